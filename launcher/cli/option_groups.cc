#include "launcher/cli/option_groups.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "common/cpu_list.h"
#include "common/job_id.h"
#include "launcher/cli/elastic_options.h"
#include "launcher/cli/foreign_flags.h"
#include "launcher/cli/node_mode_options.h"
#include "launcher/cli/status_options.h"

namespace dslaunch::launcher {
namespace {

// A number of seconds from the command line as milliseconds in [min, max]; the range is checked
// on the double, before any conversion could overflow. `hint`, if any, follows the range in the
// message: what else the user may do.
Result<std::chrono::milliseconds> Duration(const char* option, double seconds, std::chrono::milliseconds min,
                                          std::chrono::milliseconds max, const char* hint = nullptr) {
  const double min_s = std::chrono::duration<double>(min).count();
  const double max_s = std::chrono::duration<double>(max).count();
  if (!std::isfinite(seconds) || seconds < min_s || seconds > max_s) {
    std::ostringstream msg;
    msg << option << " " << seconds << ": expected seconds from " << min_s << " to " << max_s;
    if (hint != nullptr) msg << " (" << hint << ")";
    return InvalidArgumentError(msg.str());
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

// A CLI11 check that the value is one of `values`: "'x': expected on or off" (CLI11's own says "x not
// in {on,off}").
CLI::Validator OneOf(std::vector<std::string> values) {
  std::string expected;
  for (size_t i = 0; i < values.size(); ++i) {
    expected += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
  }
  return CLI::Validator(
      [values, expected](std::string& value) {
        for (const std::string& v : values) {
          if (v == value) return std::string();
        }
        return "'" + value + "': expected " + expected;
      },
      "", "one of");
}


// The command line as groups of options, one per concept. Each group declares its options on the
// app (Add, in the order --help lists them and PET_ variables are looked up) and, once CLI11 has
// read them, checks what was given and writes it into CliOptions (Resolve). Parse resolves the
// groups in a fixed order, so that of two mistakes the same one is reported first.

// Which hosts and slots the job uses, and the contract's MASTER_ADDR/MASTER_PORT.
struct SelectionGroup {
  static constexpr char kHeading[] = "Hosts and slots";
  std::string hostfile;
  int num_nodes = -1;
  std::string nproc_text;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("-H,--hostfile", hostfile, "hostfile with 'host slots=N' lines (docs/hostfile.md); default: this "
                   "machine alone")->option_text("FILE");
    app.add_option("-i,--include", o.include, "use only these hosts/slots: 'host[:s,s]@host...'")->option_text("SPEC");
    app.add_option("-e,--exclude", o.exclude, "do not use these hosts/slots, same grammar as --include")
        ->option_text("SPEC");
    app.add_option("--num_nodes", num_nodes, "use the first N hosts of the hostfile")->option_text("N");
    app.add_option("--num_gpus,--nproc_per_node,--num_accelerators", nproc_text,
                   "workers per host (slots 0..N-1); torchrun's auto (GPUs, else cores), gpu, cpu")
        ->option_text("N");
    app.add_option("--master_addr", o.master_addr, "MASTER_ADDR for workers (default: first host)")
        ->option_text("ADDR");
    app.add_option("--master_port", o.master_port, "MASTER_PORT for workers (default 29500)")->option_text("PORT");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) const {
    if (app.count("--hostfile") > 0) o.hostfile = hostfile;
    if (num_nodes != -1) o.num_nodes = num_nodes;
    if (app.count("--nproc_per_node") > 0) {
      DSLAUNCH_RETURN_IF_ERROR(ParseNproc(nproc_text, o));
    }
    if (o.master_port < 1 || o.master_port > 65535) {
      return InvalidArgumentError("--master_port " + std::to_string(o.master_port) + " is not a TCP port (1-65535)");
    }
    return Status::Ok();
  }
};

// How PROGRAM starts.
struct ProgramGroup {
  static constexpr char kHeading[] = "Program";
  std::string python;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_flag("--no_python", o.no_python, "start PROGRAM directly, not under python3");
    app.add_flag("-m,--module", o.module, "PROGRAM is a Python module (python3 -m)");
    app.add_flag("--run_path", o.run_path, "PROGRAM is a Python script whatever its name (torchrun's --run-path)");
    app.add_flag("--no_local_rank", o.no_local_rank, "do not append --local_rank=N to Python programs");
    app.add_option("--python", python, "interpreter for .py programs and -m (default: $PYTHON_EXEC, else python3)")
        ->option_text("PATH");
    app.add_option("--role", o.role, "the workers' ROLE_NAME (torchrun's --role; default: default)")
        ->option_text("NAME");
    app.add_option("--export", o.exports, "pass NAME (from this environment) or NAME=VALUE to every worker; repeatable")
        ->option_text("NAME[=VALUE]");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) const {
    if (o.module && o.no_python) {
      return InvalidArgumentError("--module and --no_python exclude each other: a module runs under python3");
    }
    if (o.run_path && (o.no_python || o.module)) {
      return InvalidArgumentError(std::string("--run_path and ") + (o.no_python ? "--no_python" : "--module") +
                                  " exclude each other: --run_path runs PROGRAM as a Python script file");
    }
    if (o.role.empty()) return InvalidArgumentError("--role: empty name; give the workers' ROLE_NAME or leave it out");
    if (app.count("--python") > 0) {
      if (python.empty()) return InvalidArgumentError("--python: empty interpreter path");
      if (o.no_python) {
        return InvalidArgumentError("--python and --no_python exclude each other: --no_python starts PROGRAM directly");
      }
      o.python = python;
    }
    return Status::Ok();
  }
};

// Where the workers' output goes: the log files, and what of it the console shows (docs/cli.md,
// "Worker output").
struct OutputGroup {
  static constexpr char kHeading[] = "Worker output";
  // DeepSpeed's --enable_each_rank_log default: no directory.
  static constexpr char kNoEachRankLog[] = "None";
  std::string tee, redirects, local_ranks, each_rank_dir;
  bool no_tee = false;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("--log_dir", o.log_dir, "per-rank log files go to LOG_DIR/JOB_ID/ (default: $TMPDIR/dslaunch-$UID)")
        ->option_text("DIR");
    app.add_flag("-t,--tee{3}", tee,
                 "also show these streams on the console when redirected: 0 none, 1 stdout, 2 stderr, 3 both, or "
                 "LOCAL_RANK:N pairs (0:3,1:2); alone: 3. Everything is shown unless redirected")
        ->expected(0, 1)
        ->option_text("[N]");
    app.add_flag("--no_tee", no_tee, "show no worker output on the console, only write the log files (--redirects 3)");
    app.add_option("-r,--redirects", redirects,
                   "streams kept off the console (only in the log files): 0-3 or LOCAL_RANK:N pairs, as --tee")
        ->option_text("N");
    app.add_option("--local_ranks_filter", local_ranks,
                   "show only these local ranks' output on the console, e.g. 0 or 0,1 (the log files get all)")
        ->option_text("RANKS");
    app.add_option("--enable_each_rank_log", each_rank_dir,
                   "DeepSpeed's: write each rank's output to files under DIR, not to the console (--log_dir DIR "
                   "--redirects 3)")
        ->option_text("DIR");
    app.add_option("--events_file", o.events_file,
                   "append the job's events (generations started and ended, faults, decisions) to FILE, one JSON "
                   "object per line (docs/elastic.md)")
        ->option_text("FILE");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) const {
    ConsoleStreams& c = o.console;
    const bool each_rank_log = app.count("--enable_each_rank_log") > 0 && each_rank_dir != kNoEachRankLog;
    if (no_tee) {
      if (app.count("--tee") > 0 || app.count("--redirects") > 0) {
        return InvalidArgumentError(std::string("--no_tee and ") + (app.count("--tee") > 0 ? "--tee" : "--redirects") +
                                    " exclude each other: --no_tee is --redirects 3; keep one of them");
      }
      c.redirects.all = StdStreams::kBoth;
    }
    if (app.count("--redirects") > 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(c.redirects, ParseStdStreams("--redirects", redirects));
    } else if (each_rank_log) {
      c.redirects.all = StdStreams::kBoth;  // DeepSpeed writes each rank's output to its files only
    }
    if (app.count("--tee") > 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(c.tee, ParseStdStreams("--tee", tee));
    }
    if (app.count("--local_ranks_filter") > 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(c.local_ranks, ParseLocalRanks(local_ranks));
    }
    if (each_rank_log) {
      if (each_rank_dir.empty()) return InvalidArgumentError("--enable_each_rank_log: empty directory");
      if (app.count("--log_dir") > 0 && o.log_dir != each_rank_dir) {
        return InvalidArgumentError("--enable_each_rank_log " + each_rank_dir + " and --log_dir " + o.log_dir +
                                    " disagree: both name the log directory; keep one of them");
      }
      o.log_dir = each_rank_dir;
    }
    return Status::Ok();
  }
};

// The launcher's own conduct of the job: the store proxy, stopping, heartbeats, the job id, the
// pid file and --dry-run.
struct ConductGroup {
  static constexpr char kHeading[] = "Running the job";
  std::string store_proxy = "on";
  double grace_seconds = std::chrono::duration<double>(kDefaultGracePeriod).count();
  std::string save_pid;
  std::string dry_run;
  double heartbeat_seconds = std::chrono::duration<double>(kDefaultHeartbeatTimeout).count();
  double heartbeat_interval_seconds = 0;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("--store_proxy", store_proxy,
                   "on: each node's agent carries its workers' store traffic to the launcher, one connection per "
                   "node (default); off: every worker connects to the launcher itself (docs/protocol.md)")
        ->check(OneOf({"on", "off"}))
        ->option_text("on|off");
    app.add_option("--grace_period", grace_seconds, "seconds between SIGTERM and SIGKILL when stopping")
        ->capture_default_str()
        ->option_text("SECONDS");
    app.add_flag("--save_pid{}", save_pid, "write the launcher pid to FILE (default $TMPDIR/<pid>.ds)")
        ->expected(0, 1)
        ->option_text("[=FILE]");
    app.add_flag("--dry-run{table}", dry_run, "print the launch plan and exit, starting nothing")
        ->expected(0, 1)
        ->option_text("[=table|json]");
    app.add_option("--job_id", o.job_id, "job id (default: generated)")->option_text("ID");
    app.add_option("--heartbeat_timeout", heartbeat_seconds,
                   "seconds of silence after which an agent or the launcher counts as lost")
        ->capture_default_str()
        ->option_text("SECONDS");
    app.add_option("--heartbeat_interval", heartbeat_interval_seconds,
                   "seconds between heartbeats, at most half the timeout (default: min(1, timeout / 3))")
        ->option_text("SECONDS");
  }

