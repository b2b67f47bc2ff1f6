#include "common/report/html_report.h"

#include "common/report/svg_chart.h"

#include <doctest/doctest.h>

#include <string>

namespace dslaunch::report {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The part of `html` from the element with `id` to the end of its chart figure.
std::string Chart(const std::string& html, const std::string& id) {
  const size_t begin = html.find("<svg id=\"" + id + "\"");
  REQUIRE(begin != std::string::npos);
  return html.substr(begin, html.find("</svg>", begin) - begin);
}

std::string Start(int world, const std::string& model = "gpt") {
  return R"({"event":"start","model":")" + model + R"(","parameters":1000,"world_size":)" + std::to_string(world) +
         R"(,"zero_stage":1,"precision":"fp32"})" "\n";
}

std::string Steps(int from, int to, int ranks) {
  std::string out;
  for (int s = from; s <= to; ++s) {
    // Rank r's step takes 10 + s % 3 ms, r of them inside collectives (waiting for the last rank).
    std::string per_rank, collective;
    for (int r = 0; r < ranks; ++r) {
      per_rank += (r ? "," : "") + std::to_string(10 + s % 3);
      collective += (r ? "," : "") + std::to_string(r);
    }
    out += R"({"event":"step","step":)" + std::to_string(s) + R"(,"loss":)" + std::to_string(5.0 - 0.01 * s) +
           R"(,"tokens_per_s":1000,"ms_per_step":12,"rank_step_ms":[)" + per_rank + R"(],"rank_collective_ms":[)" +
           collective + "]}\n";
  }
  return out;
}

const ReportPage kPage{"job-1", "/tmp/job-1/metrics.jsonl"};

TEST_CASE("RenderReport of a 2-rank run: charts with every point, a line per rank, one summary per generation") {
  const std::string text = Start(2) + Steps(1, 30, 2) +
                           R"({"event":"generation","generation":0,"world_size":2,"reason":"start","resumed_step":0})"
                           "\n" R"({"event":"validation","step":30,"val_loss":4.75})" "\n"
                           R"({"event":"end","steps":30})" "\n";
  const std::string html = RenderReport(ParseMetricsLog(text), kPage);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(Count(Chart(html, "loss-chart"), "<circle class=\"point\"") == 30);
  CHECK(Count(Chart(html, "val-loss-chart"), "<circle class=\"point\"") == 1);
  CHECK(Count(Chart(html, "throughput-chart"), "<circle class=\"point\"") == 30);
  const std::string ranks = Chart(html, "rank-step-chart");
  CHECK(Count(ranks, "class=\"series\"") == 2);
  CHECK(ranks.find("data-label=\"rank 1\" data-points=\"30\"") != std::string::npos);
  CHECK(Count(html, "<li class=\"generation\"") == 1);
  CHECK(html.find("generation 0 (start): 2 ranks, steps 1-30, last loss 4.7000, finished") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http") == std::string::npos);  // nothing fetched: no URL at all
  CHECK(html.find("validation loss 4.7500 (step 30)") != std::string::npos);
}

TEST_CASE("RenderReport draws each rank's time outside collectives: the rank the others wait for is highest") {
  const std::string html = RenderReport(ParseMetricsLog(Start(3) + Steps(1, 3, 3)), kPage);
  const std::string chart = Chart(html, "rank-compute-chart");
  CHECK(Count(chart, "class=\"series\"") == 3);
  // Step 1 takes 11 ms on every rank; rank r spent r of them in collectives.
  CHECK(chart.find("<title>rank 0: 1, 11</title>") != std::string::npos);
  CHECK(chart.find("<title>rank 2: 1, 9</title>") != std::string::npos);
  // A runtime without rank_collective_ms: the chart has no lines.
  const std::string old = RenderReport(
      ParseMetricsLog(Start(1) + R"({"event":"step","step":1,"loss":2,"rank_step_ms":[5]})"), kPage);
  CHECK(Chart(old, "rank-compute-chart").find("no data") != std::string::npos);
}

TEST_CASE("RenderReport of a run that failed at step 3 draws what there is and says it did not finish") {
  const std::string html = RenderReport(ParseMetricsLog(Start(2) + Steps(1, 3, 2)), kPage);
  CHECK(Count(Chart(html, "loss-chart"), "<circle class=\"point\"") == 3);
  CHECK(Chart(html, "val-loss-chart").find("no data") != std::string::npos);
  CHECK(html.find("ended early") != std::string::npos);
  CHECK(html.find("did not finish") != std::string::npos);
}

TEST_CASE("RenderReport of an empty file is a page that says there is nothing") {
  const std::string html = RenderReport(ParseMetricsLog(""), kPage);
  CHECK(html.find("No training records") != std::string::npos);
  CHECK(Count(html, "no data") == 8);
  CHECK(html.find("Wall time: not recorded") != std::string::npos);
  CHECK(html.find("id=\"run-config\"") == std::string::npos);
  CHECK(html.find("id=\"sample\"") == std::string::npos);
}

// A run as today's runtime records it: the start with its time, command and config; steps with
// the learning rate, the gradient norm and the loss scale; the sample; the exit.
std::string RecordedRun() {
  std::string text =
      R"({"event":"start","model":"gpt","parameters":1000,"world_size":2,"zero_stage":1,"precision":"fp16",)"
      R"("started_ms":1764065700000,"command":["dslaunch-worker","train","my config.json"],)"
      R"("sgemm_kernel":"SkylakeX<i>","sgemm_gflops":131.14,"sgemm_default_kernel":"Prescott","sgemm_default_gflops":27.3,)"
      R"("config":{"train_batch_size":8,"optimizer":{"type":"AdamW","params":{"lr":0.003}},"note":"<b>&"}})" "\n";
  for (int s = 1; s <= 4; ++s) {
    text += R"({"event":"step","step":)" + std::to_string(s) + R"(,"loss":2.5,"lr":)" + std::to_string(0.001 * s) +
            R"(,"loss_scale":)" + (s < 3 ? "65536" : "32768") + R"(,"grad_norm":)" + (s == 2 ? "null" : "0.5") +
            R"(,"skipped":)" + (s == 2 ? "true" : "false") + R"(,"tokens_per_s":1000,"ms_per_step":12})" "\n";
  }
  text += R"({"event":"sample","text":"ab\\x1bc <i>\n\u0007"})" "\n";
  text += R"({"event":"end","steps":4})" "\n";
  text += R"({"event":"exit","ended_ms":1764065763250})" "\n";
  return text;
}

TEST_CASE("RenderReport draws the learning rate, gradient norm and loss scale of every step, as the loss") {
  const std::string html = RenderReport(ParseMetricsLog(RecordedRun()), kPage);
  const std::string lr = Chart(html, "lr-chart");
  CHECK(Count(lr, "<circle class=\"point\"") == 4);
  CHECK(lr.find("<title>learning rate: 3, 0.003</title>") != std::string::npos);
  const std::string norm = Chart(html, "grad-norm-chart");
  CHECK(Count(norm, "<circle class=\"point\"") == 3);  // the overflowed step's null is a gap
  CHECK(norm.find("data-points=\"3\" data-total=\"4\"") != std::string::npos);
  const std::string scale = Chart(html, "loss-scale-chart");
  CHECK(Count(scale, "<circle class=\"point\"") == 4);
  CHECK(scale.find("<title>loss scale: 3, " + TickLabel(32768) + "</title>") != std::string::npos);
  CHECK(scale.find("<title>loss scale: 2, " + TickLabel(65536) + "</title>") != std::string::npos);
  // A runtime from before these figures: charts without lines.
  const std::string old = RenderReport(ParseMetricsLog(Start(2) + Steps(1, 3, 2)), kPage);
  for (const char* id : {"lr-chart", "grad-norm-chart", "loss-scale-chart"}) {
    CAPTURE(id);
    CHECK(Chart(old, id).find("no data") != std::string::npos);
  }
}

TEST_CASE("RenderReport shows the command line, the config, the wall time, the kernels and the sample, escaped") {
  const std::string html = RenderReport(ParseMetricsLog(RecordedRun()), kPage);
  CHECK(html.find(", fp16, OpenBLAS SkylakeX&lt;i&gt; kernels (131.1 GFLOP/s); 1 generation;") != std::string::npos);
  // A runtime from before the kernel choice: no kernels named.
  CHECK(RenderReport(ParseMetricsLog(Start(2) + Steps(1, 3, 2)), kPage).find("kernels (") == std::string::npos);
  CHECK(html.find("<p id=\"wall-time\">Wall time: 1m 3.2 s, from the first run&#39;s start to the last exit "
                  "recorded.</p>") != std::string::npos);
  CHECK(html.find("<pre id=\"command\">dslaunch-worker train &#39;my config.json&#39;</pre>") != std::string::npos);
  CHECK(html.find("<pre id=\"config\">{\n  &quot;note&quot;: &quot;&lt;b&gt;&amp;&quot;,\n  &quot;optimizer&quot;: {") !=
        std::string::npos);
  CHECK(html.find("&quot;lr&quot;: 0.003") != std::string::npos);
  // The text as the runtime escaped it, and what it left raw (BEL) escaped here: as text, never markup.
  CHECK(html.find("<pre id=\"sample-text\">ab\\x1bc &lt;i&gt;\n\\x07</pre>") != std::string::npos);
  // A run killed before its exit record: the time to the last exit recorded, and why it is short.
  std::string killed = RecordedRun() + Start(2);
  const std::string again = RenderReport(ParseMetricsLog(killed), kPage);
  CHECK(again.find("(the last run wrote no exit record: it was killed, so it ran longer).") != std::string::npos);
}

TEST_CASE("RenderReport of a run that failed before its first step") {
  const std::string html = RenderReport(ParseMetricsLog(Start(4)), kPage);
  CHECK(html.find("run 1: 4 ranks, no step completed") != std::string::npos);
}

TEST_CASE("RenderReport escapes the job's name, the model and a restart's reason") {
  const std::string text = Start(2, "<img src=x>") + Steps(1, 1, 2) +
                           R"({"event":"generation","generation":1,"world_size":2,"reason":"<script>x</script> & \"q\""})"
                           "\n";
  const std::string html = RenderReport(ParseMetricsLog(text), ReportPage{"a<b>", "p&q"});
  CHECK(html.find("<script>") == std::string::npos);
  CHECK(html.find("<img") == std::string::npos);
  CHECK(html.find("<b>") == std::string::npos);
  CHECK(html.find("&lt;script&gt;x&lt;/script&gt; &amp; &quot;q&quot;") != std::string::npos);
  CHECK(html.find("from p&amp;q") != std::string::npos);
}

