// dslaunch-agent: started by the launcher on every node (locally by fork/exec, remotely over
// SSH). Reads the job secret from stdin, so it never appears on a command line. This file only
// reads the process's edges (argv, stdin, environment, hostname, CPU count) and calls RunAgent.
#include <pwd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <limits>
#include <string>
#include <string_view>

#include "agent/agent.h"
#include "agent/start_relay.h"
#include "common/cpu_count.h"
#include "common/text.h"
#include "dslaunch/config.h"

extern char** environ;

int main(int argc, char** argv) {
  // A start-tree head (docs/ssh.md, "The start tree"): the relay instead of an agent.
  if (argc == 2 && std::string_view(argv[1]) == "--start_relay") {
    dslaunch::agent::StartRelayEdges edges;
    if (const char* home = std::getenv("HOME")) edges.home = home;
    if (const char* sock = std::getenv("SSH_AUTH_SOCK")) edges.agent_socket = sock;
    if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr) edges.local_user = pw->pw_name;
    return dslaunch::agent::RunStartRelay(edges);
  }
  dslaunch::agent::AgentConfig config;
  CLI::App app{"dslaunch-agent: runs one node's workers for a dslaunch job (started by dslaunch)"};
  app.add_option("--endpoint", config.endpoint, "launcher endpoint host:port")->required();
  app.add_option("--job_id", config.job_id, "job id")->required();
  app.add_option("--node_rank", config.node_rank, "this node's rank (node mode: the rank asked for, -1 for any)")
      ->required()
      ->check(CLI::Range(-1, std::numeric_limits<int>::max()));
  // Node mode (docs/node-mode.md): set by a dslaunch that runs as one node of a rendezvous.
  int join_timeout_seconds = 0;
  app.add_option("--slots", config.slots, "node mode: join the rendezvous with this many workers")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  app.add_option("--join_timeout", join_timeout_seconds, "node mode: seconds to wait to be let in")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  std::string exit_codes = "classes";
  app.add_option("--exit_codes", exit_codes, "node mode: classes or kubeflow (docs/exit-codes.md)");
  app.set_version_flag("--version", std::string("dslaunch-agent ") + DSLAUNCH_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if ((config.slots > 0) != (join_timeout_seconds > 0) || (config.node_rank < 0 && config.slots == 0)) {
    std::cerr << "dslaunch-agent: --slots and --join_timeout go together (node mode, where --node_rank may be -1)\n";
    return dslaunch::agent::kAgentStartupFailed;
  }
  config.join_timeout = std::chrono::seconds(join_timeout_seconds);
  auto scheme = dslaunch::ParseExitCodeScheme(exit_codes);
  if (!scheme.ok()) {
    std::cerr << "dslaunch-agent: " << scheme.status().message() << "\n";
    return dslaunch::agent::kAgentStartupFailed;
  }
  config.exit_codes = *scheme;
  // The secret is the first line of stdin.
  if (!std::getline(std::cin, config.secret) || config.secret.empty()) {
    std::cerr << "dslaunch-agent: expected the job secret on stdin (the agent is started by dslaunch)\n";
    return dslaunch::agent::kAgentStartupFailed;
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) config.host = host;
  const char* tmp = std::getenv("TMPDIR");
  config.runtime_dir = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  config.cores = dslaunch::UsableCpuCount();
  config.environment = dslaunch::EnvironmentMap(environ);
  // Writes to a connection the launcher closed must fail with EPIPE, not kill the agent before
  // it has stopped its workers and cleaned up.
  std::signal(SIGPIPE, SIG_IGN);
  // A log file past the node's file size limit (ulimit -f) must fail the write (EFBIG, reported
  // as lost output: agent/workers/log_writer.h), not kill the agent with SIGXFSZ. Workers start with every
  // signal at its default (common/spawn.h).
  std::signal(SIGXFSZ, SIG_IGN);
  const int code = dslaunch::agent::RunAgent(config);
  // A node-mode agent's code is its node's, what the scheduler reads; an agent of a planned job
  // reports to its launcher with codes of its own (agent/exit_codes.h), never translated.
  if (config.slots == 0) return code;
  const int written = dslaunch::SchedulerExitCode(code, config.exit_codes);
  if (written != code) {
    std::cerr << "dslaunch-agent[" << config.host << "]: exit code " << code << " written as " << written
              << " (--exit_codes " << dslaunch::ExitCodeSchemeName(config.exit_codes) << ")\n";
  }
  return written;
}
