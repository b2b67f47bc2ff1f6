#!/bin/sh
# A worker that double-forks: the subshell starts `sleep` in the background and exits at once, so
# the sleep is orphaned and reparented to the nearest subreaper (the agent) or to PID 1. It exits
# after 1 s and must then be reaped, not left <defunct>. The worker itself lives on for $1 s
# (default 10) so that the test can look into the running container.
( sleep 1 & )
exec sleep "${1:-10}"
