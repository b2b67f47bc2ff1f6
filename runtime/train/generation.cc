#include "runtime/train/generation.h"

#include <charconv>
#include <cstdio>

#include "common/env_names.h"
#include "common/text.h"

namespace dslaunch::runtime {

Result<GenerationInfo> ParseGenerationInfo(const std::map<std::string, std::string>& env, int generation) {
  GenerationInfo info;
  info.generation = generation;
  if (auto it = env.find(env::kRestartReason); it != env.end()) info.reason = it->second;
  if (auto it = env.find(env::kFaultTime); it != env.end() && !it->second.empty()) {
    int64_t ms = 0;
    const std::string& text = it->second;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    if (ec != std::errc() || end != text.data() + text.size() || ms < 0) {
      return InvalidArgumentError(std::string(env::kFaultTime) + "='" + text +
                                  "' is not a Unix time in milliseconds (a non-negative integer)");
    }
    info.fault_time_ms = ms;
  }
  return info;
}

std::string GenerationRecordJson(const GenerationInfo& info, int world_size, int64_t resumed_step, int64_t now_ms) {
  std::string json = "{\"event\":\"generation\",\"generation\":" + std::to_string(info.generation) +
                     ",\"world_size\":" + std::to_string(world_size) +
                     ",\"reason\":" + JsonString(info.reason.empty() ? "start" : info.reason) +
                     ",\"resumed_step\":" + std::to_string(resumed_step);
  if (info.generation > 0 && info.fault_time_ms) {
    json += ",\"seconds_lost\":" + JsonNumber(static_cast<double>(now_ms - *info.fault_time_ms) / 1e3);
  }
  if (info.started_ms && info.rendezvous_ms) {
    json += ",\"started_ms\":" + std::to_string(*info.started_ms) + ",\"rendezvous_ms\":" +
            std::to_string(*info.rendezvous_ms) + ",\"first_step_ms\":" + std::to_string(now_ms);
  }
  return json + "}";
}


}  // namespace dslaunch::runtime
