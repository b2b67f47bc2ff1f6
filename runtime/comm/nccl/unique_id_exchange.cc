#include "runtime/comm/nccl/unique_id_exchange.h"

#include <algorithm>

#include "common/text.h"

namespace dslaunch::runtime {
namespace {

constexpr std::string_view kOkTag = "ok:";
constexpr std::string_view kErrorTag = "error:";

}  // namespace

std::string NcclUniqueIdKey(int context_id) { return "nccl/ctx" + std::to_string(context_id) + "/unique_id"; }

std::string EncodeUniqueIdRecord(const NcclUniqueIdBytes& id) {
  std::string record(kOkTag);
  record.append(id.data(), id.size());
  return record;
}

std::string EncodeUniqueIdFailure(std::string_view why) {
  std::string record(kErrorTag);
  record.append(why.substr(0, kMaxUniqueIdFailureBytes));
  return record;
}

Result<NcclUniqueIdBytes> DecodeUniqueIdRecord(std::string_view record, std::string_view key) {
  if (record.starts_with(kErrorTag)) {
    return UnavailableError("rank 0 could not make the NCCL unique id: " +
                            std::string(record.substr(kErrorTag.size())));
  }
  if (!record.starts_with(kOkTag) || record.size() != kOkTag.size() + kNcclUniqueIdBytes) {
    return DataLossError("'" + std::string(key) + "' holds " + std::to_string(record.size()) +
                         " bytes that are not an NCCL unique id record (\"ok:\" and " +
                         std::to_string(kNcclUniqueIdBytes) + " bytes, or \"error:\" and a reason)");
  }
  NcclUniqueIdBytes id;
  std::copy(record.begin() + kOkTag.size(), record.end(), id.begin());
  return id;
}

Result<NcclUniqueIdBytes> ExchangeUniqueId(StoreClient& store, int rank,
                                           const std::function<Result<NcclUniqueIdBytes>()>& make_id,
                                           const UniqueIdExchangeOptions& options) {
  const std::string key = NcclUniqueIdKey(options.context_id);
  const std::string where = "rank " + std::to_string(rank) + ": NCCL unique id '" + store.key_prefix() + key +
                            "' (store " + store.address() + ")";
  if (rank < 0) return InvalidArgumentError(where + ": negative rank");
  if (rank == 0) {
    Result<NcclUniqueIdBytes> id = make_id();
    const std::string record = id.ok() ? EncodeUniqueIdRecord(*id) : EncodeUniqueIdFailure(id.status().message());
    Status published = store.Set(key, record);
    if (!id.ok()) return UnavailableError(where + ": making it: " + id.status().message());
    if (!published.ok()) return UnavailableError(where + ": publishing it: " + published.message());
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  for (;;) {
    if (options.stop != nullptr && options.stop->load()) return AbortedError(where + ": stopped while waiting for it");
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return UnavailableError(where + ": not published within " + FormatSeconds(options.timeout) +
                              " (is rank 0 running? its log says why it did not get this far)");
    }
    // Rounded up: a GET of 0 ms would not wait at all.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    const auto slice = options.stop != nullptr ? std::min(left, kUniqueIdStopPoll) : left;
    Result<std::string> record = store.Get(key, slice);
    if (record.ok()) {
      Result<NcclUniqueIdBytes> id = DecodeUniqueIdRecord(*record, store.key_prefix() + key);
      if (!id.ok()) return id.status().WithContext(where);
      return id;
    }
    if (record.status().code() != StatusCode::kDeadlineExceeded) {
      return UnavailableError(where + ": " + record.status().message());
    }
  }
}

}  // namespace dslaunch::runtime
