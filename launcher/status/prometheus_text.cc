#include "launcher/status/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <map>
#include <optional>

namespace dslaunch::launcher {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

struct Sample {
  Labels labels;
  double value = 0;
};

// One metric family: its HELP and TYPE lines, then its samples.
struct Family {
  std::string name;
  const char* type;  // "gauge" or "counter"
  const char* help;
  std::vector<Sample> samples;
};

void Write(const Family& f, std::string& out) {
  out += "# HELP " + f.name + " " + f.help + "\n";
  out += "# TYPE " + f.name + " " + f.type + "\n";
  for (const Sample& s : f.samples) {
    out += f.name;
    if (!s.labels.empty()) {
      out += "{";
      for (size_t i = 0; i < s.labels.size(); ++i) {
        if (i > 0) out += ",";
        out += s.labels[i].first + "=\"" + EscapeLabelValue(s.labels[i].second) + "\"";
      }
      out += "}";
    }
    out += " " + FormatSampleValue(s.value) + "\n";
  }
}

Labels RankLabels(const RankView& r) { return {{"rank", std::to_string(r.rank)}, {"host", r.host}}; }
Labels NodeLabels(const NodeView& n) { return {{"node", std::to_string(n.node_rank)}, {"host", n.host}}; }

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

std::vector<Family> JobFamilies(const JobView& v) {
  Family info{"dslaunch_job_info", "gauge", "The job, by id; always 1.", {}};
  info.samples.push_back({{{"job_id", v.job_id}}, 1});
  Family state{"dslaunch_job_state", "gauge", "1 for the job's current state, 0 for the others.", {}};
  for (std::string_view s : kJobStates) state.samples.push_back({{{"state", std::string(s)}}, v.state == s ? 1.0 : 0.0});
  Family ranks{"dslaunch_ranks", "gauge", "Ranks of the current generation in each state.", {}};
  std::map<std::string, int> by_state;
  for (std::string_view s : kRankStates) by_state[std::string(s)] = 0;
  for (const RankView& r : v.ranks) ++by_state[r.state];
  for (const auto& [s, n] : by_state) ranks.samples.push_back({{{"state", s}}, static_cast<double>(n)});
  Family generation{"dslaunch_generation", "gauge", "The current generation (0 for the first).", {{{}, double(v.generation)}}};
  Family restarts{"dslaunch_restarts_total", "counter", "Generations started after the first.", {{{}, double(v.restarts)}}};
  Family start{"dslaunch_start_time_seconds", "gauge", "When the launcher started, Unix time.", {}};
  if (v.started_ms > 0) start.samples.push_back({{}, Seconds(v.started_ms)});
  return {info, state, ranks, generation, restarts, start};
}

std::vector<Family> NodeFamilies(const JobView& v) {
  Family age{"dslaunch_node_heartbeat_age_seconds", "gauge",
             "Seconds since the launcher last heard from the node's agent.", {}};
  Family connected{"dslaunch_node_connected", "gauge", "1 while the node's agent is connected.", {}};
  for (const NodeView& n : v.nodes) {
    if (n.last_heartbeat_ms > 0) age.samples.push_back({NodeLabels(n), Seconds(v.now_ms - n.last_heartbeat_ms)});
    connected.samples.push_back({NodeLabels(n), n.connected ? 1.0 : 0.0});
  }
  return {age, connected};
}

// A sample of `r` when `value` was reported, divided by `divisor` (ms to s).
void AddOptional(Family& f, const RankView& r, const std::optional<double>& value, double divisor = 1) {
  if (value) f.samples.push_back({RankLabels(r), *value / divisor});
}

std::vector<Family> RankFamilies(const JobView& v) {
  Family step{"dslaunch_rank_step", "gauge", "The last training step the rank completed.", {}};
  Family step_s{"dslaunch_rank_step_duration_seconds", "gauge", "Wall time of the rank's last step.", {}};
  Family compute_s{"dslaunch_rank_step_outside_collectives_seconds", "gauge",
                   "Part of the rank's last step spent outside collectives (its own work).", {}};
  Family loss{"dslaunch_rank_loss", "gauge", "Training loss the rank reported for its last step.", {}};
  Family tps{"dslaunch_rank_tokens_per_second", "gauge", "Tokens per second the rank reported for its last step.", {}};
  Family straggler{"dslaunch_rank_straggler", "gauge", "1 while the straggler rule flags the rank.", {}};
  Family exit{"dslaunch_rank_exit_code", "gauge", "The rank's exit code, once it exited (128+N for signal N).", {}};
  for (const RankView& r : v.ranks) {
    if (r.last_step >= 0) step.samples.push_back({RankLabels(r), static_cast<double>(r.last_step)});
    AddOptional(step_s, r, r.step_ms, 1000.0);
    AddOptional(compute_s, r, r.compute_ms, 1000.0);
    AddOptional(loss, r, r.loss);
    AddOptional(tps, r, r.tokens_per_s);
    straggler.samples.push_back({RankLabels(r), r.straggler ? 1.0 : 0.0});
    if (r.exit_code) exit.samples.push_back({RankLabels(r), static_cast<double>(*r.exit_code)});
  }
  return {step, step_s, compute_s, loss, tps, straggler, exit};
}

std::vector<Family> CounterFamilies(const JobView& v) {
  Family val{"dslaunch_validation_loss", "gauge", "The last validation loss (rank 0).", {}};
  if (!v.val_loss.empty()) val.samples.push_back({{}, v.val_loss.back().value});
  Family stragglers{"dslaunch_stragglers_total", "counter", "Ranks flagged as stragglers (each once per generation).",
                    {{{}, double(v.stragglers_total)}}};
  Family saves{"dslaunch_checkpoint_saves_total", "counter", "Checkpoints saved.", {{{}, double(v.checkpoint_saves_total)}}};
  Family save_s{"dslaunch_checkpoint_save_duration_seconds", "gauge", "Duration of the last checkpoint save.", {}};
  if (v.checkpoint_save_seconds) save_s.samples.push_back({{}, *v.checkpoint_save_seconds});
  Family save_b{"dslaunch_checkpoint_save_bytes", "gauge", "Bytes written by the last checkpoint save.", {}};
  if (v.checkpoint_save_bytes) save_b.samples.push_back({{}, static_cast<double>(*v.checkpoint_save_bytes)});
  Family store{"dslaunch_store_sent_bytes_total", "counter",
               "Bytes the launcher's endpoint (store and agent control) sent to its clients.",
               {{{}, double(v.store_bytes_sent_total)}}};
  return {val, stragglers, saves, save_s, save_b, store};
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, end);
}

std::string PrometheusText(const JobView& view) {
  std::string out;
  for (auto* make : {&JobFamilies, &NodeFamilies, &RankFamilies, &CounterFamilies}) {
    for (const Family& f : make(view)) Write(f, out);
  }
  return out;
}

}  // namespace dslaunch::launcher
