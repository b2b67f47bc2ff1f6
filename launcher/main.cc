// dslaunch: the launcher. Reads the process's edges once (argv, environment, clock, pid, hostname,
// its own path) into typed options, wires the pieces together, and returns the job's exit code.
#include <pwd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "common/env_names.h"
#include "common/process_tree.h"
#include "common/route.h"
#include "common/secret.h"
#include "common/text.h"
#include "dslaunch/config.h"
#include "launcher/agent_starter.h"
#include "launcher/cli.h"
#include "launcher/console.h"
#include "launcher/exported_env.h"
#include "launcher/hostfile.h"
#include "launcher/job_runner.h"
#include "launcher/launch_plan.h"
#include "launcher/no_ssh.h"
#include "launcher/open_files_limit.h"
#include "launcher/plan_format.h"
#include "launcher/resource_filter.h"
#include "launcher/slurm_allocation.h"
#include "launcher/srun_agent_starter.h"
#include "launcher/ssh_agent_starter.h"
#include "launcher/visible_devices.h"

extern char** environ;

namespace dslaunch::launcher {
namespace {

// Exit code for bad usage (bad option, bad hostfile), as CLI tools conventionally use.
constexpr int kUsageError = 2;
// Exit code when the launcher cannot do its own part (bind, read the secret, start the agent).
constexpr int kLauncherError = 1;
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

// The job secret: generated, or in --no_ssh mode shared by every node through --secret_file or
// DSLAUNCH_JOB_SECRET (never a command-line value).
Result<std::string> JobSecret(const CliOptions& cli, const Edges& edges) {
  if (!cli.no_ssh) return GenerateSecret();
  if (!cli.secret_file.empty()) return ReadSecretFile(cli.secret_file);
  auto it = edges.env.find(env::kJobSecret);
  if (it != edges.env.end() && !it->second.empty()) return it->second;
  return InvalidArgumentError(
      "--no_ssh needs the job secret on every node: --secret_file FILE (mode 0600) or the "
      "DSLAUNCH_JOB_SECRET environment variable, with the same value on every node");
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
  return SelectJobResources(hostfile, FilterOptions{cli.include, cli.exclude, cli.num_nodes, cli.num_gpus}, visible);
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
  SshOptions so;
  so.user = cli.ssh_user;
  so.port = cli.ssh_port;
  so.identities = cli.ssh_identities;
  so.known_hosts = cli.ssh_known_hosts;
  so.accept_new_host_keys = cli.ssh_accept_new_host_keys;
  so.connect_timeout = cli.ssh_connect_timeout;
  so.home = edges.home;
  // The user name needs a passwd lookup (NSS), so it is read only for SSH jobs.
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr) so.local_user = pw->pw_name;
  auto sock = edges.env.find("SSH_AUTH_SOCK");
  if (sock != edges.env.end()) so.agent_socket = sock->second;
  return so;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  auto command = ParseCommandLine(args);
  if (!command.ok()) return Fail(command.status(), kUsageError);
  if (command->print) {
    std::cout << *command->print;
    return 0;
  }
  const CliOptions& cli = command->options;
  const Edges edges = ReadEdges();

