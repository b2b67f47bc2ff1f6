// dslaunch: the launcher. Reads the process's edges once (argv, environment, clock, pid, hostname,
// its own path) into typed options, wires the pieces together, and returns the job's exit code.
#include <pwd.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include "common/auth/secret.h"
#include "common/endpoint/handshake_admission.h"
#include "common/cpu_count.h"
#include "common/env_names.h"
#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/process_tree.h"
#include "common/route.h"
#include "common/text.h"
#include "dslaunch/config.h"
#include "launcher/cli/cli.h"
#include "launcher/machine/connection_budget.h"
#include "launcher/job/console.h"
#include "launcher/plan/exported_env.h"
#include "launcher/machine/gpu_discovery.h"
#include "launcher/plan/hostfile.h"
#include "launcher/machine/init_process.h"
#include "launcher/job/job_runner.h"
#include "launcher/job/starter_choice.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/plan/model_grid.h"
#include "launcher/cli/node_mode_options.h"
#include "launcher/node_mode/node_role.h"
#include "launcher/machine/open_files_limit.h"
#include "launcher/plan/plan_format.h"
#include "launcher/plan/resource_filter.h"
#include "launcher/slurm/allocation.h"
#include "launcher/start/agent_starter.h"
#include "launcher/start/no_ssh.h"
#include "launcher/cli/report_command.h"
#include "launcher/status/job_board.h"
#include "launcher/status/job_state_file.h"
#include "launcher/status/status_command.h"
#include "launcher/status/status_page.h"
#include "launcher/plan/visible_devices.h"

extern char** environ;

