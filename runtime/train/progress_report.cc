#include "runtime/train/progress_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/env_names.h"

namespace dslaunch::runtime {

WatchdogTimeout::WatchdogTimeout(WatchdogSettings settings)
    : fixed_(settings.env_seconds ? settings.env_seconds : settings.config_seconds) {
  window_.reserve(kStepTimeWindow);
}

void WatchdogTimeout::AddStep(double seconds) {
  ++measured_;
  if (fixed_) return;  // nothing to derive
  if (window_.size() < kStepTimeWindow) {
    window_.push_back(seconds);
  } else {
    window_[next_] = seconds;
    next_ = (next_ + 1) % kStepTimeWindow;
  }
}

double WatchdogTimeout::For(ProgressPhase phase) const {
  if (fixed_ && *fixed_ == 0.0) return 0.0;
  double between_steps = kStartupAllowance;
  if (fixed_) {
    between_steps = *fixed_;
  } else if (measured_ >= kStepsBeforeDerived) {
    std::vector<double> sorted = window_;
    auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
    std::nth_element(sorted.begin(), middle, sorted.end());
    between_steps = std::ceil(std::max(kMinDerivedTimeout, kStepTimeFactor * *middle));
  }
  switch (phase) {
    case ProgressPhase::kStartup: return std::max(between_steps, kStartupAllowance);
    case ProgressPhase::kTraining: return between_steps;
    case ProgressPhase::kSlow: return std::max(between_steps, kSlowPhaseAllowance);
  }
  return between_steps;
}

std::string FormatProgressReport(int64_t step, double timeout_seconds, const ProgressFigures& figures) {
  char buf[64];
  int n = 0;
  if (timeout_seconds == std::floor(timeout_seconds)) {
    n = std::snprintf(buf, sizeof(buf), "%lld timeout=%.0f", static_cast<long long>(step), timeout_seconds);
  } else {
    n = std::snprintf(buf, sizeof(buf), "%lld timeout=%.3f", static_cast<long long>(step), timeout_seconds);
    while (n > 0 && buf[n - 1] == '0') --n;  // "0.500" -> "0.5"
  }
  std::string report(buf, static_cast<size_t>(n));
  report += FormatProgressFigures(figures);
  report += '\n';
  return report;
}

Result<std::optional<double>> ParseWatchdogTimeoutEnv(const std::map<std::string, std::string>& env) {
  auto it = env.find(env::kWatchdogTimeout);
  if (it == env.end() || it->second.empty()) return std::optional<double>();
  const char* text = it->second.c_str();
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(seconds) || seconds < 0.0) {
    return InvalidArgumentError(std::string(env::kWatchdogTimeout) + "='" + it->second +
                                "' is not a number of seconds >= 0 (0 = no watchdog)");
  }
  return std::optional<double>(seconds);
}

std::chrono::milliseconds CollectiveTimeoutFor(double watchdog_seconds, std::chrono::milliseconds when_off) {
  if (watchdog_seconds <= 0.0) return when_off;
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(kCollectiveTimeoutFactor * watchdog_seconds * 1e3)));
}

ProgressReporter::ProgressReporter(WatchdogSettings settings, Writer write, std::function<void(double)> on_timeout)
    : watchdog_(settings), write_(std::move(write)), on_timeout_(std::move(on_timeout)) {}

void ProgressReporter::Starting(int64_t step) {
  step_ = step;
  Report();
}

void ProgressReporter::StepDone(int64_t step, double seconds, std::optional<double> loss,
                                std::optional<double> tokens_per_s, std::optional<double> compute_seconds) {
  watchdog_.AddStep(seconds);
  step_ = step;
  stepped_ = true;
  figures_.step_ms = 1e3 * seconds;
  figures_.loss = loss;
  figures_.tokens_per_s = tokens_per_s;
  figures_.compute_ms = compute_seconds ? std::optional<double>(1e3 * *compute_seconds) : std::nullopt;
  Report();
}

void ProgressReporter::ValidationDone(int64_t after_step, double loss) {
  figures_.val_loss = loss;
  figures_.val_step = after_step;
  Report();
}

void ProgressReporter::CheckpointSaved(int64_t step, double seconds, uint64_t bytes) {
  figures_.ckpt_s = seconds;
  figures_.ckpt_bytes = static_cast<int64_t>(bytes);
  figures_.ckpt_step = step;
  Report();
}

void ProgressReporter::StillWorking() { Report(); }

void ProgressReporter::BeginSlowPhase() {
  ++slow_depth_;
  Report();
}

void ProgressReporter::EndSlowPhase() {
  if (slow_depth_ > 0) --slow_depth_;
  Report();
}

void ProgressReporter::Report() {
  const ProgressPhase phase = slow_depth_ > 0 ? ProgressPhase::kSlow
                              : stepped_      ? ProgressPhase::kTraining
                                              : ProgressPhase::kStartup;
  const double timeout = watchdog_.For(phase);
  if (write_) write_(FormatProgressReport(step_, timeout, figures_));
  if (timeout != timeout_ && on_timeout_) on_timeout_(timeout);
  timeout_ = timeout;
}

}  // namespace dslaunch::runtime
