// dslaunch-worker: the bundled runtime, started by the agents for a train.json. This file reads
// the process's edges (argv, environment) and wires the pieces; the work is in the libraries.
//
//   dslaunch-worker train CONFIG.json                 (under dslaunch: the rank environment is set)
//   dslaunch-worker prepare-text IN... OUT.bin [--val VAL.bin] [--val_fraction 0.1]
//   dslaunch-worker make-digits OUT_DIR [--train N] [--val N]   (synthetic IDX images for `mlp`)
//   dslaunch-worker export CKPT OUT.safetensors [--dtype fp32|bf16|fp16] [--hf_config --n_head N | --config train.json]
//   dslaunch-worker sgemm-probe SHAPE...             (run by train: this process's kernels, timed and checked)
#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <limits>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>

#include "common/auth/secret.h"
#include "common/env_names.h"
#include "common/error_record.h"
#include "common/exit_codes.h"
#include "common/report/report_file.h"
#include "common/route.h"
#include "common/store/store_client.h"
#include "common/text.h"
#include "common/worker_identity.h"
#include "dslaunch/config.h"
#include "runtime/checkpoint/fault_injecting_file_system.h"
#include "runtime/checkpoint/model_file.h"
#include "runtime/comm/gloo/communicator.h"
#include "runtime/comm/gloo/grid_communicators.h"
#include "runtime/config/train_config.h"
#include "runtime/data/idx_synthetic.h"
#include "runtime/data/prepare_text.h"
#include "runtime/data/token_shard.h"
#include "runtime/ops/cpu/sgemm_probe.h"
#include "runtime/train/available_memory.h"
#include "runtime/train/checkpoint_schedule.h"
#include "runtime/train/generation.h"
#include "runtime/train/kernel_choice.h"
#include "runtime/train/memory_estimate.h"
#include "runtime/train/pipeline_stage.h"
#include "runtime/train/offload_sizing.h"
#include "runtime/worker_device.h"
#include "runtime/train/progress_file.h"
#include "runtime/train/progress_report.h"
#include "runtime/train/trainer.h"

extern char** environ;