namespace dslaunch::launcher {
namespace {

// Exit code for bad usage (bad option, bad hostfile): nothing was started.
constexpr int kUsageError = kExitUsage;
// Exit code when the launcher cannot do its own part (bind, become a subreaper, start the agent):
// the machinery failed, not the program (docs/exit-codes.md).
constexpr int kLauncherError = kExitInfrastructure;
// Placeholder for the endpoint address in --dry-run output, where nothing is bound.
constexpr char kDryRunStoreAddress[] = "<launcher>:<port>";
// Every address of this machine: multi-node endpoints must be reachable from the nodes.
constexpr char kBindAllAddresses[] = "0.0.0.0";
constexpr char kLoopback[] = "127.0.0.1";

// The process's edges, read once.
struct Edges {
  std::map<std::string, std::string> env;
  std::string hostname;
  std::string home;
  std::string working_dir;
  std::string self_dir;  // directory of the dslaunch binary (and of dslaunch-agent)
  std::string temp_dir;
};

Edges ReadEdges() {
  Edges e;
  e.env = EnvironmentMap(environ);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  e.hostname = host;
  e.home = e.env.count("HOME") ? e.env["HOME"] : "";
  std::error_code ec;
  e.working_dir = std::filesystem::current_path(ec).string();
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  e.self_dir = ec ? std::string(".") : exe.parent_path().string();
  e.temp_dir = e.env.count("TMPDIR") && !e.env["TMPDIR"].empty() ? e.env["TMPDIR"] : "/tmp";
  return e;
}

std::string NewJobId() {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  return std::string(stamp) + "-" + GenerateSecret().substr(0, 6);
}

int Fail(const Status& status, int code) {
  std::cerr << "dslaunch: " << status.message() << "\n";
  return code;
}

bool IsThisMachine(const std::string& host, const std::string& hostname) {
  return IsLocalhostName(host) || host == "127.0.0.1" || host == "::1" || SameHost(host, hostname);
}

// The job secret: generated, or in --no_ssh and node mode shared by every node through --secret_file or
// DSLAUNCH_JOB_SECRET (never a command-line value).
Result<std::string> JobSecret(const CliOptions& cli, const Edges& edges) {
  if (!cli.no_ssh && !cli.rendezvous) return GenerateSecret();
  if (!cli.secret_file.empty()) return ReadSecretFile(cli.secret_file);
  auto it = edges.env.find(env::kJobSecret);
  if (it != edges.env.end() && !it->second.empty()) return it->second;
  return InvalidArgumentError(
      std::string(cli.no_ssh ? "--no_ssh" : "node mode") +
      " needs the job secret on every node: --secret_file FILE (mode 0600; a mounted Kubernetes Secret) or the "
      "DSLAUNCH_JOB_SECRET environment variable, with the same value on every node");
}

// The GPUs of this machine (launcher/machine/gpu_discovery.h): NVML, or the nvidia-smi on the launcher's
// PATH; DSLAUNCH_NVML_LIBRARY names another NVML library, or none when empty.
Result<int> LocalGpus(const Edges& edges) {
  GpuDiscoveryOptions options;
  if (auto it = edges.env.find(kNvmlLibraryVariable); it != edges.env.end()) options.nvml_library = it->second;
  if (auto it = edges.env.find("PATH"); it != edges.env.end()) options.path = it->second;
  auto gpus = CountLocalGpus(options);
  if (!gpus.ok()) {
    return UnavailableError("cannot count this machine's GPUs for the default number of workers: " +
                            gpus.status().message() + "; give --nproc_per_node N to skip the count");
  }
  return gpus->count;
}

// This node's workers in node mode, or for torchrun's --nproc_per_node keywords (NprocPerNode);
// the GPUs are counted only for the keywords that need them.
Result<int> ThisNodesWorkers(const CliOptions& cli, const Edges& edges) {
  int gpus = 0;
  if (cli.nproc_keyword && *cli.nproc_keyword != NprocKeyword::kCpu) {
    DSLAUNCH_ASSIGN_OR_RETURN(gpus, LocalGpus(edges));
  }
  return NprocPerNode(cli, UsableCpuCount(), gpus);
}

// The selected resources, with the launcher's own CUDA_VISIBLE_DEVICES taken into account. Inside a
// Slurm allocation without a hostfile the allocation is the hostfile; the launcher's
// CUDA_VISIBLE_DEVICES is then the batch step's, not a choice of the user (docs/slurm.md).
Result<JobResources> SelectNodes(const CliOptions& cli, const Edges& edges, const std::optional<Hostfile>& slurm) {
  std::optional<Hostfile> hostfile = slurm;
  if (cli.hostfile) {
    DSLAUNCH_ASSIGN_OR_RETURN(hostfile, ReadHostfile(*cli.hostfile));
  }
  std::optional<std::string> visible;
  if (auto it = edges.env.find(env::kCudaVisibleDevices); it != edges.env.end() && !slurm) visible = it->second;
  FilterOptions filter{cli.include, cli.exclude, cli.num_nodes, cli.num_gpus};
  if (cli.nproc_keyword) {
    // torchrun's keywords count this machine's GPUs or cores: a job on this machine only.
    if (hostfile || cli.no_ssh) {
      return InvalidArgumentError("--nproc_per_node auto, gpu and cpu count this machine's devices; with a hostfile "
                                  "give a number (each host's slots 0..N-1)");
    }
    DSLAUNCH_ASSIGN_OR_RETURN(filter.num_gpus, ThisNodesWorkers(cli, edges));
  }
  int local_gpus = 0;
  if (NeedsGpuDiscovery(hostfile.has_value(), filter, visible)) {
    DSLAUNCH_ASSIGN_OR_RETURN(local_gpus, LocalGpus(edges));
  }
  return SelectJobResources(hostfile, filter, visible, local_gpus);
}

// Slurm, read once (nullopt outside an allocation, and in --no_ssh mode, where every node runs its
// own dslaunch) and the launcher it implies.
struct SlurmEdge {
  std::optional<SlurmAllocation> allocation;
  LauncherChoice choice;
  std::optional<Hostfile> hostfile;  // the allocation's nodes, when they are the job's
  std::string slots_source;
};

Result<SlurmEdge> ReadSlurm(const CliOptions& cli, const Edges& edges) {
  SlurmEdge s;
  if (cli.no_ssh) return s;
  DSLAUNCH_ASSIGN_OR_RETURN(s.allocation, ReadSlurmAllocation(edges.env));
  LauncherInputs in;
  in.requested = cli.launcher;
  in.hostfile_given = cli.hostfile.has_value();
  in.allocation = s.allocation ? &*s.allocation : nullptr;
  in.single_node_is_here = s.allocation && s.allocation->nodes.size() == 1 &&
                           (IsThisMachine(s.allocation->nodes[0], edges.hostname) ||
                            SameHost(s.allocation->nodes[0], edges.hostname.substr(0, edges.hostname.find('.'))));
  DSLAUNCH_ASSIGN_OR_RETURN(s.choice, ChooseLauncher(in));
  if (s.choice.nodes_from_slurm) s.hostfile = AllocationHostfile(*s.allocation, cli.num_gpus, &s.slots_source);
  return s;
}

// The address agents started by srun use to reach the launcher: this machine's source address
// toward the first node that is reached through a real interface (not loopback, which a node name
// mapped to 127.0.1.1 in /etc/hosts would give); the hostname when none is.
std::string SlurmAdvertiseHost(const Resources& resources, const Edges& edges) {
  for (const NodeResources& n : resources) {
    auto src = SourceAddressToward(JoinHostPort(n.host, kDefaultMasterPort));
    if (src.ok() && !src->starts_with("127.") && *src != "::1") return *src;
  }
  return edges.hostname;
}

// The interpreter for Python programs: --python, else torchrun's PYTHON_EXEC, else python3.
std::string PythonInterpreter(const CliOptions& cli, const Edges& edges) {
  if (cli.python) return *cli.python;
  auto it = edges.env.find("PYTHON_EXEC");
  return it != edges.env.end() && !it->second.empty() ? it->second : kDefaultPython;
}

// What travels to the workers (docs/environment.md). The working directory goes in front of
// PYTHONPATH only for multi-node jobs, as DeepSpeed does: local workers start in it anyway.
Result<std::map<std::string, std::string>> WorkerExports(const CliOptions& cli, const Edges& edges, bool local) {
  ExportOptions eo;
  eo.launcher_env = edges.env;
  DSLAUNCH_ASSIGN_OR_RETURN(eo.env_files, ReadEnvFiles(EnvFileCandidates(edges.home, edges.working_dir)));
  eo.exports = cli.exports;
  if (!local) eo.working_directory = edges.working_dir;
  return ExportedEnvironment(eo);
}

SshOptions SshOptionsFrom(const CliOptions& cli, const Edges& edges) {
  SshOptions so = cli.ssh;
  so.home = edges.home;
  // The user name needs a passwd lookup (NSS), so it is read only for SSH jobs.
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr) so.local_user = pw->pw_name;
  auto sock = edges.env.find("SSH_AUTH_SOCK");
  if (sock != edges.env.end()) so.agent_socket = sock->second;
  return so;
}

// Whether the console is a terminal, and its width.
struct Terminal {
  bool interactive = false;
  int columns = 80;
};

Terminal ReadTerminal() {
  Terminal t;
  t.interactive = ::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1;
  if (winsize ws{}; t.interactive && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    t.columns = ws.ws_col;
  }
  return t;
}

// A train.json job's pipeline and tensor sizes (launcher/plan/model_grid.h): each plan's grid,
// for --dry-run and the status page. Unset for any other program.
std::optional<Result<ModelGridSizes>> ModelGridOf(const PlanOptions& po) {
  if (po.program.kind != ProgramKind::kTrainConfig) return std::nullopt;
  return ReadModelGridSizes(po.program.program, [](const std::string& path) { return ReadFile(path); });
}

// The plan options every job shares: the program, the contract's addresses, the exports. `local`:
// a one-node job on this machine.
Result<PlanOptions> BasePlanOptions(const CliOptions& cli, const Edges& edges, const Terminal& terminal, bool local) {
  DSLAUNCH_ASSIGN_OR_RETURN(auto exports, WorkerExports(cli, edges, local));
  PlanOptions po;
  // torchrun's --run_path runs PROGRAM as a Python script whatever its name ends in.
  po.program.kind = cli.run_path ? ProgramKind::kPythonScript : ClassifyProgram(cli.program, cli.no_python, cli.module);
  po.role_name = cli.role;
  const bool python_program =
      po.program.kind == ProgramKind::kPythonScript || po.program.kind == ProgramKind::kPythonModule;
  if (cli.python && !python_program) {
    return InvalidArgumentError("--python " + *cli.python + ": PROGRAM '" + cli.program +
                                "' is not a .py file and --module is not given, so it runs without an "
                                "interpreter; drop --python, or add --module");
  }
  po.program.python = PythonInterpreter(cli, edges);
  po.program.program = cli.program;
  po.program.args = cli.program_args;
  po.program.local_rank_arg = !cli.no_local_rank;
  po.program.worker = edges.self_dir + "/dslaunch-worker";
  po.master_addr = cli.master_addr;
  po.master_port = cli.master_port;
  po.job_id = cli.job_id.empty() ? NewJobId() : cli.job_id;
  po.generation = 0;
  po.extra_env = std::move(exports);
  po.max_restarts = cli.max_restarts;
  po.watchdog_timeout_ms = cli.watchdog_timeout ? cli.watchdog_timeout->count() : 0;
  po.bind_cores_to_rank = cli.bind_cores_to_rank;
  po.bind_core_list = cli.bind_core_list.value_or(std::vector<int>{});
  // On a terminal, transient lines (progress bars) are drawn in place, and the bundled runtime
  // is asked to draw one; a user's own DSLAUNCH_PROGRESS (--export) wins.
  if (terminal.interactive) po.extra_env.emplace(env::kProgress, "1");
  return po;
}

// The status board (launcher/status/job_board.h), made only when something reads it: the status
// page. Null: no view is published (the straggler rule runs on the runner's own view).
std::shared_ptr<JobBoard> MakeBoard(const CliOptions& cli) {
  if (cli.status_port) return std::make_shared<JobBoard>();
  return nullptr;
}

// The runner's options from the command line; the caller sets where the endpoint listens.
Result<JobRunnerOptions> RunnerOptions(const CliOptions& cli, const Edges& edges, const std::string& job_id) {
  JobRunnerOptions ro;
  ro.agent_path = cli.agent_path.empty() ? edges.self_dir + "/dslaunch-agent" : cli.agent_path;
  ro.agent_version = std::string("dslaunch-agent ") + DSLAUNCH_VERSION;
  // Empty: every agent uses its own user's default on its node (docs/launcher.md, "Log files").
  ro.log_dir = cli.log_dir.empty() ? std::string() : cli.log_dir + "/" + job_id;
  ro.working_dir = edges.working_dir;
  ro.grace_period = cli.grace_period;
  ro.heartbeat_timeout = cli.heartbeat_timeout;
  ro.heartbeat_interval = cli.heartbeat_interval;
  DSLAUNCH_ASSIGN_OR_RETURN(ro.events, EventLog::Open(cli.events_file));
  ro.console = cli.console;
  ro.store_proxy = cli.store_proxy;
  ro.stragglers = cli.stragglers;
  ro.board = MakeBoard(cli);
  return ro;
}

// Raises the launcher's soft descriptor limit to the hard one (the endpoint's own bounds, not the
// descriptor limit, must be what a flood of connections meets) and returns the limits as they
// were: agents started here get the soft one back. Nullopt (with a warning) when they cannot be
// read or set.
std::optional<OpenFilesLimit> RaiseLauncherOpenFiles() {
  auto limit = RaiseOpenFilesLimit();
  if (limit.ok()) return *limit;
  std::cerr << "dslaunch: warning: " << limit.status().message() << "\n";
  return std::nullopt;
}

// Sizes the endpoint's connection limit from the job's largest plan (every candidate node, every
// slot) and checks it against the descriptor limit `raised` left (docs/launcher.md, "Descriptor
// limit"): a job that cannot fit is refused here, before anything starts.
Status SizeEndpoint(int64_t ranks, int64_t nodes, int64_t start_descriptors,
                    const std::optional<OpenFilesLimit>& raised, JobRunnerOptions& ro) {
  ConnectionDemand demand;
  demand.ranks = ranks;
  demand.nodes = nodes;
  demand.start_descriptors = start_descriptors;
  demand.store_proxy = ro.store_proxy;
  demand.handshake_headroom = static_cast<int64_t>(kMaxUnauthenticatedConnections);
  // Without the limits (getrlimit failed) only the plan sizes the endpoint.
  const uint64_t limit = raised ? raised->hard : UINT64_MAX;
  DSLAUNCH_ASSIGN_OR_RETURN(ConnectionBudget budget, FitConnections(demand, limit));
  ro.max_connections = static_cast<size_t>(budget.max_connections);
  ro.connections = demand;
  ro.descriptor_limit = limit;
  return Status::Ok();
}

// The live status page (docs/observability.md), when --status_port asks for it.
Result<std::unique_ptr<StatusPage>> StartStatusPage(const CliOptions& cli, const Edges& edges,
                                                    const JobRunnerOptions& ro, const std::string& job_id,
                                                    std::shared_ptr<const JobBoard> board, int64_t now_ms) {
  if (!cli.status_port) return std::unique_ptr<StatusPage>();
  StatusPageOptions o;
  o.server.bind_address = cli.status_bind;
  o.server.port = *cli.status_port;
  o.server.access.host_names = cli.status_hosts;
  o.server.access.metrics_open = cli.status_metrics_open;
  o.job_id = job_id;
  o.log_dir = ro.log_dir.empty() ? UserRuntimeBase(edges.temp_dir, ::getuid()) + "/" + job_id : ro.log_dir;
  o.temp_dir = edges.temp_dir;
  o.uid = ::getuid();
  o.pid = ::getpid();
  o.now_ms = now_ms;
  auto page = StatusPage::Start(o, std::move(board), std::cerr);
  if (!page.ok()) return page.status().WithContext("--status_port " + std::to_string(*cli.status_port));
  return page;
}

// The part every launcher shares once its job is planned: the pid file, the console, the runner
// (`run` gets it listening), and for a launcher that starts agents on this machine the subreaper
// and the final sweep. Returns the job's exit code.
int Execute(const CliOptions& cli, const Edges& edges, const Terminal& terminal, const JobRunnerOptions& ro,
            const std::string& job_id, const std::string& secret, AgentStarter& starter, bool own_agents,
            const std::function<int(JobRunner&)>& run) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed console or a dead agent's pipe must not kill the launcher
  std::string pid_file;
  if (cli.save_pid) {
    pid_file = cli.save_pid->empty() ? edges.temp_dir + "/" + std::to_string(::getpid()) + ".ds" : *cli.save_pid;
    std::ofstream(pid_file) << ::getpid() << "\n";
  }
  // An agent started here that dies (SIGKILL, a crash) takes its workers with it
  // (PR_SET_PDEATHSIG), but not processes they moved into a session of their own: as a child
  // subreaper the launcher inherits those, and sweeps them once every agent is gone.
  if (own_agents) {
    if (Status s = BecomeChildSubreaper(); !s.ok()) return Fail(s, kLauncherError);
  }
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (ro.board) {
    std::vector<std::string> command = {cli.program};
    command.insert(command.end(), cli.program_args.begin(), cli.program_args.end());
    ro.board->Publish(StartingView(job_id, std::move(command), now_ms));
  }
  auto page = StartStatusPage(cli, edges, ro, job_id, ro.board, now_ms);
  if (!page.ok()) return Fail(page.status(), kLauncherError);
  Console console(STDOUT_FILENO, STDERR_FILENO, terminal.interactive, terminal.columns);
  int code = kLauncherError;
  {
    JobRunner runner(ro, job_id, secret, starter, console);
    Status listening = runner.Listen();
    code = listening.ok() ? run(runner) : Fail(listening.WithContext("cannot open the launcher's endpoint"), kLauncherError);
  }  // the runner has reaped or killed every agent it started
  if (own_agents) {
    auto swept = KillAllDescendants();
    if (!swept.ok()) {
      std::cerr << "dslaunch: " << swept.status().ToString() << "\n";
    } else if (*swept > 0) {
      std::cerr << "dslaunch: killed " << *swept << " leftover process" << (*swept == 1 ? "" : "es")
                << " of a lost agent's workers\n";
    }
  }
  if (!pid_file.empty()) std::remove(pid_file.c_str());
  return code;
}

