// The dslaunch command line: `dslaunch [options] PROGRAM [ARGS...]`.
//
// Options come before PROGRAM; everything from PROGRAM on is passed to the workers untouched,
// even arguments that look like dslaunch options. Parsing is pure (argv in, typed options out):
// CLI11 exceptions never leave launcher/cli/ (the options themselves are declared group by group
// in option_groups.cc), unknown options are kInvalidArgument with a suggestion. Option reference:
// docs/cli.md.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "common/heartbeat.h"
#include "common/status.h"
#include "launcher/elastic/elastic_policy.h"
#include "launcher/node_mode/membership.h"
#include "launcher/plan/console_streams.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/slurm/allocation.h"
#include "launcher/start/ssh/options.h"
#include "launcher/status/straggler_detector.h"

namespace dslaunch::launcher {

// Default grace period between SIGTERM and SIGKILL when stopping workers: long enough for a
// training program to write a checkpoint on SIGTERM (torchelastic uses 30 s as well).
inline constexpr std::chrono::milliseconds kDefaultGracePeriod{30000};
// The longest --grace_period: a checkpoint written on SIGTERM takes minutes; a day is past any,
// and keeps every deadline (now + grace period) far from the clock's overflow.
inline constexpr std::chrono::milliseconds kMaxGracePeriod = std::chrono::hours(24);
// --heartbeat_timeout: at least a second, so that a node is declared lost in seconds (issue 10) but
// not for a scheduling hiccup of a loaded machine (a page-cache flush, a GC pause); at most a day,
// for the same overflow reason as kMaxGracePeriod.
inline constexpr std::chrono::milliseconds kMinHeartbeatTimeout{1000};
inline constexpr std::chrono::milliseconds kMaxHeartbeatTimeout = std::chrono::hours(24);
// --heartbeat_interval: at least 100 ms, ten frames a second per agent, still nothing next to a
// job's own traffic. An interval given explicitly fits at least twice into the timeout, so that
// one late heartbeat is not a lost node; without one it is min(kHeartbeatInterval, timeout / 3),
// which leaves room for two late ones.
inline constexpr std::chrono::milliseconds kMinHeartbeatInterval{100};
inline constexpr int kMinHeartbeatsPerTimeout = 2;
inline constexpr int kDefaultHeartbeatsPerTimeout = 3;
// --watchdog_timeout: from a millisecond (a value that rounds to 0 would mean no watchdog) to a
// day (the overflow reason of kMaxGracePeriod).
inline constexpr std::chrono::milliseconds kMinWatchdogTimeout{1};
inline constexpr std::chrono::milliseconds kMaxWatchdogTimeout = std::chrono::hours(24);
// --max_restarts when --elastic_training is given without it: the budget DeepSpeed's elastic agent
// runs with (deepspeed/launcher/launch.py), so a DeepSpeed elastic command line keeps restarting.
inline constexpr int kDeepSpeedElasticMaxRestarts = 100;
// --ssh_connect_timeout: at least a millisecond (0 would mean "no timeout" to libssh); at most an
// hour, far beyond any TCP connect and login.
inline constexpr std::chrono::milliseconds kMinSshConnectTimeout{1};
inline constexpr std::chrono::milliseconds kMaxSshConnectTimeout = std::chrono::hours(1);
// The interpreter for Python programs when neither --python nor PYTHON_EXEC says otherwise.
inline constexpr char kDefaultPython[] = "python3";
inline constexpr int kDefaultMasterPort = 29500;
// The launcher's endpoint port in --no_ssh mode, where every node must know it in advance
// (torchrun's c10d rendezvous uses the same default).
inline constexpr int kDefaultRdzvPort = 29400;

enum class DryRunFormat { kTable, kJson };

// torchrun's --nproc_per_node keywords, resolved on the node at the edge (main.cc): auto = the
// node's GPUs if it has any, else its CPU cores; gpu = its GPUs (an error without); cpu = its cores.
enum class NprocKeyword { kAuto, kGpu, kCpu };

// --status_bind's default: only this machine reaches the page unless the user says otherwise (the
// job's token guards it from other users of the machine too; docs/observability.md).
inline constexpr char kDefaultStatusBind[] = "127.0.0.1";

// The longest --rdzv_conf timeout: a day, far beyond any pod's start.
inline constexpr int kMaxRendezvousTimeoutSeconds = 86400;

// Node mode (torchrun's rendezvous, docs/node-mode.md): one dslaunch per node, started by a
// scheduler; the nodes find each other at the rendezvous endpoint instead of being started over
// SSH. The node whose address is the endpoint's (or node rank 0) hosts it; the others join.
struct RendezvousOptions {
  std::string host;  // --rdzv_endpoint's host, else --master_addr
  int port = kDefaultRdzvPort;  // --rdzv_endpoint's port, else --rdzv_port
  int min_nodes = 1;  // --nnodes N (min = max) or MIN:MAX
  int max_nodes = 1;
  std::optional<int> node_rank;  // --node_rank; absent: assigned by arrival (node 0 hosts)
  std::chrono::seconds join_timeout = kDefaultJoinTimeout;            // --rdzv_conf join_timeout=S
  std::chrono::seconds last_call_timeout = kDefaultLastCallTimeout;  // --rdzv_conf last_call_timeout=S
};

// The elastic node range (docs/elastic.md): torchrun's --nnodes MIN:MAX, or DeepSpeed's
// --elastic_training with --min_elastic_nodes / --max_elastic_nodes. 1 <= min_nodes <= max_nodes.
struct NodeRange {
  int min_nodes = 1;
  std::optional<int> max_nodes;  // absent: every selected host (DeepSpeed's default)
  std::string option;            // as given, for messages: "--nnodes 2:4", "--elastic_training"
};

struct CliOptions {
  std::optional<std::string> hostfile;  // -H/--hostfile; absent: one local node
  std::string include;
  std::string exclude;
  std::optional<int> num_nodes;
  std::optional<int> num_gpus;  // --num_gpus / --nproc_per_node N
  std::optional<NprocKeyword> nproc_keyword;  // --nproc_per_node auto|gpu|cpu
  std::string master_addr;      // empty: the first node
  int master_port = kDefaultMasterPort;
  bool no_python = false;
  bool module = false;
  bool no_local_rank = false;
  // torchrun's --run_path: PROGRAM is a Python script whatever its name ends in.
  bool run_path = false;
  // torchrun's --role: the workers' ROLE_NAME.
  std::string role = kRoleNameDefault;
  // torchrun's --local_addr: this node's address; in node mode the workers' MASTER_ADDR on the node
  // that hosts the rendezvous, unless --master_addr gives one. Empty: not given.
  std::string local_addr;
  // --python: interpreter for .py programs and --module; absent: PYTHON_EXEC from the launcher's
  // environment (torchrun's variable), else kDefaultPython. Read at the edge (main.cc).
  std::optional<std::string> python;
  std::string log_dir;  // empty: each node's per-user default (docs/launcher.md, "Log files")
  // Which workers' streams the console shows (--tee, --no_tee, --redirects, --local_ranks_filter,
  // --enable_each_rank_log); the log files always get everything.
  ConsoleStreams console;
  // --store_proxy on|off: the agents proxy their workers' store traffic (docs/protocol.md, "Store
  // proxy"); off: workers connect to the launcher's endpoint themselves.
  bool store_proxy = true;
  std::chrono::milliseconds grace_period = kDefaultGracePeriod;
  // --save_pid: write the launcher's pid to this file while it runs; "" means the default path.
  std::optional<std::string> save_pid;
  std::string events_file;  // --events_file; empty: none (docs/elastic.md, "Events file")
  std::optional<DryRunFormat> dry_run;
  std::string job_id;  // empty: generated; otherwise valid (ValidateJobId, common/job_id.h)
  std::chrono::milliseconds heartbeat_timeout = kDefaultHeartbeatTimeout;
  std::vector<std::string> exports;  // --export NAME or NAME=VALUE, in order
  // Resolved: --heartbeat_interval, else min(kHeartbeatInterval, heartbeat_timeout / 3).
  std::chrono::milliseconds heartbeat_interval = kHeartbeatInterval;

