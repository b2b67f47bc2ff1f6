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

TEST_CASE("JobStatus gives each rank its place in the plan's grid, and a generation without one none") {
  JobStatus status("J", {"train.json"}, 1000);
  LaunchPlan plan = Plan(0);
  plan.grid = *ProcessGrid::Create(4, 2, 2);
  status.OnGeneration(plan);
  JobView v = status.View(1500);
  REQUIRE(v.grid.has_value());
  CHECK(*v.grid == GridShape{2, 1, 2});
  REQUIRE(v.ranks.size() == 4);
  for (const RankView& r : v.ranks) {
    CAPTURE(r.rank);
    REQUIRE(r.grid.has_value());
    CHECK(*r.grid == plan.grid->CoordinatesOf(r.rank));
  }
  CHECK(*v.ranks[1].grid == GridCoordinates{0, 0, 1});
  CHECK(*v.ranks[2].grid == GridCoordinates{1, 0, 0});
  // The next generation's plan has no grid (another program would not): nothing is left over.
  status.OnGeneration(Plan(1));
  v = status.View(1600);
  CHECK_FALSE(v.grid.has_value());
  CHECK_FALSE(v.ranks[1].grid.has_value());
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
  status.OnFinished(3, RootCause::Kind::kWorkerFailed, 4);

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
  CHECK(v.outcome == "failed");
  CHECK(v.ended_ms == 4);
  CHECK(v.root_cause == "rank 1 failed");
}

TEST_CASE("JobOutcomeName: exit 0 succeeded, a signal to the launcher stopped, anything else failed") {
  CHECK(JobOutcomeName(0, std::nullopt) == "succeeded");
  CHECK(JobOutcomeName(0, RootCause::Kind::kSignal) == "succeeded");  // stopped, and every rank exited 0
  CHECK(JobOutcomeName(143, RootCause::Kind::kSignal) == "stopped");
  CHECK(JobOutcomeName(76, RootCause::Kind::kSignal) == "stopped");  // SIGUSR1: requeue
  CHECK(JobOutcomeName(1, RootCause::Kind::kWorkerFailed) == "failed");
  CHECK(JobOutcomeName(137, RootCause::Kind::kWorkerStalled) == "failed");
  CHECK(JobOutcomeName(75, RootCause::Kind::kAgentLost) == "failed");
  CHECK(JobOutcomeName(2, std::nullopt) == "failed");
}

TEST_CASE("JobStatus's finished view says the outcome, the exit code and when it ended; before, none of them") {
  JobStatus status("J", {"x"}, 1000);
  status.OnGeneration(Plan(0));
  JobView running = status.View(2000);
  CHECK(running.outcome.empty());
  CHECK(running.ended_ms == 0);
  CHECK_FALSE(running.exit_code);
  status.OnFinished(0, std::nullopt, 64000);
  const JobView v = status.View(65000);
  CHECK(v.state == "finished");
  CHECK(v.outcome == "succeeded");
  CHECK(v.exit_code == 0);
  CHECK(v.ended_ms == 64000);
  CHECK(v.ended_ms - v.started_ms == 63000);
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

TEST_CASE("JobStatus flags a straggler, says why and since when, counts it; a restart starts afresh") {
  JobStatus status("J", {"x"}, 0, StragglerOptions{1.5, 4, 20, 2});
  status.OnGeneration(Plan(0));
  std::vector<StragglerChange> changes;
  for (int step = 1; step <= 10; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      if (auto c = status.OnProgress(Progress(rank, step, rank == 2 ? 400.0 : 200.0), 100 * step)) changes.push_back(*c);
      // A report of the same step again is no new sample.
      status.OnProgress(Progress(rank, step, rank == 2 ? 400.0 : 200.0), 100 * step);
    }
  }
  // Windows full at step 4, the second slow check at step 5.
  REQUIRE(changes.size() == 1);
  CHECK(changes[0] == StragglerChange{StragglerChange::Kind::kFlagged, Straggler{2, "host-1", 400.0, 200.0, 4, 5}});
  JobView v = status.View(1100);
  CHECK(v.ranks[2].straggler);
  CHECK(v.ranks[2].straggler_median_ms == 400.0);
  CHECK(v.ranks[2].straggler_peers_median_ms == 200.0);
  CHECK(v.ranks[2].straggler_since_step == 5);
  CHECK(v.ranks[2].straggler_since_ms == 500);
  CHECK_FALSE(v.ranks[1].straggler);
  CHECK_FALSE(v.ranks[1].straggler_median_ms);
  CHECK(v.stragglers_total == 1);
  CHECK(v.straggler_factor == 1.5);
  CHECK(v.straggler_margin_ms == 20);
  CHECK(v.straggler_window == 4);
  CHECK(v.straggler_patience == 2);
  // The medians follow its later steps; it recovers and is cleared after two checks.
  for (int step = 11; step <= 12; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      if (auto c = status.OnProgress(Progress(rank, step, rank == 2 ? 500.0 : 200.0), 100 * step)) changes.push_back(*c);
    }
  }
  REQUIRE(changes.size() == 1);
  v = status.View(1300);
  CHECK(v.ranks[2].straggler_median_ms == 450.0);  // 400, 400, 500, 500: the mean of the middle two
  CHECK(v.ranks[2].straggler_since_step == 5);
  for (int step = 13; step <= 20; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      if (auto c = status.OnProgress(Progress(rank, step, 200.0), 100 * step)) changes.push_back(*c);
    }
  }
  // Rank 2's window at step 14: 500, 500, 200, 200 (350: still slow); at step 15 500, 200, 200,
  // 200 (200): not slow, and cleared at the second such check, step 16.
  REQUIRE(changes.size() == 2);
  CHECK(changes[1].kind == StragglerChange::Kind::kCleared);
  CHECK(changes[1].straggler.rank == 2);
  v = status.View(2100);
  CHECK_FALSE(v.ranks[2].straggler);
  CHECK_FALSE(v.ranks[2].straggler_median_ms);
  CHECK(v.ranks[2].straggler_since_step == -1);
  CHECK(v.stragglers_total == 1);

  status.OnGeneration(Plan(1));
  v = status.View(2200);
  CHECK(v.generation == 1);
  CHECK(v.restarts == 1);
  CHECK(v.stragglers_total == 1);  // since the start
  for (int step = 1; step <= 5; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      if (auto c = status.OnProgress(Progress(rank, step, rank == 2 ? 400.0 : 200.0), step)) changes.push_back(*c);
    }
  }
  CHECK(changes.size() == 3);  // flagged again in the new generation
  CHECK(status.View(2300).stragglers_total == 2);
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
  JobStatus status("J", {"x"}, 0, StragglerOptions{1.5, 1, 20, 1});
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
  CHECK(flagged->straggler.rank == 1);
  CHECK(flagged->straggler.host == "host-0");
}

TEST_CASE("JobStatus judges stragglers by compute_ms when given: waiting makes every step_ms alike") {
  JobStatus status("J", {"x"}, 0, StragglerOptions{1.5, 3, 20, 1});
  status.OnGeneration(Plan(0));
  std::vector<Straggler> flagged;
  for (int step = 1; step <= 3; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      auto p = Progress(rank, step, 400.0);  // every rank's wall time: the straggler's
      p.figures.compute_ms = rank == 3 ? 390.0 : 100.0;
      if (auto s = status.OnProgress(p, step)) flagged.push_back(s->straggler);
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