// Node mode (docs/node-mode.md): host the rendezvous and the job, or join it as this node's agent.
int RunNode(const CliOptions& cli, const Edges& edges) {
  const RendezvousOptions& rdzv = *cli.rendezvous;
  auto slots = ThisNodesWorkers(cli, edges);
  if (!slots.ok()) {
    return Fail(slots.status(), slots.status().code() == StatusCode::kUnavailable ? kLauncherError : kUsageError);
  }
  auto secret = JobSecret(cli, edges);
  if (!secret.ok()) return Fail(secret.status(), kUsageError);
  const std::string endpoint = JoinHostPort(rdzv.host, static_cast<uint16_t>(rdzv.port));
  NodeRoleFacts facts;
  facts.node_rank = rdzv.node_rank;
  auto local = IsAddressOfThisMachine(rdzv.host);
  facts.endpoint_is_local = local.ok() && *local;
  if (facts.endpoint_is_local && !rdzv.node_rank) facts.port_in_use = PortInUse(static_cast<uint16_t>(rdzv.port));
  const Terminal terminal = ReadTerminal();
  auto ro = RunnerOptions(cli, edges, cli.job_id);
  if (!ro.ok()) return Fail(ro.status(), kUsageError);
  const std::chrono::seconds join_timeout = rdzv.join_timeout + rdzv.last_call_timeout;
  if (DecideNodeRole(facts) == NodeRole::kJoin) {
    std::cerr << "dslaunch: joining the rendezvous of job " << cli.job_id << " at " << endpoint << " with "
              << *slots << " worker" << (*slots == 1 ? "" : "s")
              << (rdzv.node_rank ? " as node " + std::to_string(*rdzv.node_rank) : std::string()) << "\n";
    AgentCommand ac{ro->agent_path, rdzv.host, static_cast<uint16_t>(rdzv.port), cli.job_id,
                    rdzv.node_rank.value_or(-1), AgentCommand::Join{*slots, join_timeout}};
    ac.exit_codes = cli.exit_codes;
    return Fail(ExecNodeAgent(ac, *secret), kLauncherError);
  }
  if (!facts.endpoint_is_local) {
    std::cerr << "dslaunch: warning: node rank 0 hosts the rendezvous, but " << rdzv.host
              << (local.ok() ? " is not an address of this machine" : " does not resolve here (" + local.status().message() + ")")
              << "; the other nodes must reach this one at " << endpoint << "\n";
  }
  CliOptions contract = cli;
  // Rank 0 runs on this node: its --local_addr if given, else the endpoint's host.
  if (contract.master_addr.empty()) contract.master_addr = cli.local_addr.empty() ? rdzv.host : cli.local_addr;
  auto po = BasePlanOptions(contract, edges, terminal, /*local=*/false);
  if (!po.ok()) return Fail(po.status(), kUsageError);
  if (cli.dry_run) {
    return Fail(InvalidArgumentError("--dry-run: in node mode the plan exists only once the nodes have joined"),
                kUsageError);
  }
  ro->bind_address = kBindAllAddresses;
  ro->port = static_cast<uint16_t>(rdzv.port);
  // This node's own agent reaches the endpoint as the other nodes do when there are others: its
  // workers take the agent's endpoint as DSLAUNCH_STORE, and the bundled runtime advertises the
  // address that routes to it to its Gloo peers (a loopback store made rank 0 unreachable).
  ro->advertise_host = rdzv.max_nodes > 1 ? rdzv.host : std::string(kLoopback);
  ro->show_host = rdzv.max_nodes > 1;
  const std::optional<OpenFilesLimit> open_files = RaiseLauncherOpenFiles();
  // The other nodes' --nproc_per_node is known only when they join: this node's is the estimate.
  if (Status fits = SizeEndpoint(int64_t{rdzv.max_nodes} * *slots, rdzv.max_nodes, 0, open_files, *ro); !fits.ok()) {
    return Fail(fits, kUsageError);
  }
  SelfStartedAgentStarter starter(0, open_files ? std::optional<uint64_t>(open_files->soft) : std::nullopt);
  return Execute(cli, edges, terminal, *ro, cli.job_id, *secret, starter, /*own_agents=*/true, [&](JobRunner& runner) {
    NodeModeSpec spec;
    spec.job.plan_options = *po;
    spec.job.plan_options.store_address = JoinHostPort(ro->advertise_host, runner.port());
    spec.job.elastic.max_restarts = cli.max_restarts;
    spec.job.model_grid = ModelGridOf(*po);
    spec.min_nodes = rdzv.min_nodes;
    spec.max_nodes = rdzv.max_nodes;
    spec.join_timeout = rdzv.join_timeout;
    spec.last_call_timeout = rdzv.last_call_timeout;
    spec.own_host = edges.hostname;
    spec.own_slots = *slots;
    return runner.RunNodeMode(spec);
  });
}

