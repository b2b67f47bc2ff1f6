#include "runtime/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "runtime/checkpoint/checkpoint_directory.h"
#include "runtime/checkpoint/memory_restore.h"
#include "runtime/checkpoint/model_file.h"
#include "runtime/checkpoint/resume.h"
#include "runtime/checkpoint/saver.h"
#include "runtime/engine/engine.h"
#include "runtime/train/checkpoint_schedule.h"
#include "runtime/train/device_training.h"
#include "runtime/train/run_report.h"
#include "runtime/train/timed_communicator.h"
#include "runtime/train/train_task.h"

namespace dslaunch::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

ReportOutputs OutputsOf(const TrainHooks& hooks) {
  return ReportOutputs{hooks.print, hooks.metrics, hooks.progress, hooks.first_step_done};
}

// What a checkpoint of this run records, and what a resumed one must match: the whole model's
// parameters, also where this rank holds a part of them (`parallel`: the grid; null: none).
CheckpointRun RunOf(const TrainConfig& config, const TrainTask& task, const ModelParallelRun* parallel) {
  CheckpointRun run;
  run.model = std::string(task.name());
  run.part = task.placement();
  run.layout = run.part != nullptr ? &run.part->whole : &task.layout();
  if (parallel != nullptr) run.grid = {parallel->grid.shape().pipeline, parallel->grid.shape().tensor};
  run.global_batch = task.GlobalBatch();
  run.seed = config.seed;
  run.zero_stage = config.engine.zero.stage;
  run.precision = std::string(PrecisionName(config.engine.precision));
  run.optimizer = std::string(OptimizerTypeName(config.engine.optimizer.kind));
  run.config_sha256 = config.source_sha256;
  return run;
}

RunStart StartOf(const TrainConfig& config, const TrainTask& task, int world, const MemoryStats& memory,
                 const RunOrigin& origin) {
  return RunStart{std::string(task.name()), static_cast<int64_t>(task.layout().numel()), task.FlopsPerToken(),
                  task.classifier(), world, config.engine.zero.stage,
                  std::string(PrecisionName(config.engine.precision)), memory, task.ActivationBytes(), origin};
}

// The engine, its parameters initialised by the model or imported from model.init_from. A
// checkpoint being resumed wins over model.init_from, which only starts a fresh run. The model's
// own initialisation is read a range at a time by the engine's parts (no whole fp32 copy); an
// imported model is read into memory first.
Result<std::unique_ptr<Engine>> CreateEngine(const TrainConfig& config, const TrainTask& task, bool resuming,
                                             Communicator& comm, RunReport& report, DeviceTraining* device) {
  auto create = [&](const InitialValues& initial) {
    return device != nullptr ? device->CreateEngine(task.layout(), config.engine, initial)
                             : Engine::Create(task.layout(), comm, config.engine, initial);
  };
  if (!resuming && !config.model_init_from.empty()) {
    // The file holds the whole model; a part takes its pieces of it.
    const PartPlacement* part = task.placement();
    DSLAUNCH_ASSIGN_OR_RETURN(std::vector<float> imported,
                              ImportParameters(config.model_init_from, part != nullptr ? part->whole : task.layout(),
                                               task.name()));
    if (part != nullptr) {
      std::vector<float> mine;
      mine.reserve(task.layout().numel());
      ForEachRun(part->pieces, [&](uint64_t begin, uint64_t count) {
        mine.insert(mine.end(), imported.begin() + static_cast<std::ptrdiff_t>(begin),
                    imported.begin() + static_cast<std::ptrdiff_t>(begin + count));
      });
      imported = std::move(mine);
    }
    report.ModelInitialisedFrom(config.model_init_from);
    if (imported.size() != task.layout().numel()) {
      return InvalidArgumentError("initial parameters: " + std::to_string(imported.size()) + " values for a model of " +
                                  std::to_string(task.layout().numel()));
    }
    return create(InitialValuesIn(imported));
  }
  const uint64_t seed = config.seed;
  return create([&task, seed](size_t begin, std::span<float> out) { task.InitRange(begin, out, seed); });
}

// The loop's shared state: one object per run, the phases as methods.
struct Loop {
  const TrainConfig& config;
  Communicator& comm;
  const TrainHooks& hooks;
  TrainTask& task;
  Engine& engine;
  RunReport& report;
  // A model split over ranks: every rank's pieces of the whole model, for its snapshots'
  // meta.json (GatherShardPieces). Empty otherwise.
  std::vector<std::vector<WholePiece>> snapshot_pieces;

