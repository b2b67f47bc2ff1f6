#include "benchmarks/sim_scale/sim_node.h"

#include <arpa/inet.h>
#include <unistd.h>

#include "common/control_messages.h"
#include "common/message_types.h"
#include "common/store/store_protocol.h"

namespace dslaunch::sim {
namespace {

// The simulated rank's "process id" in WORKER_STARTED: no process of this machine has it.
constexpr int64_t kFakePidBase = 1 << 30;

StoreRequest Req(uint8_t type, std::string key, std::string value = "") {
  StoreRequest r;
  r.type = type;
  r.key = std::move(key);
  r.value = std::move(value);
  return r;
}

// The reply's error, or OK for STORE_OK.
Status ReplyStatus(const wire::Frame& f) {
  if (f.type == msg::kStoreOk) return Status::Ok();
  if (f.type == msg::kStoreError) return DecodeStoreError(f.payload);
  return InvalidArgumentError("unexpected store reply type " + std::to_string(f.type));
}

}  // namespace

const char* PhaseName(Phase p) {
  static const char* const kNames[] = {"join", "connect", "barrier", "broadcast", "alltoall", "teardown"};
  return kNames[static_cast<int>(p)];
}


void SimJob::Connect(std::function<void()> start) {
  if (connecting < connect_window) {
    ++connecting;
    start();
  } else {
    connect_queue.push_back(std::move(start));
  }
}

void SimJob::Connected() {
  --connecting;
  while (connecting < connect_window && !connect_queue.empty()) {
    auto start = std::move(connect_queue.front());
    connect_queue.pop_front();
    ++connecting;
    start();
  }
}

SimNode::SimNode(SimJob& job, int index) : job_(job), index_(index) {
  const std::string ip = "127.1." + std::to_string(index / 250) + "." + std::to_string(index % 250 + 1);
  ::inet_pton(AF_INET, ip.c_str(), &source_);
}

ConnectTarget SimNode::Target(PeerRole role) const {
  ConnectTarget t;
  t.server = job_.server;
  t.source = source_;
  t.job_id = job_.job_id;
  t.secret = job_.secret;
  t.role = role;
  t.generation = role == PeerRole::kAgent ? 0 : generation_;  // store roles are fenced
  t.retries = &job_.connect_retries;
  return t;
}

void SimNode::Error(const std::string& what) { job_.errors.push_back("node " + std::to_string(index_) + ": " + what); }

std::string SimNode::Key(const std::string& key) const { return "gen/" + std::to_string(generation_) + "/" + key; }

void SimNode::StartJoin() {
  agent_ = std::make_unique<SimConnection>(*job_.loop, Target(PeerRole::kAgent));
  if (job_.proxied) agent_->UseProxiedRequests();
  job_.Connect([this] {
    agent_->Start(
        [this] {
          job_.Connected();
          control::Register reg;
          reg.job_id = job_.job_id;
          reg.node_rank = -1;  // by arrival
          reg.version = job_.version;
          reg.host = "sim-node-" + std::to_string(index_);
          reg.pid = ::getpid();
          reg.slots = job_.ranks_per_node;
          agent_->Send(control::Encode(reg));
        },
        [this](wire::Frame f) { OnControl(std::move(f)); },
        [this](const Status& st) {
          if (agent_->open()) job_.Connected();
          Error("agent connection: " + st.ToString());
        });
  });
}

void SimNode::OnControl(wire::Frame f) {
  auto m = control::Decode(f);
  if (!m.ok()) return Error("control message: " + m.status().ToString());
  if (auto* a = std::get_if<control::Assignment>(&*m)) {
    generation_ = a->generation;
    for (const auto& w : a->workers) {
      ranks_.emplace_back();
      ranks_.back().rank = w.rank;
    }
    ++job_.done[static_cast<int>(Phase::kJoin)];
  } else if (auto* h = std::get_if<control::Heartbeat>(&*m)) {
    agent_->Send(control::Encode(control::Heartbeat{h->generation, ++heartbeat_sequence_}));
  } else if (auto* s = std::get_if<control::Stop>(&*m)) {
    Error("the launcher sent STOP: " + s->reason);
  } else if (auto* r = std::get_if<control::Release>(&*m)) {
    if (r->exit_code != 0) Error("RELEASE with exit code " + std::to_string(r->exit_code));
    ++job_.done[static_cast<int>(Phase::kTeardown)];
    agent_->Close();
  }
}

void SimNode::StartConnect() {
  for (Rank& r : ranks_) {
    agent_->Send(control::Encode(control::WorkerStarted{generation_, r.rank, kFakePidBase + r.rank, ""}));
  }
  auto on_error = [this](SimConnection* c) {
    return [this, c](const Status& st) {
      if (!c->open()) job_.Connected();
      Error("store connection: " + st.ToString());
    };
  };
  auto start = [this, on_error](SimConnection* c, int weight) {
    job_.Connect([this, c, weight, on_error] {
      c->Start(
          [this, weight] {
            job_.Connected();
            job_.done[static_cast<int>(Phase::kConnect)] += weight;
          },
          [this](wire::Frame) { Error("unexpected frame on a store connection"); }, on_error(c));
    });
  };
  if (job_.proxied) {
    // The proxy's frames ride the agent's control connection, open since the join.
    job_.done[static_cast<int>(Phase::kConnect)] += static_cast<int>(ranks_.size());
    return;
  }
  for (Rank& r : ranks_) {
    r.conn = std::make_unique<SimConnection>(*job_.loop, Target(PeerRole::kStoreClient));
    start(r.conn.get(), 1);
  }
}

void SimNode::StartBarrier() {
  if (job_.proxied) return Barrier(nullptr);
  for (Rank& r : ranks_) Barrier(&r);
}

void SimNode::Barrier(Rank* r) {
  SimConnection& c = r ? StoreOf(*r) : *agent_;
  const int weight = r ? 1 : Weight();
  StoreRequest add = Req(msg::kStoreAdd, Key(std::string("barrier/") + kBarrierName + "/arrived"));
  add.delta = weight;
  const std::string done_key = Key(std::string("barrier/") + kBarrierName + "/done");
  c.Request(add, [this, &c, weight, done_key](wire::Frame f) {
    if (Status st = ReplyStatus(f); !st.ok()) return Error("barrier add: " + st.ToString());
    wire::ByteReader in(f.payload);
    int64_t arrived = 0;
    if (!in.I64(arrived)) return Error("barrier add: bad reply");
    if (arrived == job_.world_size) {
      StoreRequest set = Req(msg::kStoreSet, done_key, "1");
      c.Request(set, [this](wire::Frame g) {
        if (Status st = ReplyStatus(g); !st.ok()) Error("barrier set: " + st.ToString());
      });
    }
    StoreRequest wait = Req(msg::kStoreWait, "");
    wait.keys = {done_key};
    wait.timeout = kStoreWait;
    c.Request(wait, [this, weight](wire::Frame g) {
      if (Status st = ReplyStatus(g); !st.ok()) return Error("barrier wait: " + st.ToString());
      job_.done[static_cast<int>(Phase::kBarrier)] += weight;
    });
  });
}

void SimNode::StartBroadcast() {
  StoreRequest get = Req(msg::kStoreGet, Key(kBroadcastKey));
  get.timeout = kStoreWait;
  auto send = [this, &get](SimConnection& c, int weight) {
    c.Request(get, [this, weight](wire::Frame f) {
      if (Status st = ReplyStatus(f); !st.ok()) return Error("broadcast get: " + st.ToString());
      wire::ByteReader in(f.payload);
      std::string value;
      if (!in.String(value) || value != BroadcastValue()) return Error("broadcast get: wrong value");
      job_.done[static_cast<int>(Phase::kBroadcast)] += weight;
    });
  };
  if (job_.proxied) return send(*agent_, Weight());
  for (Rank& r : ranks_) send(*r.conn, 1);
}

void SimNode::StartAllToAll() {
  for (Rank& r : ranks_) {
    StoreRequest set = Req(msg::kStoreSet, Key(AddressKey(r.rank)), AddressValue(r.rank));
    StoreOf(r).Request(set, [this](wire::Frame f) {
      if (Status st = ReplyStatus(f); !st.ok()) Error("alltoall set: " + st.ToString());
    });
  }
  if (job_.proxied) return AllToAllGets(&node_);
  for (Rank& r : ranks_) AllToAllGets(&r);
}

// Direct: rank r GETs every rank's key but its own. Proxied: the node GETs every key once
// (its own ranks' too: the proxy does not keep what it forwarded) and hands each to its ranks.
void SimNode::AllToAllGets(Rank* r) {
  const bool node = r == &node_;
  SimConnection& c = node ? *agent_ : *r->conn;
  const int total = node ? job_.world_size : job_.world_size - 1;
  const int window = kAllToAllWindow * (node ? Weight() : 1);  // a proxy carries its ranks' GETs
  while (r->next_get < total && r->next_get - r->gets_done < window) {
    int peer = r->next_get++;
    if (!node && peer >= r->rank) ++peer;  // skip its own key
    StoreRequest get = Req(msg::kStoreGet, Key(AddressKey(peer)));
    get.timeout = kStoreWait;
    c.Request(get, [this, r, peer, total, node](wire::Frame f) {
      if (Status st = ReplyStatus(f); !st.ok()) return Error("alltoall get: " + st.ToString());
      wire::ByteReader in(f.payload);
      std::string value;
      if (!in.String(value) || value != AddressValue(peer)) return Error("alltoall get: wrong value");
      if (++r->gets_done == total) {
        job_.done[static_cast<int>(Phase::kAllToAll)] += node ? Weight() : 1;
        return;
      }
      AllToAllGets(r);
    });
  }
}

void SimNode::StartTeardown() {
  for (Rank& r : ranks_) {
    if (r.conn) r.conn->Close();
    control::WorkerExited e;
    e.generation = generation_;
    e.rank = r.rank;
    e.pid = kFakePidBase + r.rank;
    e.status = ExitStatus::Exited(0);
    agent_->Send(control::Encode(e));
  }
  agent_->Send(control::Encode(control::AgentDone{generation_}));
}

}  // namespace dslaunch::sim