namespace dslaunch::runtime {
namespace {

// How long a worker waits for the store and its peers at start-up: the launcher starts every rank
// within milliseconds, but a busy node may be slow to schedule them.
constexpr std::chrono::seconds kStartupTimeout{60};

std::atomic<bool> g_stop_requested{false};

// The checkpoint crash tests' hook (docs/checkpoint.md, "Crash safety"):
// DSLAUNCH_CHECKPOINT_FAULT=POINT@RANK@STEP (ParseSaveFault) kills rank RANK with SIGKILL when the
// save of step STEP reaches POINT, through a FaultInjectingFileSystem under the checkpoint saves.
// It fires in generation 0 only, so that the restart it causes (--max_restarts) can pass the same
// point.
constexpr char kCheckpointFaultEnv[] = "DSLAUNCH_CHECKPOINT_FAULT";

// The fault hooks' end: says which (`variable`=`spec`) and where, then SIGKILL, as a crash.
void KillForFault(const char* variable, const std::string& spec, const std::string& where) {
  std::fprintf(stderr, "dslaunch-worker: %s=%s: killed %s\n", variable, spec.c_str(), where.c_str());
  std::fflush(stderr);
  std::raise(SIGKILL);
}

// The file system of this rank's checkpoint saves with the fault of `spec` in it, or null when the
// fault is for another rank. kInvalidArgument naming the variable for a malformed spec.
Result<std::unique_ptr<FaultInjectingFileSystem>> CheckpointFaultFileSystem(const std::string& spec, int rank) {
  Result<SaveFault> fault = ParseSaveFault(spec);
  if (!fault.ok()) return fault.status().WithContext(kCheckpointFaultEnv);
  if (fault->rank != rank) return std::unique_ptr<FaultInjectingFileSystem>();
  return std::make_unique<FaultInjectingFileSystem>(
      LocalFileSystem(), *fault, [spec](SaveFaultPoint, const std::string& path) -> Status {
        KillForFault(kCheckpointFaultEnv, spec, "at " + path);
        return Status::Ok();
      });
}

// The steps between this rank's in-memory snapshots: checkpoint.snapshot_interval resolved against
// the agent's memory (DSLAUNCH_SNAPSHOT_FDS) and the job's restarts (TORCHELASTIC_MAX_RESTARTS).
int64_t SnapshotIntervalFor(const std::map<std::string, std::string>& env, const TrainConfig& config) {
  int max_restarts = 0;
  if (auto it = env.find(env::kTorchElasticMaxRestarts); it != env.end()) max_restarts = std::atoi(it->second.c_str());
  const bool offloaded = config.engine.offload_optimizer.device == swap::OffloadDevice::kNvme;
  return ResolveSnapshotInterval(config.checkpoint.snapshot_interval, env.count(env::kSnapshotFds) > 0, max_restarts,
                                 offloaded);
}

// The peer nodes each in-memory snapshot is copied to: checkpoint.snapshot_replicas, as many as
// the job has other nodes (0 without snapshots).
int SnapshotReplicasFor(const WorkerIdentity& id, const TrainConfig& config, int64_t interval) {
  if (interval == 0) return 0;
  return std::max(0, std::min(config.checkpoint.snapshot_replicas, id.num_nodes - 1));
}

// The snapshot tests' hook: DSLAUNCH_CRASH_AFTER_STEP=RANK@STEP kills rank RANK with SIGKILL
// once step STEP is done (its in-memory snapshot taken), in generation 0 only.
constexpr char kCrashAfterStepEnv[] = "DSLAUNCH_CRASH_AFTER_STEP";

// The snapshot crash tests' hook: DSLAUNCH_SNAPSHOT_FAULT=RANK@STEP kills rank RANK with SIGKILL in
// the middle of its in-memory snapshot of step STEP (one tensor copied, the slot not complete), in
// generation 0 only.
constexpr char kSnapshotFaultEnv[] = "DSLAUNCH_SNAPSHOT_FAULT";

// RANK@STEP of `spec`, named `variable` in the error ("1@12").
Result<std::pair<int, int64_t>> ParseRankAtStep(const char* variable, const std::string& spec) {
  const size_t at = spec.find('@');
  char* end = nullptr;
  const long rank = at == std::string::npos ? -1 : std::strtol(spec.c_str(), &end, 10);
  const long long step = at == std::string::npos ? 0 : std::strtoll(spec.c_str() + at + 1, nullptr, 10);
  if (at == std::string::npos || end != spec.c_str() + at || rank < 0 || step < 1) {
    return InvalidArgumentError(std::string(variable) + "='" + spec + "': expected RANK@STEP (\"1@12\")");
  }
  return std::pair<int, int64_t>(static_cast<int>(rank), step);
}

// The after-step hook of `spec` for `rank`: empty when it is for another rank.
Result<std::function<void(int64_t)>> CrashAfterStep(const std::string& spec, int rank) {
  DSLAUNCH_ASSIGN_OR_RETURN(const auto target, ParseRankAtStep(kCrashAfterStepEnv, spec));
  if (target.first != rank) return std::function<void(int64_t)>();
  return std::function<void(int64_t)>([spec, step = target.second](int64_t done) {
    if (done == step) KillForFault(kCrashAfterStepEnv, spec, "after step " + std::to_string(step));
  });
}

// The mid-write hook of `spec` for `rank`: empty when it is for another rank.
Result<SnapshotSlot::WriteHook> SnapshotFault(const std::string& spec, int rank) {
  DSLAUNCH_ASSIGN_OR_RETURN(const auto target, ParseRankAtStep(kSnapshotFaultEnv, spec));
  if (target.first != rank) return SnapshotSlot::WriteHook();
  return SnapshotSlot::WriteHook([spec, step = target.second](const SnapshotInfo& info) {
    if (info.step == step) {
      KillForFault(kSnapshotFaultEnv, spec, "in the middle of the snapshot of step " + std::to_string(step));
    }
  });
}

// This rank's in-memory snapshots (docs/checkpoint.md, "Snapshots in memory"): the slots its agent
// passed (DSLAUNCH_SNAPSHOT_FDS, and the peers' copies in DSLAUNCH_SNAPSHOT_REPLICA_FDS) into
// `slots`, and `interval` (SnapshotIntervalFor), in `hooks`; each is copied to `replicas` peer
// nodes. Off where the interval is 0; rank 0 says which.
Status SetUpSnapshots(const std::map<std::string, std::string>& env, const TrainConfig& config,
                      const WorkerIdentity& id, int64_t interval, int replicas, std::optional<MemorySnapshots>& slots,
                      TrainHooks& hooks) {
  const int rank = id.rank;
  const auto fds = env.find(env::kSnapshotFds);
  const int64_t configured = config.checkpoint.snapshot_interval;
  if (rank == 0 && fds == env.end() && configured > 0) {
    std::printf("warning: checkpoint.snapshot_interval is %lld, but no dslaunch agent holds memory for this worker "
                "(no %s): no in-memory snapshots\n",
                static_cast<long long>(configured), env::kSnapshotFds);
  }
  if (interval == 0) return Status::Ok();
  const auto copies = env.find(env::kSnapshotReplicaFds);
  DSLAUNCH_ASSIGN_OR_RETURN(
      MemorySnapshots mine,
      MemorySnapshots::FromEnv(fds->second, copies == env.end() ? std::string_view() : std::string_view(copies->second)));
  slots.emplace(std::move(mine));
  slots->set_origin(SlotOrigin{id.generation, replicas});
  hooks.snapshots = &*slots;
  hooks.snapshot_interval = interval;
  if (rank == 0) {
    const int wanted = config.checkpoint.snapshot_replicas;
    const std::string copied =
        replicas > 0 ? ", each copied to " + std::to_string(replicas) + (replicas == 1 ? " peer node" : " peer nodes")
        : wanted > 0 ? ", not copied to a peer node (the job has one node)"
                     : ", not copied to a peer node (checkpoint.snapshot_replicas is 0)";
    std::printf("snapshots: every %s into the agent's memory (checkpoint.snapshot_interval%s)%s\n",
                interval == 1 ? "step" : (std::to_string(interval) + " steps").c_str(),
                configured == kSnapshotIntervalAuto ? " left out: the job can restart" : "", copied.c_str());
  }
  std::fflush(stdout);
  return Status::Ok();
}

// "grid: stage 1/2 (blocks 2-3 of 4), data 0/2, tensor 0/1, 1f1b schedule": where this rank sits.
std::string GridLine(const TrainConfig& config, const ProcessGrid& grid, int rank) {
  const GridCoordinates at = grid.CoordinatesOf(rank);
  std::string blocks;
  if (const auto* gpt = std::get_if<GptConfig>(&config.model)) {
    auto partition = PartitionStages(*gpt, grid.shape().pipeline, config.pipeline.partition_method);
    if (partition.ok()) {
      const StageBlocks b = (*partition)[at.pipeline];
      blocks = " (blocks " + std::to_string(b.begin) + "-" + std::to_string(b.end - 1) + " of " +
               std::to_string(gpt->n_layer) + ")";
    }
  }
  std::string line = "grid: " + grid.Describe(rank);
  const size_t comma = line.find(',');
  line.insert(comma, blocks);
  if (grid.shape().pipeline == 1) return line;
  return line + ", " + PipeScheduleName(config.pipeline.schedule) + " schedule";
}

int Fail(const Status& status) {
  std::fprintf(stderr, "dslaunch-worker: %s\n", status.ToString().c_str());
  return 1;
}

// A train.json that cannot be used (missing, unreadable, or with errors, all listed) is a
// configuration error: the configuration exit class (common/exit_codes.h, docs/exit-codes.md), so
// that a scheduler does not retry what cannot succeed. An internal error of the parser is a bug,
// not the user's config: it keeps the failure code.
int FailConfig(const Status& status) {
  Fail(status);
  return status.code() == StatusCode::kInternal ? 1 : kExitUsage;
}

// Fails training, first leaving an error record for the launcher (common/error_record.h). An
// aborted status is what a rank sees when a peer failed (a broken collective, a checkpoint another
// rank could not write): collateral, so that the peer's own failure is named as the root cause.
int FailTraining(const Status& status, const std::map<std::string, std::string>& env) {
  if (auto file = env.find(env::kErrorFile); file != env.end()) {
    ErrorRecord record;
    record.message = status.ToString();
    record.time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
    record.caused_by_peer = status.code() == StatusCode::kAborted;
    if (Status w = WriteErrorRecord(file->second, record); !w.ok()) {
      std::fprintf(stderr, "dslaunch-worker: cannot write the error record: %s\n", w.ToString().c_str());
    }
  }
  return Fail(status);
}

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Rank 0's words before training, once per job generation (the other ranks read the same config
// and stay silent, so 8 ranks do not print 8 copies): keys recognised but not implemented, the
// parser's warnings (unknown keys ignored, deprecated forms), the default optimizer when the config
// has none, and the batch sizes.
void PrintConfigSummary(const TrainConfig& config, int world_size) {
  // UnimplementedWarning carries its own "warning: " prefix.
  if (!config.unimplemented_keys.empty()) {
    std::fprintf(stderr, "dslaunch-worker: %s\n", UnimplementedWarning(config).c_str());
  }
  for (const std::string& w : config.warnings) std::fprintf(stderr, "dslaunch-worker: warning: %s\n", w.c_str());
  if (const std::string note = DefaultOptimizerNote(config); !note.empty()) std::printf("%s\n", note.c_str());
  std::printf("%s\n", BatchSummary(config, world_size).c_str());
  std::fflush(stdout);
}

// A budget no machine has: every rank's reading failed, so the sizes stay DeepSpeed's and the check
// is skipped. In MiB, as the ranks agree on it in a float.
constexpr float kUnknownBudgetMib = std::numeric_limits<float>::max();

// Before anything model-sized is allocated: the offload buffers sized to this node's memory and the
// check that the run fits (runtime/train/offload_sizing.h, memory_estimate.h). The ranks agree on
// the smallest budget any of them read (the sizes set collectives: every rank must choose alike).
// A rank whose available memory cannot be read does not count; when none can, the check is
// skipped with a warning from rank 0. *estimate receives this rank's estimate for the end line.
Status FitMemory(TrainConfig* config, const WorkerIdentity& id, Communicator& comm, const std::string& config_path,
                 const ProcessFootprint& footprint, double* estimate) {
  auto available = ReadAvailableMemory();
  const int ranks = std::max(id.local_world_size, 1);
  // Whole KiB, in MiB: the float every rank receives is the same number.
  float budget_mib = available.ok() ? static_cast<float>(std::floor(available->bytes / ranks / 1024.0) / 1024.0)
                                    : kUnknownBudgetMib;
  float negated = -budget_mib;
  DSLAUNCH_RETURN_IF_ERROR(comm.AllReduce(std::span<float>(&negated, 1), ReduceOp::kMax)
                               .WithContext("agree on the memory budget"));
  budget_mib = -negated;
  const bool known = budget_mib < kUnknownBudgetMib;
  const double budget = known ? static_cast<double>(budget_mib) * 1024.0 * 1024.0 : std::numeric_limits<double>::max();
  const std::string source = available.ok() ? available->source : "unknown";
  DSLAUNCH_ASSIGN_OR_RETURN(SizedBuffers sized,
                            SizeOffloadBuffers(config, id.world_size, footprint, budget, source, config_path));
  const MemoryEstimate need = EstimateTrainingMemory(*config, id.world_size, footprint);
  *estimate = need.total();
  if (id.rank == 0) {
    if (std::string line = SizedBuffersLine(sized); !line.empty()) std::printf("%s\n", line.c_str());
    std::printf("memory: about %s per rank estimated (parameters %s, gradients %s, optimizer state %s, "
                "activations %s, buffers %s, process %s%s)\n",
                FormatBytesHuman(need.total()).c_str(), FormatBytesHuman(need.parameters).c_str(),
                FormatBytesHuman(need.gradients).c_str(), FormatBytesHuman(need.optimizer_state).c_str(),
                FormatBytesHuman(need.activations).c_str(), FormatBytesHuman(need.buffers).c_str(),
                FormatBytesHuman(need.process).c_str(),
                need.snapshots > 0 ? (", in-memory snapshots " + FormatBytesHuman(need.snapshots)).c_str() : "");
    std::fflush(stdout);
  }
  if (known) return CheckMemoryFits(need, ranks, AvailableMemory{budget * ranks, source}, config_path);
  if (id.rank == 0) {
    std::fprintf(stderr, "dslaunch-worker: warning: memory check skipped: %s\n",
                 available.status().ToString().c_str());
  }
  return Status::Ok();
}

// The end of a run: this rank's peak resident memory against its estimate (the estimate is meant
// to be an upper bound: docs/offload.md).
void PrintPeakMemory(double estimate) {
  auto peak = ReadPeakResident();
  if (!peak.ok()) return;
  std::printf("memory: peak %s resident (VmHWM %.0f bytes), estimated %s (%.0f bytes)\n",
              FormatBytesHuman(*peak).c_str(), *peak, FormatBytesHuman(estimate).c_str(), estimate);
  std::fflush(stdout);
}

// This rank's client of the launcher's store, authenticated with the job's secret.
Result<std::unique_ptr<StoreClient>> ConnectStore(const WorkerIdentity& id) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::string secret, ReadSecretFile(id.store_secret_file));
  const auto deadline = std::chrono::steady_clock::now() + kStartupTimeout;
  return StoreClient::Connect({id.store_address, id.job_id, id.generation, secret}, deadline);
}

