// JobStatus: the launcher's account of a job, from the events of its shell, as a JobView.
#include "launcher/status/job_status.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

// Two nodes of two ranks each.
LaunchPlan Plan(int generation) {
  LaunchPlan plan;
  plan.job_id = "J";
  plan.generation = generation;
  plan.world_size = 4;
  for (int n = 0; n < 2; ++n) {
    NodePlan node;
    node.node_rank = n;
    node.host = "host-" + std::to_string(n);
    for (int l = 0; l < 2; ++l) node.workers.push_back(WorkerPlan{2 * n + l, l, {}, {}});
    plan.nodes.push_back(node);
  }
  return plan;
}

control::WorkerProgress Progress(int rank, int64_t step, std::optional<double> step_ms = std::nullopt,
                                 std::optional<double> loss = std::nullopt) {
  control::WorkerProgress p{0, rank, step, {}};
  p.figures.step_ms = step_ms;
  p.figures.loss = loss;
  return p;
}

TEST_CASE("JobStatus lists the plan's ranks and nodes, pending, then follows them") {
  JobStatus status("J", {"train.py", "--lr", "0.1"}, 1000);
  status.OnGeneration(Plan(0));
  JobView v = status.View(1500);
  CHECK(v.job_id == "J");
  CHECK(v.command == std::vector<std::string>{"train.py", "--lr", "0.1"});
  CHECK(v.state == "starting");
  CHECK(v.now_ms == 1500);
  CHECK(v.started_ms == 1000);
  REQUIRE(v.ranks.size() == 4);
  REQUIRE(v.nodes.size() == 2);
  CHECK(v.ranks[3].host == "host-1");
  CHECK(v.ranks[3].node_rank == 1);
  CHECK(v.ranks[3].local_rank == 1);
  CHECK(v.ranks[3].state == "pending");
  CHECK_FALSE(v.nodes[0].connected);

  status.OnAgentHeard(1, 1200);
  status.OnJobState(JobState::kRunning);
  status.OnWorkerStarted({0, 3, 4242, "/logs/J/rank3.stderr.log"});
  v = status.View(1600);
  CHECK(v.state == "running");
  CHECK(v.nodes[1].connected);
  CHECK(v.nodes[1].last_heartbeat_ms == 1200);
  CHECK(v.ranks[3].state == "running");
  CHECK(v.ranks[3].pid == 4242);
  CHECK(v.ranks[3].log_path == "/logs/J/rank3.stderr.log");
  // Figures never reported are empty, not 0.
  CHECK_FALSE(v.ranks[3].step_ms);
  CHECK_FALSE(v.ranks[3].loss);
  CHECK(v.ranks[3].last_step == -1);

  status.OnAgentLost(1);
  CHECK_FALSE(status.View(1700).nodes[1].connected);
}

TEST_CASE("JobStatus names how each rank ended: exited, failed, stopped, stalled") {
  JobStatus status("J", {"x"}, 0);
  status.OnGeneration(Plan(0));
  for (int r = 0; r < 4; ++r) status.OnWorkerStarted({0, r, 100 + r, ""});
  control::WorkerExited ok;
  ok.rank = 0;
  ok.status = ExitStatus::Exited(0);
  status.OnWorkerExited(ok);
  control::WorkerExited failed;
  failed.rank = 1;
  failed.status = ExitStatus::Exited(3);
  failed.last_step = 41;
  failed.log_path = "/l/rank1.stderr.log";
  status.OnWorkerExited(failed);
  control::WorkerExited stopped;
  stopped.rank = 2;
  stopped.status = ExitStatus::Signaled(15);
  stopped.stopped = true;
  status.OnWorkerExited(stopped);
  status.OnWorkerStalled({0, 3, 7, 3100, 3000, "sleeping"});
  control::WorkerExited killed;
  killed.rank = 3;
  killed.status = ExitStatus::Signaled(9);
  status.OnWorkerExited(killed);
  status.OnRootCause("rank 1 failed");
  status.OnRootCause("a later failure");
  status.OnFinished(3);

  const JobView v = status.View(5);
  CHECK(v.ranks[0].state == "exited");
  CHECK(v.ranks[0].exit_code == 0);
  CHECK(v.ranks[1].state == "failed");
  CHECK(v.ranks[1].exit_code == 3);
  CHECK(v.ranks[1].exit_text == "exit code 3");
  CHECK(v.ranks[1].last_step == 41);
  CHECK(v.ranks[1].log_path == "/l/rank1.stderr.log");
  CHECK(v.ranks[2].state == "stopped");
  CHECK(v.ranks[2].exit_code == 143);
  CHECK(v.ranks[3].state == "stalled");  // its SIGKILL was the watchdog's
  CHECK(v.ranks[3].exit_text == "signal 9 (SIGKILL)");
  CHECK(v.state == "finished");
  CHECK(v.exit_code == 3);
  CHECK(v.root_cause == "rank 1 failed");
}

