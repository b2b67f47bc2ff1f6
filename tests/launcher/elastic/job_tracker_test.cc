#include "launcher/elastic/job_tracker.h"

#include <doctest/doctest.h>

#include <csignal>
#include <optional>

#include "common/exit_codes.h"
#include "launcher/job/console.h"

namespace dslaunch::launcher {
namespace {

LaunchPlan TwoNodePlan() {
  LaunchPlan plan;
  plan.job_id = "j";
  plan.world_size = 4;
  plan.nodes.resize(2);
  plan.nodes[0].node_rank = 0;
  plan.nodes[0].host = "a";
  plan.nodes[1].node_rank = 1;
  plan.nodes[1].host = "b";
  return plan;
}

control::WorkerExited Exit(int rank, ExitStatus status) {
  control::WorkerExited e;
  e.rank = rank;
  e.pid = 1000 + rank;
  e.status = status;
  e.stderr_tail = {"Traceback", "ValueError: boom"};
  e.log_path = "/logs/rank" + std::to_string(rank) + ".stderr.log";
  return e;
}

TEST_CASE("JobTracker finishes with 0 when every agent reports success") {
  JobTracker t(TwoNodePlan());
  CHECK(t.OnAgentRegistered(0) == Action::kNone);
  CHECK(t.state() == JobState::kStarting);
  CHECK(t.OnAgentRegistered(1) == Action::kNone);
  CHECK(t.state() == JobState::kRunning);
  CHECK(t.OnWorkerExited(0, Exit(0, ExitStatus::Exited(0))) == Action::kNone);
  CHECK(t.OnAgentDone(0) == Action::kNone);
  CHECK(t.OnAgentDone(1) == Action::kFinish);
  CHECK(t.state() == JobState::kFinished);
  CHECK(t.ExitCode() == 0);
  CHECK(FormatSummary("j", t).empty());
}

TEST_CASE("JobTracker makes the first failure the root cause and stops every node") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnWorkerExited(1, Exit(3, ExitStatus::Exited(3))) == Action::kStopAll);
  CHECK(t.state() == JobState::kStopping);
  // The workers stopped because of it are not root causes.
  CHECK(t.OnWorkerExited(0, Exit(0, ExitStatus::Signaled(SIGTERM))) == Action::kNone);
  CHECK(t.OnWorkerExited(1, Exit(2, ExitStatus::Signaled(SIGKILL))) == Action::kNone);
  CHECK(t.OnAgentDone(0) == Action::kNone);
  CHECK(t.OnAgentDone(1) == Action::kFinish);
  CHECK(t.ExitCode() == 3);
  REQUIRE(t.root_cause().has_value());
  CHECK(t.root_cause()->rank == 3);
  CHECK(t.root_cause()->host == "b");
  std::string summary = FormatSummary("j", t);
  CHECK(summary.find("rank 3 on host b (pid 1003) exited with exit code 3") != std::string::npos);
  CHECK(summary.find("ValueError: boom") != std::string::npos);
  CHECK(summary.find("b:/logs/rank3.stderr.log") != std::string::npos);
}

TEST_CASE("JobTracker maps a signal death to 128+N") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  CHECK(t.OnWorkerExited(0, Exit(1, ExitStatus::Signaled(SIGKILL))) == Action::kStopAll);
  t.OnAgentDone(0);
  t.OnAgentDone(1);
  CHECK(t.ExitCode() == 137);
}

TEST_CASE("JobTracker stops the job on a signal to the launcher and exits 128+N") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnSignal(SIGTERM) == Action::kStopAll);
  CHECK(t.OnSignal(SIGTERM) == Action::kNone);  // already stopping
  CHECK(t.OnSignal(SIGHUP) == Action::kNone);
  CHECK(t.OnStopDeadline() == Action::kFinish);
  CHECK(t.ExitCode() == 143);
  CHECK(FormatSummary("j", t).find("the launcher received SIGTERM") != std::string::npos);
}

