#include "runtime/train/run_report.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/display_text.h"
#include "common/process_grid.h"
#include "runtime/train/progress_bar.h"

namespace dslaunch::runtime {
namespace {

// Keys stay in the order they are added: readers match on the start of a record
// ("{\"event\":\"step\",\"step\":N"; scripts/bench-elastic.sh, the proc tests).
using Record = nlohmann::ordered_json;

// A loss scale as recorded: a whole number up to 2^53 (every dynamic scale is a power of two) as an
// integer, exact where 9 digits would round it (2^30 = 1073741824, not 1073741820); a larger or a
// fractional (static) scale as a float.
Record ExactScale(double scale) {
  constexpr double kLargestExactInteger = 9007199254740992.0;  // 2^53: every integer below is a double
  if (scale >= 0 && scale <= kLargestExactInteger && scale == std::floor(scale)) {
    return static_cast<int64_t>(scale);
  }
  return scale;
}

// Floating-point values are written as "%.9g" (9 significant digits, as common/text.h's
// JsonNumber: a float's value exactly, a double's to 1e-9 relative), non-finite ones as null.
// nlohmann's own formatter prints the shortest text that reads back as the same double, which
// is a different text for about 1 value in 800 once rounded to 9 digits ("0.17648503199999999"):
// metrics.jsonl keeps the digits it always had (docs/engine.md, "Metrics").
void Dump(const Record& value, std::string& out) {
  switch (value.type()) {
    case Record::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out += ',';
        first = false;
        out += Record(key).dump(-1, ' ', false, Record::error_handler_t::replace);
        out += ':';
        Dump(item, out);
      }
      out += '}';
      return;
    }
    case Record::value_t::array: {
      out += '[';
      for (size_t i = 0; i < value.size(); ++i) {
        if (i > 0) out += ',';
        Dump(value[i], out);
      }
      out += ']';
      return;
    }
    case Record::value_t::number_float: {
      const double v = value.get<double>();
      if (!std::isfinite(v)) {
        out += "null";
        return;
      }
      char buf[40];
      std::snprintf(buf, sizeof(buf), "%.9g", v);
      out += buf;
      return;
    }
    default:  // strings (invalid UTF-8 replaced, never thrown), integers, booleans, null
      out += value.dump(-1, ' ', false, Record::error_handler_t::replace);
  }
}

std::string Text(const Record& record) {
  std::string out;
  Dump(record, out);
  return out;
}

Record MemoryRecord(const MemoryStats& m) {
  Record r;
  r["parameters"] = m.parameters;
  r["gradients"] = m.gradients;
  r["optimizer_state"] = m.optimizer_state;
  r["working"] = m.working;
  return r;
}

std::string Megabytes(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

}  // namespace

RunReport RunReport::ForRank(int rank, ReportOutputs outputs, int64_t steps_per_print, int64_t total_steps) {
  return RunReport(rank == 0 ? std::move(outputs) : ReportOutputs{}, steps_per_print, total_steps);
}

RunReport::RunReport(ReportOutputs outputs, int64_t steps_per_print, int64_t total_steps)
    : out_(std::move(outputs)), steps_per_print_(steps_per_print), total_steps_(total_steps) {}

void RunReport::Print(const std::string& line) const {
  if (out_.print) out_.print(line);
}

void RunReport::ModelInitialisedFrom(const std::string& path) { Print("model initialised from " + path); }

void RunReport::Start(const RunStart& start) {
  unit_ = start.classifier ? "samples" : "tokens";
  if (out_.metrics) {
    Record r;
    r["event"] = "start";
    r["model"] = start.model;
    r["parameters"] = start.parameters;
    r["flops_per_token"] = start.flops_per_token;
    r["world_size"] = start.world_size;
    r["zero_stage"] = start.zero_stage;
    r["precision"] = start.precision;
    r["bytes_per_rank"] = MemoryRecord(start.memory);
    r["activation_bytes"] = start.activation_bytes;
    if (start.origin.started_ms) r["started_ms"] = *start.origin.started_ms;
    if (!start.origin.command.empty()) r["command"] = start.origin.command;
    if (!start.origin.sgemm_kernel.empty()) {
      r["sgemm_kernel"] = start.origin.sgemm_kernel;
      r["sgemm_gflops"] = start.origin.sgemm_gflops;
      r["sgemm_default_kernel"] = start.origin.sgemm_default_kernel;
      r["sgemm_default_gflops"] = start.origin.sgemm_default_gflops;
    }
    if (!start.origin.config_json.empty()) {
      // Embedded as the object it is; a text that is not JSON (it was read, so it should be) as a string.
      Record config = Record::parse(start.origin.config_json, nullptr, /*allow_exceptions=*/false);
      r["config"] = config.is_discarded() ? Record(start.origin.config_json) : std::move(config);
    }
    out_.metrics(Text(r));
  }
  if (!out_.print) return;
  char flops[64];
  std::snprintf(flops, sizeof(flops), "%.4g", start.flops_per_token);
  Print("model " + start.model + ": " + std::to_string(start.parameters) + " parameters, " + flops + " FLOPs per " +
        (start.classifier ? "sample" : "token") + " (forward + backward); per rank: parameters " +
        Megabytes(start.memory.parameters) + ", gradients " + Megabytes(start.memory.gradients) +
        ", optimizer state " + Megabytes(start.memory.optimizer_state) + " (ZeRO stage " +
        std::to_string(start.zero_stage) + ", " + start.precision + ", world " + std::to_string(start.world_size) +
        ")");
}

