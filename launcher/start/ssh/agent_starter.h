// SshAgentStarter: starts each node's dslaunch-agent over SSH (libssh), docs/ssh.md.
//
// Preflight connects to the nodes in parallel (at most options.fanout at once), authenticates, and
// starts the node's staged command (preflight.h): one remote login shell that enters the working
// directory, checks `AGENT --version`, reports ready and waits. Start tells that shell to exec the
// agent (`AGENT --endpoint ADDR:PORT ...`, shell-quoted) and then writes the job secret and a
// newline to the agent's stdin, never onto its command line; ADDR is the launcher's own address on
// that node's connection. So a job costs one SSH handshake and one login shell per node. One
// thread per started agent pumps its output to the callbacks.
//
// Past options.tree_threshold nodes (and always in the relay role) the nodes are started as a
// start tree (start_tree.h, docs/ssh.md): only the group heads are connected to; each head's staged
// shell becomes a start relay that checks and starts its subtree (relay_link.h), and Start of any
// node of a group goes through its head's RelayLink. A head that fails is reported and the next
// node of its group takes its place.
//
// Threading: Preflight and Start are called on one thread (the launcher's), as AgentStarter says.
// Handles and their threads are independent of the starter: it may be destroyed first.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "launcher/start/agent_starter.h"
#include "launcher/start/ssh/channel_process.h"
#include "launcher/start/ssh/connection.h"
#include "launcher/start/ssh/options.h"
#include "launcher/start/ssh/relay_link.h"
#include "launcher/start/ssh/start_tree.h"

namespace dslaunch::launcher {

// Limit for the staged command to report ready after login: `dslaunch-agent --version` answers in
// milliseconds, a login shell in well under a second; 10 s allows for a cold NFS home directory or
// a heavily loaded node.
inline constexpr std::chrono::seconds kPreflightCommandTimeout{10};

// Longest line forwarded to AgentCallbacks::on_output as one piece; longer ones are cut (the agent
// writes short start-up messages here; a runaway writer must not make the launcher buffer forever).
inline constexpr size_t kMaxAgentOutputLine = 64u << 10;

// Who runs the starter: the launcher (a tree past options.tree_threshold nodes; each agent is told
// the launcher's address on its own connection) or a start relay (always a tree of its subtree,
// cut by options.fanout; every agent is told the address in AgentCommand, the launcher's).
enum class SshStarterRole { kLauncher, kRelay };

class SshAgentStarter : public AgentStarter {
 public:
  explicit SshAgentStarter(SshOptions options, SshStarterRole role = SshStarterRole::kLauncher);
  ~SshAgentStarter() override;  // disconnects the sessions that no agent took over

  // Connects to every node, at most options.fanout at once, and checks it (see the file comment). OK, or
  // kFailedPrecondition with FormatPreflightReport's text naming every failing node; on failure
  // every session is closed (the staged shells exit) and nothing was started. Bad options:
  // kInvalidArgument. A second call drops what the first one staged.
  Status Preflight(const std::vector<NodePlan>& nodes, const PreflightChecks& checks) override;
  // The same checks; the nodes that pass keep their staged shell, the failures are returned.
  Result<std::vector<PreflightFailure>> PreflightEach(const std::vector<NodePlan>& nodes,
                                                      const PreflightChecks& checks) override;

  // Starts the agent of `node` through the shell Preflight staged for it (or, when there is none for
  // that node and host, a new session and staged shell without checks). The handle owns the session
  // from then on. Fails with the connection's error, kUnavailable when the channel fails, or
  // kInvalidArgument for an argv word with a NUL byte or a newline. on_output gets each line of the
  // agent's stdout and stderr; on_exit is called once when the channel closes, with the exit status
  // or signal sshd reported (nullopt when it reported none) and a detail naming the host. Kill()
  // sends a KILL signal request and, because OpenSSH refuses those for root logins, also runs
  // `kill -KILL -PID` for the agent's process group on the same session. Callbacks must not destroy
  // the handle.
  Result<std::unique_ptr<AgentHandle>> Start(const NodePlan& node, const AgentCommand& command,
                                             std::string_view secret, AgentCallbacks callbacks) override;

 private:
  // A node's session with its staged shell waiting for the agent's argv.
  struct Staged {
    std::unique_ptr<SshConnection> connection;
    std::unique_ptr<SshChannelProcess> process;  // declared later: destroyed before `connection`
    pid_t pid = 0;                                // the staged shell; 0 while unknown
  };

  Result<Staged> TakeStaged(const NodePlan& node);
  // Connects to `node`, runs the staged `command` and waits for its ready line: nullopt and the
  // session in `staged` when the node passes, else the reason (naming no host). Any thread.
  std::optional<std::string> CheckNode(const NodePlan& node, const std::string& command,
                                       const PreflightChecks& checks, Staged& staged) const;
  // Checks the nodes of `group` (start_tree.h): its head, the next node when a head fails, and the
  // rest through a relay on the head. Sets reasons[i] and staged[i] of the nodes it checked itself
  // and adds the relay's failures to `subtree_failures`. Returns the head's index and its link, or
  // no link when it checked every node of the group itself (a group of one, or every head failed).
  // Any thread; different groups touch different indexes.
  std::pair<size_t, std::shared_ptr<RelayLink>> CheckGroup(const std::vector<NodePlan>& nodes, StartGroup group,
                                                           const std::string& command, const PreflightChecks& checks,
                                                           std::vector<Staged>& staged,
                                                           std::vector<std::optional<std::string>>& reasons,
                                                           std::vector<PreflightFailure>& subtree_failures) const;

  SshOptions options_;
  SshStarterRole role_;
  std::map<int, Staged> staged_;  // by node rank, from Preflight: the nodes this starter starts itself
  // By node rank: the relay that starts the node (the head's own, or its subtree's), from Preflight.
  std::map<int, std::shared_ptr<RelayLink>> relay_of_;
};

}  // namespace dslaunch::launcher
