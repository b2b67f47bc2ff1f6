// The start relay: what `dslaunch-agent --start_relay` runs on a start-tree head (docs/ssh.md,
// "The start tree"). It reads its parent's commands on stdin and reports on stdout, one line each
// (launcher/start/ssh/relay_messages.h): it checks its subtree over SSH as the launcher checks its
// nodes (SshAgentStarter, in the relay role), reports every node that failed and then `checked`;
// then it starts the agents its parent names, its own node's as a child process and the others
// over SSH (directly, or through the relays of its subtree), passes each agent's output lines and
// end up, and kills an agent when told to. It exits once stdin has ended and every agent it started
// has ended (the head's SSH sessions to its subtree close then).
#pragma once

#include <string>

namespace dslaunch::agent {

// What the relay reads from its node, once, in main.cc.
struct StartRelayEdges {
  std::string home;          // $HOME: the default SSH keys and known_hosts
  std::string agent_socket;  // $SSH_AUTH_SOCK, empty when unset
  std::string local_user;    // this user's name
};

// Runs the relay on the process's stdin and stdout until it is done; returns the process's exit
// code: 0, or kAgentStartupFailed when the first line is not a valid plan.
int RunStartRelay(const StartRelayEdges& edges);

}  // namespace dslaunch::agent
