// AgentConfig: what dslaunch-agent is told at its start (agent/main.cc reads it from the command
// line, stdin and the process's environment; docs/launcher.md). Plain data.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "common/exit_codes.h"

namespace dslaunch::agent {

struct AgentConfig {
  std::string endpoint;  // launcher's host:port
  std::string job_id;
  int node_rank = 0;
  std::string secret;       // read from stdin, never from argv
  std::string host;         // this node's hostname, reported at registration
  std::string runtime_dir;  // where the private directory holding the workers' secret file goes
  int cores = 1;            // CPU cores of this node, for the OMP_NUM_THREADS default
  std::map<std::string, std::string> environment;  // the agent's own environment
  // Node mode (docs/node-mode.md): the agent joins the rendezvous with `slots` workers (0: not
  // node mode), asking for node_rank (-1: by arrival), and waits up to join_timeout to be let in;
  // its exit code is then its node's (NodeModeExitCode).
  int slots = 0;
  std::chrono::seconds join_timeout{0};
  // Node mode: how the node's exit code is written (--exit_codes, common/exit_codes.h); the
  // dslaunch that exec'd the agent passes its own.
  ExitCodeScheme exit_codes = ExitCodeScheme::kClasses;
};

}  // namespace dslaunch::agent
