// The frames of an agent's store proxy, carried on the agent's control connection next to the
// control messages: pure encoding shared by the agent (agent/store_proxy/) and the launcher's
// StoreService. Specified in docs/protocol.md,
// "Store proxy":
//
//   PROXIED        {u64 tag, u8 op, then the payload of request `op` (SET .. NUM_KEYS)}
//   PROXIED_REPLY  {u64 tag, u8 type (STORE_OK or STORE_ERROR), then that response's payload}
//
// The proxy picks the tags (unique among its outstanding requests); the server answers each
// PROXIED with exactly one PROXIED_REPLY carrying its tag, in any order (a parked GET or WAIT is
// answered when its keys exist or its deadline passes, while later requests go ahead).
// Thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/store/store_protocol.h"

namespace dslaunch {

struct ProxiedRequest {
  uint64_t tag = 0;
  StoreRequest request;
};

struct ProxiedReply {
  uint64_t tag = 0;
  uint8_t type = 0;     // msg::kStoreOk or msg::kStoreError
  std::string payload;  // the STORE_OK or STORE_ERROR payload
};

// The PROXIED payload carrying `request` under `tag`.
std::string EncodeProxiedRequest(uint64_t tag, const StoreRequest& request);

// Decodes a PROXIED payload. kInvalidArgument if it is shorter than its header, if `op` is not a
// store request type (a PROXIED inside a PROXIED included), or if the inner request is malformed
// (see DecodeStoreRequest; its timeout is clamped the same way).
Result<ProxiedRequest> DecodeProxiedRequest(std::string_view payload);

// The PROXIED_REPLY payload. Precondition (checked): type is msg::kStoreOk or msg::kStoreError.
std::string EncodeProxiedReply(uint64_t tag, uint8_t type, std::string_view payload);

// Decodes a PROXIED_REPLY payload. kInvalidArgument if it is shorter than its header or its type
// is neither STORE_OK nor STORE_ERROR; the inner payload is returned as is (the caller reads it
// as the reply to the request it sent under that tag).
Result<ProxiedReply> DecodeProxiedReply(std::string_view payload);

}  // namespace dslaunch