using MetricsFile = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// Rank 0's metrics, one JSON object per line, in the job's directory on its node. The directory
// is kept across the generations of a job: a restart appends, generation 0 starts the file. No
// file (a null pointer) on other ranks or without a job directory.
Result<MetricsFile> OpenMetrics(const std::map<std::string, std::string>& env, const WorkerIdentity& id) {
  MetricsFile metrics(nullptr, &std::fclose);
  if (auto dir = env.find(env::kJobDir); id.rank == 0 && dir != env.end() && !dir->second.empty()) {
    const std::string path = dir->second + "/metrics.jsonl";
    metrics.reset(std::fopen(path.c_str(), id.generation > 0 ? "a" : "w"));
    if (!metrics) return InternalError("cannot write " + path + ": " + std::strerror(errno));
  }
  return metrics;
}

// Rank 0 at the end of a run: the job's report.html from its metrics.jsonl, the path printed as a
// line the launcher shows ("report: PATH"). A report that cannot be written is a warning: the run
// succeeded or failed on its own account, and `dslaunch report JOB_DIR` can write it later.
void WriteReport(const std::string& job_dir) {
  auto written = report::WriteJobReport(job_dir);
  if (!written.ok()) {
    std::fprintf(stderr, "dslaunch-worker: warning: report not written: %s\n", written.status().ToString().c_str());
    return;
  }
  std::printf("report: %s\n", written->path.c_str());
  std::fflush(stdout);
}

