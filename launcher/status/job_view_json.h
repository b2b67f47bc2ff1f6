// JobView as JSON, the body of GET /api/job and of each server-sent event of GET /api/events
// (docs/observability.md, "Endpoints"), and back again for `dslaunch status`. Pure.
//
// The object mirrors JobView's fields by name (snake_case); a figure never reported (an empty
// optional) is null, never 0; `uptime_ms` (now_ms - started_ms) is added for readers that only
// want the job's age. Series are arrays of [step, value] pairs, so that a long curve stays small.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "launcher/status/job_view.h"

namespace dslaunch::launcher {

// The view as one line of compact JSON (no newline, so that it fits one SSE `data:` line).
// Non-finite numbers (a NaN loss) are written as null: JSON has no NaN.
std::string JobViewJson(const JobView& view);

// Reads what JobViewJson wrote. kInvalidArgument naming the JSON path of the first field that is
// missing or of the wrong type ("ranks[1].state: expected a string"), or the parse error.
Result<JobView> ParseJobViewJson(std::string_view text);

}  // namespace dslaunch::launcher