  // The step's outcome after the all-reduce that ends it.
  struct StepOutcome {
    StepReport step;
    bool stop = false;      // some rank was told to stop
    int ranks_written = 0;  // ranks that wrote their shard of the asynchronous save in flight
    int snapshot_ranks = 0;  // ranks that wrote their latest in-memory snapshot
    int answered_ranks = 0;  // ranks whose agent answered for the copies of their latest snapshot
  };

  // Collective: resumes what `plan` names (the steps done before this run), else starts at 0;
  // then rank 0 removes the step directories earlier crashes left in checkpoint.dir.
  Result<ResumeOutcome> Resume(const ResumePlan& plan, const CheckpointRun& run) {
    const CheckpointConfig& ckpt = config.checkpoint;
    if (ckpt.restarted && hooks.snapshots != nullptr) {
      DSLAUNCH_ASSIGN_OR_RETURN(std::optional<ResumeOutcome> from_memory, ResumeFromMemory(run));
      if (from_memory) return *from_memory;
    }
    const bool restart = ckpt.resume_newest;  // a restart resumes on its own: say so
    if (!plan.scan_reason.empty()) report.ScanningForCheckpoints(plan.scan_reason, ckpt.dir, restart);
    Result<ResumeOutcome> resumed = [&] {
      std::optional<ScopedSlowPhase> slow;
      if (plan.mode != ResumeMode::kFresh) slow.emplace(hooks.reporter);
      return ResumeFromPlan(plan, engine, comm, run, [&](const std::string& path, const std::string& why) {
        report.CheckpointSkipped(path, why, restart);
      });
    }();
    if (!resumed.ok()) return resumed.status();
    ResumeOutcome outcome = std::move(*resumed);
    if (outcome.loaded) {
      report.Resumed(outcome.path, *outcome.loaded, restart);
    } else if (ckpt.load == CheckpointLoad::kLatest || ckpt.resume_newest) {
      report.NoCheckpointYet(ckpt.dir, restart);
    }
    if (comm.rank() == 0 && !ckpt.dir.empty()) {
      FileSystem& files = hooks.checkpoint_files != nullptr ? *hooks.checkpoint_files : LocalFileSystem();
      for (const std::string& line : RemoveUnfinishedStepDirectories(files, ckpt.dir)) report.CheckpointNote(line);
    }
    return outcome;
  }

  // Collective, at a restart with snapshots: the newest in-memory snapshot every rank of its run
  // has, restored; nullopt (after saying why) when there is none, and checkpoint.dir is next.
  Result<std::optional<ResumeOutcome>> ResumeFromMemory(const CheckpointRun& run) {
    std::vector<std::string> notes;
    Result<MemoryRestoreResult> restored = [&] {
      ScopedSlowPhase slow(hooks.reporter);
      return RestoreFromMemory(*hooks.snapshots, engine, comm, run, notes);
    }();
    if (hooks.print) {
      for (const std::string& note : notes) hooks.print(note);  // this rank's own slots
    }
    if (!restored.ok()) {
      if (restored.status().code() != StatusCode::kNotFound) return restored.status();
      report.NoMemorySnapshot(restored.status().message(), config.checkpoint.dir);
      return std::optional<ResumeOutcome>();
    }
    LoadResult loaded{restored->meta, "", restored->bytes, restored->seconds};
    if (!loaded.meta.config_sha256.empty() && loaded.meta.config_sha256 != run.config_sha256) {
      loaded.warning = "train.json differs from the one the snapshot was taken with";
    }
    report.Resumed("the in-memory snapshot", loaded, /*restart=*/true, /*from_memory=*/true);
    if (comm.rank() == 0 && !config.checkpoint.dir.empty()) {
      FileSystem& files = hooks.checkpoint_files != nullptr ? *hooks.checkpoint_files : LocalFileSystem();
      for (const std::string& line : RemoveUnfinishedStepDirectories(files, config.checkpoint.dir)) {
        report.CheckpointNote(line);
      }
    }
    return std::optional<ResumeOutcome>(ResumeOutcome{std::move(loaded), "", /*from_memory=*/true});
  }

