#include "runtime/checkpoint/saver.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "common/text.h"

namespace dslaunch::runtime {
CheckpointSaver::CheckpointSaver(const CheckpointConfig& config, const Engine& engine, Communicator& comm,
                                 CheckpointRun run, SaveOptions options, std::function<void(const std::string&)> print,
                                 std::function<void(const std::string&)> record, int64_t first_step,
                                 std::string resumed_from)
    : config_(config),
      engine_(engine),
      comm_(comm),
      run_(std::move(run)),
      options_(std::move(options)),
      print_(std::move(print)),
      record_(std::move(record)),
      last_saved_(first_step),
      last_complete_step_(first_step),
      last_complete_(std::move(resumed_from)) {}

CheckpointSaver::~CheckpointSaver() {
  pending_.reset();  // an unfinished save's writer thread is joined
  if (release_pending_) release_pending_();
}

bool CheckpointSaver::pending_written() const { return pending_ && pending_->written(); }

void CheckpointSaver::Report(int64_t step, const std::string& why, const SaveResult& saved) {
  saved_.push_back(saved.path);
  last_complete_ = saved.path;
  last_complete_step_ = step;
  if (on_saved_) on_saved_(step, saved);
  if (comm_.rank() != 0) return;
  if (print_) {
    char line[400];
    std::snprintf(line, sizeof(line), "step %lld | checkpoint (%s) %s: %.1f MB in %.2f s, training stalled %.3f s",
                  static_cast<long long>(step), why.c_str(), saved.path.c_str(), static_cast<double>(saved.bytes) / 1e6,
                  saved.seconds, saved.stall_seconds);
    print_(line);
  }
  if (record_) {
    record_("{\"event\":\"checkpoint\",\"step\":" + std::to_string(step) + ",\"bytes\":" + std::to_string(saved.bytes) +
            ",\"seconds\":" + JsonNumber(saved.seconds) + ",\"stall_seconds\":" + JsonNumber(saved.stall_seconds) +
            "}");
  }
}

void CheckpointSaver::ReportFailure(int64_t step, const Status& status) {
  failed_steps_.push_back(step);
  // Rank 0 speaks for the run; a rank that failed on its own (not told by a peer) gives its reason.
  if (print_ && (comm_.rank() == 0 || status.code() != StatusCode::kAborted)) {
    print_("step " + std::to_string(step) + " | checkpoint FAILED: " + status.ToString() + "; training goes on");
  }
  if (record_ && comm_.rank() == 0) {
    record_("{\"event\":\"checkpoint_failed\",\"step\":" + std::to_string(step) + "}");
  }
}

Status CheckpointSaver::CompletePending() {
  if (!pending_) return Status::Ok();
  const int64_t step = pending_->step();
  Result<SaveResult> saved = pending_->Finish(comm_);
  pending_.reset();
  if (release_pending_) std::exchange(release_pending_, nullptr)();
  if (!saved.ok()) {
    if (!comm_.health().ok()) return saved.status();
    ReportFailure(step, saved.status());
    return Status::Ok();
  }
  Report(step, saved->from_snapshot ? "async, from the in-memory snapshot" : "async", *saved);
  return Status::Ok();
}

Status CheckpointSaver::SavePeriodic(int64_t step) {
  last_saved_ = step;
  if (!config_.async) {
    DSLAUNCH_ASSIGN_OR_RETURN(SaveResult saved, SaveCheckpoint(config_.dir, step, engine_, comm_, run_, options_));
    Report(step, "interval", saved);
    return Status::Ok();
  }
  DSLAUNCH_RETURN_IF_ERROR(CompletePending());  // one save in flight at a time
  std::optional<ResidentState> resident = resident_ ? resident_(step) : std::nullopt;
  Result<std::unique_ptr<AsyncCheckpoint>> started = AsyncCheckpoint::Start(
      config_.dir, step, engine_, comm_, run_, options_, async_buffers_, resident ? &resident->tensors : nullptr);
  if (resident) {
    if (started.ok()) {
      release_pending_ = std::move(resident->release);
    } else if (resident->release) {
      resident->release();
    }
  }
  if (!started.ok()) {
    // The ranks agreed the save cannot start (rank 0 could not create its directory): a periodic
    // asynchronous save that failed early, not a reason to stop training.
    if (!comm_.health().ok()) return started.status();
    ReportFailure(step, started.status());
    return Status::Ok();
  }
  pending_ = std::move(*started);
  return Status::Ok();
}

Status CheckpointSaver::SaveFinal(int64_t step, const std::string& why, bool save) {
  DSLAUNCH_RETURN_IF_ERROR(CompletePending());
  if (!enabled() || !save || last_saved_ == step) return Status::Ok();
  last_saved_ = step;
  Result<SaveResult> saved = SaveCheckpoint(config_.dir, step, engine_, comm_, run_, options_);
  if (!saved.ok()) {
    if (record_ && comm_.rank() == 0) {
      record_("{\"event\":\"checkpoint_failed\",\"step\":" + std::to_string(step) + ",\"final\":true}");
    }
    const std::string kept = last_complete_.empty()
                                 ? "no checkpoint of this run is complete"
                                 : "the last complete checkpoint is " + last_complete_ + " (step " +
                                       std::to_string(last_complete_step_) + ")";
    return Status(saved.status().code(),
                  std::string(why == "stop" ? "the checkpoint on stop" : "the end-of-run checkpoint") + " of step " + std::to_string(step) + " in " + config_.dir + " failed: " +
                      saved.status().message() + "; " + kept + ", so steps " + std::to_string(last_complete_step_ + 1) +
                      "-" + std::to_string(step) + " are not saved");
  }
  Report(step, why, *saved);
  return Status::Ok();
}

std::string CheckpointSaver::Summary() const {
  if (!enabled()) return "";
  std::string text = "checkpoints: " + std::to_string(saved_.size()) + " saved, " +
                     std::to_string(failed_steps_.size()) + " failed";
  if (!failed_steps_.empty()) {
    text += " (step";
    text += failed_steps_.size() > 1 ? "s " : " ";
    for (size_t i = 0; i < failed_steps_.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(failed_steps_[i]);
    text += ")";
  }
  text += "; last complete: " + (last_complete_.empty() ? std::string("none") : last_complete_);
  return text;
}

}  // namespace dslaunch::runtime