TEST_CASE("JobTracker stops the job with save-on-stop on SIGUSR1 and exits with the requeue class") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnSignal(SIGUSR1) == Action::kStopAll);
  CHECK(t.OnAgentDone(0) == Action::kNone);
  CHECK(t.OnAgentDone(1) == Action::kFinish);
  CHECK(t.ExitCode() == kExitRequeue);
  CHECK(FormatSummary("j", t).find("the launcher received SIGUSR1 (stop for a requeue: workers save on SIGTERM)") !=
        std::string::npos);
}

TEST_CASE("JobTracker escalates a second SIGINT to killing every worker at once") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnSignal(SIGINT) == Action::kStopAll);
  CHECK(t.OnSignal(SIGINT) == Action::kKillAll);
  CHECK(t.OnSignal(SIGINT) == Action::kKillAll);  // every further Ctrl-C asks again
  CHECK(t.state() == JobState::kStopping);
  CHECK(t.OnAgentDone(0) == Action::kNone);
  CHECK(t.OnAgentDone(1) == Action::kFinish);
  CHECK(t.ExitCode() == 130);  // the first signal stays the root cause
  CHECK(FormatSummary("j", t).find("the launcher received SIGINT") != std::string::npos);
  CHECK(t.OnSignal(SIGINT) == Action::kNone);  // finished: nothing left to kill
}

TEST_CASE("JobTracker cuts the grace period short on a SIGINT while stopping for a failure") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnWorkerExited(1, Exit(3, ExitStatus::Exited(3))) == Action::kStopAll);
  CHECK(t.OnSignal(SIGINT) == Action::kKillAll);
  CHECK(t.root_cause()->kind == RootCause::Kind::kWorkerFailed);
}

TEST_CASE("JobTracker reports an agent's own failure as the root cause, not a lost agent") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnAgentFailed(1, "cannot create log directory '/l/j': Permission denied") == Action::kStopAll);
  // Its connection closes right after: nothing more to say about that node.
  CHECK(t.OnAgentLost(1, "control connection closed", std::nullopt) == Action::kNone);
  CHECK(t.OnAgentDone(0) == Action::kFinish);
  CHECK(t.ExitCode() == kExitInfrastructure);
  REQUIRE(t.root_cause()->kind == RootCause::Kind::kAgentFailed);
  std::string summary = FormatSummary("j", t);
  CHECK(summary.find("dslaunch: job j failed: node 1 on host b: cannot create log directory '/l/j': "
                     "Permission denied\n") == 0);
  CHECK(summary.find("lost") == std::string::npos);
}

TEST_CASE("JobTracker treats a lost agent as a failure of the job") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnAgentLost(1, "connection reset", std::nullopt) == Action::kStopAll);
  CHECK(t.OnAgentDone(0) == Action::kFinish);
  CHECK(t.ExitCode() == kExitInfrastructure);
  CHECK(t.root_cause()->kind == RootCause::Kind::kAgentLost);
}

TEST_CASE("JobTracker names an agent's own reason to stop, not the SIGTERM exits that follow it") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnAgentStopping(1, control::AgentStopping{0, "no heartbeat from the launcher for 10.4 s", 0}) ==
        Action::kStopAll);
  control::WorkerExited stopped = Exit(2, ExitStatus::Signaled(SIGTERM));
  stopped.stopped = true;
  CHECK(t.OnWorkerExited(1, stopped) == Action::kNone);
  CHECK(t.OnAgentDone(1) == Action::kNone);
  CHECK(t.OnAgentDone(0) == Action::kFinish);
  REQUIRE(t.root_cause().has_value());
  CHECK(t.root_cause()->kind == RootCause::Kind::kAgentStopped);
  CHECK(t.root_cause()->node_rank == 1);
  CHECK(t.ExitCode() == kExitInfrastructure);
  CHECK(FormatSummary("j", t) ==
        "dslaunch: job j failed: the agent of node 1 on host b stopped its workers: no heartbeat from the "
        "launcher for 10.4 s\n"
        "dslaunch: stopped all workers; exit code 75\n");
}

