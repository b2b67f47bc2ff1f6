// The NCCL unique id's trip through dslaunch's store (docs/communicator.md, "NCCL bootstrap through
// the store"). Built with or without NCCL: the protocol is plain bytes, so the CPU build tests it.
//
// Rank 0 makes the id (ncclGetUniqueId, which needs no GPU) and SETs one record under
// "nccl/ctx<context_id>/unique_id"; the StoreClient puts "gen/<generation>/" in front and the
// connection is bound to the job, so a restarted generation never reads an id of an earlier one,
// and a second communicator of the same generation takes another context id. Every other rank
// GETs the record with a deadline. A record is
//   "ok:" followed by the id's kNcclUniqueIdBytes bytes, or
//   "error:" followed by why rank 0 could not make an id,
// so that a rank 0 that fails makes every rank fail at once with rank 0's reason, instead of
// leaving them waiting for the deadline.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/store/store_client.h"

namespace dslaunch::runtime {

// NCCL_UNIQUE_ID_BYTES of nccl.h (2.x); the NCCL communicator checks it with a static_assert.
inline constexpr size_t kNcclUniqueIdBytes = 128;
using NcclUniqueIdBytes = std::array<char, kNcclUniqueIdBytes>;

// Forming an NCCL communicator waits for the slowest rank to start and for NCCL's own bootstrap
// (a TCP ring through rank 0); the same bound as Gloo's mesh.
inline constexpr std::chrono::milliseconds kDefaultNcclInitTimeout{60000};
// A rank blocked on the id looks at its stop flag this often (a store GET cannot be interrupted,
// so the wait is sliced): a stop decided by the agent ends the wait within this.
inline constexpr std::chrono::milliseconds kUniqueIdStopPoll{200};

// "nccl/ctx<context_id>/unique_id": the key, without the generation prefix the client adds.
std::string NcclUniqueIdKey(int context_id);

// The record for an id, and the record that says rank 0 failed (`why` is kept to
// kMaxUniqueIdFailureBytes).
inline constexpr size_t kMaxUniqueIdFailureBytes = 1024;
std::string EncodeUniqueIdRecord(const NcclUniqueIdBytes& id);
std::string EncodeUniqueIdFailure(std::string_view why);

// The id in `record` read from `key` (for messages). kUnavailable with rank 0's reason for a
// failure record; kDataLoss naming the key and the length for anything else that is not a record.
Result<NcclUniqueIdBytes> DecodeUniqueIdRecord(std::string_view record, std::string_view key);

struct UniqueIdExchangeOptions {
  int context_id = 0;
  std::chrono::milliseconds timeout = kDefaultNcclInitTimeout;
  // When set and true, the wait ends with kAborted (the agent stopped the job).
  const std::atomic<bool>* stop = nullptr;
};

// Rank 0 calls `make_id` and publishes what it returns (or its failure), then returns it. Other
// ranks wait up to options.timeout for the record. Errors name the rank, the store address and the
// key (with the generation prefix): kInvalidArgument for a rank < 0; kUnavailable when rank 0
// failed to make the id, or the id did not appear in time ("is rank 0 running?"), or the store
// failed; kAborted when `stop` was set; kDataLoss for a malformed record.
Result<NcclUniqueIdBytes> ExchangeUniqueId(StoreClient& store, int rank,
                                           const std::function<Result<NcclUniqueIdBytes>()>& make_id,
                                           const UniqueIdExchangeOptions& options);

}  // namespace dslaunch::runtime
