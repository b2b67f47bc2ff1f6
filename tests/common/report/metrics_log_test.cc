#include "common/report/metrics_log.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

namespace dslaunch::report {
namespace {

constexpr char kStart[] =
    R"({"event":"start","model":"gpt","parameters":1000,"flops_per_token":6000,"world_size":2,"zero_stage":1,"precision":"fp32","bytes_per_rank":{}})";

std::string Step(int step, const std::string& loss, const std::string& extra = "") {
  return R"({"event":"step","step":)" + std::to_string(step) + R"(,"loss":)" + loss +
         R"(,"lr":0.001,"loss_scale":1,"grad_norm":1.5,"skipped":false,"tokens_per_s":1000,"ms_per_step":12.5)" +
         extra + "}\n";
}

TEST_CASE("ParseMetricsLog reads a finished run: its start, steps, validations and end") {
  const std::string text = std::string(kStart) + "\n" + Step(1, "5.5", R"(,"rank_step_ms":[12.5,13.25])") +
                           R"({"event":"generation","generation":0,"world_size":2,"reason":"start","resumed_step":0})"
                           "\n" +
                           Step(2, "5.25") + R"({"event":"validation","step":2,"val_loss":5.125})" "\n" +
                           R"({"event":"checkpoint","step":2,"bytes":10,"seconds":0.1,"stall_seconds":0})" "\n" +
                           R"({"event":"end","steps":2,"applied_steps":2})" "\n";
  const MetricsLog log = ParseMetricsLog(text);
  CHECK(log.malformed == 0);
  REQUIRE(log.segments.size() == 1);
  const RunSegment& s = log.segments[0];
  CHECK(s.model == "gpt");
  CHECK(s.world_size == 2);
  CHECK(s.generation == 0);
  CHECK(s.reason == "start");
  CHECK(s.first_step == 1);
  CHECK(s.last_step == 2);
  CHECK(s.last_loss == 5.25);
  CHECK(s.checkpoints == 1);
  CHECK(s.ended);
  CHECK(s.sgemm_kernel.empty());  // a runtime from before the kernel choice
  CHECK(std::isnan(s.sgemm_gflops));
  REQUIRE(log.steps.size() == 2);
  CHECK(log.steps[0].rank_step_ms == std::vector<double>{12.5, 13.25});
  CHECK(log.steps[1].rank_step_ms.empty());  // a runtime without the field
  REQUIRE(log.validations.size() == 1);
  CHECK(log.validations[0].val_loss == 5.125);
}

TEST_CASE("ParseMetricsLog splits the runs of a restarted job at each start record") {
  const std::string text = std::string(kStart) + "\n" + Step(1, "5") + Step(2, "4.5") + kStart + "\n" +
                           R"({"event":"resume","step":1,"saved_world_size":2,"saved_zero_stage":1,"load_seconds":0.5})"
                           "\n" +
                           Step(2, "4.6") +
                           R"({"event":"generation","generation":1,"world_size":2,"reason":"rank 1 exited","resumed_step":1,"seconds_lost":1.5})"
                           "\n";
  const MetricsLog log = ParseMetricsLog(text);
  REQUIRE(log.segments.size() == 2);
  CHECK_FALSE(log.segments[0].ended);
  CHECK(log.segments[1].resumed_step == 1);
  CHECK(log.segments[1].generation == 1);
  CHECK(log.segments[1].reason == "rank 1 exited");
  CHECK(log.segments[1].seconds_lost == 1.5);
  REQUIRE(log.steps.size() == 3);
  CHECK(log.steps[2].segment == 1);
}

TEST_CASE("ParseMetricsLog reads the node's OpenBLAS kernels from the start record") {
  const MetricsLog log = ParseMetricsLog(
      R"({"event":"start","model":"gpt","sgemm_kernel":"SkylakeX","sgemm_gflops":131.1,"sgemm_default_kernel":"Prescott",)"
      R"("sgemm_default_gflops":27.3})" "\n" R"({"event":"start","model":"gpt","sgemm_kernel":7,"sgemm_gflops":"fast"})");
  REQUIRE(log.segments.size() == 2);
  CHECK(log.segments[0].sgemm_kernel == "SkylakeX");
  CHECK(log.segments[0].sgemm_gflops == 131.1);
  CHECK(log.segments[1].sgemm_kernel.empty());  // wrong types are as absent
  CHECK(std::isnan(log.segments[1].sgemm_gflops));
}

TEST_CASE("ParseMetricsLog skips malformed lines and names the first") {
  struct Case {
    const char* line;
    const char* reason;
  };
  for (const Case& c : {Case{R"({"event":"step","step":3,"lo)", "not JSON"}, Case{"[1,2]", "not a JSON object"},
                        Case{R"({"step":3})", "no string \"event\""},
                        Case{R"({"event":"step","step":"3"})", "step record without an integer \"step\""},
                        Case{R"({"event":"validation","val_loss":1})", "validation record without an integer \"step\""}}) {
    CAPTURE(c.line);
    const MetricsLog log = ParseMetricsLog(std::string(kStart) + "\n" + Step(1, "5") + "\n" + c.line + "\n" + Step(2, "4"));
    CHECK(log.malformed == 1);
    REQUIRE(log.first_malformed);
    CHECK(log.first_malformed->line == 4);  // the blank line 3 counts as a line, not as malformed
    CHECK(log.first_malformed->reason == c.reason);
    CHECK(log.steps.size() == 2);
  }
}

TEST_CASE("ParseMetricsLog keeps non-finite losses as NaN and counts them and skipped steps") {
  const MetricsLog log = ParseMetricsLog(std::string(kStart) + "\n" + Step(1, "null") +
                                         R"({"event":"step","step":2,"loss":3,"skipped":true})" "\n");
  REQUIRE(log.steps.size() == 2);
  CHECK(std::isnan(log.steps[0].loss));
  CHECK(log.segments[0].nonfinite_losses == 1);
  CHECK(log.segments[0].skipped_steps == 1);
  CHECK(log.steps[1].skipped);
}

TEST_CASE("ParseMetricsLog of an empty file or one cut at its head") {
  CHECK(ParseMetricsLog("").segments.empty());
  CHECK(ParseMetricsLog("\n\n").lines == 0);
  const MetricsLog headless = ParseMetricsLog(Step(7, "2"));
  REQUIRE(headless.segments.size() == 1);  // a segment of its own, without a start
  CHECK(headless.segments[0].model.empty());
  CHECK(headless.steps.size() == 1);
}

TEST_CASE("ParseMetricsLog ignores unknown events and fields and reads CRLF lines") {
  const MetricsLog log = ParseMetricsLog(std::string(kStart) + "\r\n" + R"({"event":"future","x":1})" "\r\n" +
                                         R"({"event":"step","step":1,"loss":2,"new_field":[1]})" "\r\n");
  CHECK(log.malformed == 0);
  CHECK(log.steps.size() == 1);
}

}  // namespace
}  // namespace dslaunch::report
