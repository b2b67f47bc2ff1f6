#include "launcher/status/prometheus_text.h"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/launcher/status/sample_view.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l == line) return true;
  }
  return false;
}

TEST_CASE("EscapeLabelValue escapes backslash, double quote and newline only") {
  CHECK(EscapeLabelValue("plain-host.example") == "plain-host.example");
  CHECK(EscapeLabelValue("a\\b") == "a\\\\b");
  CHECK(EscapeLabelValue("say \"hi\"") == "say \\\"hi\\\"");
  CHECK(EscapeLabelValue("two\nlines") == "two\\nlines");
  CHECK(EscapeLabelValue("tab\there") == "tab\there");
  // The edges: empty, the special characters alone, first and last, and UTF-8 kept as it is.
  CHECK(EscapeLabelValue("").empty());
  CHECK(EscapeLabelValue("\\") == "\\\\");
  CHECK(EscapeLabelValue("\"x\n") == "\\\"x\\n");
  CHECK(EscapeLabelValue("-@:[]") == "-@:[]");
  CHECK(EscapeLabelValue("n\xc5\x93ud-\xc3\xa9") == "n\xc5\x93ud-\xc3\xa9");
}

TEST_CASE("FormatSampleValue writes the format's special values and round-trip decimals") {
  CHECK(FormatSampleValue(NAN) == "NaN");
  CHECK(FormatSampleValue(INFINITY) == "+Inf");
  CHECK(FormatSampleValue(-INFINITY) == "-Inf");
  CHECK(FormatSampleValue(0.1) == "0.1");
  CHECK(FormatSampleValue(123456789) == "123456789");
  CHECK(FormatSampleValue(1764065700) == "1764065700");
}

TEST_CASE("PrometheusText has the job's state, ranks by state, and per-rank figures") {
  const std::string text = PrometheusText(testing::SampleView());
  CHECK(HasLine(text, "dslaunch_job_state{state=\"running\"} 1"));
  CHECK(HasLine(text, "dslaunch_job_state{state=\"finished\"} 0"));
  CHECK(HasLine(text, "dslaunch_ranks{state=\"running\"} 3"));
  CHECK(HasLine(text, "dslaunch_ranks{state=\"failed\"} 1"));
  CHECK(HasLine(text, "dslaunch_ranks{state=\"pending\"} 0"));
  CHECK(HasLine(text, "dslaunch_generation 1"));
  CHECK(HasLine(text, "dslaunch_restarts_total 1"));
  CHECK(HasLine(text, "dslaunch_start_time_seconds 1764065700"));
  CHECK(HasLine(text, "dslaunch_node_heartbeat_age_seconds{node=\"0\",host=\"node-a\"} 1.2"));
  CHECK(HasLine(text, "dslaunch_node_heartbeat_age_seconds{node=\"1\",host=\"node \\\"b\\\"\\\\x\"} 4"));
  CHECK(HasLine(text, "dslaunch_rank_step{rank=\"0\",host=\"node-a\"} 40"));
  CHECK(HasLine(text, "dslaunch_rank_step_duration_seconds{rank=\"0\",host=\"node-a\"} 0.1985"));
  CHECK(HasLine(text, "dslaunch_rank_step_outside_collectives_seconds{rank=\"0\",host=\"node-a\"} 0.15"));
  CHECK(HasLine(text, "dslaunch_rank_loss{rank=\"0\",host=\"node-a\"} 2.5"));
  CHECK(HasLine(text, "dslaunch_rank_tokens_per_second{rank=\"0\",host=\"node-a\"} 10240"));
  CHECK(HasLine(text, "dslaunch_rank_exit_code{rank=\"1\",host=\"node-a\"} 1"));
  CHECK(HasLine(text, "dslaunch_validation_loss 2.3"));
  CHECK(HasLine(text, "dslaunch_stragglers_total 1"));
  CHECK(HasLine(text, "dslaunch_checkpoint_saves_total 2"));
  CHECK(HasLine(text, "dslaunch_checkpoint_save_duration_seconds 0.75"));
  CHECK(HasLine(text, "dslaunch_checkpoint_save_bytes 123456789"));
  CHECK(HasLine(text, "dslaunch_store_sent_bytes_total 987654"));
  CHECK(HasLine(text, "# TYPE dslaunch_restarts_total counter"));
  CHECK(HasLine(text, "# TYPE dslaunch_rank_loss gauge"));
}

TEST_CASE("PrometheusText leaves out figures never reported instead of writing 0") {
  const std::string text = PrometheusText(testing::SampleView());
  CHECK(text.find("dslaunch_rank_step{rank=\"2\"") == std::string::npos);
  CHECK(text.find("dslaunch_rank_loss{rank=\"2\"") == std::string::npos);
  CHECK(text.find("dslaunch_rank_exit_code{rank=\"0\"") == std::string::npos);
  JobView empty;
  const std::string none = PrometheusText(empty);
  CHECK(none.find("\ndslaunch_checkpoint_save_bytes ") == std::string::npos);
  CHECK(HasLine(none, "# TYPE dslaunch_checkpoint_save_bytes gauge"));  // the family is still described
  CHECK(none.find("\ndslaunch_start_time_seconds ") == std::string::npos);
}

TEST_CASE("PrometheusText describes every family once, counters ending in _total") {
  std::istringstream in(PrometheusText(testing::SampleView()));
  std::set<std::string> typed;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream words(l.substr(7));
    std::string name, type;
    words >> name >> type;
    CAPTURE(name);
    CHECK(typed.insert(name).second);
    CHECK(name.rfind("dslaunch_", 0) == 0);
    CHECK((type == "counter") == name.ends_with("_total"));
  }
  CHECK(typed.size() >= 20);
}

bool PromtoolInstalled() { return std::ifstream("/usr/bin/promtool").good(); }

TEST_CASE("promtool check metrics accepts the text of a realistic view") {
  DSLAUNCH_SKIP_UNLESS(PromtoolInstalled(), "promtool",
                       "/usr/bin/promtool is missing (Debian's prometheus package; scripts/setup.sh installs it)");
  testing::TempDir dir;
  const std::string file = dir.path() + "/metrics.txt";
  std::ofstream(file) << PrometheusText(testing::SampleView());
  // promtool reads the metrics on its standard input.
  auto r = testing::RunProcess({"/bin/sh", "-c", "/usr/bin/promtool check metrics < " + file},
                               std::chrono::seconds(60));
  INFO("promtool: " << r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("error") == std::string::npos);
}

TEST_CASE("promtool check metrics rejects a broken label, so the test above can fail") {
  DSLAUNCH_SKIP_UNLESS(PromtoolInstalled(), "promtool",
                       "/usr/bin/promtool is missing (Debian's prometheus package; scripts/setup.sh installs it)");
  testing::TempDir dir;
  const std::string file = dir.path() + "/metrics.txt";
  // An unescaped quote in a label value, as a renderer without EscapeLabelValue would write.
  std::ofstream(file) << "# HELP dslaunch_x x\n# TYPE dslaunch_x gauge\ndslaunch_x{host=\"a\"b\"} 1\n";
  auto r = testing::RunProcess({"/bin/sh", "-c", "/usr/bin/promtool check metrics < " + file},
                               std::chrono::seconds(60));
  CHECK(r.exit_code != 0);
}

}  // namespace
}  // namespace dslaunch::launcher