TEST_CASE("JobStatus keeps each rank's last report and rank 0's curves, a repeated figure once") {
  JobStatus status("J", {"x"}, 0);
  status.OnGeneration(Plan(0));
  auto p = Progress(0, 1, 200.0, 2.5);
  p.figures.tokens_per_s = 1000;
  status.OnProgress(p, 10);
  status.OnProgress(p, 20);  // the same report again (a validation batch): no new point
  auto val = Progress(0, 1, 200.0, 2.5);
  val.figures.val_loss = 2.75;
  val.figures.val_step = 1;
  val.figures.ckpt_s = 1.5;
  val.figures.ckpt_bytes = 4096;
  val.figures.ckpt_step = 1;
  status.OnProgress(val, 30);
  val.step = 2;
  val.figures.loss = 2.25;
  status.OnProgress(val, 40);  // validation and checkpoint repeated: counted once
  status.OnProgress(Progress(1, 2, 210.0, 9.0), 50);  // rank 1: its row, not the curves

  JobView v = status.View(60);
  CHECK(v.ranks[0].last_step == 2);
  CHECK(v.ranks[0].loss == 2.25);
  CHECK(v.ranks[0].step_ms == 200.0);
  CHECK(v.ranks[0].last_report_ms == 40);
  CHECK(v.ranks[1].loss == 9.0);
  CHECK(v.ranks[1].last_report_ms == 50);
  REQUIRE(v.loss.size() == 2);
  CHECK(v.loss[0].step == 1);
  CHECK(v.loss[0].value == 2.5);
  CHECK(v.loss[1].step == 2);
  CHECK(v.loss[1].value == 2.25);
  REQUIRE(v.tokens_per_s.size() == 1);
  REQUIRE(v.val_loss.size() == 1);
  CHECK(v.val_loss[0].step == 1);
  CHECK(v.val_loss[0].value == 2.75);
  CHECK(v.checkpoint_saves_total == 1);
  CHECK(v.checkpoint_save_seconds == 1.5);
  CHECK(v.checkpoint_save_bytes == 4096);

  // A new save of the next step counts; a report without val_step gives its own step.
  auto next = Progress(0, 3);
  next.figures.ckpt_s = 2.0;
  next.figures.ckpt_bytes = 4096;
  next.figures.ckpt_step = 3;
  next.figures.val_loss = 2.5;
  status.OnProgress(next, 70);
  v = status.View(80);
  CHECK(v.checkpoint_saves_total == 2);
  CHECK(v.checkpoint_save_seconds == 2.0);
  REQUIRE(v.val_loss.size() == 2);
  CHECK(v.val_loss[1].step == 3);
}