  // Stopping and heartbeats: resolved early, before the options that depend on no other group.
  Status ResolveTiming(const CLI::App& app, CliOptions& o) const {
    DSLAUNCH_ASSIGN_OR_RETURN(o.grace_period,
                              Duration("--grace_period", grace_seconds, std::chrono::milliseconds(0), kMaxGracePeriod));
    o.store_proxy = store_proxy == "on";
    DSLAUNCH_ASSIGN_OR_RETURN(o.heartbeat_timeout, Duration("--heartbeat_timeout", heartbeat_seconds,
                                                            kMinHeartbeatTimeout, kMaxHeartbeatTimeout));
    if (app.count("--heartbeat_interval") == 0) {
      o.heartbeat_interval = std::min(kHeartbeatInterval, o.heartbeat_timeout / kDefaultHeartbeatsPerTimeout);
      return Status::Ok();
    }
    DSLAUNCH_ASSIGN_OR_RETURN(o.heartbeat_interval, Duration("--heartbeat_interval", heartbeat_interval_seconds,
                                                             kMinHeartbeatInterval, kMaxHeartbeatTimeout));
    if (o.heartbeat_interval * kMinHeartbeatsPerTimeout > o.heartbeat_timeout) {
      std::ostringstream msg;
      msg << "--heartbeat_interval " << heartbeat_interval_seconds << " is more than half of --heartbeat_timeout "
          << heartbeat_seconds << ": one late heartbeat would make a lost node; lower the interval or raise the timeout";
      return InvalidArgumentError(msg.str());
    }
    return Status::Ok();
  }