void RunReport::Resumed(const std::string& path, const LoadResult& loaded, bool restart, bool from_memory) {
  if (out_.print) {
    char size[96];
    std::snprintf(size, sizeof(size), "; %.1f MB in %.2f s", static_cast<double>(loaded.bytes) / 1e6, loaded.seconds);
    const CheckpointGrid& g = loaded.meta.grid;
    const std::string grid =
        g.trivial() ? "" : " as " + DescribeGridShape({g.pipeline, g.data(loaded.meta.world_size), g.tensor});
    Print(std::string(restart ? "restart: " : "") + "resumed from " + path + " at step " +
          std::to_string(loaded.meta.step) + " (saved by " + std::to_string(loaded.meta.world_size) + " ranks" + grid +
          " at ZeRO stage " + std::to_string(loaded.meta.zero_stage) + ", " + loaded.meta.precision + size + ")" +
          (loaded.warning.empty() ? "" : "; warning: " + loaded.warning));
  }
  if (out_.metrics) {
    Record r;
    r["event"] = "resume";
    r["step"] = loaded.meta.step;
    r["saved_world_size"] = loaded.meta.world_size;
    r["saved_zero_stage"] = loaded.meta.zero_stage;
    if (!loaded.meta.grid.trivial()) {
      r["saved_grid"] = {{"pipeline", loaded.meta.grid.pipeline},
                         {"data", loaded.meta.grid.data(loaded.meta.world_size)},
                         {"tensor", loaded.meta.grid.tensor}};
    }
    r["load_seconds"] = loaded.seconds;
    r["source"] = from_memory ? "memory" : "disk";
    out_.metrics(Text(r));
  }
}

void RunReport::NoMemorySnapshot(const std::string& why, const std::string& dir) {
  Print("restart: no complete in-memory snapshot (" + why + "): " +
        (dir.empty() ? std::string("no checkpoint.dir either, starting at step 0") : "using checkpoint.dir " + dir));
}

void RunReport::NoCheckpointYet(const std::string& dir, bool restart) {
  Print(std::string(restart ? "restart: " : "") + "no checkpoint in " + dir + " yet: starting at step 0");
}

void RunReport::ScanningForCheckpoints(const std::string& reason, const std::string& dir, bool restart) {
  Print(std::string(restart ? "restart: " : "") + reason + ": looking for the newest complete checkpoint in " + dir);
}

void RunReport::CheckpointSkipped(const std::string& path, const std::string& why, bool restart) {
  Print(std::string(restart ? "restart: " : "") + "skipping checkpoint " + path + ": " + why);
  if (out_.metrics) {
    Record r;
    r["event"] = "checkpoint_skipped";
    r["path"] = path;
    r["reason"] = why;
    out_.metrics(Text(r));
  }
}

void RunReport::CheckpointNote(const std::string& line) { Print(line); }

void RunReport::TrainingStarts(int64_t first_step, Clock::time_point now) {
  first_step_ = first_step;
  train_start_ = now;
  last_print_ = now;
  tokens_since_print_ = 0;
}

