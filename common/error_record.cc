#include "common/error_record.h"

#include <nlohmann/json.hpp>

#include "common/file_io.h"

namespace dslaunch {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;

}  // namespace

std::string FormatErrorRecord(const ErrorRecord& record) {
  nlohmann::json j;
  j["message"]["message"] = record.message;
  j["message"]["extraInfo"]["py_callstack"] = "";
  j["message"]["extraInfo"]["timestamp"] = std::to_string(record.time_ns / kNanosPerSecond);
  j["dslaunch"]["time_ns"] = record.time_ns;
  j["dslaunch"]["caused_by_peer"] = record.caused_by_peer;
  // Invalid UTF-8 in a message (bytes from a system error text) is replaced, not thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Result<ErrorRecord> ParseErrorRecord(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("error record is not JSON");
  const auto* message = j.is_object() && j.contains("message") ? &j["message"] : nullptr;
  if (message == nullptr) return InvalidArgumentError("error record has no 'message'");
  ErrorRecord r;
  // PyTorch writes {"message": {"message": ..., "extraInfo": ...}}; a bare string is accepted too.
  if (message->is_string()) {
    r.message = message->get<std::string>();
  } else if (message->is_object() && message->contains("message") && (*message)["message"].is_string()) {
    r.message = (*message)["message"].get<std::string>();
    const auto& extra = message->value("extraInfo", nlohmann::json::object());
    if (extra.is_object() && extra.contains("timestamp")) {
      const auto& ts = extra["timestamp"];
      if (ts.is_string()) {
        try {
          r.time_ns = std::stoll(ts.get<std::string>()) * kNanosPerSecond;
        } catch (const std::exception&) {
          // an unreadable timestamp is no timestamp
        }
      } else if (ts.is_number_integer()) {
        r.time_ns = ts.get<int64_t>() * kNanosPerSecond;
      }
    }
  } else {
    return InvalidArgumentError("error record: 'message.message' is not a string");
  }
  if (j.contains("dslaunch") && j["dslaunch"].is_object()) {
    const auto& d = j["dslaunch"];
    if (d.contains("time_ns") && d["time_ns"].is_number_integer()) r.time_ns = d["time_ns"].get<int64_t>();
    if (d.contains("caused_by_peer") && d["caused_by_peer"].is_boolean()) {
      r.caused_by_peer = d["caused_by_peer"].get<bool>();
    }
  }
  return r;
}

Status WriteErrorRecord(const std::string& path, const ErrorRecord& record) {
  if (path.empty()) return Status::Ok();
  return WriteFileAtomically(path, FormatErrorRecord(record));
}

}  // namespace dslaunch