  // The pid file and --dry-run.
  Status ResolveOutputs(const CLI::App& app, CliOptions& o) const {
    if (app.count("--save_pid") > 0) o.save_pid = save_pid;
    if (app.count("--dry-run") == 0) return Status::Ok();
    if (dry_run == "table") {
      o.dry_run = DryRunFormat::kTable;
    } else if (dry_run == "json") {
      o.dry_run = DryRunFormat::kJson;
    } else {
      return InvalidArgumentError("--dry-run=" + dry_run + ": expected 'table' or 'json'");
    }
    return Status::Ok();
  }
};

// Fault tolerance (docs/elastic.md): restarts, the elastic range, the watchdog, stragglers.
struct FaultGroup {
  static constexpr char kHeading[] = "Fault tolerance";
  std::string nnodes;
  ElasticArgs elastic;
  int max_restarts = 0, min_elastic_nodes = 0, max_elastic_nodes = 0;
  double watchdog_seconds = 0;
  std::string exit_codes = "classes";

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("--max_restarts", max_restarts,
                   "restart the job after up to N failures (default 0: the first failure ends it; 100 with --elastic_training)")
        ->option_text("N");
    app.add_option("--nnodes", nnodes,
                   "N: the first N hosts (as --num_nodes); MIN:MAX: elastic, run on MIN to MAX hosts, the others are spares")
        ->option_text("N|MIN:MAX");
    app.add_flag("--elastic_training", elastic.elastic_training,
                 "DeepSpeed's spelling of an elastic range: --min_elastic_nodes (default 1) to --max_elastic_nodes (default all)");
    app.add_option("--min_elastic_nodes", min_elastic_nodes, "--elastic_training: the fewest nodes to run on")
        ->option_text("N");
    app.add_option("--max_elastic_nodes", max_elastic_nodes, "--elastic_training: the most nodes to run on")
        ->option_text("N");
    app.add_option("--watchdog_timeout", watchdog_seconds,
                   "seconds without progress after which a rank counts as hung (default: off; docs/elastic.md)")
        ->option_text("SECONDS");
    app.add_option("--straggler_factor", o.stragglers.factor,
                   "flag a rank whose median step time is more than F times its peers' (0: off; docs/observability.md)")
        ->capture_default_str()
        ->option_text("F");
    app.add_option("--straggler_window", o.stragglers.window, "steps of each rank the straggler rule looks at")
        ->capture_default_str()
        ->option_text("STEPS");
    app.add_option("--straggler_margin_ms", o.stragglers.margin_ms,
                   "and only when its median is also more than MS ms/step above its peers'")
        ->capture_default_str()
        ->option_text("MS");
    app.add_option("--straggler_patience", o.stragglers.patience,
                   "checks in a row (one per step) that must agree to flag a rank, or to clear it")
        ->capture_default_str()
        ->option_text("N");
    app.add_option("--exit_codes", exit_codes,
                   "classes: exit 75 (infrastructure), 76 (requeue); kubeflow: 203, 204, which a PyTorchJob's "
                   "restartPolicy ExitCode retries (docs/exit-codes.md)")
        ->capture_default_str()
        ->option_text("classes|kubeflow");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) {
    if (app.count("--watchdog_timeout") > 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(o.watchdog_timeout, Duration("--watchdog_timeout", watchdog_seconds, kMinWatchdogTimeout,
                                                             kMaxWatchdogTimeout, "leave it out for no watchdog"));
    }
    DSLAUNCH_RETURN_IF_ERROR(ValidateStragglerOptions(o.stragglers));
    DSLAUNCH_ASSIGN_OR_RETURN(o.exit_codes, ParseExitCodeScheme(exit_codes));
    if (app.count("--nnodes") > 0) elastic.nnodes = nnodes;
    if (app.count("--min_elastic_nodes") > 0) elastic.min_elastic_nodes = min_elastic_nodes;
    if (app.count("--max_elastic_nodes") > 0) elastic.max_elastic_nodes = max_elastic_nodes;
    if (app.count("--max_restarts") > 0) elastic.max_restarts = max_restarts;
    return ResolveElastic(elastic, o);
  }
};

