#include "runtime/comm/nccl/poll.h"

#include <thread>

namespace dslaunch::runtime {

void SteadyPollClock::sleep_for(std::chrono::microseconds d) const { std::this_thread::sleep_for(d); }

}  // namespace dslaunch::runtime