TEST_CASE("JobTracker exits 128+N when an agent stops its workers because it received signal N") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnAgentStopping(0, control::AgentStopping{0, "the agent received SIGHUP", SIGHUP}) == Action::kStopAll);
  // Once the job is stopping, a second agent's reason does not replace the first.
  CHECK(t.OnAgentStopping(1, control::AgentStopping{0, "the agent received SIGTERM", SIGTERM}) == Action::kNone);
  CHECK(t.root_cause()->message == "the agent received SIGHUP");
  CHECK(t.ExitCode() == 128 + SIGHUP);
}

control::WorkerExited WithRecord(control::WorkerExited e, const std::string& message, int64_t time_ns,
                                  bool caused_by_peer) {
  e.error_record = FormatErrorRecord({message, time_ns, caused_by_peer});
  return e;
}

TEST_CASE("JobTracker prefers a rank's own earlier failure to a collateral failure that was reported first") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnWorkerExited(1, WithRecord(Exit(3, ExitStatus::Exited(1)), "allreduce failed", 2000, true)) ==
        Action::kStopAll);
  CHECK(t.root_cause()->rank == 3);
  // A stopped rank without a record, and one whose own failure came after the collateral one
  // (it failed while stopping), do not replace it.
  CHECK(t.OnWorkerExited(1, Exit(2, ExitStatus::Signaled(SIGTERM))) == Action::kNone);
  CHECK(t.OnWorkerExited(0, WithRecord(Exit(1, ExitStatus::Exited(2)), "save on stop failed", 3000, false)) ==
        Action::kNone);
  CHECK(t.root_cause()->rank == 3);
  // Rank 0's own failure happened first: it is the root cause, with its exit status and message.
  CHECK(t.OnWorkerExited(0, WithRecord(Exit(0, ExitStatus::Exited(28)), "No space left on device", 1000, false)) ==
        Action::kNone);
  CHECK(t.state() == JobState::kStopping);
  REQUIRE(t.root_cause().has_value());
  CHECK(t.root_cause()->rank == 0);
  CHECK(t.root_cause()->node_rank == 0);
  CHECK(t.root_cause()->host == "a");
  CHECK(t.root_cause()->error->message == "No space left on device");
  CHECK(t.ExitCode() == 28);
  // Once an original failure is the root cause, nothing replaces it.
  CHECK(t.OnWorkerExited(1, WithRecord(Exit(2, ExitStatus::Exited(5)), "other", 500, false)) == Action::kNone);
  CHECK(t.root_cause()->rank == 0);
}

TEST_CASE("JobTracker keeps a first failure that was not collateral, and ignores unreadable records") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  control::WorkerExited garbled = Exit(1, ExitStatus::Exited(4));
  garbled.error_record = "{not json";
  CHECK(t.OnWorkerExited(0, garbled) == Action::kStopAll);
  CHECK_FALSE(t.root_cause()->error.has_value());
  CHECK(t.OnWorkerExited(1, WithRecord(Exit(2, ExitStatus::Exited(9)), "own", 1, false)) == Action::kNone);
  CHECK(t.root_cause()->rank == 1);
  CHECK(t.ExitCode() == 4);
}

TEST_CASE("JobTracker exits with the infrastructure class for a lost agent, whatever its own exit status") {
  struct Case {
    std::optional<ExitStatus> status;
    int exit_code;
  };
  for (const Case& c : {Case{ExitStatus::Exited(5), kExitInfrastructure},
                        Case{ExitStatus::Signaled(SIGKILL), kExitInfrastructure},
                        Case{ExitStatus::Exited(0), kExitInfrastructure}, Case{std::nullopt, kExitInfrastructure}}) {
    CAPTURE(c.status.value_or(ExitStatus{}).value);
    JobTracker t(TwoNodePlan());
    t.OnAgentRegistered(0);
    t.OnAgentRegistered(1);
    CHECK(t.OnAgentLost(1, "connection reset", c.status) == Action::kStopAll);
    CHECK(t.state() == JobState::kStopping);
    CHECK(t.OnAgentDone(0) == Action::kFinish);
    CHECK(t.ExitCode() == c.exit_code);
    REQUIRE(t.root_cause().has_value());
    CHECK(t.root_cause()->kind == RootCause::Kind::kAgentLost);
    CHECK(t.root_cause()->node_rank == 1);
    CHECK(t.root_cause()->host == "b");
    CHECK(t.root_cause()->status == c.status.value_or(ExitStatus{}));
    CHECK(FormatSummary("j", t).find("lost the agent of node 1 on host b: connection reset\n") != std::string::npos);
  }
}