// Starting agents over SSH (docs/ssh.md).
struct SshGroup {
  static constexpr char kHeading[] = "Starting agents over SSH";
  double timeout_seconds = std::chrono::duration<double>(kSshDefaultConnectTimeout).count();

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("--agent_path", o.agent_path, "dslaunch-agent on the nodes (default: this one's absolute path)")
        ->option_text("PATH");
    app.add_option("--ssh_user", o.ssh.user, "SSH user for hosts without user@ in the hostfile")->option_text("USER");
    app.add_option("--ssh_port", o.ssh.port, "SSH port")->capture_default_str()->option_text("PORT");
    app.add_option("--ssh_identity", o.ssh.identities, "SSH private key file; repeatable (default: ssh-agent, ~/.ssh/id_*)")
        ->option_text("FILE");
    app.add_option("--ssh_known_hosts", o.ssh.known_hosts, "known_hosts file (default: ~/.ssh/known_hosts)")
        ->option_text("FILE");
    app.add_flag("--ssh_accept_new_host_keys", o.ssh.accept_new_host_keys,
                 "add unknown host keys to known_hosts (changed keys are still refused)");
    app.add_option("--ssh_connect_timeout", timeout_seconds, "seconds per SSH connection attempt")
        ->capture_default_str()
        ->option_text("SECONDS");
    app.add_option("--ssh_fanout", o.ssh.fanout, "SSH handshakes and pre-flight commands in flight at once (as pdsh -f)")
        ->capture_default_str()
        ->option_text("N");
    app.add_option("--ssh_tree_threshold", o.ssh.tree_threshold,
                   "past this many nodes, agents start the agents of their subtree over SSH (docs/ssh.md)")
        ->capture_default_str()
        ->option_text("NODES");
  }

  Status Resolve(CliOptions& o) const {
    DSLAUNCH_ASSIGN_OR_RETURN(o.ssh.connect_timeout, Duration("--ssh_connect_timeout", timeout_seconds,
                                                              kMinSshConnectTimeout, kMaxSshConnectTimeout));
    if (o.ssh.tree_threshold < 1) {
      return InvalidArgumentError("--ssh_tree_threshold " + std::to_string(o.ssh.tree_threshold) +
                                  " must be at least 1 (a job of that many nodes or fewer starts without a tree)");
    }
    if (o.ssh.fanout < 1) {
      return InvalidArgumentError("--ssh_fanout " + std::to_string(o.ssh.fanout) + " must be at least 1");
    }
    if (o.ssh.port < 1 || o.ssh.port > 65535) {
      return InvalidArgumentError("--ssh_port " + std::to_string(o.ssh.port) + " is not a TCP port (1-65535)");
    }
    return Status::Ok();
  }
};