// The training loop's connections to this process: stdout, the metrics file, the progress bar when
// the launcher asked for one, SIGTERM as the stop request.
TrainHooks OutputHooks(const std::map<std::string, std::string>& env, std::FILE* metrics) {
  TrainHooks output;
  output.print = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  output.metrics = [metrics](const std::string& json) {
    if (metrics == nullptr) return;
    std::fprintf(metrics, "%s\n", json.c_str());
    std::fflush(metrics);
  };
  if (auto progress = env.find(env::kProgress); progress != env.end() && progress->second == "1") {
    // Ended by '\r': the launcher's console redraws it in place and keeps it out of the logs.
    output.progress = [](const std::string& bar) {
      std::printf("%s\r", bar.c_str());
      std::fflush(stdout);
    };
  }
  // SIGTERM (the agent stopping the job) ends training after the current step, with a
  // checkpoint when checkpoint.save_on_stop is set; the worker then exits 143 as if killed by it.
  std::signal(SIGTERM, [](int) { g_stop_requested.store(true); });
  output.stop = &g_stop_requested;
  return output;
}

// The file's text, "" when it cannot be read (the report then has no config section).
std::string FileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

int RunTrain(const std::string& config_path, std::vector<std::string> command) {
  const int64_t started_ms = UnixMillis();
  // Gloo writes to sockets without MSG_NOSIGNAL: a dead peer must be an error, not SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  const std::map<std::string, std::string> env = EnvironmentMap(environ);
  auto id = ParseWorkerIdentity(env);
  if (!id.ok()) return Fail(id.status());
  auto generation = ParseGenerationInfo(env, id->generation);
  if (!generation.ok()) return Fail(generation.status());
  auto watchdog_env = ParseWatchdogTimeoutEnv(env);
  if (!watchdog_env.ok()) return Fail(watchdog_env.status());
  auto config = ReadTrainConfig(config_path, id->world_size, id->generation);
  if (!config.ok()) return FailConfig(config.status());
  // The device first: a worker without CUDA hands a GPU run to the CUDA worker here
  // (runtime/worker_device.h), before it times kernels or forms groups.
  std::vector<std::string> device_lines;
  if (Status prepared = PrepareDevice(*config, *id, env, command, device_lines); !prepared.ok()) {
    return prepared.code() == StatusCode::kFailedPrecondition ? FailConfig(prepared) : FailTraining(prepared, env);
  }
  // The node's matrix kernels, before anything else: applying them re-executes this process
  // (runtime/train/kernel_choice.h).
  auto kernel = ChooseNodeKernel(env, *config, "/proc/self/exe");
  if (!kernel.ok()) {
    return kernel.status().code() == StatusCode::kInvalidArgument ? FailConfig(kernel.status())
                                                                  : FailTraining(kernel.status(), env);
  }
  if (Status applied = ApplyNodeKernel(*kernel, env, command); !applied.ok()) return FailTraining(applied, env);
  if (const std::string running = ops::OpenBlasKernelName(); running != kernel->choice.kernel) {
    return FailTraining(InternalError("this worker runs OpenBLAS's " + running + " kernels, not the " +
                                      kernel->choice.kernel + " kernels chosen for its node"),
                        env);
  }
  if (id->local_rank == 0) {
    std::printf("%s\n", kernel->line.c_str());
    std::fflush(stdout);
  }
  if (id->rank == 0) PrintConfigSummary(*config, id->world_size);

  // Progress reports for the agent's hang detection, from now on (runtime/train/progress_report.h). The
  // communicator's collective timeout follows the watchdog timeout once it exists.
  std::unique_ptr<ProgressFile> progress_file;
  if (auto path = env.find(env::kProgressFile); path != env.end() && !path->second.empty()) {
    progress_file = std::make_unique<ProgressFile>(path->second, [](const std::string& warning) {
      std::fprintf(stderr, "dslaunch-worker: warning: %s\n", warning.c_str());
    });
  }
  GlooCommunicator* gloo = nullptr;
  std::optional<GridCommunicators> grid_comms;  // a pipelined run's groups (below)
  ProgressReporter reporter(
      {*watchdog_env, config->train.watchdog_timeout},
      [&](const std::string& report) {
        if (progress_file) progress_file->Write(report);
      },
      [&](double timeout) {
        const auto collective = CollectiveTimeoutFor(timeout, kDefaultGlooCollectiveTimeout);
        if (gloo != nullptr) gloo->SetCollectiveTimeout(collective);
        if (grid_comms) {
          for (GlooCommunicator* group : {grid_comms->pipeline.get(), grid_comms->data.get(), grid_comms->tensor.get()}) {
            group->SetCollectiveTimeout(collective);
          }
        }
      });
  reporter.Starting(0);
  const int64_t snapshot_interval = SnapshotIntervalFor(env, *config);
  ProcessFootprint footprint = ReadProcessFootprint(*config, env);
  const int snapshot_replicas = SnapshotReplicasFor(*id, *config, snapshot_interval);
  footprint.snapshot_slots = SnapshotSlots(snapshot_interval > 0, snapshot_replicas);
  auto data = ReadTrainData(*config);
  if (!data.ok()) return Fail(data.status());

  auto store = ConnectStore(*id);
  if (!store.ok()) return Fail(store.status());
  auto address = SourceAddressToward(id->launcher_address);
  if (!address.ok()) return Fail(address.status());
  GlooOptions options;
  options.address = *address;
  options.collective_timeout = CollectiveTimeoutFor(reporter.timeout(), kDefaultGlooCollectiveTimeout);
  auto comm = GlooCommunicator::Create(**store, id->rank, id->world_size, options);
  if (!comm.ok()) return FailTraining(comm.status(), env);
  generation->started_ms = started_ms;
  generation->rendezvous_ms = UnixMillis();
  gloo = comm->get();
  // A model split into pipeline stages or over tensor ranks (docs/parallelism.md): this rank's
  // groups, formed through the store as the world's; each rank says where it sits in the grid.
  ModelParallelRun model_parallel;
  if (RanksPerModelCopy(*config) > 1) {
    auto grid = ProcessGrid::Create(id->world_size, config->pipeline.stages, config->tensor_parallel.size);
    if (!grid.ok()) return FailConfig(grid.status());
    auto groups = CreateGridCommunicators(**store, *grid, id->rank, options);
    if (!groups.ok()) return FailTraining(groups.status(), env);
    grid_comms = std::move(*groups);
    model_parallel =
        ModelParallelRun{*grid, grid_comms->pipeline.get(), grid_comms->data.get(), grid_comms->tensor.get()};
    std::printf("%s\n", GridLine(*config, *grid, id->rank).c_str());
    std::fflush(stdout);
  }
  // This rank's device (runtime/worker_device.h): null trains on the CPU.
  auto device = StartDevice(*config, *id, env, **store, **comm, device_lines);
  if (!device.ok()) {
    return device.status().code() == StatusCode::kFailedPrecondition ? FailConfig(device.status())
                                                                     : FailTraining(device.status(), env);
  }
  for (const std::string& line : device_lines) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  double estimate = 0;
  // The memory check counts host memory for the CPU engine; a device run's state is in device
  // memory (its check is not done yet: docs/gpu.md).
  if (!*device) {
    if (Status fits = FitMemory(&*config, *id, **comm, config_path, footprint, &estimate); !fits.ok()) {
      return FailTraining(fits, env);
    }
  }

  auto metrics = OpenMetrics(env, *id);
  if (!metrics.ok()) return Fail(metrics.status());
  TrainHooks output = OutputHooks(env, metrics->get());
  output.reporter = &reporter;
  output.device = device->get();
  if (grid_comms) output.model_parallel = &model_parallel;
  output.origin = RunOrigin{std::move(command), FileText(config_path), started_ms, kernel->choice.kernel,
                            kernel->choice.gflops, kernel->choice.default_kernel, kernel->choice.default_gflops};
  output.first_step_done = [&](int64_t first_step) {
    output.metrics(GenerationRecordJson(*generation, id->world_size, first_step, UnixMillis()));
  };
  std::unique_ptr<FaultInjectingFileSystem> fault_files;
  if (auto fault = env.find(kCheckpointFaultEnv); fault != env.end() && id->generation == 0) {
    auto files = CheckpointFaultFileSystem(fault->second, id->rank);
    if (!files.ok()) return Fail(files.status());
    fault_files = std::move(*files);
    output.checkpoint_files = fault_files.get();
  }
  if (auto crash = env.find(kCrashAfterStepEnv); crash != env.end() && id->generation == 0) {
    auto hook = CrashAfterStep(crash->second, id->rank);
    if (!hook.ok()) return Fail(hook.status());
    output.after_step = std::move(*hook);
  }
  std::optional<MemorySnapshots> snapshots;
  if (Status s = SetUpSnapshots(env, *config, *id, snapshot_interval, snapshot_replicas, snapshots, output); !s.ok()) return Fail(s);
  if (auto fault = env.find(kSnapshotFaultEnv); fault != env.end() && id->generation == 0 && snapshots) {
    auto hook = SnapshotFault(fault->second, id->rank);
    if (!hook.ok()) return Fail(hook.status());
    snapshots->set_mid_write(std::move(*hook));
  }
  // A round trip under this generation's keys: the store refuses a stale generation's client, so
  // its rank 0 cannot publish a checkpoint over the new generation's (docs/elastic.md, "Fencing").
  output.checkpoint_fence = [&client = **store] { return client.Check({"checkpoint_fence"}).status(); };
  auto result = Train(*config, *data, **comm, output);
  // The report of what the file holds so far, also after a failure or a stop: a partial run's
  // curves say where it went wrong. The exit record first: its time ends the run's wall time.
  output.metrics(ExitRecordJson(UnixMillis()));
  if (*metrics) WriteReport(env.at(env::kJobDir));
  if (!result.ok()) return FailTraining(result.status().WithContext("rank " + std::to_string(id->rank)), env);
  if (!*device) PrintPeakMemory(estimate);
  return result->stopped ? 128 + SIGTERM : 0;
}