TEST_CASE("RenderReport notes non-finite losses and skipped lines") {
  const std::string text = Start(2) + Steps(1, 2, 2) + R"({"event":"step","step":3,"loss":null,"skipped":true})" +
                           "\n{torn\n";
  const std::string html = RenderReport(ParseMetricsLog(text), kPage);
  CHECK(html.find("1 line skipped as unreadable (first: line 5, not JSON)") != std::string::npos);
  CHECK(html.find("1 step with a non-finite loss") != std::string::npos);
  CHECK(html.find("1 step skipped by the fp16 loss scaler") != std::string::npos);
  CHECK(Count(Chart(html, "loss-chart"), "<circle class=\"point\"") == 2);
}

TEST_CASE("RenderReport draws percentiles instead of lines beyond kMaxRankLines ranks") {
  const int ranks = kMaxRankLines + 1;
  const std::string html = RenderReport(ParseMetricsLog(Start(ranks) + Steps(1, 5, ranks)), kPage);
  const std::string chart = Chart(html, "rank-step-chart");
  CHECK(Count(chart, "class=\"series\"") == 3);
  CHECK(chart.find("data-label=\"largest\"") != std::string::npos);
  CHECK(html.find("Step time per rank over 17 ranks (median, 90th percentile, largest)") != std::string::npos);
  CHECK(Count(Chart(html, "rank-compute-chart"), "class=\"series\"") == 3);
  const std::string at_limit = Chart(RenderReport(ParseMetricsLog(Start(16) + Steps(1, 5, 16)), kPage), "rank-step-chart");
  CHECK(Count(at_limit, "class=\"series\"") == 16);
}