void RunReport::Step(const StepReport& step, Clock::time_point now) {
  tokens_since_print_ += step.tokens;
  const double per_second = static_cast<double>(step.tokens) / step.seconds;
  if (out_.metrics) {  // built only where it is written: this runs every step
    Record r;
    r["event"] = "step";
    r["step"] = step.step;
    r["loss"] = static_cast<double>(step.loss);
    r["lr"] = step.stats.lr;
    r["loss_scale"] = ExactScale(step.stats.loss_scale);
    r["grad_norm"] = step.stats.grad_norm;
    r["skipped"] = step.stats.skipped;
    r["tokens_per_s"] = per_second;
    r["ms_per_step"] = 1e3 * step.seconds;
    if (!step.rank_ms.empty()) r["rank_step_ms"] = step.rank_ms;
    if (!step.rank_collective_ms.empty()) r["rank_collective_ms"] = step.rank_collective_ms;
    if (step.snapshot_seconds >= 0) r["snapshot_ms"] = 1e3 * step.snapshot_seconds;
    if (step.snapshot_deferred) r["snapshot_deferred"] = true;
    out_.metrics(Text(r));
  }
  if (step.step == first_step_ + 1 && out_.first_step_done) out_.first_step_done(first_step_);
  if (!step.stats.scale_event.empty()) Print("step " + std::to_string(step.step) + " | " + step.stats.scale_event);
  if (out_.progress) {
    out_.progress(FormatProgressBar(step.step, total_steps_, step.loss, per_second, unit_,
                                    std::chrono::duration<double>(now - train_start_).count()));
  }
  if (step.step % steps_per_print_ == 0 || step.step == total_steps_) PrintStepLine(step, now);
}

void RunReport::PrintStepLine(const StepReport& step, Clock::time_point now) {
  const double seconds = std::chrono::duration<double>(now - last_print_).count();
  // Steps since the last line: a whole print interval, or the rest of one at the last step.
  const int64_t steps_done = step.step % steps_per_print_ == 0 ? steps_per_print_ : step.step % steps_per_print_;
  if (out_.print) {
    char line[256];
    std::snprintf(line, sizeof(line),
                  "step %lld | loss %.6f | lr %.3e | loss scale %g | grad norm %.4f | %.0f %s/s | %.1f ms/step",
                  static_cast<long long>(step.step), step.loss, step.stats.lr, step.stats.loss_scale,
                  step.stats.grad_norm, static_cast<double>(tokens_since_print_) / seconds, unit_.c_str(),
                  1e3 * seconds / static_cast<double>(steps_done));
    Print(line);
  }
  last_print_ = now;
  tokens_since_print_ = 0;
}

void RunReport::Validation(const ValidationReport& validation, Clock::duration spent) {
  last_print_ += spent;  // validation time is not training time
  if (out_.print) {
    char line[160];
    std::snprintf(line, sizeof(line), "step %lld | validation loss %.6f", static_cast<long long>(validation.step),
                  validation.loss);
    std::string text = line;
    if (validation.accuracy) {
      std::snprintf(line, sizeof(line), " | accuracy %.2f%%", 100.0 * *validation.accuracy);
      text += line;
    }
    std::snprintf(line, sizeof(line), " (%lld batches per rank)", static_cast<long long>(validation.batches));
    Print(text + line);
  }
  if (out_.metrics) {
    Record r;
    r["event"] = "validation";
    r["step"] = validation.step;
    r["val_loss"] = validation.loss;
    if (validation.accuracy) r["accuracy"] = *validation.accuracy;
    out_.metrics(Text(r));
  }
}

void RunReport::Stopped(int64_t step) { Print("step " + std::to_string(step) + " | stopped on request"); }

void RunReport::Sample(const std::string& text) {
  const std::string shown = DisplayText(text);
  Print("sample:\n" + shown);
  if (out_.metrics) {
    Record r;
    r["event"] = "sample";
    r["text"] = shown;
    out_.metrics(Text(r));
  }
}

std::string ExitRecordJson(int64_t ended_ms) {
  return "{\"event\":\"exit\",\"ended_ms\":" + std::to_string(ended_ms) + "}";
}

void RunReport::CheckpointSummary(const std::string& summary) {
  if (!summary.empty()) Print(summary);
}

void RunReport::End(const RunEnd& end) {
  if (!out_.metrics) return;
  Record r;
  r["event"] = "end";
  r["steps"] = end.steps;
  r["applied_steps"] = end.applied_steps;
  r["bytes_per_rank"] = MemoryRecord(end.memory);
  r["checkpoints_saved"] = end.checkpoints_saved;
  r["checkpoints_failed"] = end.checkpoints_failed;
  const swap::IoStats& io = end.swap_io;
  if (io.bytes_read + io.bytes_written > 0) {
    r["swap_io"] = {{"bytes_read", io.bytes_read},     {"bytes_written", io.bytes_written},
                    {"pieces", io.pieces},             {"submit_calls", io.submit_calls},
                    {"max_in_flight", io.max_in_flight}};
  }
  out_.metrics(Text(r));
}

}  // namespace dslaunch::runtime