// Nodes that start themselves: --no_ssh, and node mode (torchrun's rendezvous; docs/node-mode.md).
struct SelfStartGroup {
  static constexpr char kHeading[] = "Node mode (torchrun's rendezvous) and --no_ssh";
  int node_rank = -1;
  std::string rdzv_endpoint, rdzv_id, rdzv_backend, rdzv_conf;
  bool standalone = false;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_flag("--no_ssh", o.no_ssh, "run this same command on every node yourself, with --node_rank");
    app.add_option("--node_rank", node_rank, "this node's rank (0 hosts the launcher); node mode or --no_ssh")
        ->option_text("N");
    app.add_option("--rdzv_port", o.rdzv_port, "--no_ssh: port of the launcher's endpoint on node 0")
        ->capture_default_str()
        ->option_text("PORT");
    app.add_option("--secret_file", o.secret_file,
                   "--no_ssh and node mode: file holding the job secret, the same on every node")
        ->option_text("FILE");
    app.add_option("--rdzv_endpoint", rdzv_endpoint,
                   "node mode: HOST[:PORT] of the rendezvous endpoint (default port: --rdzv_port); its node hosts "
                   "it. Port 0 on one node: a job on this machine, as --standalone")
        ->option_text("HOST[:PORT]");
    app.add_option("--rdzv_id", rdzv_id, "node mode: the job's id, the same on every node (as --job_id)")
        ->option_text("ID");
    app.add_option("--rdzv_backend", rdzv_backend, "torchrun's rendezvous backend: c10d or static (both: dslaunch's store)")
        ->option_text("c10d|static");
    app.add_option("--rdzv_conf", rdzv_conf, "node mode: join_timeout=SECONDS,last_call_timeout=SECONDS")
        ->option_text("KEY=VALUE,...");
    app.add_flag("--standalone", standalone, "torchrun's one-node job with a local rendezvous (the default without a hostfile)");
    app.add_option("--local_addr", o.local_addr,
                   "node mode: this node's address; on the node hosting the rendezvous, the workers' MASTER_ADDR "
                   "unless --master_addr gives one")
        ->option_text("ADDR");
  }

  Status Resolve(const CLI::App& app, CliOptions& o, std::vector<std::string>& notes) const {
    if (app.count("--local_addr") > 0 && o.local_addr.empty()) {
      return InvalidArgumentError("--local_addr: empty address; give this node's address or leave it out");
    }
    if (o.rdzv_port < 0 || o.rdzv_port > 65535) {
      return InvalidArgumentError("--rdzv_port " + std::to_string(o.rdzv_port) +
                                  " is not a TCP port (1-65535, or 0 for any free port on a one-node job)");
    }
    if (app.count("--node_rank") > 0) {
      if (node_rank < 0) {
        return InvalidArgumentError("--node_rank " + std::to_string(node_rank) + ": expected a node rank >= 0");
      }
      o.node_rank = node_rank;
    }
    if (!rdzv_id.empty()) {
      if (!o.job_id.empty() && o.job_id != rdzv_id) {
        return InvalidArgumentError("--rdzv_id " + rdzv_id + " and --job_id " + o.job_id +
                                    " disagree: both name the job; keep one of them");
      }
      o.job_id = rdzv_id;
    }
    NodeModeArgs node_mode{rdzv_endpoint, rdzv_backend, rdzv_conf, standalone,
                           app.count("--rdzv_endpoint") > 0 || app.count("--rdzv_id") > 0 ||
                               app.count("--rdzv_conf") > 0};
    DSLAUNCH_RETURN_IF_ERROR(ResolveNodeMode(node_mode, o));
    if (o.rendezvous) return Status::Ok();  // node mode: every check below is of --no_ssh mode
    if (!o.local_addr.empty()) {
      notes.push_back("--local_addr " + o.local_addr +
                      ": ignored outside node mode (the workers' MASTER_ADDR is --master_addr, else the first host)");
    }
    if (o.no_ssh) {
      if (!o.node_rank || *o.node_rank < 0) {
        return InvalidArgumentError("--no_ssh needs --node_rank N (0 on the node that hosts the launcher)");
      }
      if (o.master_addr.empty()) {
        return InvalidArgumentError("--no_ssh needs --master_addr, the address of node 0");
      }
      if (o.job_id.empty()) {
        return InvalidArgumentError("--no_ssh needs --job_id, the same on every node");
      }
    } else if (o.node_rank) {
      return InvalidArgumentError("--node_rank is for node mode (with --nnodes and --rdzv_endpoint or --master_addr, "
                                  "no hostfile) or --no_ssh mode");
    }
    return Status::Ok();
  }

  // --job_id or --rdzv_id, whichever named the job, once both are merged.
  static Status ValidateJob(const CLI::App& app, const CliOptions& o) {
    if (app.count("--job_id") == 0 && app.count("--rdzv_id") == 0) return Status::Ok();
    Status valid = ValidateJobId(o.job_id);
    if (valid.ok()) return valid;
    return InvalidArgumentError((app.count("--job_id") > 0 ? "--job_id: " : "--rdzv_id: ") + valid.message());
  }
};

