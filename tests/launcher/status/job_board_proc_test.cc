// The launcher's shell publishes its view of a running job to the JobBoard (docs/observability.md):
// a JobRunner in this process, with a real dslaunch-agent and bash workers that report progress.
#include <fcntl.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <memory>

#include "common/auth/secret.h"
#include "dslaunch/config.h"
#include "launcher/job/job_runner.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

// Each rank: 6 steps of 0.3 s (each report seen by the agent's 200 ms poll) with figures, rank 0
// also a validation loss after step 3; then a line of output.
constexpr const char* kScript =
    "for step in 1 2 3 4 5 6; do sleep 0.3; val=''; "
    "  [ \"$RANK\" = 0 ] && [ $step -ge 3 ] && val=' val_loss=1.75 val_step=3'; "
    "  echo \"$step step_ms=300 loss=2.$step tokens_per_s=1000$val\" > \"$DSLAUNCH_PROGRESS_FILE\"; "
    "done; echo \"hello from $RANK\"";

TEST_CASE("The runner publishes ranks, figures, curves, the end and every rank's output to the board") {
  testing::TempDir dir;
  const std::string job_id = "board-test";
  JobRunnerOptions ro;
  ro.agent_path = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch-agent";
  ro.agent_version = std::string("dslaunch-agent ") + DSLAUNCH_VERSION;
  ro.log_dir = dir.path() + "/logs/" + job_id;
  ro.grace_period = std::chrono::seconds(2);
  ro.heartbeat_timeout = std::chrono::seconds(30);
  ro.board = std::make_shared<JobBoard>();
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  REQUIRE(devnull >= 0);
  Console console(devnull, devnull);
  LocalAgentStarter starter;
  int code = -1;
  {
    JobRunner runner(ro, job_id, GenerateSecret(), starter, console);
    REQUIRE(runner.Listen().ok());
    PlanOptions po;
    po.program.kind = ProgramKind::kExecutable;
    po.program.program = "/bin/bash";
    po.program.args = {"-c", kScript};
    po.job_id = job_id;
    po.store_address = "127.0.0.1:" + std::to_string(runner.port());
    const Resources resources = {NodeResources{"", "localhost", {0, 1}}};
    auto plan = PlanLaunch(resources, po);
    REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
    JobSpec spec;
    spec.candidates = resources;
    spec.everyone = std::move(*plan);
    spec.plan_options = po;
    code = runner.Run(spec);
  }
  ::close(devnull);
  CHECK(code == 0);

  const JobView v = ro.board->View();
  CHECK(v.job_id == job_id);
  CHECK(v.command == std::vector<std::string>{"/bin/bash", "-c", kScript});
  CHECK(v.state == "finished");
  CHECK(v.exit_code == 0);
  CHECK(v.generation == 0);
  REQUIRE(v.nodes.size() == 1);
  CHECK(v.nodes[0].host == "localhost");
  CHECK(v.nodes[0].last_heartbeat_ms > 0);
  REQUIRE(v.ranks.size() == 2);
  for (const RankView& r : v.ranks) {
    CAPTURE(r.rank);
    CHECK(r.state == "exited");
    CHECK(r.exit_code == 0);
    CHECK(r.pid > 0);
    CHECK(r.host == "localhost");
    CHECK(r.log_path.find(ro.log_dir) == 0);
    CHECK(r.last_step == 6);
    CHECK(r.step_ms == 300.0);
    CHECK(r.loss == 2.6);
    CHECK(r.tokens_per_s == 1000.0);
    CHECK(r.last_report_ms >= v.started_ms);
    CHECK_FALSE(r.straggler);
  }
  // Rank 0's curves: a point per step the agent saw (most of the 6), the validation once.
  CHECK(v.loss.size() >= 3);
  CHECK(v.loss.size() <= 6);
  CHECK(v.loss.back().step == 6);
  CHECK(v.loss.back().value == 2.6);
  REQUIRE(v.val_loss.size() == 1);
  CHECK(v.val_loss[0].step == 3);
  CHECK(v.val_loss[0].value == 1.75);
  CHECK(v.stragglers_total == 0);
  // The endpoint answered the agent's registration and heartbeats, and sent its assignment: at
  // least one assignment frame's worth.
  CHECK(v.store_bytes_sent_total > 100);
  CHECK(ro.board->LogTail(1, 10) == std::vector<std::string>{"hello from 1"});
  CHECK(ro.board->LogTail(0, 10) == std::vector<std::string>{"hello from 0"});
}

}  // namespace
}  // namespace dslaunch::launcher
