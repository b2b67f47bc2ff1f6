#include "common/control_messages.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <utility>

#include "common/cpu_list.h"
#include "common/snapshot/slot_header.h"

namespace dslaunch::control {
namespace {

using wire::ByteReader;
using wire::ByteWriter;

// A name from the wire, fit for an error message: at most 64 bytes, bytes outside printable
// ASCII as '?'.
std::string PrintableName(const std::string& name) {
  constexpr size_t kMaxShown = 64;
  std::string out = name.substr(0, kMaxShown);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return name.size() > kMaxShown ? out + "..." : out;
}

// env = u32 count, then count pairs of strings; a name given twice is malformed (`whose` says
// whose environment it was, for the message).
void PutEnv(ByteWriter& w, const std::map<std::string, std::string>& env) {
  w.U32(static_cast<uint32_t>(env.size()));
  for (const auto& [k, v] : env) w.String(k).String(v);
}
bool GetEnv(ByteReader& r, std::map<std::string, std::string>& env, const std::string& whose, std::string& why) {
  uint32_t count = 0;
  if (!r.U32(count)) return false;
  for (uint32_t j = 0; j < count; ++j) {
    std::string k, v;
    if (!(r.String(k) && r.String(v))) return false;
    if (!env.try_emplace(k, std::move(v)).second) {
      why = whose + " has environment variable '" + PrintableName(k) + "' twice";
      return false;
    }
  }
  return true;
}

void Put(ByteWriter& w, const Register& m) {
  w.String(m.job_id).I32(m.generation).I32(m.node_rank).U32(m.protocol_version).String(m.version)
      .String(m.host).I64(m.pid).I32(m.slots).String(m.snapshot_address);
}
bool Get(ByteReader& r, Register& m, std::string& why) {
  return r.String(m.job_id) && r.I32(m.generation) && r.I32(m.node_rank) &&
         r.U32(m.protocol_version) && r.String(m.version) && r.String(m.host) && r.I64(m.pid) && r.I32(m.slots) &&
         r.String(m.snapshot_address);
}

void Put(ByteWriter& w, const Assignment& m) {
  w.I32(m.generation).I32(m.node_rank).String(m.log_dir).String(m.working_dir)
      .I64(m.grace_period_ms).Bool(m.tee).I64(m.heartbeat_interval_ms).I64(m.heartbeat_timeout_ms);
  PutEnv(w, m.env);
  w.U32(static_cast<uint32_t>(m.workers.size()));
  for (const auto& worker : m.workers) {
    w.I32(worker.rank).I32(worker.local_rank).StringList(worker.argv);
    PutEnv(w, worker.env);
  }
  w.Bool(m.restartable).I64(m.watchdog_timeout_ms).Bool(m.bind_cores_to_rank);
  w.U32(static_cast<uint32_t>(m.bind_core_list.size()));
  for (int cpu : m.bind_core_list) w.I32(cpu);
  w.Bool(m.await_release).Bool(m.store_proxy).I64(m.fence_agent_pid);
}
bool Get(ByteReader& r, Assignment& m, std::string& why) {
  uint32_t n = 0;
  if (!(r.I32(m.generation) && r.I32(m.node_rank) && r.String(m.log_dir) &&
        r.String(m.working_dir) && r.I64(m.grace_period_ms) && r.Bool(m.tee) &&
        r.I64(m.heartbeat_interval_ms) && r.I64(m.heartbeat_timeout_ms) && GetEnv(r, m.env, "the node", why) &&
        r.U32(n))) {
    return false;
  }
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    WorkerAssignment worker;
    if (!(r.I32(worker.rank) && r.I32(worker.local_rank) && r.StringList(worker.argv) &&
          GetEnv(r, worker.env, "rank " + std::to_string(worker.rank), why))) {
      return false;
    }
    m.workers.push_back(std::move(worker));
  }
  uint32_t cpus = 0;
  if (!(r.ok() && r.Bool(m.restartable) && r.I64(m.watchdog_timeout_ms) && r.Bool(m.bind_cores_to_rank) &&
        r.U32(cpus))) {
    return false;
  }
  for (uint32_t i = 0; i < cpus; ++i) {  // a count beyond the bytes present fails at the first missing one
    int32_t cpu = 0;
    if (!r.I32(cpu)) return false;
    if (cpu < 0 || cpu >= kMaxCpuId) {
      why = "bind_core_list holds CPU " + std::to_string(cpu) + ", outside 0.." + std::to_string(kMaxCpuId - 1);
      return false;
    }
    m.bind_core_list.push_back(cpu);
  }
  if (!(r.Bool(m.await_release) && r.Bool(m.store_proxy) && r.I64(m.fence_agent_pid))) return false;
  if (m.fence_agent_pid < 0) {
    why = "fence_agent_pid " + std::to_string(m.fence_agent_pid) + " is negative";
    return false;
  }
  return true;
}

void Put(ByteWriter& w, const WorkerStarted& m) { w.I32(m.generation).I32(m.rank).I64(m.pid).String(m.log_path); }
bool Get(ByteReader& r, WorkerStarted& m, std::string& why) {
  return r.I32(m.generation) && r.I32(m.rank) && r.I64(m.pid) && r.String(m.log_path);
}

void Put(ByteWriter& w, const WorkerExited& m) {
  w.I32(m.generation).I32(m.rank).I64(m.pid)
      .U8(m.status.kind == ExitStatus::Kind::kSignaled ? 1 : 0).I32(m.status.value)
      .Bool(m.stopped).StringList(m.stderr_tail).String(m.log_path).String(m.error_record).I64(m.last_step);
}
bool Get(ByteReader& r, WorkerExited& m, std::string& why) {
  uint8_t kind = 0;
  int32_t value = 0;
  if (!(r.I32(m.generation) && r.I32(m.rank) && r.I64(m.pid) && r.U8(kind) && r.I32(value) &&
        r.Bool(m.stopped) && r.StringList(m.stderr_tail) && r.String(m.log_path) && r.String(m.error_record) &&
        r.I64(m.last_step))) {
    return false;
  }
  if (kind > 1) return false;
  m.status = kind == 1 ? ExitStatus::Signaled(value) : ExitStatus::Exited(value);
  if (!IsReportableExitStatus(m.status)) {
    why = "rank " + std::to_string(m.rank) + " " + DescribeExitStatus(m.status) +
          " is no status a process can end with";
    return false;
  }
  return true;
}

void Put(ByteWriter& w, const Output& m) {
  w.I32(m.generation).I32(m.rank).U8(static_cast<uint8_t>(m.stream)).StringList(m.lines);
}
bool Get(ByteReader& r, Output& m, std::string& why) {
  uint8_t stream = 0;
  if (!(r.I32(m.generation) && r.I32(m.rank) && r.U8(stream) && r.StringList(m.lines))) {
    return false;
  }
  if (stream != 1 && stream != 2) return false;
  m.stream = static_cast<Stream>(stream);
  return true;
}

void Put(ByteWriter& w, const Stop& m) {
  w.I32(m.generation).I64(m.grace_period_ms).String(m.reason);
}
bool Get(ByteReader& r, Stop& m, std::string& why) {
  return r.I32(m.generation) && r.I64(m.grace_period_ms) && r.String(m.reason);
}

void Put(ByteWriter& w, const AgentDone& m) { w.I32(m.generation); }
bool Get(ByteReader& r, AgentDone& m, std::string& why) { return r.I32(m.generation); }

void Put(ByteWriter& w, const Heartbeat& m) { w.I32(m.generation).U64(m.sequence); }
bool Get(ByteReader& r, Heartbeat& m, std::string& why) { return r.I32(m.generation) && r.U64(m.sequence); }

void Put(ByteWriter& w, const AgentStopping& m) { w.I32(m.generation).String(m.reason).I32(m.signal); }
bool Get(ByteReader& r, AgentStopping& m, std::string& why) {
  if (!(r.I32(m.generation) && r.String(m.reason) && r.I32(m.signal))) return false;
  if (m.signal < 0 || m.signal > kMaxSignalNumber) {
    why = "signal " + std::to_string(m.signal) + " is not a signal number (0 for none)";
    return false;
  }
  return true;
}

void Put(ByteWriter& w, const AgentFailed& m) { w.I32(m.generation).String(m.reason); }
bool Get(ByteReader& r, AgentFailed& m, std::string& why) { return r.I32(m.generation) && r.String(m.reason); }

void Put(ByteWriter& w, const WorkerStalled& m) {
  w.I32(m.generation).I32(m.rank).I64(m.last_step).I64(m.silence_ms).I64(m.timeout_ms).String(m.state);
}
bool Get(ByteReader& r, WorkerStalled& m, std::string& why) {
  return r.I32(m.generation) && r.I32(m.rank) && r.I64(m.last_step) && r.I64(m.silence_ms) && r.I64(m.timeout_ms) &&
         r.String(m.state);
}

void Put(ByteWriter& w, const OutputLost& m) {
  w.I32(m.generation).I32(m.rank).U8(static_cast<uint8_t>(m.stream)).String(m.path).String(m.error);
  w.U64(m.lost_bytes).U64(m.lost_lines).Bool(m.final);
}
bool Get(ByteReader& r, OutputLost& m, std::string& why) {
  uint8_t stream = 0;
  if (!(r.I32(m.generation) && r.I32(m.rank) && r.U8(stream) && r.String(m.path) && r.String(m.error) &&
        r.U64(m.lost_bytes) && r.U64(m.lost_lines) && r.Bool(m.final))) {
    return false;
  }
  if (stream != 1 && stream != 2) {
    why = "unknown stream " + std::to_string(stream);
    return false;
  }
  m.stream = static_cast<Stream>(stream);
  return true;
}

void Put(ByteWriter& w, const Release& m) { w.I32(m.generation).I32(m.exit_code).String(m.reason); }
bool Get(ByteReader& r, Release& m, std::string& why) {
  return r.I32(m.generation) && r.I32(m.exit_code) && r.String(m.reason);
}

// WORKER_PROGRESS: i32 generation, i32 rank, i64 step, u32 mask of the figures present (bit i for
// the i-th of kRealFigures, then bit 6 + j for the j-th of kCountFigures), then each present
// figure in bit order: a double as the u64 of its IEEE-754 bits, a count as i64.
using RealFigure = std::optional<double> ProgressFigures::*;
using CountFigure = std::optional<int64_t> ProgressFigures::*;
struct RealField {
  RealFigure field;
  bool non_negative;
  const char* name;
};
constexpr RealField kRealFigures[] = {{&ProgressFigures::step_ms, true, "step_ms"},
                                      {&ProgressFigures::loss, false, "loss"},
                                      {&ProgressFigures::tokens_per_s, true, "tokens_per_s"},
                                      {&ProgressFigures::val_loss, false, "val_loss"},
                                      {&ProgressFigures::ckpt_s, true, "ckpt_s"},
                                      {&ProgressFigures::compute_ms, true, "compute_ms"}};
constexpr std::pair<CountFigure, const char*> kCountFigures[] = {{&ProgressFigures::val_step, "val_step"},
                                                                 {&ProgressFigures::ckpt_bytes, "ckpt_bytes"},
                                                                 {&ProgressFigures::ckpt_step, "ckpt_step"}};
constexpr uint32_t kRealFigureCount = std::size(kRealFigures);
constexpr uint32_t kFigureMask = (1u << (kRealFigureCount + std::size(kCountFigures))) - 1;

void Put(ByteWriter& w, const WorkerProgress& m) {
  const ProgressFigures& f = m.figures;
  uint32_t mask = 0;
  for (uint32_t i = 0; i < kRealFigureCount; ++i) mask |= (f.*(kRealFigures[i].field) ? 1u : 0u) << i;
  for (uint32_t j = 0; j < std::size(kCountFigures); ++j) {
    mask |= (f.*(kCountFigures[j].first) ? 1u : 0u) << (kRealFigureCount + j);
  }
  w.I32(m.generation).I32(m.rank).I64(m.step).U32(mask);
  for (const RealField& r : kRealFigures) {
    if (f.*(r.field)) w.U64(std::bit_cast<uint64_t>(*(f.*(r.field))));
  }
  for (const auto& [field, name] : kCountFigures) {
    if (f.*field) w.I64(*(f.*field));
  }
}
bool Get(ByteReader& r, WorkerProgress& m, std::string& why) {
  uint32_t mask = 0;
  if (!(r.I32(m.generation) && r.I32(m.rank) && r.I64(m.step) && r.U32(mask))) return false;
  if ((mask & ~kFigureMask) != 0) {
    why = "unknown figure bits " + std::to_string(mask & ~kFigureMask);
    return false;
  }
  for (uint32_t i = 0; i < kRealFigureCount; ++i) {
    if ((mask & (1u << i)) == 0) continue;
    uint64_t bits = 0;
    if (!r.U64(bits)) return false;
    const double v = std::bit_cast<double>(bits);
    if (!std::isfinite(v) || (kRealFigures[i].non_negative && v < 0)) {
      char shown[32];  // %g: a huge value is not 300 digits long
      std::snprintf(shown, sizeof(shown), "%g", v);
      why = "rank " + std::to_string(m.rank) + " " + kRealFigures[i].name + " " + shown +
            " is not a finite number" + (kRealFigures[i].non_negative ? " >= 0" : "");
      return false;
    }
    m.figures.*(kRealFigures[i].field) = v;
  }
  for (uint32_t j = 0; j < std::size(kCountFigures); ++j) {
    if ((mask & (1u << (kRealFigureCount + j))) == 0) continue;
    int64_t v = 0;
    if (!r.I64(v)) return false;
    if (v < 0) {
      why = "rank " + std::to_string(m.rank) + " " + kCountFigures[j].second + " " + std::to_string(v) + " is negative";
      return false;
    }
    m.figures.*(kCountFigures[j].first) = v;
  }
  return true;
}

void Put(ByteWriter& w, const SnapshotPeers& m) { w.I32(m.generation).StringList(m.peers); }
bool Get(ByteReader& r, SnapshotPeers& m, std::string& why) {
  if (!(r.I32(m.generation) && r.StringList(m.peers))) return false;
  if (m.peers.size() > static_cast<size_t>(snapshot::kMaxReplicas)) {
    why = std::to_string(m.peers.size()) + " peers, more than " + std::to_string(snapshot::kMaxReplicas);
    return false;
  }
  return true;
}

template <typename T>
constexpr MessageType TypeOf();
template <> constexpr MessageType TypeOf<Register>() { return MessageType::kRegister; }
template <> constexpr MessageType TypeOf<Assignment>() { return MessageType::kAssignment; }
template <> constexpr MessageType TypeOf<WorkerStarted>() { return MessageType::kWorkerStarted; }
template <> constexpr MessageType TypeOf<WorkerExited>() { return MessageType::kWorkerExited; }
template <> constexpr MessageType TypeOf<Output>() { return MessageType::kOutput; }
template <> constexpr MessageType TypeOf<Stop>() { return MessageType::kStop; }
template <> constexpr MessageType TypeOf<AgentDone>() { return MessageType::kAgentDone; }
template <> constexpr MessageType TypeOf<Heartbeat>() { return MessageType::kHeartbeat; }
template <> constexpr MessageType TypeOf<AgentStopping>() { return MessageType::kAgentStopping; }
template <> constexpr MessageType TypeOf<AgentFailed>() { return MessageType::kAgentFailed; }
template <> constexpr MessageType TypeOf<WorkerStalled>() { return MessageType::kWorkerStalled; }
template <> constexpr MessageType TypeOf<Release>() { return MessageType::kRelease; }
template <> constexpr MessageType TypeOf<WorkerProgress>() { return MessageType::kWorkerProgress; }
template <> constexpr MessageType TypeOf<OutputLost>() { return MessageType::kOutputLost; }
template <> constexpr MessageType TypeOf<SnapshotPeers>() { return MessageType::kSnapshotPeers; }

template <typename T>
Result<Message> DecodeAs(const wire::Frame& frame) {
  T m;
  ByteReader r(frame.payload);
  std::string why;
  if (!Get(r, m, why) || !r.Finished()) {
    return InvalidArgumentError("malformed control message of type " +
                                std::to_string(frame.type) + " (" +
                                std::to_string(frame.payload.size()) + " bytes)" +
                                (why.empty() ? "" : ": " + why));
  }
  return Message(std::move(m));
}

}  // namespace