  // Local: this rank's snapshot of the state after `step` steps into its agent's memory. A failure
  // is this rank's line, and the snapshot is not committed; training goes on.
  bool TakeSnapshot(int64_t step, const CheckpointRun& run, double* seconds) {
    const auto start = Clock::now();
    const EngineSnapshot snap = engine.Snapshot();
    const std::string meta =
        CheckpointMetaToJson(MetaOfSnapshot(step, comm.world_size(), snap, run, snapshot_pieces));
    const Status written = hooks.snapshots->Write(SnapshotInfo{step, comm.rank(), comm.world_size()}, meta, snap);
    *seconds = SecondsSince(start);
    if (!written.ok() && hooks.print) {
      hooks.print("in-memory snapshot of step " + std::to_string(step) + " failed: " + written.ToString() +
                  " (the previous one is kept; training goes on)");
    }
    return written.ok();
  }

  // Collective: the optimizer step after `step` steps; `pending_written` whether this rank wrote
  // its shard of the asynchronous save in flight, `snapshot_written` its latest snapshot.
  Result<StepOutcome> RunStep(int64_t step, bool pending_written, bool snapshot_written) {
    const int accumulation = static_cast<int>(config.batch.gradient_accumulation_steps);
    engine.BeginStep(accumulation);
    const float backward_scale = static_cast<float>(engine.loss_scale() / accumulation);
    DSLAUNCH_ASSIGN_OR_RETURN(const double loss_sum,
                              hooks.device != nullptr
                                  ? hooks.device->TrainMicroSteps(task, step, accumulation, backward_scale)
                                  : task.TrainMicroSteps(engine.access(), step, accumulation, backward_scale));
    StepOutcome outcome;
    DSLAUNCH_ASSIGN_OR_RETURN(outcome.step.stats, engine.Step());
    // The step's loss, averaged over ranks; whether any rank was told to stop; how many ranks have
    // written their shard of the asynchronous save in flight, and their latest in-memory snapshot,
    // and have the answer about its copies on peer nodes.
    float reduced[5] = {static_cast<float>(loss_sum / accumulation),
                        hooks.stop != nullptr && hooks.stop->load() ? 1.0f : 0.0f, pending_written ? 1.0f : 0.0f,
                        snapshot_written ? 1.0f : 0.0f, SnapshotAnswered(step) ? 1.0f : 0.0f};
    DSLAUNCH_RETURN_IF_ERROR(
        comm.AllReduce(std::span<float>(reduced, 5), ReduceOp::kSum).WithContext("loss all-reduce"));
    outcome.step.step = step + 1;
    outcome.step.loss = reduced[0] / static_cast<float>(task.LossRanks(comm.world_size()));
    outcome.step.tokens = task.GlobalBatch() * task.TokensPerSample();
    outcome.stop = reduced[1] > 0;
    outcome.ranks_written = static_cast<int>(reduced[2]);
    outcome.snapshot_ranks = static_cast<int>(reduced[3]);
    outcome.answered_ranks = static_cast<int>(reduced[4]);
    return outcome;
  }

  // Local: whether this rank's agent has answered for the copies of its latest snapshot on peer
  // nodes (always without snapshots or copies); a copy that failed is this rank's line, once.
  bool SnapshotAnswered(int64_t step) {
    if (hooks.snapshots == nullptr) return true;
    std::optional<int64_t> failed;
    const bool answered = hooks.snapshots->Answered(&failed);
    if (failed && hooks.print) {
      hooks.print("step " + std::to_string(step + 1) + ": the in-memory snapshot of step " + std::to_string(*failed) +
                  " was not copied to every peer node (its agent's log says why): a lost node's ranks may come "
                  "back from an older copy or from checkpoint.dir");
    }
    return answered;
  }

  // Every rank's time of a step, in ms and rank order: all of it, and the part inside collectives.
  struct RankTimes {
    std::vector<double> step_ms;
    std::vector<double> collective_ms;
  };