// A job whose nodes the launcher knows: a hostfile, one local node, or --no_ssh.
int RunPlannedJob(const CliOptions& cli, const Edges& edges) {
  auto slurm = ReadSlurm(cli, edges);
  if (!slurm.ok()) return Fail(slurm.status(), kUsageError);
  auto selected = SelectNodes(cli, edges, slurm->hostfile);
  if (!selected.ok()) {
    // kUnavailable: the GPU count failed (the machine's fault, not the command line's).
    return Fail(selected.status(), selected.status().code() == StatusCode::kUnavailable ? kLauncherError : kUsageError);
  }
  const Resources* resources = &selected->resources;
  AgentStartFacts start_facts;
  start_facts.no_ssh = cli.no_ssh;
  start_facts.requested = cli.launcher;
  start_facts.launcher = slurm->choice;
  start_facts.one_local_node = resources->size() == 1 && IsThisMachine((*resources)[0].host, edges.hostname);
  auto start = ChooseAgentStart(start_facts, *resources);
  if (!start.ok()) return Fail(start.status(), kUsageError);
  const bool local = *start == AgentStart::kLocal;
  if (slurm->allocation || cli.launcher) {
    std::cerr << "dslaunch: launcher " << (local ? "local" : LauncherName(slurm->choice.kind)) << " ("
              << slurm->choice.why << ")";
    if (slurm->choice.nodes_from_slurm) {
      std::cerr << ": " << resources->size() << (resources->size() == 1 ? " node, " : " nodes, ")
                << (*resources)[0].slots.size() << " worker(s) on the first, slots from " << slurm->slots_source;
    }
    std::cerr << "\n";
  }
  const Terminal terminal = ReadTerminal();
  auto base = BasePlanOptions(cli, edges, terminal, local);
  if (!base.ok()) return Fail(base.status(), kUsageError);
  PlanOptions po = std::move(*base);
  po.no_devices = selected->no_devices;
  // A requeued Slurm job starts at generation SLURM_RESTART_COUNT: its workers see a restart
  // (DSLAUNCH_RESTART_COUNT > 0: the bundled runtime resumes from checkpoint.dir and appends to
  // metrics.jsonl), docs/slurm.md, "Requeue".
  po.generation = slurm->allocation ? slurm->allocation->restart_count : 0;
  if (po.generation > 0) {
    po.restart_reason = "requeued by Slurm (SLURM_RESTART_COUNT=" + std::to_string(po.generation) + ")";
  }
  auto elastic = ElasticOptionsFor(cli, static_cast<int>(resources->size()));
  if (!elastic.ok()) return Fail(elastic.status(), kUsageError);

  if (cli.dry_run) {
    po.store_address = kDryRunStoreAddress;
    auto plan = PlanLaunch(*resources, po);
    if (!plan.ok()) return Fail(plan.status(), kUsageError);
    if (const auto sizes = ModelGridOf(po)) SetModelGrid(*plan, *sizes);
    std::cout << (*cli.dry_run == DryRunFormat::kJson ? FormatPlanJson(*plan) : FormatPlanTable(*plan));
    return 0;
  }

  if (cli.no_ssh && cli.rdzv_port == 0 && resources->size() > 1) {
    return Fail(InvalidArgumentError("--rdzv_port 0 (any free port) works only for a one-node job: the other " +
                                     std::to_string(resources->size() - 1) +
                                     " nodes must know the port in advance; give every node the same --rdzv_port"),
                kUsageError);
  }
  auto secret = JobSecret(cli, edges);
  if (!secret.ok()) return Fail(secret.status(), kUsageError);
  auto ro = RunnerOptions(cli, edges, po.job_id);
  if (!ro.ok()) return Fail(ro.status(), kUsageError);
  if (cli.no_ssh && *cli.node_rank != 0) {
    if (*cli.node_rank >= static_cast<int>(resources->size())) {
      return Fail(InvalidArgumentError("--node_rank " + std::to_string(*cli.node_rank) + " is outside the " +
                                       std::to_string(resources->size()) + " selected nodes"),
                  kUsageError);
    }
    AgentCommand ac{ro->agent_path, cli.master_addr, static_cast<uint16_t>(cli.rdzv_port), po.job_id, *cli.node_rank, std::nullopt};
    return Fail(ExecNodeAgent(ac, *secret), kLauncherError);
  }

  ro->bind_address = local ? kLoopback : kBindAllAddresses;
  ro->port = cli.no_ssh ? static_cast<uint16_t>(cli.rdzv_port) : 0;
  // --no_ssh: node 0's own agent reaches the endpoint at --master_addr as the other nodes do, when
  // there are others: its workers' DSLAUNCH_STORE is that address, and the bundled runtime
  // advertises the address routing to it to its Gloo peers (loopback would make rank 0 unreachable).
  if (local) {
    ro->advertise_host = kLoopback;
  } else if (cli.no_ssh) {
    ro->advertise_host = resources->size() > 1 ? cli.master_addr : std::string(kLoopback);
  } else {
    ro->advertise_host = *start == AgentStart::kSrun ? SlurmAdvertiseHost(*resources, edges) : edges.hostname;
  }
  ro->show_host = resources->size() > 1;

  const std::optional<OpenFilesLimit> open_files = RaiseLauncherOpenFiles();
  const std::optional<uint64_t> agent_open_files =
      open_files ? std::optional<uint64_t>(open_files->soft) : std::nullopt;
  int64_t ranks = 0;
  for (const NodeResources& node : *resources) ranks += static_cast<int64_t>(node.slots.size());
  const auto nodes = static_cast<int64_t>(resources->size());
  if (Status fits = SizeEndpoint(ranks, nodes, StartDescriptors(*start, nodes, cli.ssh), open_files, *ro);
      !fits.ok()) {
    return Fail(fits, kUsageError);
  }
  Starters starters = MakeStarters(*start, agent_open_files, slurm->allocation ? &*slurm->allocation : nullptr,
                                   *start == AgentStart::kSsh ? SshOptionsFrom(cli, edges) : SshOptions{});
  JobSpec spec;
  spec.probe_starter = std::move(starters.probe);
  return Execute(cli, edges, terminal, *ro, po.job_id, *secret, *starters.starter, /*own_agents=*/local || cli.no_ssh,
                 [&](JobRunner& runner) {
                   po.store_address = JoinHostPort(ro->advertise_host, runner.port());
                   auto plan = PlanLaunch(*resources, po);  // generation 0 on every candidate: checks the options
                   if (!plan.ok()) return Fail(plan.status(), kUsageError);
                   spec.candidates = *resources;
                   spec.everyone = std::move(*plan);
                   spec.plan_options = po;
                   spec.model_grid = ModelGridOf(po);
                   spec.elastic = *elastic;
                   return runner.Run(spec);
                 });
}

