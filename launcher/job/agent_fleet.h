// AgentFleet: the job's agents, one place per candidate node for the whole job. It starts agents
// through the AgentStarter and follows their processes, seats the links that register
// (agent_link.h: their store-proxy traffic stays in the link), exchanges heartbeats and declares
// a silent agent lost, sends what the lifecycle decides (ASSIGNMENT, STOP, RELEASE), re-probes
// failed nodes on threads of their own, and at the end waits for the agents to exit, killing
// those that do not. What happens to the job is not its business: it tells the lifecycle
// (FleetEvents, implemented by JobRunner::Impl), which decides.
//
// Threading: the loop's thread (JobLoop); the starter's callbacks and the re-probes post onto
// it. The fleet must be destroyed before the loop: its destructor joins the reporting threads of
// its agents' handles and the re-probes, which post to the loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/control_messages.h"
#include "common/exit_status.h"
#include "common/heartbeat.h"
#include "common/status.h"
#include "launcher/job/agent_link.h"
#include "launcher/job/console.h"
#include "launcher/job/job_loop.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/start/agent_starter.h"

namespace dslaunch::launcher {

// How long the launcher waits for agent processes to exit once the job is over before it kills
// them, and then how long it waits for the kill to be reported.
inline constexpr std::chrono::seconds kAgentExitWait{5};
inline constexpr std::chrono::seconds kAgentKillWait{2};

// What the fleet tells the job's lifecycle, and the few questions it asks it.
class FleetEvents {
 public:
  virtual ~FleetEvents() = default;

  // -- Links --
  // A REGISTER of this job and version: the lifecycle admits it (AgentFleet::Admit), lets it join
  // (node mode), or refuses it (AgentFleet::Refuse). A non-OK status closes the connection.
  virtual Status OnRegister(AgentLink& link, const control::Register& reg) = 0;
  // A control message from the agent seated in `candidate`'s place (its heartbeat is renewed).
  virtual void OnAgentMessage(int candidate, const control::Message& msg) = 0;
  // The connection of the agent seated in a candidate's place closed; `node_rank` is that
  // candidate's node rank in the current generation (-1: not a member).
  virtual void OnAgentClosed(int node_rank, const Status& why) = 0;
  // Node mode: a link that joined as `arrival` closed before the membership was complete.
  virtual void OnJoinedClosed(int arrival) = 0;

  // -- Members --
  // The agent of member `node_rank` is lost: silent past the heartbeat timeout, not startable, or
  // its process ended before it registered (`status`: how, when known).
  virtual void OnMemberLost(int node_rank, const std::string& why, std::optional<ExitStatus> status) = 0;
  // Whether the agent of member `node_rank` is done and exits by itself: its silence is expected.
  virtual bool AgentLeavesWhenDone(int node_rank) const = 0;

  // -- Re-probes (docs/elastic.md, "Re-admission") --
  // Whether `candidate` still counts as a failed node (else its probe's answer is moot).
  virtual bool NodeFailed(int candidate) const = 0;
  // A probe of failed `candidate` found it unreachable (the fleet probes it again later) or
  // answering.
  virtual void OnNodeUnreachable(int candidate) = 0;
  virtual void OnNodeAnswered(int candidate) = 0;
};

class AgentFleet final : private LinkEvents {
 public:
  struct Options {
    std::string agent_path;
    std::string agent_version;  // what pre-flight (and re-probes) check `dslaunch-agent --version` against
    std::string working_dir;
    std::string advertise_host;  // the endpoint's address on the agents' command line
    std::string job_id;
    std::string secret;
    std::chrono::milliseconds heartbeat_timeout{0};
    std::chrono::milliseconds heartbeat_interval = kHeartbeatInterval;
  };

  AgentFleet(Options options, AgentStarter& starter, Console& console, JobLoop& loop, FleetEvents& events);
  ~AgentFleet() override;
  AgentFleet(const AgentFleet&) = delete;
  AgentFleet& operator=(const AgentFleet&) = delete;

  // -- Links --
  // The endpoint's session factory for agent connections; `store` runs their proxied requests.
  std::unique_ptr<SessionHandler> Accept(std::shared_ptr<EndpointConnection> conn, std::shared_ptr<StoreService> store);
  // The endpoint's port, which started agents are given.
  void SetEndpointPort(uint16_t port) { port_ = port; }
  // Tells an agent why it is not admitted (STOP of the current generation: it exits without
  // retrying) and closes its link.
  void Refuse(AgentLink& link, const std::string& why);

  // -- Places --
  // One place per node of `everyone` (candidate i is everyone[i]), each heard now. Failed
  // candidates are re-probed with starters `probe_starter` makes (empty: never).
  void SetUp(const std::vector<NodePlan>& everyone, std::function<std::unique_ptr<AgentStarter>()> probe_starter);
  size_t size() const { return places_.size(); }
  // Host, user and slots of `candidate`.
  const NodePlan& node(int candidate) const { return places_[candidate].node; }
  // Its node rank in the current generation; -1: not a member.
  int node_rank(int candidate) const { return places_[candidate].node_rank; }
  bool seated(int candidate) const { return places_[candidate].link != nullptr; }

  // Seats a registering agent in place `candidate` if this launcher expects one there, and
  // returns the place's node rank; otherwise refuses it (Refuse) saying why, in this order: the
  // place does not exist, it has an agent, the job is `stopping`, no agent is expected there in
  // this generation.
  std::optional<int> Admit(AgentLink& link, int candidate, bool stopping);
  // Node mode: seats an agent that joined in place `candidate` when the membership completes.
  void SeatJoined(int candidate, AgentLink& link);
  // Node mode: seats an agent that rejoined in the place of lost `candidate` once the job runs;
  // it waits for the next generation's ASSIGNMENT (no heartbeats either way until then).
  void SeatRejoined(int candidate, AgentLink& link);