// Core binding (docs/launch-plan.md, "Core binding") and how agents start (docs/slurm.md).
struct PlacementGroup {
  static constexpr char kHeading[] = "Placement";
  std::string bind_core_list;
  std::string launcher;
  static constexpr char kPdsh[] = "pdsh";  // DeepSpeed's default launcher: SSH to every node

  void Add(CLI::App& app, CliOptions& o) {
    app.add_flag("--bind_cores_to_rank", o.bind_cores_to_rank,
                 "give each local rank its own share of the node's cores (and NUMA node), OMP_NUM_THREADS to match");
    app.add_option("--bind_core_list", bind_core_list,
                   "--bind_cores_to_rank: the cores to share, e.g. 0-3,8,10-11 (default: the node's, one thread per core)")
        ->option_text("LIST");
    app.add_option("--launcher", launcher,
                   "how agents start: slurm (srun, inside an allocation), ssh (also DeepSpeed's pdsh) or local "
                   "(default: chosen, docs/slurm.md)")
        ->option_text("slurm|ssh|local");
  }

  Status Resolve(const CLI::App& app, CliOptions& o, std::vector<std::string>& notes) const {
    if (app.count("--bind_core_list") > 0) {
      const std::string given = "--bind_core_list '" + bind_core_list + "'";
      if (!o.bind_cores_to_rank) {
        return InvalidArgumentError(given + " needs --bind_cores_to_rank (DeepSpeed ignores it without)");
      }
      auto cores = ParseCpuList(bind_core_list);
      if (!cores.ok()) return InvalidArgumentError(given + ": " + cores.status().message() + " (expected e.g. 0-3,8,10-11)");
      if (cores->empty()) return InvalidArgumentError(given + ": no cores listed (expected e.g. 0-3,8,10-11)");
      o.bind_core_list = std::move(*cores);
    }
    if (app.count("--launcher") > 0) {
      if (auto refusal = RefusalOfLauncher(launcher)) return InvalidArgumentError(*refusal);
      if (launcher == kPdsh) {
        notes.push_back("--launcher pdsh: dslaunch starts the agents over SSH itself, as pdsh would (--launcher ssh)");
      }
      DSLAUNCH_ASSIGN_OR_RETURN(o.launcher, ParseLauncherKind(launcher == kPdsh ? "ssh" : launcher));
      if (o.no_ssh || o.rendezvous) {
        return InvalidArgumentError(std::string("--launcher and ") + (o.no_ssh ? "--no_ssh" : "node mode") +
                                    " exclude each other: there every node's agent is started by the node's own dslaunch");
      }
    }
    return Status::Ok();
  }
};