TEST_CASE("RenderReport of a restarted job has a loss line and a summary line per generation") {
  const std::string text = Start(2) + Steps(1, 10, 2) +
                           R"({"event":"generation","generation":0,"world_size":2,"reason":"start"})" "\n" +
                           Start(2) + R"({"event":"resume","step":8})" "\n" + Steps(9, 12, 2) +
                           R"({"event":"generation","generation":1,"world_size":2,"reason":"rank 1 exited with signal 9","seconds_lost":1.25})"
                           "\n" R"({"event":"end","steps":12})" "\n";
  const std::string html = RenderReport(ParseMetricsLog(text), kPage);
  CHECK(Count(html, "<li class=\"generation\"") == 2);
  CHECK(html.find("generation 0 (start): 2 ranks, steps 1-10, last loss 4.9000, ended early") != std::string::npos);
  CHECK(html.find("generation 1 (rank 1 exited with signal 9): 2 ranks, resumed from step 8, 1.25 s lost, "
                  "steps 9-12, last loss 4.8800, finished") != std::string::npos);
  const std::string loss = Chart(html, "loss-chart");
  CHECK(Count(loss, "class=\"series\"") == 2);
  CHECK(Count(loss, "<circle class=\"point\"") == 14);
}

TEST_CASE("RenderReport of a long run stays small") {
  const std::string html = RenderReport(ParseMetricsLog(Start(8) + Steps(1, 20000, 8)), kPage);
  CHECK(html.size() < 200000);
  CHECK(html.find("data-total=\"20000\"") != std::string::npos);
}

TEST_CASE("RenderReport counts samples for the mlp classifier") {
  const std::string html = RenderReport(ParseMetricsLog(Start(1, "mlp") + Steps(1, 2, 1)), kPage);
  CHECK(html.find("Throughput (samples/s)") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::report