  // Fault tolerance (docs/elastic.md). `--nnodes N` is --num_nodes N.
  int max_restarts = 0;                 // --max_restarts; kDeepSpeedElasticMaxRestarts with --elastic_training
  std::optional<NodeRange> elastic_nodes;  // absent: every selected host must run, no spares
  std::optional<std::chrono::milliseconds> watchdog_timeout;  // absent: no watchdog unless a rank asks
  // --straggler_factor (0: off), --straggler_window, --straggler_margin_ms, --straggler_patience
  // (docs/observability.md, "Straggler rule").
  StragglerOptions stragglers;
  // --exit_codes (PET_EXIT_CODES): how the exit-code classes are written at the process's exit,
  // the launcher's and a node-mode agent's (common/exit_codes.h, docs/exit-codes.md).
  ExitCodeScheme exit_codes = ExitCodeScheme::kClasses;

  // Multi-node over SSH.
  std::string agent_path;  // empty: the local agent's absolute path
  // --ssh_user, --ssh_port, --ssh_identity, --ssh_known_hosts, --ssh_accept_new_host_keys,
  // --ssh_connect_timeout, --ssh_fanout, --ssh_tree_threshold; the edges' parts (home, the local
  // user, the ssh-agent socket) are filled in by main.cc.
  SshOptions ssh;