// The live status page (docs/observability.md).
struct StatusGroup {
  static constexpr char kHeading[] = "Status page";
  StatusArgs status;

  void Add(CLI::App& app) {
    app.add_option("--status_port", status.port,
                   "serve the live job page, JSON and /metrics on this port (0: any free port; default: off)")
        ->option_text("PORT");
    app.add_option("--status_bind", status.bind,
                   "--status_port: the IP address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
        ->option_text("ADDR");
    app.add_option("--status_host", status.hosts,
                   "--status_port: a name the page is opened by besides its address (repeat or comma-separate)")
        ->delimiter(',')
        ->option_text("NAME");
    app.add_flag("--status_metrics_open", status.metrics_open,
                 "--status_port: serve /metrics without the job's token (for a Prometheus scraper)");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) {
    status.port_given = app.count("--status_port") > 0;
    status.bind_given = app.count("--status_bind") > 0;
    return ResolveStatusPage(status, o);
  }
};

// torchrun's and DeepSpeed's flags that change nothing in dslaunch: accepted, so that their
// command lines run, each with a note saying why it changes nothing (docs/cli.md).
struct CompatGroup {
  static constexpr char kHeading[] = "Accepted from torchrun and DeepSpeed, changing nothing here";
  double monitor_interval = 0;
  std::string start_method, comment;
  bool no_ssh_check = false, force_multi = false;

  void Add(CLI::App& app) {
    app.add_option("--monitor_interval", monitor_interval,
                   "torchrun's polling interval: agents hear of a worker's exit at once, without polling")
        ->option_text("SECONDS");
    app.add_option("--start_method", start_method,
                   "torchrun's spawn, fork or forkserver: every worker is a new process (as spawn)")
        ->check(OneOf({"spawn", "fork", "forkserver"}))
        ->option_text("spawn|fork|forkserver");
    app.add_flag("--no_ssh_check", no_ssh_check, "DeepSpeed's: the SSH pre-flight is how dslaunch starts its agents");
    app.add_flag("--force_multi", force_multi,
                 "DeepSpeed's: other hosts always start over SSH; this machine alone runs here without it");
    app.add_option("--comment", comment, "DeepSpeed's comment for srun: not passed on")->option_text("COMMENT");
  }

  Status Resolve(const CLI::App& app, std::vector<std::string>& notes) const {
    if (app.count("--monitor_interval") > 0) {
      if (!std::isfinite(monitor_interval) || monitor_interval < 0) {
        return InvalidArgumentError("--monitor_interval: expected seconds >= 0 (e.g. 0.1)");
      }
      notes.push_back("--monitor_interval: ignored: the agents hear of a worker's exit at once, without polling");
    }
    if (app.count("--start_method") > 0 && start_method != "spawn") {
      notes.push_back("--start_method " + start_method +
                      ": ignored: every worker is a new process (fork and exec), as with spawn");
    }
    if (no_ssh_check) {
      notes.push_back("--no_ssh_check: ignored: the pre-flight over SSH is part of starting each node's agent");
    }
    if (force_multi) {
      notes.push_back("--force_multi: ignored: other hosts always start over SSH, and a job on this machine alone "
                      "runs here without SSH");
    }
    if (app.count("--comment") > 0) notes.push_back("--comment: ignored: dslaunch passes no comment to srun");
    return Status::Ok();
  }
};

}  // namespace