  // -- Generations --
  // Generation `generation` runs on `members` (candidates, in node-rank order): the places get
  // their node ranks, and the agents of the others are released (RELEASE) and their links closed.
  void SetMembers(int generation, const std::vector<int>& members);
  // Every seated agent's store proxy stops running as its last generation (docs/protocol.md).
  void EndStoreProxies();
  // Sends the seated agent of `candidate` its ASSIGNMENT, naming the agent it replaced on the same
  // host for fencing (docs/elastic.md, "Fencing a lost node").
  void SendAssignment(int candidate, control::Assignment assignment);
  // Starts an agent for `candidate` unless one was started and has not registered yet. A start
  // that fails is reported as the member's loss (FleetEvents::OnMemberLost).
  void StartAgentIfNone(int candidate);
  // STOP to the seated agents of `candidates`.
  void SendStop(const std::vector<int>& candidates, int64_t grace_ms, const std::string& reason);
  // Forgets `candidate`'s agent: its link is closed, and with `kill` its process killed.
  void Drop(int candidate, bool kill);
  // Re-probes failed `candidate` after the policy's backoff (ReprobeDelay), on a thread of its
  // own; the answer goes to FleetEvents. Nothing when it is being probed already.
  void Probe(int candidate);
  // Heartbeats every heartbeat interval from now on: each seated agent gets one, and a silent
  // one is lost (FleetEvents::OnMemberLost).
  void StartHeartbeats();

  // -- The end --
  // The job is over: heartbeats and re-probes stop, every seated agent gets RELEASE with `code`
  // (-1: none; node mode: the job's exit code) and its link is closed.
  void ReleaseAll(int code);
  // Stops the loop once every started agent has exited; one that has not after kAgentExitWait is
  // killed, and kAgentKillWait later the loop stops anyway (a dead SSH connection never reports).
  void AwaitExits();

 private:
  // One candidate node's place, for the whole job.
  struct Place {
    NodePlan node;  // host, user, slots; node_rank = candidate index
    AgentLink* link = nullptr;
    std::unique_ptr<AgentHandle> handle;
    uint64_t handle_serial = 0;  // which started agent the handle's callbacks speak of
    bool agent_running = false;  // an agent process started by this launcher has not exited
    bool expecting = false;      // an agent was started for it and has not registered yet
    bool probing = false;
    int failed_probes = 0;
    int node_rank = -1;  // in the current generation; -1: not a member
    std::optional<HeartbeatMonitor> heartbeat;
    // Node mode: a rejoined agent waits in its registration for an ASSIGNMENT (the next
    // generation's): it sends no heartbeats, and must be sent none, until then.
    bool awaiting_assignment = false;
    // The registered agent that holds (or last held) this place, and the one it replaced on the
    // same host, which its ASSIGNMENT names for fencing (docs/elastic.md, "Fencing a lost node").
    int64_t agent_pid = 0;
    std::string agent_host;
    int64_t fence_pid = 0;
    int assigned_generation = -1;  // the generation whose ASSIGNMENT it was sent last
  };

  // LinkEvents: the fleet's links report here. A REGISTER is checked for the job and the version
  // here, the rest is the lifecycle's; a closing link leaves its place.
  Status OnRegister(AgentLink& link, const control::Register& reg) override;
  void OnMessage(AgentLink& link, const control::Message& msg) override;
  void OnClosed(AgentLink& link, const Status& why) override;

  void Seat(int candidate, AgentLink& link);
  void SendSnapshotPeers();
  void StartAgent(int candidate);
  void OnProcessExit(int candidate, uint64_t serial, std::optional<ExitStatus> status, const std::string& detail);
  void OnProbed(int candidate, bool answered);
  void ScheduleHeartbeats();
  void CheckHeartbeats();
  bool AllAgentsExited() const { return agents_exited_ >= agents_started_; }

  // -- Wiring --
  const Options options_;
  AgentStarter& starter_;
  Console& console_;
  JobLoop& loop_;
  FleetEvents& events_;
  uint16_t port_ = 0;

  // -- Places and processes --
  std::vector<Place> places_;
  std::vector<int> members_;           // the current generation's, in node-rank order
  size_t members_assigned_ = 0;        // of them, those sent their ASSIGNMENT
  bool snapshot_peers_sent_ = false;  // SNAPSHOT_PEERS went to every member of this generation
  std::vector<std::unique_ptr<AgentHandle>> retired_handles_;  // agents replaced by a later one
  uint64_t agent_serial_ = 0;    // agents whose start was attempted
  uint64_t agents_started_ = 0;  // of them, started
  uint64_t agents_exited_ = 0;   // of those, exits reported
  int generation_ = 0;           // the current generation (STOP, HEARTBEAT, RELEASE carry it)
  bool over_ = false;            // ReleaseAll happened

  // -- Heartbeats --
  std::unique_ptr<JobTimer> heartbeat_timer_;
  SteadyClock::time_point last_heartbeat_check_;
  uint64_t heartbeat_sequence_ = 0;

  // -- Re-probes --
  std::function<std::unique_ptr<AgentStarter>()> probe_starter_;
  std::vector<std::thread> probes_;

  // -- The end --
  std::unique_ptr<JobTimer> exit_timer_;
};

}  // namespace dslaunch::launcher