int RunPrepareText(PrepareTextOptions prep, std::vector<std::string> files) {
  prep.output = files.back();
  files.pop_back();
  prep.inputs = files;
  auto split = PrepareText(prep);
  if (!split.ok()) return Fail(split.status());
  std::printf("wrote %zu training tokens to %s", split->train.size(), prep.output.c_str());
  if (!prep.val_output.empty()) std::printf(" and %zu validation tokens to %s", split->val.size(), prep.val_output.c_str());
  std::printf("\n");
  return 0;
}

// Writes OUT_DIR/{train,val}-{images,labels}.idx (docs/data.md, "Synthetic digits").
int RunMakeDigits(const std::string& dir, int train_count, int val_count) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail(InternalError("cannot create " + dir + ": " + ec.message()));
  // Different seeds: the validation images are not the training images.
  for (auto [split, count, seed] : {std::tuple{"train", train_count, 1ull}, {"val", val_count, 2ull}}) {
    const IdxDataset set = MakeSyntheticDigits(count, seed);
    const std::string base = dir + "/" + split;
    if (Status s = WriteIdxImages(base + "-images.idx", set.images); !s.ok()) return Fail(s);
    if (Status s = WriteIdxLabels(base + "-labels.idx", set.labels); !s.ok()) return Fail(s);
    std::printf("wrote %d images to %s-images.idx and %s-labels.idx\n", count, base.c_str(), base.c_str());
  }
  return 0;
}