// Every group of the command line, declared in the order --help lists them. A group's options are
// added under its heading (kHeading); adding an option to a group is one add_option in its Add.
struct OptionGroups::Groups {
  SelectionGroup selection;
  ProgramGroup program;
  OutputGroup output;
  ConductGroup conduct;
  FaultGroup fault;
  SshGroup ssh;
  SelfStartGroup self_start;
  PlacementGroup placement;
  StatusGroup status;
  CompatGroup compat;

  void Add(CLI::App& app, CliOptions& o) {
    auto under = [&app](const char* heading) { app.option_defaults()->group(heading); };
    under(SelectionGroup::kHeading), selection.Add(app, o);
    under(ProgramGroup::kHeading), program.Add(app, o);
    under(OutputGroup::kHeading), output.Add(app, o);
    under(ConductGroup::kHeading), conduct.Add(app, o);
    under(FaultGroup::kHeading), fault.Add(app, o);
    under(SshGroup::kHeading), ssh.Add(app, o);
    under(SelfStartGroup::kHeading), self_start.Add(app, o);
    under(PlacementGroup::kHeading), placement.Add(app, o);
    under(StatusGroup::kHeading), status.Add(app);
    under(CompatGroup::kHeading), compat.Add(app);
  }

  Status Resolve(const CLI::App& app, CliOptions& o, std::vector<std::string>& notes) {
    DSLAUNCH_RETURN_IF_ERROR(selection.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(conduct.ResolveTiming(app, o));
    DSLAUNCH_RETURN_IF_ERROR(fault.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(ssh.Resolve(o));
    DSLAUNCH_RETURN_IF_ERROR(self_start.Resolve(app, o, notes));
    DSLAUNCH_RETURN_IF_ERROR(placement.Resolve(app, o, notes));
    DSLAUNCH_RETURN_IF_ERROR(status.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(conduct.ResolveOutputs(app, o));
    DSLAUNCH_RETURN_IF_ERROR(output.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(program.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(compat.Resolve(app, notes));
    return SelfStartGroup::ValidateJob(app, o);
  }
};


namespace {

// What a number option's value must look like, by its metavar, for messages.
std::string ExpectedNumber(const CLI::Option& opt) {
  const std::string& metavar = opt.get_option_text();
  if (metavar == "SECONDS") return "a number of seconds (e.g. 30 or 0.5)";
  if (metavar == "PORT") return "a TCP port number (e.g. 29500)";
  if (opt.get_type_name() == "FLOAT") return "a number (e.g. 1.5)";
  return "a whole number (e.g. 4)";
}

// CLI11 reads an empty value as 0 for a number, so "--rdzv_port ''" would mean "any free port"
// and "--grace_period ''" no grace at all: an empty number is an error instead. Any other value
// that is not a number of the option's kind is refused saying what one looks like (CLI11 would say
// only "Could not convert").
void CheckNumbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const bool integer = type == "INT" || type == "UINT";
    if (!integer && type != "FLOAT") continue;
    const std::string expected = ExpectedNumber(*opt);
    opt->check(
        [integer, expected](const std::string& value) {
          if (value.empty()) return std::string("empty value, expected a number");
          bool valid = false;
          if (integer) {
            int64_t n = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (end == value.data() + value.size() &&
                (ec == std::errc::result_out_of_range || (ec == std::errc() && (n < INT32_MIN || n > INT32_MAX)))) {
              return "'" + value + "' is out of range: expected " + expected;
            }
            valid = ec == std::errc() && end == value.data() + value.size();
          } else {
            char* end = nullptr;
            errno = 0;
            std::strtod(value.c_str(), &end);
            valid = end == value.c_str() + value.size() && errno != ERANGE;
          }
          return valid ? std::string() : "'" + value + "' is not " + expected;
        },
        "", "number");
  }
}


}  // namespace

OptionGroups::OptionGroups() : groups_(std::make_unique<Groups>()) {}
OptionGroups::~OptionGroups() = default;

void OptionGroups::Add(CLI::App& app, CliOptions& o) {
  groups_->Add(app, o);
  CheckNumbers(app);
}

Status OptionGroups::Resolve(const CLI::App& app, CliOptions& o, std::vector<std::string>& notes) {
  return groups_->Resolve(app, o, notes);
}

}  // namespace dslaunch::launcher