TEST_CASE("JobTracker finishes at once when the last agent is lost") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnAgentDone(0) == Action::kNone);
  CHECK(t.OnAgentLost(1, "connection reset", ExitStatus::Exited(4)) == Action::kFinish);
  CHECK(t.state() == JobState::kFinished);
  CHECK(t.ExitCode() == kExitInfrastructure);
}

TEST_CASE("JobTracker ignores the loss of an agent that already reported done") {
  SUBCASE("after a clean finish") {
    JobTracker t(TwoNodePlan());
    t.OnAgentRegistered(0);
    t.OnAgentRegistered(1);
    CHECK(t.OnAgentDone(0) == Action::kNone);
    // Its connection closing behind AgentDone is no failure, and no second "done".
    CHECK(t.OnAgentLost(0, "connection closed", ExitStatus::Exited(0)) == Action::kNone);
    CHECK(t.state() == JobState::kRunning);
    CHECK_FALSE(t.root_cause().has_value());
    CHECK(t.OnAgentDone(1) == Action::kFinish);
    CHECK(t.ExitCode() == 0);
    CHECK(t.OnAgentLost(1, "connection closed", ExitStatus::Signaled(SIGKILL)) == Action::kNone);
    CHECK(t.state() == JobState::kFinished);
    CHECK(t.ExitCode() == 0);
  }
  SUBCASE("while stopping for a worker's failure") {
    JobTracker t(TwoNodePlan());
    t.OnAgentRegistered(0);
    t.OnAgentRegistered(1);
    CHECK(t.OnWorkerExited(0, Exit(1, ExitStatus::Exited(3))) == Action::kStopAll);
    CHECK(t.OnAgentDone(0) == Action::kNone);
    CHECK(t.OnAgentLost(0, "connection reset", ExitStatus::Signaled(SIGKILL)) == Action::kNone);
    CHECK(t.state() == JobState::kStopping);
    CHECK(t.OnAgentDone(1) == Action::kFinish);
    CHECK(t.root_cause()->kind == RootCause::Kind::kWorkerFailed);
    CHECK(t.ExitCode() == 3);
  }
}

TEST_CASE("JobTracker reports a startup failure with a generic exit code") {
  JobTracker t(TwoNodePlan());
  CHECK(t.OnStartupFailed("not every agent registered") == Action::kStopAll);
  CHECK(t.OnAgentLost(0, "x", ExitStatus::Exited(3)) == Action::kNone);
  CHECK(t.OnAgentLost(1, "y", std::nullopt) == Action::kFinish);
  CHECK(t.ExitCode() == kExitInfrastructure);
}

TEST_CASE("JobTracker makes a stalled rank the root cause and names every silent rank, longest first") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnWorkerStalled(1, control::WorkerStalled{0, 3, 41, 3100, 3000}) == Action::kStopAll);
  CHECK(t.OnWorkerStalled(0, control::WorkerStalled{0, 0, 41, 3050, 3000}) == Action::kNone);
  CHECK(t.OnWorkerStalled(0, control::WorkerStalled{0, 1, 40, 3400, 3000}) == Action::kNone);
  REQUIRE(t.root_cause().has_value());
  CHECK(t.root_cause()->kind == RootCause::Kind::kWorkerStalled);
  CHECK(t.root_cause()->rank == 3);
  CHECK(t.ExitCode() == 128 + SIGKILL);
  CHECK(t.stalled_ranks().size() == 3);
  std::string summary = FormatSummary("j", t);
  CHECK(summary.find("rank 3 on host b reported no progress for 3.1 s (watchdog timeout 3.0 s; last step 41)") !=
        std::string::npos);
  CHECK(summary.find("ranks that stopped reporting, longest silent first: 1 (step 40) 3 (step 41) 0 (step 41)") !=
        std::string::npos);
}