TEST_CASE("JobStatus flags a straggler once, marks it and counts it; a restart starts afresh") {
  JobStatus status("J", {"x"}, 0, StragglerOptions{1.5, 4});
  status.OnGeneration(Plan(0));
  std::vector<Straggler> flagged;
  for (int step = 1; step <= 10; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      if (auto s = status.OnProgress(Progress(rank, step, rank == 2 ? 400.0 : 200.0), step)) flagged.push_back(*s);
      // A report of the same step again is no new sample.
      status.OnProgress(Progress(rank, step, rank == 2 ? 400.0 : 200.0), step);
    }
  }
  REQUIRE(flagged.size() == 1);
  CHECK(flagged[0] == Straggler{2, "host-1", 400.0, 200.0, 4});
  CHECK(DescribeStraggler(flagged[0]) ==
        "rank 2 on host-1 is a straggler: 400 ms/step against a median of 200 ms over 4 steps");
  JobView v = status.View(11);
  CHECK(v.ranks[2].straggler);
  CHECK_FALSE(v.ranks[1].straggler);
  CHECK(v.stragglers_total == 1);

  status.OnGeneration(Plan(1));
  v = status.View(12);
  CHECK(v.generation == 1);
  CHECK(v.restarts == 1);
  CHECK_FALSE(v.ranks[2].straggler);
  CHECK(v.stragglers_total == 1);  // since the start
  for (int step = 1; step <= 4; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      if (auto s = status.OnProgress(Progress(rank, step, rank == 2 ? 400.0 : 200.0), step)) flagged.push_back(*s);
    }
  }
  CHECK(flagged.size() == 2);  // flagged again in the new generation
  CHECK(status.View(13).stragglers_total == 2);
}

TEST_CASE("JobStatus counts restarts from the first generation it saw (a requeued job starts above 0)") {
  JobStatus status("J", {"x"}, 0);
  status.OnGeneration(Plan(3));
  CHECK(status.View(1).generation == 3);
  CHECK(status.View(1).restarts == 0);
  status.OnGeneration(Plan(4));
  CHECK(status.View(2).restarts == 1);
}

TEST_CASE("JobStatus takes the agents' messages of the current generation; another's only says the agent lives") {
  JobStatus status("J", {"x"}, 0, StragglerOptions{1.5, 1});
  status.OnGeneration(Plan(1));
  status.OnAgentMessage(0, 1, control::Message(control::WorkerStarted{0, 1, 77, ""}), 10);  // stale
  CHECK(status.View(11).ranks[1].state == "pending");
  CHECK(status.View(11).nodes[0].last_heartbeat_ms == 10);
  status.OnAgentMessage(0, 1, control::Message(control::WorkerStarted{1, 1, 78, ""}), 20);
  CHECK(status.View(21).ranks[1].pid == 78);
  status.OnAgentMessage(1, 1, control::Message(control::Heartbeat{1, 5}), 30);
  CHECK(status.View(31).nodes[1].last_heartbeat_ms == 30);
  auto slow = Progress(1, 1, 500.0);
  slow.generation = 1;
  auto fast = Progress(0, 1, 100.0);
  fast.generation = 1;
  CHECK_FALSE(status.OnAgentMessage(0, 1, control::Message(fast), 40));
  const auto flagged = status.OnAgentMessage(0, 1, control::Message(slow), 50);
  REQUIRE(flagged);
  CHECK(flagged->rank == 1);
  CHECK(flagged->host == "host-0");
}

TEST_CASE("JobStatus judges stragglers by compute_ms when given: waiting makes every step_ms alike") {
  JobStatus status("J", {"x"}, 0, StragglerOptions{1.5, 3});
  status.OnGeneration(Plan(0));
  std::vector<Straggler> flagged;
  for (int step = 1; step <= 3; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      auto p = Progress(rank, step, 400.0);  // every rank's wall time: the straggler's
      p.figures.compute_ms = rank == 3 ? 390.0 : 100.0;
      if (auto s = status.OnProgress(p, step)) flagged.push_back(*s);
    }
  }
  REQUIRE(flagged.size() == 1);
  CHECK(flagged[0].rank == 3);
  CHECK(flagged[0].median_ms == 390.0);
  CHECK(flagged[0].peers_median_ms == 100.0);
  CHECK(status.View(4).ranks[3].step_ms == 400.0);  // the page shows the wall time
  CHECK(status.View(4).ranks[3].compute_ms == 390.0);
}

TEST_CASE("JobStatus ignores ranks outside the plan") {
  JobStatus status("J", {"x"}, 0);
  status.OnGeneration(Plan(0));
  status.OnWorkerStarted({0, 9, 1, ""});
  CHECK_FALSE(status.OnProgress(Progress(9, 1, 1.0), 1));
  CHECK(status.View(1).ranks.size() == 4);
}

}  // namespace
}  // namespace dslaunch::launcher
