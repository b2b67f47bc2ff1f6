// Store requests and responses on the wire: pure encoding shared by StoreClient and StoreService.
// Layouts (field types from common/wire.h) are specified in docs/protocol.md, "Store operations":
//
//   SET          {string key, string value}                    -> OK {}
//   GET          {string key, u64 timeout_ms}                  -> OK {string value}
//   ADD          {string key, i64 delta}                       -> OK {i64 new_value}
//   COMPARE_SET  {string key, string expected, string desired} -> OK {string current}
//   WAIT         {string_list keys, u64 timeout_ms}            -> OK {}
//   CHECK        {string_list keys}                            -> OK {bool all_exist}
//   DELETE       {string key}                                  -> OK {bool existed}
//   NUM_KEYS     {string prefix}                               -> OK {i64 count}
//   any failure                                -> ERROR {u8 status_code, string message}
//
// Every request gets exactly one response, in request order. Thread-safe (no state).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/wire.h"

namespace dslaunch {

// Longest server-side wait a GET or WAIT may ask for; longer requests are clamped. No rendezvous
// legitimately waits a week, and the bound keeps `now + timeout` far from overflow.
inline constexpr std::chrono::milliseconds kMaxStoreWaitTimeout = std::chrono::hours(24 * 7);

struct StoreRequest {
  uint8_t type = 0;                      // msg::kStoreSet ... msg::kStoreNumKeys
  std::string key;                       // every op with one key; NUM_KEYS: the prefix
  std::string value;                     // SET: the value; COMPARE_SET: the expected value
  std::string desired;                   // COMPARE_SET
  int64_t delta = 0;                     // ADD
  std::vector<std::string> keys;         // WAIT, CHECK
  std::chrono::milliseconds timeout{0};  // GET, WAIT (0: answer at once)
};

// The frame payload of a request (its type byte is request.type).
std::string EncodeStoreRequest(const StoreRequest& request);

// Decodes a request frame. kInvalidArgument for an unknown type, a truncated payload or
// trailing bytes; the timeout is clamped to kMaxStoreWaitTimeout.
Result<StoreRequest> DecodeStoreRequest(const wire::Frame& frame);

// "set", "get", ... for messages; "message-<n>" for anything else.
std::string StoreOpName(uint8_t type);

// "gen/<generation>/": the prefix of every key of that generation (docs/protocol.md,
// "Generations and fencing").
std::string GenerationKeyPrefix(int generation);

// OK when every key `r` names (each key of WAIT and CHECK, the NUM_KEYS prefix) starts with
// GenerationKeyPrefix(generation); otherwise kInvalidArgument naming the first other one, e.g.
// "get key 'gen/1/x' is outside generation 2 of this connection (its keys start with 'gen/2/')".
// The one rule of the launcher's StoreService and of an agent's store proxy.
Status CheckGenerationKeys(const StoreRequest& r, int generation);

// The ERROR payload for a non-OK status, and back. An unknown code decodes as kInternal.
std::string EncodeStoreError(const Status& status);
Status DecodeStoreError(std::string_view payload);

}  // namespace dslaunch
