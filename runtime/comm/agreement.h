// Agreement on failure: a collective through which every rank learns whether any rank failed at
// a step that each rank does on its own (reading a checkpoint, creating a swap file), so that all
// ranks stop together instead of waiting for the failed one in the next collective.
#pragma once

#include <string_view>

#include "common/status.h"
#include "runtime/comm/communicator.h"

namespace dslaunch::runtime {

// Collective: the lowest rank whose `failed` is true, or -1 when none is. `what` names the step in
// a communication error.
Result<int> FirstFailedRank(Communicator& comm, bool failed, std::string_view what);

// Collective: Ok when every rank's `mine` is; this rank's own error when it failed; otherwise
// kAborted "rank R could not WHAT (see its error)", R the lowest rank that failed.
Status AgreeOnFailure(Communicator& comm, const Status& mine, std::string_view what);

// The longest error message AgreeOnFailureWithReason carries from one rank to the others; a
// longer one is cut and ends in "...". Room for two paths and two checksums.
inline constexpr size_t kMaxAgreedReasonBytes = 1024;

// Collective: like AgreeOnFailure, but every rank learns why, and every rank returns the same
// code: Ok when every rank's `mine` is; else the code of R, the lowest rank that failed, with this
// rank's own message when it failed with that code, otherwise "rank R could not WHAT: R's
// message". One all-reduce when every rank succeeded, and a broadcast of the reason when one
// failed.
Status AgreeOnFailureWithReason(Communicator& comm, const Status& mine, std::string_view what);

}  // namespace dslaunch::runtime
