#include "runtime/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "common/text.h"
#include "runtime/checkpoint/saver.h"
#include "runtime/engine/zero_engine.h"
#include "runtime/checkpoint/model_file.h"
#include "runtime/train/progress_bar.h"
#include "runtime/train/train_task.h"

namespace dslaunch::runtime {
namespace {

using Clock = std::chrono::steady_clock;


std::string FormatBytes(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

std::string MemoryJson(const MemoryStats& m) {
  return "{\"parameters\":" + std::to_string(m.parameters) + ",\"gradients\":" + std::to_string(m.gradients) +
         ",\"optimizer_state\":" + std::to_string(m.optimizer_state) + ",\"working\":" + std::to_string(m.working) +
         "}";
}

}  // namespace

Result<TrainResult> Train(const TrainConfig& config, const TrainData& data, Communicator& comm,
                          const std::function<void(const std::string&)>& print,
                          const std::function<void(const std::string&)>& metrics) {
  TrainHooks hooks;
  hooks.print = print;
  hooks.metrics = metrics;
  return Train(config, data, comm, hooks);
}

Result<TrainResult> Train(const TrainConfig& config, const TrainData& data, Communicator& comm,
                          const TrainHooks& hooks) {
  const int rank = comm.rank(), world = comm.world_size();
  auto print = [&](const std::string& line) {
    if (hooks.print) hooks.print(line);
  };
  const bool recording = hooks.metrics && rank == 0;  // rank 0 writes the metrics
  auto record = [&](const std::string& json) {
    if (recording) hooks.metrics(json);
  };
  const int accumulation = static_cast<int>(config.batch.gradient_accumulation_steps);
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<TrainTask> task, TrainTask::Create(config, data, rank, world));
  std::vector<float> initial(task->layout().numel());
  // A checkpoint being resumed wins over model.init_from, which only starts a fresh run.
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<std::string> resume, ResolveCheckpoint(config.checkpoint));
  if (!resume && !config.model_init_from.empty()) {
    DSLAUNCH_ASSIGN_OR_RETURN(initial, ImportParameters(config.model_init_from, task->layout(), task->name()));
    if (rank == 0) print("model initialised from " + config.model_init_from);
  } else {
    task->InitParameters(initial, config.seed);
  }
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                            Engine::Create(task->layout(), comm, EngineOptionsFrom(config), initial));
  initial = {};

  const MemoryStats start_memory = engine->memory();
  record("{\"event\":\"start\",\"model\":\"" + std::string(task->name()) +
         "\",\"parameters\":" + std::to_string(task->layout().numel()) +
         ",\"flops_per_token\":" + JsonNumber(task->FlopsPerToken()) + ",\"world_size\":" + std::to_string(world) +
         ",\"zero_stage\":" + std::to_string(config.zero.stage) + ",\"precision\":\"" +
         std::string(PrecisionName(config.precision)) + "\",\"bytes_per_rank\":" + MemoryJson(start_memory) + "}");
  if (rank == 0) {
    char flops[64];
    std::snprintf(flops, sizeof(flops), "%.4g", task->FlopsPerToken());
    print("model " + std::string(task->name()) + ": " + std::to_string(task->layout().numel()) + " parameters, " +
          flops + " FLOPs per " + (task->classifier() ? "sample" : "token") +
          " (forward + backward); per rank: parameters " + FormatBytes(start_memory.parameters) + ", gradients " +
          FormatBytes(start_memory.gradients) + ", optimizer state " + FormatBytes(start_memory.optimizer_state) +
          " (ZeRO stage " + std::to_string(config.zero.stage) + ", " + std::string(PrecisionName(config.precision)) +
          ", world " + std::to_string(world) + ")");
  }

  TrainResult result;
  const CheckpointConfig& ckpt = config.checkpoint;
  CheckpointRun run;
  run.model = std::string(task->name());
  run.layout = &task->layout();
  run.global_batch = task->GlobalBatch();
  run.seed = config.seed;
  run.zero_stage = config.zero.stage;
  run.precision = std::string(PrecisionName(config.precision));
  run.optimizer = std::string(OptimizerTypeName(config.optimizer.kind));
  run.config_sha256 = config.source_sha256;
  // A restart resumes on its own (checkpoint.resume_newest): say so.
  const std::string restart = ckpt.resume_newest ? "restart: " : "";
  if (resume) {
    Result<LoadResult> load = [&] {
      ScopedSlowPhase slow(hooks.reporter);
      return LoadCheckpoint(*resume, *engine, comm, run);
    }();
    DSLAUNCH_ASSIGN_OR_RETURN(LoadResult loaded, std::move(load));
    result.first_step = loaded.meta.step;
    if (rank == 0) {
      char size[96];
      std::snprintf(size, sizeof(size), "; %.1f MB in %.2f s", static_cast<double>(loaded.bytes) / 1e6, loaded.seconds);
      print(restart + "resumed from " + *resume + " at step " + std::to_string(loaded.meta.step) + " (saved by " +
            std::to_string(loaded.meta.world_size) + " ranks at ZeRO stage " + std::to_string(loaded.meta.zero_stage) +
            ", " + loaded.meta.precision + size + ")" + (loaded.warning.empty() ? "" : "; warning: " + loaded.warning));
    }
    record("{\"event\":\"resume\",\"step\":" + std::to_string(loaded.meta.step) + ",\"saved_world_size\":" +
           std::to_string(loaded.meta.world_size) + ",\"saved_zero_stage\":" + std::to_string(loaded.meta.zero_stage) +
           ",\"load_seconds\":" + JsonNumber(loaded.seconds) + "}");
  } else if ((ckpt.load == CheckpointLoad::kLatest || ckpt.resume_newest) && rank == 0) {
    print(restart + "no checkpoint in " + ckpt.dir + " yet: starting at step 0");
  }
  if (hooks.reporter != nullptr) hooks.reporter->Starting(result.first_step);
  SaveOptions save_options;
  save_options.keep_last = ckpt.keep_last;
  save_options.file_system = hooks.checkpoint_files;
  CheckpointSaver saver(ckpt, *engine, comm, run, save_options, print, record, result.first_step,
                        resume.value_or(""));

  // Mean loss over eval_steps validation batches per rank, averaged over ranks; -1 without data.
  auto Validate = [&](int64_t after_step) -> Result<double> {
    if (!task->HasValidation()) return -1.0;
    double sum = 0.0;
    int64_t correct = 0;
    const int64_t batches = std::max<int64_t>(1, config.train.eval_steps);
    for (int64_t i = 0; i < batches; ++i) {
      sum += task->ForwardValidation(engine->access(), i, &correct);
      if (hooks.reporter != nullptr) hooks.reporter->StillWorking();
    }
    DSLAUNCH_RETURN_IF_ERROR(engine->status());
    float reduced[2] = {static_cast<float>(sum / static_cast<double>(batches)), static_cast<float>(correct)};
    DSLAUNCH_RETURN_IF_ERROR(comm.AllReduce(std::span<float>(reduced, 2), ReduceOp::kSum).WithContext("validation all-reduce"));
    const double val = reduced[0] / world;
    const bool classifier = task->classifier();
    const double accuracy = reduced[1] / static_cast<double>(batches * task->ValidationRows() * world);
    if (rank == 0) {
      char line[160];
      std::snprintf(line, sizeof(line), "step %lld | validation loss %.6f", static_cast<long long>(after_step), val);
      std::string text = line;
      if (classifier) {
        std::snprintf(line, sizeof(line), " | accuracy %.2f%%", 100.0 * accuracy);
        text += line;
      }
      std::snprintf(line, sizeof(line), " (%lld batches per rank)", static_cast<long long>(batches));
      print(text + line);
    }
    record("{\"event\":\"validation\",\"step\":" + std::to_string(after_step) + ",\"val_loss\":" + JsonNumber(val) +
           (classifier ? ",\"accuracy\":" + JsonNumber(accuracy) : std::string()) + "}");
    return val;
  };

  const auto train_start = Clock::now();
  auto last_print = train_start;
  int64_t tokens_since_print = 0;
  const std::string unit = task->classifier() ? "samples" : "tokens";
  const int64_t step_tokens = task->GlobalBatch() * task->TokensPerSample();
  for (int64_t step = result.first_step; step < config.train.steps; ++step) {
    const auto step_start = Clock::now();
    engine->BeginStep();
    const float backward_scale = static_cast<float>(engine->loss_scale() / accumulation);
    double loss_sum = 0.0;
    for (int m = 0; m < accumulation; ++m) {
      loss_sum += task->ForwardTrain(engine->access(), step, m);
      task->Backward(engine->access(), backward_scale);
    }
    DSLAUNCH_ASSIGN_OR_RETURN(StepStats stats, engine->Step());
    // The step's loss, averaged over ranks, and whether any rank was told to stop.
    // The step's loss, averaged over ranks; whether any rank was told to stop; how many ranks have
    // written their shard of the asynchronous save in flight.
    float reduced[3] = {static_cast<float>(loss_sum / accumulation),
                        hooks.stop != nullptr && hooks.stop->load() ? 1.0f : 0.0f,
                        saver.pending_written() ? 1.0f : 0.0f};
    DSLAUNCH_RETURN_IF_ERROR(comm.AllReduce(std::span<float>(reduced, 3), ReduceOp::kSum).WithContext("loss all-reduce"));
    const float loss = reduced[0] / static_cast<float>(world);
    const bool stop = reduced[1] > 0;
    if (saver.pending() && reduced[2] == static_cast<float>(world)) DSLAUNCH_RETURN_IF_ERROR(saver.CompletePending());
    result.losses.push_back(loss);
    tokens_since_print += step_tokens;
    const double step_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
    if (hooks.reporter != nullptr) hooks.reporter->StepDone(step + 1, step_seconds);
    if (recording) {  // built only where it is written: this runs every step
      record("{\"event\":\"step\",\"step\":" + std::to_string(step + 1) + ",\"loss\":" + JsonNumber(loss) +
             ",\"lr\":" + JsonNumber(stats.lr) + ",\"loss_scale\":" + JsonNumber(stats.loss_scale) +
             ",\"grad_norm\":" + JsonNumber(stats.grad_norm) + ",\"skipped\":" + (stats.skipped ? "true" : "false") +
             ",\"tokens_per_s\":" + JsonNumber(static_cast<double>(step_tokens) / step_seconds) +
             ",\"ms_per_step\":" + JsonNumber(1e3 * step_seconds) + "}");
    }
    if (rank == 0 && step == result.first_step && hooks.first_step_done) hooks.first_step_done(result.first_step);
    if (rank == 0 && !stats.scale_event.empty()) print("step " + std::to_string(step + 1) + " | " + stats.scale_event);
    if (rank == 0 && hooks.progress) {
      hooks.progress(FormatProgressBar(step + 1, config.train.steps, loss,
                                        static_cast<double>(step_tokens) / step_seconds, unit,
                                        std::chrono::duration<double>(Clock::now() - train_start).count()));
    }
    if (rank == 0 && ((step + 1) % config.steps_per_print == 0 || step + 1 == config.train.steps)) {
      const double seconds = std::chrono::duration<double>(Clock::now() - last_print).count();
      const int64_t steps_done = (step + 1) % config.steps_per_print == 0 ? config.steps_per_print
                                                                            : (step + 1) % config.steps_per_print;
      char line[256];
      std::snprintf(line, sizeof(line),
                    "step %lld | loss %.6f | lr %.3e | loss scale %g | grad norm %.4f | %.0f %s/s | %.1f ms/step",
                    static_cast<long long>(step + 1), loss, stats.lr, stats.loss_scale, stats.grad_norm,
                    static_cast<double>(tokens_since_print) / seconds, unit.c_str(),
                    1e3 * seconds / static_cast<double>(steps_done));
      print(line);
      last_print = Clock::now();
      tokens_since_print = 0;
    }
    // The save at the step where the run ends (the last step, or a stop) is the final one: it
    // waits for its completion and its failure fails the run (runtime/checkpoint/saver.h).
    const bool last = step + 1 == config.train.steps;
    if (saver.IntervalDue(step + 1) && !stop && !last) {
      ScopedSlowPhase slow(hooks.reporter);
      DSLAUNCH_RETURN_IF_ERROR(saver.SavePeriodic(step + 1));
    }
    if (stop) {
      {
        ScopedSlowPhase slow(hooks.reporter);
        DSLAUNCH_RETURN_IF_ERROR(saver.SaveFinal(step + 1, "stop", ckpt.save_on_stop || saver.IntervalDue(step + 1)));
      }
      if (rank == 0) print("step " + std::to_string(step + 1) + " | stopped on request");
      result.stopped = true;
      result.checkpoints = saver.saved();
      if (rank == 0 && saver.enabled()) print(saver.Summary());
      return result;
    }
    if (config.train.eval_interval > 0 && (step + 1) % config.train.eval_interval == 0) {
      const auto validation_start = Clock::now();
      DSLAUNCH_ASSIGN_OR_RETURN(result.val_loss, Validate(step + 1));
      last_print += Clock::now() - validation_start;  // validation time is not training time
    }
  }

  {
    ScopedSlowPhase slow(hooks.reporter);
    DSLAUNCH_RETURN_IF_ERROR(saver.SaveFinal(config.train.steps, "end", /*save=*/true));
  }
  result.checkpoints = saver.saved();
  result.failed_checkpoints = saver.failed_steps();
  if (config.train.eval_interval <= 0 || config.train.steps % config.train.eval_interval != 0) {
    DSLAUNCH_ASSIGN_OR_RETURN(result.val_loss, Validate(config.train.steps));
  }
  if (config.train.sample_tokens > 0 && task->name() == "gpt") {
    // Every rank samples (the same tokens): at ZeRO stage 3 each forward pass gathers parameters
    // from all ranks.
    ScopedSlowPhase slow(hooks.reporter);
    std::string text =
        task->Sample(engine->access(), config.train.sample_prompt, config.train.sample_tokens, config.seed);
    DSLAUNCH_RETURN_IF_ERROR(engine->status());
    if (rank == 0) print("sample:\n" + text);
  }
  if (rank == 0 && saver.enabled()) print(saver.Summary());
  record("{\"event\":\"end\",\"steps\":" + std::to_string(config.train.steps) + ",\"applied_steps\":" +
         std::to_string(engine->applied_steps()) + ",\"bytes_per_rank\":" + MemoryJson(engine->memory()) +
         ",\"checkpoints_saved\":" + std::to_string(saver.saved().size()) +
         ",\"checkpoints_failed\":" + std::to_string(saver.failed_steps().size()) + "}");
  return result;
}

}  // namespace dslaunch::runtime