TEST_CASE("JobTracker names a stalled rank found stopped before the sleeping peers reported first") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnWorkerStalled(0, control::WorkerStalled{0, 0, 13, 3000, 3000, "sleeping"}) == Action::kStopAll);
  CHECK(t.root_cause()->rank == 0);
  CHECK(t.OnWorkerStalled(1, control::WorkerStalled{0, 3, 13, 2900, 3000, "stopped"}) == Action::kNone);
  CHECK(t.root_cause()->rank == 3);
  CHECK(t.root_cause()->process_state == "stopped");
  // A later stopped rank does not replace the first one found stopped.
  CHECK(t.OnWorkerStalled(1, control::WorkerStalled{0, 2, 13, 2900, 3000, "stopped"}) == Action::kNone);
  CHECK(t.root_cause()->rank == 3);
  CHECK(FormatSummary("j", t).find("last step 13; found stopped)") != std::string::npos);
}

TEST_CASE("JobTracker lets a stall replace a peer's collateral failure as the root cause") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  control::WorkerExited collateral = Exit(0, ExitStatus::Exited(1));
  collateral.error_record = R"({"message": {"message": "gloo timeout", "extraInfo": {"timestamp": "1"}},
                               "dslaunch": {"time_ns": 5, "caused_by_peer": true}})";
  CHECK(t.OnWorkerExited(0, collateral) == Action::kStopAll);
  REQUIRE(t.root_cause()->error.has_value());
  REQUIRE(t.root_cause()->error->caused_by_peer);
  CHECK(t.OnWorkerStalled(1, control::WorkerStalled{0, 2, 7, 4000, 3000}) == Action::kNone);
  CHECK(t.root_cause()->kind == RootCause::Kind::kWorkerStalled);
  CHECK(t.root_cause()->rank == 2);
}

TEST_CASE("JobTracker records lost nodes in order and lists the unfinished ones") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnAgentLost(1, "no heartbeat for 3 s", std::nullopt) == Action::kStopAll);
  CHECK(t.lost_nodes() == std::vector<int>{1});
  CHECK(t.unfinished_nodes() == std::vector<int>{0});
  CHECK(t.OnStopDeadline() == Action::kFinish);
  CHECK(t.unfinished_nodes() == std::vector<int>{0});
}

TEST_CASE("JobTracker stops for a rescale without calling it a failure of a rank") {
  JobTracker t(TwoNodePlan());
  t.OnAgentRegistered(0);
  t.OnAgentRegistered(1);
  CHECK(t.OnRescale("node c is back: scaling up to 3 nodes") == Action::kStopAll);
  CHECK(t.OnWorkerExited(0, Exit(0, ExitStatus::Signaled(SIGTERM))) == Action::kNone);
  CHECK(t.root_cause()->kind == RootCause::Kind::kRescale);
  CHECK(t.OnRescale("again") == Action::kNone);
}

TEST_CASE("Job state transitions follow the table") {
  CHECK(IsLegalTransition(JobState::kStarting, JobState::kRunning));
  CHECK(IsLegalTransition(JobState::kRunning, JobState::kStopping));
  CHECK(IsLegalTransition(JobState::kStopping, JobState::kFinished));
  CHECK_FALSE(IsLegalTransition(JobState::kFinished, JobState::kRunning));
  CHECK_FALSE(IsLegalTransition(JobState::kStopping, JobState::kRunning));
}

TEST_CASE("FormatOutputLines prefixes every line with the rank, and the host when given") {
  CHECK(FormatOutputLines(3, "", {"a", "b"}) == "[rank 3] a\n[rank 3] b\n");
  CHECK(FormatOutputLines(0, "node2", {""}) == "[rank 0 node2] \n");
}

}  // namespace
}  // namespace dslaunch::launcher
