#include "common/store/proxy_protocol.h"

#include "common/check.h"
#include "common/message_types.h"
#include "common/wire.h"

namespace dslaunch {
namespace {

// u64 tag + u8 type: what precedes the inner payload in both frames.
constexpr size_t kHeaderBytes = 9;

}  // namespace

std::string EncodeProxiedRequest(uint64_t tag, const StoreRequest& request) {
  std::string out = wire::ByteWriter().U64(tag).U8(request.type).Take();
  out += EncodeStoreRequest(request);
  return out;
}

Result<ProxiedRequest> DecodeProxiedRequest(std::string_view payload) {
  if (payload.size() < kHeaderBytes) {
    return InvalidArgumentError("malformed proxied request: " + std::to_string(payload.size()) +
                                " bytes, shorter than its tag and op");
  }
  wire::ByteReader in(payload.substr(0, kHeaderBytes));
  ProxiedRequest out;
  uint8_t op = 0;
  in.U64(out.tag);
  in.U8(op);
  DSLAUNCH_ASSIGN_OR_RETURN(
      out.request,
      DecodeStoreRequest(wire::Frame{op, std::string(payload.substr(kHeaderBytes))}));
  return out;
}

std::string EncodeProxiedReply(uint64_t tag, uint8_t type, std::string_view payload) {
  DSLAUNCH_CHECK(type == msg::kStoreOk || type == msg::kStoreError)
      << "not a store response type: " << int{type};
  std::string out = wire::ByteWriter().U64(tag).U8(type).Take();
  out += payload;
  return out;
}

Result<ProxiedReply> DecodeProxiedReply(std::string_view payload) {
  if (payload.size() < kHeaderBytes) {
    return InvalidArgumentError("malformed proxied reply: " + std::to_string(payload.size()) +
                                " bytes, shorter than its tag and type");
  }
  wire::ByteReader in(payload.substr(0, kHeaderBytes));
  ProxiedReply out;
  in.U64(out.tag);
  in.U8(out.type);
  if (out.type != msg::kStoreOk && out.type != msg::kStoreError) {
    return InvalidArgumentError("proxied reply of type " + std::to_string(out.type) +
                                " (expected STORE_OK or STORE_ERROR)");
  }
  out.payload = std::string(payload.substr(kHeaderBytes));
  return out;
}

}  // namespace dslaunch
