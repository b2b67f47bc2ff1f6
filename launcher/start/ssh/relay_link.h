// RelayLink: the SSH session to one start-tree head that runs `dslaunch-agent --start_relay`
// (docs/ssh.md, "The start tree"; the lines are relay_messages.h). The parent (the launcher, or a
// relay one level up) checks the head with the staged command as any node, then turns its staged
// shell into the relay, hands it its subtree and reads which of those nodes failed pre-flight.
// Afterwards the link starts and kills the agents of the head and its subtree by writing lines, and
// one thread reads the relay's reports and gives each node's output and end to that node's
// AgentCallbacks.
//
// Threading: Open runs on one thread, which owns the session until the first Start; from then on
// the link's own thread does all SSH I/O, and Start, Kill and the handles' destructors may be
// called from any thread. Callbacks run on the link's thread, never after their handle is destroyed.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/start/agent_starter.h"
#include "launcher/start/ssh/channel_process.h"
#include "launcher/start/ssh/connection.h"
#include "launcher/start/ssh/relay_messages.h"

namespace dslaunch::launcher {

// How long one level of the tree may take to check a node: the handshake's steps (connect, key
// exchange, authentication, channel) at the connect timeout each, then the staged command.
std::chrono::milliseconds RelayLevelTimeout(const SshOptions& options);

class RelayLink {
 public:
  // Makes the staged shell on `connection`/`process` (which passed pre-flight, with `pid`) exec the
  // relay (`checks.agent_path --start_relay`), sends `plan` and waits for its report: the nodes of
  // plan.nodes that failed pre-flight go to `failures` (host filled in from plan.nodes). The wait
  // ends after `idle_timeout` without any report line. Fails (the head failed as a relay, its
  // session is closed) with the reason, naming no host, when the relay ends, cannot be written to
  // or is silent for too long; `failures` is then left empty.
  static Result<std::shared_ptr<RelayLink>> Open(std::unique_ptr<SshConnection> connection,
                                                 std::unique_ptr<SshChannelProcess> process, pid_t pid,
                                                 const RelayPlan& plan, std::chrono::milliseconds idle_timeout,
                                                 std::vector<PreflightFailure>& failures);

  ~RelayLink();  // closes the session: the relay reads EOF (it keeps running until its agents end)

  // Starts node command.node_rank (the head or a node of its subtree) through the relay, with the
  // launcher's address as the head sees it (local_address()) unless `keep_endpoint_host`.
  // kUnavailable once the relay has ended (the caller may then start the node directly).
  Result<std::unique_ptr<AgentHandle>> Start(const std::shared_ptr<RelayLink>& self, AgentCommand command,
                                             std::string_view secret, AgentCallbacks callbacks,
                                             bool keep_endpoint_host);

  // The parent's address on this link's connection.
  const std::string& local_address() const;

  struct Impl;  // public for the handles in relay_link.cc

 private:
  explicit RelayLink(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dslaunch::launcher