// The job's exit class as this process writes it (--exit_codes, docs/exit-codes.md), said on
// stderr when it differs, so that a log shows both numbers.
int WrittenExitCode(int code, ExitCodeScheme scheme) {
  const int written = SchedulerExitCode(code, scheme);
  if (written != code) {
    std::cerr << "dslaunch: exit code " << code << " written as " << written << " (--exit_codes "
              << ExitCodeSchemeName(scheme) << ")\n";
  }
  return written;
}

int Main(int argc, char** argv) {
  // As a container's PID 1, stay init (forward signals, reap orphans) and run as its child.
  if (Status s = SplitOffInitIfPid1(); !s.ok()) return Fail(s, kLauncherError);
  std::vector<std::string> args(argv, argv + argc);
  if (IsReportCommand(args)) return RunReportCommand(args);
  const Edges edges = ReadEdges();
  if (IsStatusSubcommand(args)) {
    auto command = ParseStatusCommand(args);
    if (!command.ok()) return Fail(command.status(), kUsageError);
    StatusEdges se{edges.temp_dir, ::getuid(), [](int64_t pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0; }};
    return RunStatusCommand(*command, se, std::cout, std::cerr);
  }
  auto command = ParseCommandLine(args, edges.env);
  if (!command.ok()) return Fail(command.status(), kUsageError);
  if (command->print) {
    std::cout << *command->print;
    return 0;
  }
  for (const std::string& note : command->notes) std::cerr << "dslaunch: note: " << note << "\n";
  const CliOptions& cli = command->options;
  const int code = cli.rendezvous ? RunNode(cli, edges) : RunPlannedJob(cli, edges);
  return WrittenExitCode(code, cli.exit_codes);
}

}  // namespace
}  // namespace dslaunch::launcher

int main(int argc, char** argv) { return dslaunch::launcher::Main(argc, argv); }
