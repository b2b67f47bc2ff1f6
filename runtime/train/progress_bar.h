// The training progress bar rank 0 draws when the launcher's console is a terminal
// (DSLAUNCH_PROGRESS=1): one line per step, ended by '\r' so that the console redraws it in place
// (common/control_messages.h, IsTransientLine). Pure formatting.
#pragma once

#include <cstdint>
#include <string>

namespace dslaunch::runtime {

// "[########------------]  40/100 | loss 2.9311 | 9.1k tokens/s | 12s left", `unit` naming what
// the throughput counts ("tokens", "samples"). `seconds` is the time since the first step
// started; the time left assumes the mean step time so far.
std::string FormatProgressBar(int64_t step, int64_t total, double loss, double per_second, const std::string& unit,
                              double seconds);

}  // namespace dslaunch::runtime
