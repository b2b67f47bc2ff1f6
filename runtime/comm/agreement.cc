#include "runtime/comm/agreement.h"

#include <span>
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

}  // namespace dslaunch::runtime
