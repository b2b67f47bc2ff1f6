// JobRunner::Impl: the job's lifecycle, and the parts it is built from (the way leveldb's DBImpl
// declares its members in db_impl.h). job_runner.cc holds the lifecycle of a generation:
//
//   Begin            pre-flight is done; the policy starts generation 0 (on the reachable nodes)
//   StartGeneration  plans the generation, fences the store, seats or starts its members' agents
//   Apply            every event of the generation goes to its JobTracker; its Action is carried
//                    out here: STOP to every member, SIGKILL on a second Ctrl-C, or
//   EndGeneration    the policy decides: StartGeneration again (a restart, a rescale), or
//   Finish           the summary, RELEASE to every agent, and the wait for their exits.
//
// The parts, each with its own header, talk to the lifecycle through small interfaces that this
// class implements (privately), so that each is tested with fakes of the others:
//   AgentFleet (agent_fleet.h)  the agents' places, links, processes, heartbeats and re-probes;
//                               the store-proxy traffic stays in its links (FleetEvents)
//   JoinPhase  (join_phase.h)   node mode's rendezvous and rejoins (JoinEvents)
//   StatusFeed (status_feed.h)  the view for the status board and the straggler rule (StatusSource)
//   AsioJobLoop (asio_job_loop.h) the event loop, its timers and signals: the one Asio unit
//
// Threading: one thread, the loop's; the parts post onto it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/endpoint/endpoint.h"
#include "common/status.h"
#include "launcher/elastic/elastic_policy.h"
#include "launcher/elastic/job_tracker.h"
#include "launcher/job/agent_fleet.h"
#include "launcher/job/asio_job_loop.h"
#include "launcher/job/job_runner.h"
#include "launcher/job/join_phase.h"
#include "launcher/job/output_loss.h"
#include "launcher/job/status_feed.h"

namespace dslaunch {
class StoreService;
}  // namespace dslaunch

namespace dslaunch::launcher {

class JobRunner::Impl final : private FleetEvents, private JoinEvents, private StatusSource {
 public:
  Impl(JobRunnerOptions options, std::string job_id, std::string secret, AgentStarter& starter, Console& console);
  ~Impl() override;

  Status Listen();
  uint16_t port() const { return endpoint_->port(); }
  int Run(const JobSpec& spec);
  int RunNodeMode(const NodeModeSpec& spec);

 private:
  // -- The lifecycle (job_runner.cc) --
  std::optional<std::vector<int>> Preflight(const JobSpec& spec);
  bool Begin(const std::vector<int>& unreachable);
  void StartGeneration(const std::vector<int>& active, const std::string& reason, int64_t fault_time_ms);
  control::Assignment MakeAssignment(int node_rank) const;
  void Apply(Action action);
  void ArmStopDeadline(std::chrono::milliseconds after);
  std::chrono::milliseconds StopGrace() const;
  void EndGeneration();
  void Finish(const Decision& d);
  void WaitForSignal();
  void NodeReturned(int candidate);
  void OnAgentMessageOfGeneration(int candidate, int node_rank, const control::Message& msg);

  // -- FleetEvents --
  Status OnRegister(AgentLink& link, const control::Register& reg) override;
  void OnAgentMessage(int candidate, const control::Message& msg) override;
  void OnAgentClosed(int node_rank, const Status& why) override;
  void OnJoinedClosed(int arrival) override { join_->OnLeft(arrival); }
  void OnMemberLost(int node_rank, const std::string& why, std::optional<ExitStatus> status) override;
  bool AgentLeavesWhenDone(int node_rank) const override;
  bool NodeFailed(int candidate) const override { return policy_->state(candidate) == NodeState::kFailed; }
  void OnNodeUnreachable(int candidate) override { policy_->OnNodeUnreachable(candidate); }
  void OnNodeAnswered(int candidate) override { NodeReturned(candidate); }

  // -- JoinEvents --
  bool JobOver() const override { return finished_; }
  void Refuse(AgentLink& link, const std::string& why) override { fleet_.Refuse(link, why); }
  void OnMembershipComplete(const JobSpec& job, size_t max_connections,
                            const std::vector<std::pair<int, AgentLink*>>& seats) override;
  void OnJoinFailed(int code) override;
  bool PlaceFree(int candidate) const override;
  void OnRejoined(int candidate, AgentLink& link) override;

  // -- StatusSource --
  const JobTracker* tracker() const override { return tracker_.get(); }
  int generation() const override { return plan_.generation; }
  bool finished() const override { return finished_; }
  uint64_t store_bytes_sent() const override { return endpoint_->bytes_sent(); }

  // -- Given at construction --
  JobRunnerOptions options_;
  const std::string job_id_;
  const std::string secret_;
  AgentStarter& starter_;
  Console& console_;

  // -- The loop and the endpoint, for the whole job. The loop is declared first: everything
  // below runs on it, and is destroyed before it. --
  AsioJobLoop loop_;
  std::unique_ptr<Endpoint> endpoint_;   // rendezvous store and agents' control plane
  std::shared_ptr<StoreService> store_;  // on the endpoint

  // -- The parts --
  StatusFeed feed_;
  AgentFleet fleet_;
  std::unique_ptr<JoinPhase> join_;  // node mode (RunNodeMode) only

  // -- The job --
  const JobSpec* spec_ = nullptr;  // Run's, or the join phase's once the membership is complete
  bool node_mode_ = false;
  std::unique_ptr<ElasticPolicy> policy_;
  OutputLossLog output_loss_;  // log files that lost output, every generation's
  int last_code_ = 0;          // the exit code of the last generation that ended
  bool finished_ = false;
  int exit_code_ = kExitInfrastructure;

  // -- The current generation --
  LaunchPlan plan_;
  std::unique_ptr<JobTracker> tracker_;
  std::vector<int> members_;   // candidate index by node rank
  std::vector<int> leaving_;   // members whose agent said it stops on its own (AGENT_STOPPING)
  int64_t fault_time_ms_ = 0;  // when this generation's first failure was seen (Unix ms)
  int workers_started_ = 0;    // WORKER_STARTED messages of this generation
  std::unique_ptr<JobTimer> registration_timer_;  // kRegistrationTimeout for its agents
  std::unique_ptr<JobTimer> stop_timer_;          // the stop's deadline (grace + kStopReportMargin)
};

}  // namespace dslaunch::launcher
