#include "launcher/elastic/generation_outcome.h"

#include <doctest/doctest.h>

#include <csignal>

namespace dslaunch::launcher {
namespace {

LaunchPlan ThreeNodePlan() {
  LaunchPlan plan;
  plan.job_id = "j";
  plan.world_size = 3;
  plan.nodes.resize(3);
  for (int i = 0; i < 3; ++i) {
    plan.nodes[static_cast<size_t>(i)].node_rank = i;
    plan.nodes[static_cast<size_t>(i)].host = "h" + std::to_string(i);
  }
  return plan;
}

// Members: candidates 4, 1, 7 run as node ranks 0, 1, 2.
const std::vector<int> kMembers = {4, 1, 7};

JobTracker Running() {
  JobTracker t(ThreeNodePlan());
  for (int i = 0; i < 3; ++i) t.OnAgentRegistered(i);
  return t;
}

TEST_CASE("OutcomeOf: success, an interrupt and a scale-up stop") {
  JobTracker ok = Running();
  for (int i = 0; i < 3; ++i) ok.OnAgentDone(i);
  CHECK(OutcomeOf(ok, kMembers, {}).kind == GenerationOutcome::Kind::kSucceeded);

  JobTracker interrupted = Running();
  interrupted.OnSignal(SIGTERM);
  // An interrupt ends the job even when a node was lost on the way.
  CHECK(OutcomeOf(interrupted, kMembers, {1}).kind == GenerationOutcome::Kind::kInterrupted);

  JobTracker rescale = Running();
  rescale.OnRescale("node h9 is back");
  GenerationOutcome r = OutcomeOf(rescale, kMembers, {});
  CHECK(r.kind == GenerationOutcome::Kind::kRescale);
  CHECK(r.description == "node h9 is back");
}

TEST_CASE("OutcomeOf: a failed worker carries what repeat detection compares") {
  JobTracker t = Running();
  control::WorkerExited e;
  e.rank = 2;
  e.status = ExitStatus::Exited(3);
  e.stderr_tail = {"Traceback (most recent call last):", "ValueError: bad"};
  e.last_step = 41;
  t.OnWorkerExited(1, e);
  GenerationOutcome o = OutcomeOf(t, kMembers, {});
  CHECK(o.kind == GenerationOutcome::Kind::kWorkerFailed);
  CHECK(o.rank == 2);
  CHECK(o.status == ExitStatus::Exited(3));
  CHECK(o.error_message == "ValueError: bad");
  CHECK(o.last_step == 41);
  CHECK(o.description == "rank 2 on host h1 exited with exit code 3");
}

TEST_CASE("OutcomeOf: lost nodes make it kNodesLost whatever the root cause, as candidates") {
  JobTracker t = Running();
  control::WorkerExited e;
  e.rank = 0;
  e.status = ExitStatus::Signaled(SIGKILL);
  t.OnWorkerExited(0, e);
  t.OnAgentLost(2, "no heartbeat for 3.0 s", std::nullopt);
  GenerationOutcome o = OutcomeOf(t, kMembers, {7});
  CHECK(o.kind == GenerationOutcome::Kind::kNodesLost);
  CHECK(o.lost_nodes == std::vector<int>{7});

  JobTracker lost = Running();
  lost.OnAgentLost(1, "no heartbeat for 3.0 s", std::nullopt);
  GenerationOutcome l = OutcomeOf(lost, kMembers, {1});
  CHECK(l.kind == GenerationOutcome::Kind::kNodesLost);
  CHECK(l.description == "node h1 lost (no heartbeat for 3.0 s)");
}

TEST_CASE("OutcomeOf: a start-up failure names the nodes that never registered") {
  JobTracker t(ThreeNodePlan());
  t.OnAgentRegistered(0);
  t.OnStartupFailed("not every agent registered within 60 s");
  GenerationOutcome o = OutcomeOf(t, kMembers, {});
  CHECK(o.kind == GenerationOutcome::Kind::kStartupFailed);
  CHECK(o.lost_nodes == std::vector<int>{1, 7});
}

TEST_CASE("OutcomeOf: a stall names the rank, as killed by SIGKILL") {
  JobTracker t = Running();
  t.OnWorkerStalled(2, control::WorkerStalled{0, 2, 9, 3100, 3000, "stopped"});
  GenerationOutcome o = OutcomeOf(t, kMembers, {});
  CHECK(o.kind == GenerationOutcome::Kind::kWorkerStalled);
  CHECK(o.rank == 2);
  CHECK(o.status == ExitStatus::Signaled(SIGKILL));
  CHECK(o.last_step == 9);
  CHECK(o.description == "rank 2 on host h2 reported no progress for 3.1 s");
}

TEST_CASE("FormatGenerationHistory lists every generation with its hosts and end") {
  ElasticPolicy policy({1, 2, 1}, {"a", "b"});
  policy.Start();
  GenerationOutcome failed;
  failed.kind = GenerationOutcome::Kind::kWorkerFailed;
  failed.rank = 1;
  failed.status = ExitStatus::Exited(1);
  failed.description = "rank 1 on host b exited with exit code 1";
  REQUIRE(policy.OnGenerationEnded(failed).kind == Decision::Kind::kRun);
  GenerationOutcome ok;
  policy.OnGenerationEnded(ok);
  CHECK(FormatGenerationHistory(policy) ==
        "dslaunch: generation 0 on a, b: rank 1 on host b exited with exit code 1\n"
        "dslaunch: generation 1 on a, b: succeeded\n");
}

}  // namespace
}  // namespace dslaunch::launcher
