// The live page in a real browser (label browser; docs/observability.md, "The live page"): a
// 2-rank job of the bundled runtime with --status_port 0, its page loaded by headless Chromium
// (tests/support/headless_chromium.sh), the DOM checked while the job trains (both ranks listed,
// loss points drawn) and again after rank 1 was killed while rank 0 is stopped (SIGSTOP), so that
// the launcher waits out the grace period with the page up and rank 1 shown as failed. The
// screenshot of that page is kept under the build directory (test-artifacts/status-page.png).
#include <linux/close_range.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>

#include "launcher/status/job_state_file.h"
#include "launcher/status/status_client.h"
#include "launcher/status/status_server.h"
#include "tests/launcher/status/sample_view.h"
#include "runtime/data/token_shard.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

using testing::RunProcess;
using testing::Subprocess;
using testing::TempDir;
using testing::WaitFor;

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kChromium = std::string(DSLAUNCH_SOURCE_DIR) + "/tests/support/headless_chromium.sh";
constexpr auto kTimeout = std::chrono::seconds(90);
// Virtual time the page's script gets in Chromium: a few polls of /api/job.
constexpr char kBudgetMs[] = "3000";

// A tiny GPT that trains for far longer than the test looks, validating every 5 steps.
void WriteJob(const TempDir& dir) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 3000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/train.bin", tokens).ok());
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/val.bin", tokens).ok());
  std::ofstream(dir.path() + "/tiny.json") << R"({
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003}}, "steps_per_print": 1, "seed": 3,
    "model": {"type": "gpt", "n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin", "val": "val.bin"},
    "train": {"steps": 1000000, "eval_interval": 5, "eval_steps": 1}
  })";
}

nlohmann::json Job(const std::string& url, const std::string& token) {
  auto r = HttpGet(url, token, "/api/job");
  return r.ok() && r->status == 200 ? nlohmann::json::parse(r->body) : nlohmann::json();
}