bool IsReportableExitStatus(const ExitStatus& status) {
  if (status.kind == ExitStatus::Kind::kSignaled) {
    return status.value >= 1 && status.value <= kMaxSignalNumber;
  }
  return status.value >= 0 && status.value <= kMaxExitCode;
}

wire::Frame Encode(const Message& message) {
  return std::visit(
      [](const auto& m) {
        ByteWriter w;
        Put(w, m);
        using T = std::decay_t<decltype(m)>;
        return wire::Frame{static_cast<uint8_t>(TypeOf<T>()), w.Take()};
      },
      message);
}

Result<Message> Decode(const wire::Frame& frame) {
  switch (static_cast<MessageType>(frame.type)) {
    case MessageType::kRegister: return DecodeAs<Register>(frame);
    case MessageType::kAssignment: return DecodeAs<Assignment>(frame);
    case MessageType::kWorkerStarted: return DecodeAs<WorkerStarted>(frame);
    case MessageType::kWorkerExited: return DecodeAs<WorkerExited>(frame);
    case MessageType::kOutput: return DecodeAs<Output>(frame);
    case MessageType::kStop: return DecodeAs<Stop>(frame);
    case MessageType::kAgentDone: return DecodeAs<AgentDone>(frame);
    case MessageType::kHeartbeat: return DecodeAs<Heartbeat>(frame);
    case MessageType::kAgentStopping: return DecodeAs<AgentStopping>(frame);
    case MessageType::kAgentFailed: return DecodeAs<AgentFailed>(frame);
    case MessageType::kWorkerStalled: return DecodeAs<WorkerStalled>(frame);
    case MessageType::kRelease: return DecodeAs<Release>(frame);
    case MessageType::kWorkerProgress: return DecodeAs<WorkerProgress>(frame);
    case MessageType::kOutputLost: return DecodeAs<OutputLost>(frame);
    case MessageType::kSnapshotPeers: return DecodeAs<SnapshotPeers>(frame);
  }
  return InvalidArgumentError("unknown control message type " + std::to_string(frame.type));
}

}  // namespace dslaunch::control
