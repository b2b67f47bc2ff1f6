// ForEachBounded: runs one task per node with at most `limit` of them at once (docs/ssh.md,
// "Fan-out"). The launcher and every start-tree head use it for SSH handshakes and pre-flight
// commands, so that a job of thousands of nodes costs `limit` threads and handshakes in flight,
// not one per node (pdsh's fanout).
#pragma once

#include <cstddef>
#include <functional>

namespace dslaunch::launcher {

// pdsh's default fanout: 32 SSH handshakes in flight keep a node's cores busy without making the
// launcher (or a start-tree head) hold hundreds of half-open sessions.
inline constexpr int kSshDefaultFanout = 32;

// How many worker threads ForEachBounded uses for `count` tasks: min(count, limit), at least one
// when count > 0. `limit` < 1 counts as 1.
size_t BoundedWorkers(size_t count, int limit);

// Calls task(i) once for every i in [0, count), on BoundedWorkers(count, limit) threads that take
// the next index in increasing order; returns when every call has returned. With one worker the
// calls run in index order on a single thread (not the caller's). `task` must be safe to call
// from several threads at once for different i; it must not throw.
void ForEachBounded(size_t count, int limit, const std::function<void(size_t)>& task);

}  // namespace dslaunch::launcher
