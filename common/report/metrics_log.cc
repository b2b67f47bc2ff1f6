#include "common/report/metrics_log.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace dslaunch::report {
namespace {

using Json = nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A number field; NaN when absent, null (a non-finite value) or not a number.
double Number(const Json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : kNaN;
}

std::optional<int64_t> Integer(const Json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

// An array of numbers, null (non-finite) or anything else as NaN; empty when absent.
std::vector<double> Numbers(const Json& record, const char* key) {
  std::vector<double> out;
  auto it = record.find(key);
  if (it == record.end() || !it->is_array()) return out;
  for (const Json& v : *it) out.push_back(v.is_number() ? v.get<double>() : kNaN);
  return out;
}

std::string String(const Json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

class Reader {
 public:
  MetricsLog Take() { return std::move(log_); }

  void Line(std::string_view text, int64_t line) {
    ++log_.lines;
    Json record = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded()) return Malformed(line, "not JSON");
    if (!record.is_object()) return Malformed(line, "not a JSON object");
    auto event = record.find("event");
    if (event == record.end() || !event->is_string()) return Malformed(line, "no string \"event\"");
    const std::string& name = event->get_ref<const std::string&>();
    if (name == "start") return Start(record);
    if (name == "step") return Step(record, line);
    if (name == "validation") return Validation(record, line);
    RunSegment& s = Current();
    if (name == "generation") {
      s.generation = Integer(record, "generation");
      s.reason = String(record, "reason");
      const double lost = Number(record, "seconds_lost");
      if (!std::isnan(lost)) s.seconds_lost = lost;
    } else if (name == "resume") {
      s.resumed_step = Integer(record, "step");
    } else if (name == "checkpoint") {
      ++s.checkpoints;
    } else if (name == "checkpoint_failed") {
      ++s.checkpoints_failed;
    } else if (name == "end") {
      s.ended = true;
    } else if (name == "exit") {
      s.ended_ms = Integer(record, "ended_ms");
    } else if (name == "sample") {
      s.sample = String(record, "text");
    }
  }

 private:
  void Malformed(int64_t line, std::string reason) {
    ++log_.malformed;
    if (!log_.first_malformed) log_.first_malformed = MalformedLine{line, std::move(reason)};
  }

  RunSegment& Current() {
    if (log_.segments.empty()) log_.segments.emplace_back();
    return log_.segments.back();
  }
  int CurrentIndex() {
    Current();
    return static_cast<int>(log_.segments.size()) - 1;
  }

  void Start(const Json& record) {
    RunSegment s;
    s.model = String(record, "model");
    s.parameters = Integer(record, "parameters").value_or(0);
    s.world_size = static_cast<int>(Integer(record, "world_size").value_or(0));
    s.zero_stage = static_cast<int>(Integer(record, "zero_stage").value_or(0));
    s.precision = String(record, "precision");
    s.started_ms = Integer(record, "started_ms");
    s.sgemm_kernel = String(record, "sgemm_kernel");
    s.sgemm_gflops = Number(record, "sgemm_gflops");
    if (auto command = record.find("command"); command != record.end() && command->is_array()) {
      for (const Json& arg : *command) {
        if (arg.is_string()) s.command.push_back(arg.get<std::string>());
      }
    }
    if (auto config = record.find("config"); config != record.end() && !config->is_null()) {
      s.config = config->is_string() ? config->get<std::string>() : config->dump(2, ' ', false, Json::error_handler_t::replace);
    }
    log_.segments.push_back(std::move(s));
  }

  void Step(const Json& record, int64_t line) {
    std::optional<int64_t> step = Integer(record, "step");
    if (!step) return Malformed(line, "step record without an integer \"step\"");
    StepPoint p;
    p.step = *step;
    p.loss = Number(record, "loss");
    p.tokens_per_s = Number(record, "tokens_per_s");
    p.ms_per_step = Number(record, "ms_per_step");
    p.lr = Number(record, "lr");
    p.grad_norm = Number(record, "grad_norm");
    p.loss_scale = Number(record, "loss_scale");
    auto skipped = record.find("skipped");
    p.skipped = skipped != record.end() && skipped->is_boolean() && skipped->get<bool>();
    p.rank_step_ms = Numbers(record, "rank_step_ms");
    p.rank_collective_ms = Numbers(record, "rank_collective_ms");
    p.segment = CurrentIndex();
    RunSegment& s = Current();
    if (s.steps_recorded == 0) s.first_step = p.step;
    ++s.steps_recorded;
    s.last_step = p.step;
    s.last_loss = p.loss;
    if (!std::isfinite(p.loss)) ++s.nonfinite_losses;
    if (p.skipped) ++s.skipped_steps;
    log_.steps.push_back(std::move(p));
  }

  void Validation(const Json& record, int64_t line) {
    std::optional<int64_t> step = Integer(record, "step");
    if (!step) return Malformed(line, "validation record without an integer \"step\"");
    ValidationPoint v;
    v.step = *step;
    v.val_loss = Number(record, "val_loss");
    const double accuracy = Number(record, "accuracy");
    if (!std::isnan(accuracy)) v.accuracy = accuracy;
    v.segment = CurrentIndex();
    log_.validations.push_back(v);
  }

  MetricsLog log_;
};

}  // namespace

MetricsLog ParseMetricsLog(std::string_view text) {
  Reader reader;
  int64_t line = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    ++line;
    std::string_view content = text.substr(begin, end - begin);
    if (!content.empty() && content.back() == '\r') content.remove_suffix(1);
    if (content.find_first_not_of(" \t") != std::string_view::npos) reader.Line(content, line);
    begin = end + 1;
  }
  return reader.Take();
}

}  // namespace dslaunch::report