// Writes one safetensors file of the checkpoint's weights (docs/checkpoint.md, "Export and import").
int RunExport(const std::string& checkpoint, const std::string& out, const ExportOptions& options) {
  auto result = ExportCheckpoint(checkpoint, out, options);
  if (!result.ok()) return Fail(result.status());
  std::printf("exported step %lld of %s: %zu tensors (%s), %llu bytes to %s\n", static_cast<long long>(result->step),
              result->checkpoint.c_str(), result->tensors, std::string(DTypeName(options.dtype)).c_str(),
              static_cast<unsigned long long>(result->bytes), out.c_str());
  if (!result->config_json.empty()) std::printf("wrote %s\n", result->config_json.c_str());
  return 0;
}

// The probe of one kernel (runtime/train/kernel_choice.h runs it once per kernel): times SHAPEs
// ("F:256:512:1536", runtime/ops/cpu/sgemm_choice.h) with this process's OpenBLAS kernels, checks
// the known product, and prints one line "core_type= kernel=NAME gflops=X exact=0|1".
int RunSgemmProbe(const std::vector<std::string>& shapes) {
  std::vector<ops::ProductShape> products;
  for (const std::string& text : shapes) {
    auto shape = ops::ParseProductShape(text);
    if (!shape.ok()) return Fail(shape.status());
    products.push_back(*shape);
  }
  ops::KernelRate rate;
  rate.kernel = ops::OpenBlasKernelName();
  rate.exact = ops::KnownProductsExact();
  rate.gflops = ops::TimeProducts(products, kProbeBudget);
  std::printf("%s\n", ops::FormatKernelRate(rate).c_str());
  return 0;
}

}  // namespace
}  // namespace dslaunch::runtime