  // Collective: every rank's `seconds` of this step, `in_collectives` of them inside collectives,
  // for rank 0's step record. A collective of its own after the loss all-reduce, never a part of
  // it: a longer all-reduce may sum the losses in another order (docs/engine.md, "Metrics").
  Result<RankTimes> GatherStepTimes(double seconds, double in_collectives) {
    const size_t world = static_cast<size_t>(comm.world_size());
    const float mine[2] = {static_cast<float>(1e3 * seconds), static_cast<float>(1e3 * in_collectives)};
    std::vector<float> all(2 * world);
    DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const float>(mine, 2), all, std::vector<size_t>(world, 2))
                                 .WithContext("step time all-gather"));
    RankTimes times;
    for (size_t r = 0; r < world; ++r) {
      times.step_ms.push_back(all[2 * r]);
      times.collective_ms.push_back(all[2 * r + 1]);
    }
    return times;
  }

  // Collective: mean loss over eval_steps validation batches per rank, averaged over ranks; -1
  // without validation data.
  Result<double> Validate(int64_t after_step) {
    if (!task.HasValidation()) return -1.0;
    const auto start = Clock::now();
    int64_t correct = 0;
    const int64_t batches = std::max<int64_t>(1, config.train.eval_steps);
    auto still_working = [this] {
      if (hooks.reporter != nullptr) hooks.reporter->StillWorking();
    };
    double sum = 0.0;
    if (hooks.device != nullptr) {
      for (int64_t batch = 0; batch < batches; ++batch) {
        DSLAUNCH_ASSIGN_OR_RETURN(const float loss, hooks.device->ValidationLoss(task, batch));
        sum += loss;
        still_working();
      }
    } else {
      DSLAUNCH_ASSIGN_OR_RETURN(sum, task.ValidationLossSum(engine.access(), batches, &correct, still_working));
    }
    DSLAUNCH_RETURN_IF_ERROR(engine.status());
    float reduced[2] = {static_cast<float>(sum / static_cast<double>(batches)), static_cast<float>(correct)};
    DSLAUNCH_RETURN_IF_ERROR(
        comm.AllReduce(std::span<float>(reduced, 2), ReduceOp::kSum).WithContext("validation all-reduce"));
    const int world = comm.world_size();
    ValidationReport validation{after_step, reduced[0] / task.LossRanks(world), std::nullopt, batches};
    if (task.classifier()) {
      validation.accuracy = reduced[1] / static_cast<double>(batches * task.ValidationRows() * world);
    }
    report.Validation(validation, Clock::now() - start);
    if (hooks.reporter != nullptr) hooks.reporter->ValidationDone(after_step, validation.loss);
    return validation.loss;
  }

  // Collective: carries out the schedule's decision after `step` steps.
  Status Save(const SaveDecision& decision, int64_t step, CheckpointSaver& saver) {
    if (decision.kind == SaveKind::kNone) return Status::Ok();
    ScopedSlowPhase slow(hooks.reporter);
    if (decision.kind == SaveKind::kPeriodic) return saver.SavePeriodic(step);  // async per checkpoint.async
    // The save at the step where the run ends (the last step, or a stop) is the final one: it
    // waits for its completion and its failure fails the run (runtime/checkpoint/saver.h).
    return saver.SaveFinal(step, std::string(decision.why), decision.save);
  }

  // Collective, after the last step: the final save, the validation unless the last step had
  // one, the sample, the summary and the `end` record.
  Status Finish(const CheckpointSchedule& schedule, CheckpointSaver& saver, TrainResult& result) {
    const int64_t steps = config.train.steps;
    DSLAUNCH_RETURN_IF_ERROR(Save(schedule.AtEnd(), steps, saver));
    result.checkpoints = saver.saved();
    result.failed_checkpoints = saver.failed_steps();
    if (config.train.eval_interval <= 0 || steps % config.train.eval_interval != 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(result.val_loss, Validate(steps));
    }
    if (config.train.sample_tokens > 0 && task.name() == "gpt") {
      // Every rank samples (the same tokens): at ZeRO stage 3 each forward pass gathers
      // parameters from all ranks; a pipeline's stages pass each token's activations along.
      ScopedSlowPhase slow(hooks.reporter);
      DSLAUNCH_ASSIGN_OR_RETURN(
          const std::string text,
          hooks.device != nullptr
              ? hooks.device->Sample(config.train.sample_prompt, config.train.sample_tokens, config.seed)
              : task.Sample(engine.access(), config.train.sample_prompt, config.train.sample_tokens, config.seed));
      DSLAUNCH_RETURN_IF_ERROR(engine.status());
      report.Sample(text);
    }
    report.CheckpointSummary(saver.Summary());
    report.End(RunEnd{steps, engine.applied_steps(), engine.memory(), saver.saved().size(),
                      saver.failed_steps().size(), engine.swap_io()});
    return Status::Ok();
  }
};

}  // namespace

