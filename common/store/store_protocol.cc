#include "common/store/store_protocol.h"

#include <algorithm>

#include "common/message_types.h"

namespace dslaunch {
namespace {

uint64_t TimeoutMs(std::chrono::milliseconds t) {
  return static_cast<uint64_t>(std::max<int64_t>(0, t.count()));
}

std::chrono::milliseconds ClampTimeout(uint64_t ms) {
  auto max = static_cast<uint64_t>(kMaxStoreWaitTimeout.count());
  return std::chrono::milliseconds(static_cast<int64_t>(std::min(ms, max)));
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// Every key a request names (NUM_KEYS: its prefix).
std::vector<std::string_view> NamedKeys(const StoreRequest& r) {
  if (r.type == msg::kStoreWait || r.type == msg::kStoreCheck) {
    return std::vector<std::string_view>(r.keys.begin(), r.keys.end());
  }
  return {r.key};
}

}  // namespace

std::string GenerationKeyPrefix(int generation) { return "gen/" + std::to_string(generation) + "/"; }

Status CheckGenerationKeys(const StoreRequest& r, int generation) {
  const std::string prefix = GenerationKeyPrefix(generation);
  for (std::string_view key : NamedKeys(r)) {
    if (StartsWith(key, prefix)) continue;
    return InvalidArgumentError(StoreOpName(r.type) +
                                (r.type == msg::kStoreNumKeys ? " prefix '" : " key '") +
                                std::string(key) + "' is outside generation " +
                                std::to_string(generation) +
                                " of this connection (its keys start with '" + prefix + "')");
  }
  return Status::Ok();
}

std::string StoreOpName(uint8_t type) {
  switch (type) {
    case msg::kStoreSet: return "set";
    case msg::kStoreGet: return "get";
    case msg::kStoreAdd: return "add";
    case msg::kStoreCompareSet: return "compare_set";
    case msg::kStoreWait: return "wait";
    case msg::kStoreCheck: return "check";
    case msg::kStoreDelete: return "delete";
    case msg::kStoreNumKeys: return "num_keys";
  }
  return "message-" + std::to_string(type);
}

std::string EncodeStoreRequest(const StoreRequest& r) {
  wire::ByteWriter w;
  switch (r.type) {
    case msg::kStoreSet: w.String(r.key).String(r.value); break;
    case msg::kStoreGet: w.String(r.key).U64(TimeoutMs(r.timeout)); break;
    case msg::kStoreAdd: w.String(r.key).I64(r.delta); break;
    case msg::kStoreCompareSet: w.String(r.key).String(r.value).String(r.desired); break;
    case msg::kStoreWait: w.StringList(r.keys).U64(TimeoutMs(r.timeout)); break;
    case msg::kStoreCheck: w.StringList(r.keys); break;
    case msg::kStoreDelete: w.String(r.key); break;
    case msg::kStoreNumKeys: w.String(r.key); break;
    default: DSLAUNCH_CHECK(false) << "not a store request type: " << int{r.type};
  }
  return w.Take();
}

Result<StoreRequest> DecodeStoreRequest(const wire::Frame& frame) {
  StoreRequest r;
  r.type = frame.type;
  wire::ByteReader in(frame.payload);
  uint64_t timeout_ms = 0;
  switch (frame.type) {
    case msg::kStoreSet:
      in.String(r.key);
      in.String(r.value);
      break;
    case msg::kStoreGet:
      in.String(r.key);
      in.U64(timeout_ms);
      break;
    case msg::kStoreAdd:
      in.String(r.key);
      in.I64(r.delta);
      break;
    case msg::kStoreCompareSet:
      in.String(r.key);
      in.String(r.value);
      in.String(r.desired);
      break;
    case msg::kStoreWait:
      in.StringList(r.keys);
      in.U64(timeout_ms);
      break;
    case msg::kStoreCheck: in.StringList(r.keys); break;
    case msg::kStoreDelete:
    case msg::kStoreNumKeys: in.String(r.key); break;
    default:
      return InvalidArgumentError("message type " + std::to_string(frame.type) +
                                  " is not a store request");
  }
  if (!in.Finished())
    return InvalidArgumentError("malformed " + StoreOpName(frame.type) + " request");
  r.timeout = ClampTimeout(timeout_ms);
  return r;
}

std::string EncodeStoreError(const Status& status) {
  return wire::ByteWriter().U8(static_cast<uint8_t>(status.code())).String(status.message()).Take();
}

Status DecodeStoreError(std::string_view payload) {
  wire::ByteReader in(payload);
  uint8_t code = 0;
  std::string message;
  in.U8(code);
  in.String(message);
  if (!in.Finished()) return InternalError("malformed store ERROR response");
  if (code == 0 || code > static_cast<uint8_t>(StatusCode::kInternal)) {
    return InternalError("store error with unknown code " + std::to_string(code) + ": " + message);
  }
  return Status(static_cast<StatusCode>(code), std::move(message));
}

}  // namespace dslaunch
