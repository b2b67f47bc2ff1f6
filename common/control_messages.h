// The agent control plane: messages between the launcher and each dslaunch-agent, carried as
// frames (common/wire.h) on an authenticated PeerRole::kAgent connection of the launcher's
// endpoint. Layouts are specified in docs/protocol.md ("Agent control messages").
//
// Every message carries the generation it belongs to; a receiver drops messages of another
// generation (a stale peer is discarded, never trusted). Message types use the range 64..127
// reserved for the control plane. Pure code: encoding and decoding only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "common/exit_status.h"
#include "common/progress_figures.h"
#include "common/status.h"
#include "common/wire.h"

namespace dslaunch::control {

// Version of the control protocol; an agent of another version is refused at registration.
// 2: ASSIGNMENT carries the node-wide environment once; AGENT_FAILED.
// 3: generations: an agent may receive several ASSIGNMENTs (RELEASE ends it), WORKER_STALLED.
// 4: ASSIGNMENT carries core binding (bind_cores_to_rank, bind_core_list) and await_release;
//    node mode: REGISTER carries the node's slots and whether it hosts the endpoint, RELEASE the
//    job's exit code.
// 5: WORKER_PROGRESS (a rank's progress report with its figures, for the launcher's view);
//    WORKER_STARTED carries the worker's log path.
// 6: ASSIGNMENT carries store_proxy (the agent serves its workers' store traffic).
// 7: ASSIGNMENT carries fence_agent_pid (the agent that held the node's place before: its
//    workers must be gone before this agent starts any, docs/elastic.md "Fencing a lost node");
//    RELEASE carries a reason; OUTPUT_LOST (a rank's output could not be written to its log file).
// 8: REGISTER without hosts_endpoint (set by an agent flag that no launcher passed).
// 9: REGISTER carries snapshot_address; SNAPSHOT_PEERS (docs/checkpoint.md, "Copies on peer nodes").
inline constexpr uint32_t kProtocolVersion = 9;

enum class MessageType : uint8_t {
  kRegister = 64,       // agent -> launcher, first message
  kAssignment = 65,     // launcher -> agent
  kWorkerStarted = 66,  // agent -> launcher
  kWorkerExited = 67,   // agent -> launcher
  kOutput = 68,         // agent -> launcher
  kStop = 69,           // launcher -> agent
  kAgentDone = 70,      // agent -> launcher, last message
  kHeartbeat = 71,      // both ways
  kAgentStopping = 72,  // agent -> launcher: it stops its workers on its own, and why
  kAgentFailed = 73,    // agent -> launcher, last message, instead of kAgentDone
  kWorkerStalled = 74,  // agent -> launcher: a rank reported no progress for its watchdog timeout
  kRelease = 75,        // launcher -> agent: the job is over, exit (restartable assignments only)
  kWorkerProgress = 76, // agent -> launcher: a rank's progress report (step and figures)
  kOutputLost = 77,     // agent -> launcher: a rank's output did not reach its log file
  kSnapshotPeers = 78,  // launcher -> agent: where to copy the node's in-memory snapshots
};

struct Register {
  std::string job_id;
  int32_t generation = 0;
  // The node's index among the job's candidate nodes (the hostfile's selected hosts), fixed for
  // the job; its node rank in a generation is ASSIGNMENT's node_rank.
  int32_t node_rank = 0;
  uint32_t protocol_version = kProtocolVersion;
  std::string version;  // dslaunch release of the agent binary
  std::string host;     // the agent's hostname
  int64_t pid = 0;
  // Node mode (docs/node-mode.md): the agent joins with this many workers (its node's
  // --nproc_per_node); node_rank is the rank it asks for, or -1 for one by arrival. 0: not a
  // node-mode join (node_rank is then the candidate index).
  int32_t slots = 0;
  // Where peer nodes' agents send this node copies of their in-memory snapshots, "ip:port"
  // (agent/replica/replica_server.h); empty: nowhere (the agent could not listen).
  std::string snapshot_address;
};

struct WorkerAssignment {
  int32_t rank = 0;
  int32_t local_rank = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // overlaid on the agent's environment and Assignment::env
};

struct Assignment {
  int32_t generation = 0;
  int32_t node_rank = 0;
  // Per-rank log files go here, on the agent's node; empty: the agent's per-user default
  // (docs/launcher.md, "Log files").
  std::string log_dir;
  std::string working_dir;  // empty: the agent's working directory
  int64_t grace_period_ms = 0;
  bool tee = true;          // forward output lines to the launcher
  int64_t heartbeat_interval_ms = 0;  // how often each side sends HEARTBEAT
  int64_t heartbeat_timeout_ms = 0;   // silence after which the other side counts as lost
  // What every worker of the node gets (sent once per node, not per worker), overlaid on the
  // agent's own environment; each worker's own env overrides it.
  std::map<std::string, std::string> env;
  std::vector<WorkerAssignment> workers;
  // The job may run another generation: after AGENT_DONE the agent stays connected and waits for
  // the next ASSIGNMENT (a later generation) or RELEASE, instead of exiting.
  bool restartable = false;
  // --watchdog_timeout: a rank that reports no progress for this long is stalled (0: no watchdog
  // unless the rank asks for one; docs/elastic.md, "Hang detection").
  int64_t watchdog_timeout_ms = 0;
  // After AGENT_DONE the agent waits for RELEASE and exits with the job's exit code it carries
  // (node mode: every node's process ends with the job's code, which is what a scheduler sees).
  bool await_release = false;
  // --bind_cores_to_rank (docs/launch-plan.md, "Core binding"): the agent gives each local rank
  // its own cores (agent/node/core_binding.h). bind_core_list: the CPUs to split, as --bind_core_list
  // gave them (each in 0..kMaxCpuId-1); empty: the agent's own CPU affinity.
  bool bind_cores_to_rank = false;
  std::vector<int> bind_core_list;
  // The agent proxies its workers' store traffic (docs/protocol.md, "Store proxy"): they get
  // DSLAUNCH_STORE=unix:<its socket>; false (--store_proxy off): the launcher's address.
  bool store_proxy = false;
  // Fencing (docs/elastic.md, "Fencing a lost node"): the pid, as its REGISTER gave it, of the
  // agent that held this node's place before this one (the node was lost and is re-admitted).
  // Before it starts any worker the agent kills that agent and the workers it recorded on this
  // node, and waits until they are gone. 0: none (the node's first agent, or another host).
  int64_t fence_agent_pid = 0;
};

struct WorkerStarted {
  int32_t generation = 0;
  int32_t rank = 0;
  int64_t pid = 0;
  std::string log_path;  // the worker's stderr log, on the agent's node (version 5)
};

// What waitpid() can report, and so all WORKER_EXITED may carry: the launcher exits with the
// root cause's code (ShellExitCode), which must stay a valid exit code.
inline constexpr int kMaxExitCode = 255;      // WEXITSTATUS is 8 bits
inline constexpr int kMaxSignalNumber = 64;   // SIGRTMAX on Linux; 128 + 64 is still an exit code

// True for an exit code 0..kMaxExitCode or a signal 1..kMaxSignalNumber.
bool IsReportableExitStatus(const ExitStatus& status);

struct WorkerExited {
  int32_t generation = 0;
  int32_t rank = 0;
  int64_t pid = 0;
  ExitStatus status;
  bool stopped = false;  // it ended because the agent was told to stop it
  std::vector<std::string> stderr_tail;
  std::string log_path;  // the worker's stderr log, on the agent's node
  // The text of the worker's error file (TORCHELASTIC_ERROR_FILE, common/error_record.h), at most
  // kMaxErrorRecordBytes; empty when it wrote none.
  std::string error_record;
  // The last step it reported through its progress file (docs/elastic.md), -1 if none.
  int64_t last_step = -1;
};

enum class Stream : uint8_t { kStdout = 1, kStderr = 2 };

struct Output {
  int32_t generation = 0;
  int32_t rank = 0;
  Stream stream = Stream::kStdout;
  std::vector<std::string> lines;  // whole lines, without their newline; see IsTransientLine
};

// A line that ends in '\r' is transient: a progress bar's redraw, shown on a terminal until the
// next one replaces it, and kept out of logs (agent/workers/line_splitter.h makes them).
inline bool IsTransientLine(const std::string& line) { return !line.empty() && line.back() == '\r'; }

struct Stop {
  int32_t generation = 0;
  int64_t grace_period_ms = 0;
  std::string reason;
};

struct AgentDone {
  int32_t generation = 0;
};

struct Heartbeat {
  int32_t generation = 0;
  uint64_t sequence = 0;
};

// Sent once, before the agent stops its workers for a reason of its own (it received a signal,
// it heard nothing from the launcher for the heartbeat timeout, it could not start a worker), so
// that the launcher names that reason as the root cause rather than the workers' SIGTERM exits.
struct AgentStopping {
  int32_t generation = 0;
  std::string reason;  // e.g. "no heartbeat from the launcher for 10.4 s"
  int32_t signal = 0;  // the signal the agent received, 0 for other reasons
};

// The agent could not run its assignment (its log directory, a log file, starting a worker); it
// has stopped what it started and exits after sending this. `reason` is the root cause to report.
struct AgentFailed {
  int32_t generation = 0;
  std::string reason;
};

// A rank reported no progress for its watchdog timeout while its workers were running
// (docs/elastic.md, "Hang detection"). The agent has killed it (SIGKILL: a hung process cannot be
// trusted to stop on SIGTERM); its WORKER_EXITED follows.
struct WorkerStalled {
  int32_t generation = 0;
  int32_t rank = 0;
  int64_t last_step = -1;    // the last step it reported, -1 if it reported none
  int64_t silence_ms = 0;    // since its last report (or since it started, if none)
  int64_t timeout_ms = 0;    // the watchdog timeout in effect
  // The process's state when the agent found it stalled (common/process_tree.h ProcessStateName:
  // "stopped", "disk sleep", "running", "sleeping"); "" if unknown. Evidence for which rank hung:
  // its peers usually sleep in a collective, waiting for it.
  std::string state;
};

// The job is over: an agent of a restartable assignment exits once it has nothing more to report.
struct Release {
  int32_t generation = 0;
  int32_t exit_code = -1;  // the job's exit code for an agent with await_release; -1: none
  // Why, when the agent was not let in (node mode: "the place of node 1 (host a) is still held by
  // a live member; try again later"); empty: the job ended.
  std::string reason;
};

// A rank rewrote its progress file (docs/elastic.md, docs/observability.md): what the report said.
// Sent when the agent's poll of the progress files sees a write that parsed and holds a step or a
// figure, at most one per rank per poll (the latest write).
struct WorkerProgress {
  int32_t generation = 0;
  int32_t rank = 0;
  int64_t step = -1;  // the report's step, -1 if it gave none
  ProgressFigures figures;
};

// Output of a rank that the agent could not write to its log file (a full disk, a file over the
// size limit, an I/O error; docs/launcher.md, "Log files"). Sent when the first write to the file
// fails, and again with final = true when the rank's stream closes, with the totals. The lines
// still went to the launcher as OUTPUT when tee is on (the console and the status page have them).
struct OutputLost {
  int32_t generation = 0;
  int32_t rank = 0;
  Stream stream = Stream::kStdout;
  std::string path;         // the log file, on the agent's node
  std::string error;        // the first failed write's error, e.g. "No space left on device"
  uint64_t lost_bytes = 0;  // so far (all of them when final)
  uint64_t lost_lines = 0;  // lines not written whole
  bool final = false;       // the stream is closed: the totals are complete
};

// The generation's peers of a node for its in-memory snapshots (docs/checkpoint.md, "Copies on
// peer nodes"): the snapshot addresses of the nodes after it in node-rank order, wrapping around,
// at most snapshot::kMaxReplicas, skipping nodes without one. Sent to every member once all
// members of the generation have registered.
struct SnapshotPeers {
  int32_t generation = 0;
  std::vector<std::string> peers;
};

using Message = std::variant<Register, Assignment, WorkerStarted, WorkerExited, Output, Stop,
                             AgentDone, Heartbeat, AgentStopping, AgentFailed, WorkerStalled, Release,
                             WorkerProgress, OutputLost, SnapshotPeers>;

// Encodes a message as a frame's type and payload.
wire::Frame Encode(const Message& message);

// Decodes a frame. Unknown types and malformed payloads are kInvalidArgument naming the type:
// truncated or trailing bytes, a bool other than 0/1, an unknown stream or exit kind, a
// WORKER_EXITED status that IsReportableExitStatus refuses, or an environment variable given
// twice for one worker (entries may come in any order), a WORKER_PROGRESS figure that is not
// finite or (for times, throughput, bytes and steps) negative, or an unknown figure bit.
// Allocates at most a small multiple of the payload's size: counts are checked against the bytes
// present.
Result<Message> Decode(const wire::Frame& frame);

}  // namespace dslaunch::control