  auto slurm = ReadSlurm(cli, edges);
  if (!slurm.ok()) return Fail(slurm.status(), kUsageError);
  auto selected = SelectNodes(cli, edges, slurm->hostfile);
  if (!selected.ok()) return Fail(selected.status(), kUsageError);
  const Resources* resources = &selected->resources;
  const bool one_local_node = resources->size() == 1 && IsThisMachine((*resources)[0].host, edges.hostname);
  // As before Slurm: a hostfile of this machine alone runs locally, without SSH.
  const bool local = !cli.no_ssh && (slurm->choice.kind == LauncherKind::kLocal ||
                                     (!cli.launcher && slurm->choice.kind == LauncherKind::kSsh && one_local_node));
  const bool use_srun = !cli.no_ssh && slurm->choice.kind == LauncherKind::kSlurm;
  if (cli.launcher == LauncherKind::kLocal && !one_local_node && !slurm->choice.nodes_from_slurm) {
    return Fail(InvalidArgumentError("--launcher local starts agents on this machine only, but the selection has " +
                                     std::to_string(resources->size()) + " host(s) starting with '" +
                                     (*resources)[0].host + "'; use --launcher ssh or slurm"),
                kUsageError);
  }
  if (slurm->allocation || cli.launcher) {
    std::cerr << "dslaunch: launcher " << (local ? "local" : LauncherName(slurm->choice.kind)) << " ("
              << slurm->choice.why << ")";
    if (slurm->choice.nodes_from_slurm) {
      std::cerr << ": " << resources->size() << (resources->size() == 1 ? " node, " : " nodes, ")
                << (*resources)[0].slots.size() << " worker(s) on the first, slots from " << slurm->slots_source;
    }
    std::cerr << "\n";
  }
  auto exports = WorkerExports(cli, edges, local);
  if (!exports.ok()) return Fail(exports.status(), kUsageError);
  PlanOptions po;
  po.program.kind = ClassifyProgram(cli.program, cli.no_python, cli.module);
  const bool python_program =
      po.program.kind == ProgramKind::kPythonScript || po.program.kind == ProgramKind::kPythonModule;
  if (cli.python && !python_program) {
    return Fail(InvalidArgumentError("--python " + *cli.python + ": PROGRAM '" + cli.program +
                                     "' is not a .py file and --module is not given, so it runs without an "
                                     "interpreter; drop --python, or add --module"),
                kUsageError);
  }
  po.program.python = PythonInterpreter(cli, edges);
  po.program.program = cli.program;
  po.program.args = cli.program_args;
  po.program.local_rank_arg = !cli.no_local_rank;
  po.program.worker = edges.self_dir + "/dslaunch-worker";
  po.master_addr = cli.master_addr;
  po.master_port = cli.master_port;
  po.job_id = cli.job_id.empty() ? NewJobId() : cli.job_id;
  // A requeued Slurm job starts at generation SLURM_RESTART_COUNT: its workers see a restart
  // (DSLAUNCH_RESTART_COUNT > 0: the bundled runtime resumes from checkpoint.dir and appends to
  // metrics.jsonl), docs/slurm.md, "Requeue".
  po.generation = slurm->allocation ? slurm->allocation->restart_count : 0;
  if (po.generation > 0) {
    po.restart_reason = "requeued by Slurm (SLURM_RESTART_COUNT=" + std::to_string(po.generation) + ")";
  }
  po.no_devices = selected->no_devices;
  po.extra_env = std::move(*exports);
  po.max_restarts = cli.max_restarts;
  po.watchdog_timeout_ms = cli.watchdog_timeout ? cli.watchdog_timeout->count() : 0;
  auto elastic = ElasticOptionsFor(cli, static_cast<int>(resources->size()));
  if (!elastic.ok()) return Fail(elastic.status(), kUsageError);