int main(int argc, char** argv) {
  CLI::App app{"dslaunch-worker: the dslaunch training runtime", "dslaunch-worker"};
  app.set_version_flag("--version", std::string("dslaunch-worker ") + DSLAUNCH_VERSION);
  app.require_subcommand(1);
  std::string config_path;
  CLI::App* train = app.add_subcommand("train", "train with a train.json (run by dslaunch on every rank)");
  train->add_option("config", config_path, "train.json")->required();
  dslaunch::runtime::PrepareTextOptions prep;
  std::vector<std::string> files;
  CLI::App* prepare = app.add_subcommand("prepare-text", "text files -> byte-level token shard(s) in llm.c's format");
  prepare->add_option("files", files, "IN... OUT.bin")->required()->expected(2, -1);
  prepare->add_option("--val", prep.val_output, "also write a validation shard here");
  prepare->add_option("--val_fraction", prep.val_fraction, "share of the tokens (from the end) for validation")
      ->capture_default_str();
  std::string digits_dir;
  int digits_train = 60000, digits_val = 10000;
  CLI::App* digits = app.add_subcommand("make-digits", "synthetic 28x28 digit images in IDX format, for the mlp model");
  digits->add_option("dir", digits_dir, "output directory")->required();
  digits->add_option("--train", digits_train, "training images")->capture_default_str()->check(CLI::Range(1, 1000000));
  digits->add_option("--val", digits_val, "validation images")->capture_default_str()->check(CLI::Range(1, 1000000));
  std::string export_checkpoint, export_out;
  dslaunch::runtime::ExportOptions export_options;
  CLI::App* exp = app.add_subcommand("export", "a checkpoint's weights -> one safetensors file (Hugging Face GPT-2 layout for gpt)");
  exp->add_option("checkpoint", export_checkpoint, "global_stepN directory, or a checkpoint directory with `latest`")->required();
  exp->add_option("out", export_out, "OUT.safetensors")->required();
  std::string export_dtype = "fp32";
  exp->add_option("--dtype", export_dtype, "tensor type in the file")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  exp->add_flag("--hf_config", export_options.hf_config, "gpt: also write config.json next to OUT (needs --n_head or --config)");
  exp->add_option("--n_head", export_options.n_head, "attention heads of the gpt model (not recorded in the checkpoint)")
      ->check(CLI::PositiveNumber);
  exp->add_option("--config", export_options.train_config, "the run's train.json: gives n_head, checked against the checkpoint");
  std::vector<std::string> probe_shapes;
  CLI::App* probe = app.add_subcommand("sgemm-probe", "time and check this process's OpenBLAS kernels (run by train)");
  probe->add_option("shapes", probe_shapes, "products F|I|W:N:IN:OUT")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (train->parsed()) {
    try {
      return dslaunch::runtime::RunTrain(config_path, std::vector<std::string>(argv, argv + argc));
    } catch (const std::bad_alloc&) {
      // The memory check passed but an allocation still failed (an estimate is not a guarantee):
      // say so instead of aborting with an uncaught exception.
      std::fprintf(stderr, "dslaunch-worker: out of memory while training with %s (std::bad_alloc); the run "
                           "needs more memory than this node could give it\n", config_path.c_str());
      return 1;
    }
  }
  if (probe->parsed()) return dslaunch::runtime::RunSgemmProbe(probe_shapes);
  if (digits->parsed()) return dslaunch::runtime::RunMakeDigits(digits_dir, digits_train, digits_val);
  if (exp->parsed()) {
    export_options.dtype = export_dtype == "bf16"   ? dslaunch::runtime::DType::kBFloat16
                           : export_dtype == "fp16" ? dslaunch::runtime::DType::kFloat16
                                                    : dslaunch::runtime::DType::kFloat32;
    return dslaunch::runtime::RunExport(export_checkpoint, export_out, export_options);
  }
  return dslaunch::runtime::RunPrepareText(prep, files);
}