std::string Dom(const std::string& url) {
  auto r = RunProcess({"/bin/bash", kChromium, "dom", url, kBudgetMs}, kTimeout);
  INFO("headless_chromium.sh: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

// The opening tag of the element with id `id` in `dom`, "" if none.
std::string Tag(const std::string& dom, const std::string& id) {
  const size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t open = dom.rfind('<', at);
  return dom.substr(open, dom.find('>', at) - open + 1);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("Headless Chromium shows the live page of a training job: ranks, loss points, a failed rank") {
  DSLAUNCH_SKIP_UNLESS(std::filesystem::exists("/usr/bin/chromium"), "chromium",
                       "/usr/bin/chromium is missing (Debian's chromium; scripts/setup.sh installs it)");
  TempDir dir;
  WriteJob(dir);
  // The launcher's console goes to a file: a pipe nobody reads until the end would fill with the
  // steps' lines and block the launcher's loop (and with it the page's updates).
  const std::string console = dir.path() + "/console.txt";
  Subprocess launcher({"/bin/sh", "-c",
                       "exec " + kBin + "/dslaunch --job_id browser-job --status_port 0 --grace_period 60 "
                       "--nproc_per_node 2 " + dir.path() + "/tiny.json > " + console + " 2>&1"},
                      {"TMPDIR=" + dir.path()});
  auto console_text = [&] {
    std::ifstream in(console);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  auto console_tail = [&] {
    const std::string text = console_text();
    return text.substr(text.size() > 3000 ? text.size() - 3000 : 0);
  };
  std::string url;
  std::string token;
  REQUIRE(WaitFor([&] {
    auto records = ReadJobStates(JobStateDir(dir.path(), ::getuid()));
    if (records.ok() && !records->empty()) {
      url = records->front().url;
      token = records->front().token;
    }
    return !url.empty();
  }, kTimeout));
  // Training: enough loss and validation points to draw.
  REQUIRE(WaitFor([&] {
    const nlohmann::json j = Job(url, token);
    return j.is_object() && j["loss"].size() >= 10 && !j["val_loss"].empty() && j["ranks"].size() == 2;
  }, kTimeout));
  // The page as the launcher prints its address (?token=), polling (see status.js).
  const std::string page = url + "?token=" + token + "&poll=500";
  const std::string live = Dom(page);
  CHECK(Tag(live, "job-id").size() > 0);
  CHECK(live.find(">browser-job</span>") != std::string::npos);
  CHECK(Tag(live, "rank-0").find("class=\"rank running") != std::string::npos);
  CHECK(Tag(live, "rank-1").find("class=\"rank running") != std::string::npos);
  CHECK(Count(live, "class=\"point loss\"") >= 10);
  CHECK(Count(live, "class=\"point val_loss\"") >= 1);
  CHECK(Count(live, "class=\"point tokens_per_s\"") >= 10);
  // The same address without the token: the 401's line (which names the record, and so the job's
  // id, as ps does), not the page.
  const std::string locked = Dom(url + "?poll=500");
  CHECK(locked.find("status page: this needs the job's token") != std::string::npos);
  CHECK(locked.find("id=\"ranks\"") == std::string::npos);

  // Rank 0 stopped, rank 1 killed: the launcher stops the job and waits the grace period for rank 0.
  const nlohmann::json before = Job(url, token);
  const pid_t rank0 = before["ranks"][0]["pid"].get<pid_t>();
  const pid_t rank1 = before["ranks"][1]["pid"].get<pid_t>();
  REQUIRE(rank0 > 0);
  REQUIRE(rank1 > 0);
  REQUIRE(::kill(rank0, SIGSTOP) == 0);
  REQUIRE(::kill(rank1, SIGKILL) == 0);
  std::string last_view;
  const bool shown = WaitFor([&] {
    nlohmann::json j = Job(url, token);
    last_view = j.dump();
    return j.is_object() && j["ranks"].size() == 2 && j["ranks"][1]["state"] == "failed";
  }, kTimeout);
  if (!shown) {
    ::kill(rank0, SIGKILL);
    ::kill(rank0, SIGCONT);
    auto end = launcher.Wait(kTimeout);
    FAIL("rank 1 never shown as failed; last view: " << last_view << "\nlauncher (exit " << end.exit_code
                                                      << "):\n" << console_tail());
  }
  const std::string failed = Dom(page);
  CHECK(Tag(failed, "rank-1").find("class=\"rank failed") != std::string::npos);
  CHECK(Tag(failed, "rank-0").size() > 0);
  CHECK(Count(failed, "class=\"point loss\"") >= 10);
  CHECK(failed.find("signal 9") != std::string::npos);

  const std::string artifacts = std::string(DSLAUNCH_BIN_DIR) + "/../test-artifacts";
  std::filesystem::create_directories(artifacts);
  const std::string shot = artifacts + "/status-page.png";
  auto s = RunProcess({"/bin/bash", kChromium, "screenshot", page + "&rank=1", shot, "1280,1000", kBudgetMs}, kTimeout);
  CHECK(s.exit_code == 0);
  CHECK(std::filesystem::file_size(shot) > 10000);

  ::kill(rank0, SIGKILL);
  ::kill(rank0, SIGCONT);
  auto end = launcher.Wait(kTimeout);
  INFO(console_tail());
  CHECK(end.exit_code != 0);
  CHECK(console_text().find("dslaunch: status page at " + url + "?token=" + token + "\n") != std::string::npos);
}

// The text of the element with id `id` (its first text node, up to the next tag), "" if none.
std::string Text(const std::string& dom, const std::string& id) {
  const std::string tag = Tag(dom, id);
  if (tag.empty()) return "";
  const size_t start = dom.find(tag) + tag.size();
  return dom.substr(start, dom.find('<', start) - start);
}

// The page's end as a browser sees it: the real server and page, a board the test fills. The
// page streams events (not ?poll=), so Chromium's virtual time stands still until the stream
// ends; the test waits for the stream to be open, publishes the finished view and stops the
// server, as the launcher does when the job ends and it exits.
TEST_CASE("Headless Chromium shows the finished state once the launcher has gone: outcome, exit code, duration") {
  DSLAUNCH_SKIP_UNLESS(std::filesystem::exists("/usr/bin/chromium"), "chromium",
                       "/usr/bin/chromium is missing (Debian's chromium; scripts/setup.sh installs it)");
  const std::string token(64, 'a');
  auto board = std::make_shared<JobBoard>();
  JobView running = testing::SampleView();
  // A model split into 2 stages x 1 copy x 2 tensor ranks: the grid, and each rank's place in it.
  const ProcessGrid grid = *ProcessGrid::Create(4, 2, 2);
  running.grid = grid.shape();
  for (RankView& r : running.ranks) r.grid = grid.CoordinatesOf(r.rank);
  board->Publish(running);
  StatusServerOptions options;
  options.access.token = token;
  options.access.token_file = "/run/user/JOB.json";
  auto server = StatusServer::Start(options, board);
  REQUIRE(server.ok());
  const std::string page = (*server)->Url() + "?token=" + token;
  // The test's Subprocess passes its descriptors on; Chromium must not hold the server's
  // listening socket open after the server stops (its reconnect would then hang in the backlog).
  // dslaunch's own children never inherit it (common/spawn.cc).
  REQUIRE(::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) == 0);
  Subprocess chromium({"/bin/bash", kChromium, "dom", page, kBudgetMs});
  REQUIRE(WaitFor([&] { return (*server)->Load().streams == 1; }, kTimeout));
  JobView finished = running;
  finished.state = "finished";
  finished.exit_code = 0;
  finished.outcome = "succeeded";
  finished.ended_ms = finished.started_ms + 96400;
  board->Publish(finished);
  server->reset();
  auto result = chromium.Wait(kTimeout);
  INFO("headless_chromium.sh: " << result.err);
  REQUIRE(result.exit_code == 0);
  const std::string& dom = result.out;
  CHECK(Text(dom, "job-state") == "succeeded (exit 0)");
  CHECK(Tag(dom, "job-state").find("class=\"state succeeded\"") != std::string::npos);
  CHECK(Text(dom, "job-outcome") == "succeeded");
  CHECK(Text(dom, "job-exit-code") == "0");
  CHECK(Text(dom, "job-duration") == "1m 36s");
  CHECK(Text(dom, "job-uptime") == "1m 36s");  // stopped with the job
  CHECK(Tag(dom, "job-end").find("hidden") == std::string::npos);
  CHECK(Text(dom, "connection") == "job finished; the launcher has exited");
  CHECK(Tag(dom, "connection").find("class=\"connection ended\"") != std::string::npos);
  CHECK(Text(dom, "job-grid") == "2 stages x 1 data x 2 tensor");
  CHECK(Tag(dom, "job-grid").find("hidden") == std::string::npos);
  CHECK(Tag(dom, "ranks-grid").find("hidden") == std::string::npos);
  // Rank 3: stage 1, data 0, tensor 1, in the column after the host.
  const size_t row = dom.find(Tag(dom, "rank-3"));
  CHECK(dom.find("<td class=\"grid\">1/0/1</td>", row) < dom.find("</tr>", row));
  // Rank 3 of the sample is a straggler: why and since when.
  CHECK(Text(dom, "straggler-3") ==
        "rank 3 on node \"b\"\\x: 380 ms/step against its peers' median of 150 ms (2.5x; flagged above 1.5x and 20 ms "
        "more over 20 steps, 5 checks in a row), since step 38 (2025-11-25 10:16:30 UTC)");
}

}  // namespace
}  // namespace dslaunch::launcher