  if (cli.dry_run) {
    po.store_address = kDryRunStoreAddress;
    auto plan = PlanLaunch(*resources, po);
    if (!plan.ok()) return Fail(plan.status(), kUsageError);
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
  const std::string agent_path = cli.agent_path.empty() ? edges.self_dir + "/dslaunch-agent" : cli.agent_path;
  if (cli.no_ssh && *cli.node_rank != 0) {
    if (*cli.node_rank >= static_cast<int>(resources->size())) {
      return Fail(InvalidArgumentError("--node_rank " + std::to_string(*cli.node_rank) + " is outside the " +
                                       std::to_string(resources->size()) + " selected nodes"),
                  kUsageError);
    }
    AgentCommand ac{agent_path, cli.master_addr, static_cast<uint16_t>(cli.rdzv_port), po.job_id, *cli.node_rank};
    return Fail(ExecNodeAgent(ac, *secret), kLauncherError);
  }

  // On a terminal, transient lines (progress bars) are drawn in place, and the bundled runtime
  // is asked to draw one; a user's own DSLAUNCH_PROGRESS (--export) wins.
  const bool interactive = ::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1;
  int columns = 80;
  if (winsize ws{}; interactive && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) columns = ws.ws_col;
  if (interactive) po.extra_env.emplace(env::kProgress, "1");

  std::signal(SIGPIPE, SIG_IGN);  // a closed console or a dead agent's pipe must not kill the launcher
  std::string pid_file;
  if (cli.save_pid) {
    pid_file = cli.save_pid->empty() ? edges.temp_dir + "/" + std::to_string(::getpid()) + ".ds" : *cli.save_pid;
    std::ofstream(pid_file) << ::getpid() << "\n";
  }

  JobRunnerOptions ro;
  ro.bind_address = local ? kLoopback : kBindAllAddresses;
  ro.port = cli.no_ssh ? static_cast<uint16_t>(cli.rdzv_port) : 0;
  ro.advertise_host = local || cli.no_ssh ? kLoopback : use_srun ? SlurmAdvertiseHost(*resources, edges) : edges.hostname;
  ro.agent_path = agent_path;
  ro.agent_version = std::string("dslaunch-agent ") + DSLAUNCH_VERSION;
  // Empty: every agent uses its own user's default on its node (docs/launcher.md, "Log files").
  ro.log_dir = cli.log_dir.empty() ? std::string() : cli.log_dir + "/" + po.job_id;
  ro.working_dir = edges.working_dir;
  ro.grace_period = cli.grace_period;
  ro.heartbeat_timeout = cli.heartbeat_timeout;
  ro.heartbeat_interval = cli.heartbeat_interval;
  auto events = EventLog::Open(cli.events_file);
  if (!events.ok()) return Fail(events.status(), kUsageError);
  ro.events = *events;
  ro.tee = cli.tee;
  ro.show_host = resources->size() > 1;

  // The endpoint's own bounds, not the descriptor limit, must be what a flood of connections
  // meets; agents and workers get the limit the launcher started with.
  std::optional<uint64_t> agent_open_files;
  if (auto limit = RaiseOpenFilesLimit(); limit.ok()) {
    agent_open_files = limit->soft;
  } else {
    std::cerr << "dslaunch: warning: " << limit.status().message() << "\n";
  }
  std::unique_ptr<AgentStarter> starter;
  JobSpec spec;
  if (local) {
    starter = std::make_unique<LocalAgentStarter>(agent_open_files);
    spec.probe_starter = [agent_open_files] { return std::make_unique<LocalAgentStarter>(agent_open_files); };
  } else if (use_srun) {
    SrunOptions so;
    const SlurmAllocation& a = *slurm->allocation;
    for (size_t i = 0; i < a.cpus_per_node.size(); ++i) so.cpus_per_node[a.nodes[i]] = a.cpus_per_node[i];
    starter = std::make_unique<SrunAgentStarter>(so);
    spec.probe_starter = [so] { return std::make_unique<SrunAgentStarter>(so); };
  } else if (cli.no_ssh) {
    // Every other node's agent is started by hand: a lost node cannot be re-probed from here.
    starter = std::make_unique<SelfStartedAgentStarter>(0, agent_open_files);
  } else {
    const SshOptions ssh = SshOptionsFrom(cli, edges);
    starter = std::make_unique<SshAgentStarter>(ssh);
    spec.probe_starter = [ssh] { return std::make_unique<SshAgentStarter>(ssh); };
  }
  // An agent started here that dies (SIGKILL, a crash) takes its workers with it
  // (PR_SET_PDEATHSIG), but not processes they moved into a session of their own: as a child
  // subreaper the launcher inherits those, and sweeps them once every agent is gone.
  const bool own_agents = local || cli.no_ssh;
  if (own_agents) {
    if (Status s = BecomeChildSubreaper(); !s.ok()) return Fail(s, kLauncherError);
  }
  Console console(STDOUT_FILENO, STDERR_FILENO, interactive, columns);
  int code = kLauncherError;
  {
    JobRunner runner(ro, po.job_id, *secret, *starter, console);
    Status listening = runner.Listen();
    if (!listening.ok()) {
      code = Fail(listening.WithContext("cannot open the launcher's endpoint"), kLauncherError);
    } else {
      po.store_address = JoinHostPort(ro.advertise_host, runner.port());
      auto plan = PlanLaunch(*resources, po);  // generation 0 on every candidate: checks the options
      if (plan.ok()) {
        spec.candidates = *resources;
        spec.everyone = std::move(*plan);
        spec.plan_options = po;
        spec.elastic = *elastic;
        code = runner.Run(spec);
      } else {
        code = Fail(plan.status(), kUsageError);
      }
    }
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

}  // namespace
}  // namespace dslaunch::launcher

int main(int argc, char** argv) { return dslaunch::launcher::Main(argc, argv); }
