#include "runtime/comm/agreement.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>
#include <string>

namespace dslaunch::runtime {

Result<int> FirstFailedRank(Communicator& comm, bool failed, std::string_view what) {
  // world - rank, so that the maximum names the lowest failed rank; exact in fp32 below 2^24 ranks.
  float flag = failed ? static_cast<float>(comm.world_size() - comm.rank()) : 0.0f;
  DSLAUNCH_RETURN_IF_ERROR(comm.AllReduce(std::span<float>(&flag, 1), ReduceOp::kMax).WithContext(what));
  return flag > 0 ? comm.world_size() - static_cast<int>(flag) : -1;
}

Status AgreeOnFailure(Communicator& comm, const Status& mine, std::string_view what) {
  DSLAUNCH_ASSIGN_OR_RETURN(const int failed, FirstFailedRank(comm, !mine.ok(), what));
  if (failed < 0) return Status::Ok();
  if (!mine.ok()) return mine;
  return AbortedError("rank " + std::to_string(failed) + " could not " + std::string(what) + " (see its error)");
}

Status AgreeOnFailureWithReason(Communicator& comm, const Status& mine, std::string_view what) {
  DSLAUNCH_ASSIGN_OR_RETURN(const int failed, FirstFailedRank(comm, !mine.ok(), what));
  if (failed < 0) return Status::Ok();
  // The failed rank's code, the message's length (2 bytes, little-endian), then the message.
  constexpr size_t kHeader = 3;
  std::vector<uint8_t> wire(kHeader + kMaxAgreedReasonBytes, 0);
  if (comm.rank() == failed) {
    std::string message = mine.message();
    if (message.size() > kMaxAgreedReasonBytes) message = message.substr(0, kMaxAgreedReasonBytes - 3) + "...";
    wire[0] = static_cast<uint8_t>(mine.code());
    wire[1] = static_cast<uint8_t>(message.size() & 0xff);
    wire[2] = static_cast<uint8_t>(message.size() >> 8);
    std::memcpy(wire.data() + kHeader, message.data(), message.size());
  }
  static_assert(kMaxAgreedReasonBytes < (1u << 16), "the length travels in 2 bytes");
  DSLAUNCH_RETURN_IF_ERROR(comm.Broadcast(std::span<uint8_t>(wire), failed).WithContext(what));
  if (comm.rank() == failed) return mine;
  // A rank that failed the same way keeps its own words; the code is the same on every rank, so
  // that callers deciding on it decide alike.
  if (!mine.ok() && mine.code() == static_cast<StatusCode>(wire[0])) return mine;
  const size_t length = std::min<size_t>(wire[1] | (static_cast<size_t>(wire[2]) << 8), kMaxAgreedReasonBytes);
  const std::string reason(reinterpret_cast<const char*>(wire.data() + kHeader), length);
  return Status(static_cast<StatusCode>(wire[0]),
                "rank " + std::to_string(failed) + " could not " + std::string(what) + ": " + reason);
}

}  // namespace dslaunch::runtime