Result<TrainResult> Train(const TrainConfig& config, const TrainData& data, Communicator& comm,
                          const std::function<void(const std::string&)>& print,
                          const std::function<void(const std::string&)>& metrics) {
  TrainHooks hooks;
  hooks.print = print;
  hooks.metrics = metrics;
  return Train(config, data, comm, hooks);
}

Result<TrainResult> Train(const TrainConfig& config, const TrainData& data, Communicator& untimed,
                          const TrainHooks& hooks) {
  // Every collective of the run goes through it: each step's time splits into time inside
  // collectives and the rest (the step records' rank_collective_ms).
  TimedCommunicator comm(untimed);
  const int world = comm.world_size();
  // Rank 0's output; every other rank's report writes nothing.
  RunReport report = RunReport::ForRank(comm.rank(), OutputsOf(hooks), config.steps_per_print, config.train.steps);
  // A model split into stages or over tensor ranks: the engine partitions over the data group, the
  // stage's messages go over the pipeline group, the split layers' sums over the tensor group
  // (docs/parallelism.md); all timed as the world's collectives are.
  const ModelParallelRun* parallel = hooks.model_parallel;
  std::optional<TimedCommunicator> data_comm, pipeline_comm, tensor_comm;
  ModelParallelRun timed_parallel;
  if (parallel != nullptr) {
    data_comm.emplace(*parallel->data);
    pipeline_comm.emplace(*parallel->pipeline);
    tensor_comm.emplace(*parallel->tensor);
    timed_parallel = ModelParallelRun{parallel->grid, &*pipeline_comm, &*data_comm, &*tensor_comm};
  }
  auto in_collectives = [&] {
    auto total = comm.in_collectives();
    if (parallel != nullptr) {
      total += data_comm->in_collectives() + pipeline_comm->in_collectives() + tensor_comm->in_collectives();
    }
    return total;
  };
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<TrainTask> task,
                            parallel != nullptr ? TrainTask::CreateStage(config, data, comm.rank(), timed_parallel)
                                                : TrainTask::Create(config, data, comm.rank(), world));
  DSLAUNCH_ASSIGN_OR_RETURN(const ResumePlan plan, PlanCheckpointResume(config.checkpoint));
  Communicator& engine_comm = parallel != nullptr ? static_cast<Communicator&>(*data_comm) : comm;
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                            CreateEngine(config, *task, plan.mode != ResumeMode::kFresh, engine_comm, report, hooks.device));
  if (parallel != nullptr) {
    // The whole tensors every tensor rank holds count once in the norm: on the first tensor rank.
    engine->SetModelParallelGroups({&*tensor_comm, &*pipeline_comm},
                                   tensor_comm->rank() == 0 ? std::vector<ShardRange>{} : task->ReplicatedRanges());
  }
  if (hooks.print) {  // every rank's own (its device, its swap files); the launcher prefixes the rank
    if (hooks.device != nullptr) hooks.print(hooks.device->Describe());
    for (const std::string& note : engine->notes()) hooks.print(note);
  }
  report.Start(StartOf(config, *task, world, engine->memory(), hooks.origin));

  Loop loop{config, comm, hooks, *task, *engine, report};
  const CheckpointRun run = RunOf(config, *task, parallel);
  TrainResult result;
  DSLAUNCH_ASSIGN_OR_RETURN(const ResumeOutcome resumed, loop.Resume(plan, run));
  result.first_step = resumed.loaded ? resumed.loaded->meta.step : 0;
  if (hooks.reporter != nullptr) hooks.reporter->Starting(result.first_step);
  SaveOptions save_options;
  save_options.keep_last = config.checkpoint.keep_last;
  save_options.file_system = hooks.checkpoint_files;
  save_options.fence = hooks.checkpoint_fence;
  // Every rank prints its own failed shard; only rank 0 records (the report's recorder).
  CheckpointSaver saver(config.checkpoint, *engine, comm, run, save_options, hooks.print, report.recorder(),
                        result.first_step, resumed.path);
  if (hooks.reporter != nullptr) {
    saver.set_on_saved([&hooks](int64_t step, const SaveResult& saved) {
      hooks.reporter->CheckpointSaved(step, saved.seconds, saved.bytes);
    });
  }
  const CheckpointSchedule schedule(config.checkpoint, config.train.steps);
  if (hooks.snapshots != nullptr) {
    // An asynchronous save of a step this rank has a snapshot of is written from the snapshot: no
    // copy while training waits (docs/checkpoint.md, "Disk checkpoints from the snapshot").
    saver.set_resident_state([snapshots = hooks.snapshots](int64_t step) {
      std::optional<CheckpointSaver::ResidentState> state;
      const SnapshotSlot* slot = snapshots->Pin(step);
      if (slot == nullptr) return state;
      state.emplace();
      for (size_t i = 0; i < slot->tensors(); ++i) state->tensors.push_back(slot->tensor(i));
      state->release = [snapshots] { snapshots->Unpin(); };
      return state;
    });
  }

  // In-memory snapshots: only the one this run resumed from is kept; each step's is committed once
  // the next step's all-reduce says every rank wrote it.
  const int64_t snapshot_interval = hooks.snapshots != nullptr ? hooks.snapshot_interval : 0;
  if (hooks.snapshots != nullptr) {
    hooks.snapshots->KeepOnly(resumed.from_memory ? std::optional<int64_t>(result.first_step) : std::nullopt);
    hooks.snapshots->DropReplicas();
  }
  if (snapshot_interval > 0 && run.part != nullptr) {
    DSLAUNCH_ASSIGN_OR_RETURN(loop.snapshot_pieces, GatherShardPieces(comm, run, engine->Snapshot().range));
  }
  int64_t snapshot_step = -1;  // the step of this rank's latest snapshot, written
  report.TrainingStarts(result.first_step, Clock::now());
  for (int64_t step = result.first_step; step < config.train.steps; ++step) {
    const auto step_start = Clock::now();
    const auto collectives_before = in_collectives();
    DSLAUNCH_ASSIGN_OR_RETURN(Loop::StepOutcome outcome,
                              loop.RunStep(step, saver.pending_written(), snapshot_step >= 0));
    if (snapshot_step >= 0 && outcome.snapshot_ranks == world) hooks.snapshots->Committed(snapshot_step);
    snapshot_step = -1;
    if (CheckpointSchedule::CompletePendingNow(saver.pending(), outcome.ranks_written, world)) {
      DSLAUNCH_RETURN_IF_ERROR(saver.CompletePending());
    }
    result.losses.push_back(outcome.step.loss);
    outcome.step.seconds = SecondsSince(step_start);
    const double in_collectives_s = std::chrono::duration<double>(in_collectives() - collectives_before).count();
    DSLAUNCH_ASSIGN_OR_RETURN(Loop::RankTimes times, loop.GatherStepTimes(outcome.step.seconds, in_collectives_s));
    outcome.step.rank_ms = std::move(times.step_ms);
    outcome.step.rank_collective_ms = std::move(times.collective_ms);
    if (hooks.reporter != nullptr) {
      const double outside_collectives = outcome.step.seconds - in_collectives_s;
      hooks.reporter->StepDone(step + 1, outcome.step.seconds, outcome.step.loss,
                               static_cast<double>(outcome.step.tokens) / outcome.step.seconds,
                               std::max(0.0, outside_collectives));
    }
    if (snapshot_interval > 0 && (step + 1) % snapshot_interval == 0) {
      // Copies on peer nodes: the next snapshot waits until every rank's latest has its answer,
      // so a step every rank kept is always on the peers too.
      if (outcome.answered_ranks == world) {
        double seconds = 0.0;
        if (loop.TakeSnapshot(step + 1, run, &seconds)) snapshot_step = step + 1;
        outcome.step.snapshot_seconds = seconds;
      } else {
        outcome.step.snapshot_deferred = true;
      }
    }
    report.Step(outcome.step, Clock::now());
    if (hooks.after_step) hooks.after_step(step + 1);
    DSLAUNCH_RETURN_IF_ERROR(loop.Save(schedule.AfterStep(step + 1, outcome.stop), step + 1, saver));
    if (outcome.stop) {
      report.Stopped(step + 1);
      result.stopped = true;
      result.checkpoints = saver.saved();
      report.CheckpointSummary(saver.Summary());
      return result;
    }
    if (config.train.eval_interval > 0 && (step + 1) % config.train.eval_interval == 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(result.val_loss, loop.Validate(step + 1));
    }
  }
  DSLAUNCH_RETURN_IF_ERROR(loop.Finish(schedule, saver, result));
  return result;
}

}  // namespace dslaunch::runtime