  // --no_ssh: the same command runs on every node, started by something else.
  bool no_ssh = false;
  std::optional<int> node_rank;
  int rdzv_port = kDefaultRdzvPort;
  std::string secret_file;  // --no_ssh and node mode: the job secret, the same file content on every node

  // Node mode: set when this process is one node of a rendezvous (docs/node-mode.md).
  std::optional<RendezvousOptions> rendezvous;

  // Core binding (docs/launch-plan.md, "Core binding"): DeepSpeed's --bind_cores_to_rank, and
  // --bind_core_list parsed (common/cpu_list.h); absent: each node's own CPU affinity.
  bool bind_cores_to_rank = false;
  std::optional<std::vector<int>> bind_core_list;

  // --launcher: how agents start (docs/slurm.md, "Which launcher"); absent: chosen automatically.
  std::optional<LauncherKind> launcher;

  // The live status page (docs/observability.md): --status_port (absent: no server; 0: any free
  // port) and --status_bind, an IP address (default: loopback only).
  std::optional<uint16_t> status_port;
  std::string status_bind = kDefaultStatusBind;
  // --status_host: names (or addresses) besides the bound address that requests may carry in
  // their Host header; --status_metrics_open: /metrics without the token.
  std::vector<std::string> status_hosts;
  bool status_metrics_open = false;

  std::string program;
  std::vector<std::string> program_args;
};

// What the command line asks for: run a job, or print text (help, version) and exit.
struct CliCommand {
  CliOptions options;
  std::optional<std::string> print;  // set for --help / --version
  // One line each about a torchrun or DeepSpeed flag that was accepted but changes nothing here, or
  // means something slightly different (docs/cli.md, "torchrun's and DeepSpeed's flags"), for the
  // program to print before it starts.
  std::vector<std::string> notes;
};

// The policy's options for a job whose hostfile selection has `candidates` hosts: no range means
// every one of them must run (min = max = candidates); a range without MAX ends at `candidates`;
// MAX may exceed it (the job never runs on more than there are). kInvalidArgument, naming the
// option as given, when MIN exceeds `candidates`.
Result<ElasticOptions> ElasticOptionsFor(const CliOptions& options, int candidates);

// Parses argv (argv[0] is the program name). Every long option has two spellings, DeepSpeed's
// underscores and torchrun's dashes (--nproc_per_node, --nproc-per-node). torchrun's and
// DeepSpeed's flags are accepted with their meaning, or refused naming what to use instead
// (foreign_flags.h). An option absent from argv is read from `environment`'s PET_<NAME> when there
// is one (NAME: any of the option's long names in upper case, dashes as underscores; the variables
// Kubernetes' PyTorchJob sets), the command line winning. Errors are kInvalidArgument and name the
// offending argument, e.g. "unknown option '--hostfiel' (did you mean '--hostfile'?)" (suggested
// in the spelling the user wrote), "--grace_period: 'abc' is not a number of seconds (e.g. 30 or
// 0.5)", "--grace_period 1e+10: expected seconds from 0 to 86400", with "(from PET_NNODES)" where
// an environment variable gave it. --help gives the text of help_text.h in `print`. Never throws.
Result<CliCommand> ParseCommandLine(const std::vector<std::string>& argv,
                                    const std::map<std::string, std::string>& environment = {});

// Every option ParseCommandLine knows, each as its long names ("--num_gpus", "--nproc_per_node",
// "--num_accelerators") and then its short one if any ("-m"), in --help's order; the dashed
// spellings of the long names are not listed. For the settings harness (tests/settings/), which
// checks that each has a test observing its effect.
std::vector<std::vector<std::string>> OptionSpellings();

}  // namespace dslaunch::launcher
