#include "runtime/train/progress_bar.h"

#include <doctest/doctest.h>

namespace dslaunch::runtime {
namespace {

TEST_CASE("The progress bar shows the share done, the step, the loss, the rate and the time left") {
  CHECK(FormatProgressBar(40, 100, 2.93114, 9123, "tokens", 8.0) ==
        "[########------------]  40/100 | loss 2.9311 | 9.1k tokens/s | 12s left");
  CHECK(FormatProgressBar(1, 200, 5.5, 950, "tokens", 0.5) ==
        "[--------------------]   1/200 | loss 5.5000 | 950 tokens/s | 1m40s left");
  CHECK(FormatProgressBar(7, 7, 0.1, 2.5e6, "samples", 3.0) ==
        "[####################] 7/7 | loss 0.1000 | 2.5M samples/s | done");
  CHECK(FormatProgressBar(1, 10000, 1.0, 1, "tokens", 2.0) ==
        "[--------------------]     1/10000 | loss 1.0000 | 1 tokens/s | 5h33m left");
}

}  // namespace
}  // namespace dslaunch::runtime
