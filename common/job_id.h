// Job ids: the name a job goes by on every node. A job id is a directory name (the job's log
// directory, the agent's secret directory) and the namespace of the job's store and messages, so
// it is checked once, where it enters (the launcher's --job_id, the agent's assignment), against a
// charset that is safe in a path component, a shell word and a log line. Pure.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/status.h"

namespace dslaunch {

// The longest job id: a path component may hold 255 bytes, and the agent's secret directory adds
// "dslaunch-" and "-nNODE-PID" around the id.
inline constexpr std::size_t kMaxJobIdLength = 128;

// Ok when `id` is 1..kMaxJobIdLength characters from A-Z a-z 0-9 '.' '_' '-' and starts with a
// letter or digit (so "", ".", "..", "-x", ".hidden" and anything with '/' are refused). Otherwise
// kInvalidArgument saying what is wrong, e.g. "job id '../x': '/' is not allowed (...)"; the
// caller adds where the id came from.
Status ValidateJobId(std::string_view id);

}  // namespace dslaunch
