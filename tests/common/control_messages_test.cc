#include "common/control_messages.h"

#include <doctest/doctest.h>

#include <bit>
#include <limits>

namespace dslaunch::control {
namespace {

template <typename T>
T RoundTrip(const T& m) {
  wire::Frame f = Encode(m);
  auto decoded = Decode(f);
  REQUIRE(decoded.ok());
  REQUIRE(std::holds_alternative<T>(*decoded));
  return std::get<T>(*decoded);
}

TEST_CASE("Control messages survive encoding and decoding") {
  Register reg{"job-1", 2, 3, kProtocolVersion, "0.1.0", "node3", 4242, 8, "10.0.0.3:40123"};
  Register r = RoundTrip(reg);
  CHECK(r.snapshot_address == "10.0.0.3:40123");
  CHECK(r.job_id == "job-1");
  CHECK(r.generation == 2);
  CHECK(r.node_rank == 3);
  CHECK(r.host == "node3");
  CHECK(r.pid == 4242);
  CHECK(r.slots == 8);

  Assignment a;
  a.generation = 1;
  a.node_rank = 0;
  a.log_dir = "/tmp/logs";
  a.grace_period_ms = 1500;
  a.tee = false;
  a.heartbeat_interval_ms = 1000;
  a.heartbeat_timeout_ms = 10000;
  a.env = {{"WORLD_SIZE", "8"}, {"CUDA_VISIBLE_DEVICES", "0,1"}};
  a.workers.push_back({5, 1, {"python3", "-u", "x.py"}, {{"RANK", "5"}, {"EMPTY", ""}}});
  a.restartable = true;
  a.watchdog_timeout_ms = 7000;
  a.await_release = true;
  a.bind_cores_to_rank = true;
  a.bind_core_list = {0, 1, 2, 8};
  a.store_proxy = true;
  a.fence_agent_pid = 31337;
  Assignment b = RoundTrip(a);
  CHECK(b.store_proxy);
  CHECK(b.fence_agent_pid == 31337);
  CHECK(b.bind_cores_to_rank);
  CHECK(b.bind_core_list == std::vector<int>{0, 1, 2, 8});
  CHECK(b.restartable);
  CHECK(b.watchdog_timeout_ms == 7000);
  CHECK(b.await_release);
  CHECK(b.grace_period_ms == 1500);
  CHECK_FALSE(b.tee);
  CHECK(b.heartbeat_interval_ms == 1000);
  CHECK(b.heartbeat_timeout_ms == 10000);
  REQUIRE(b.workers.size() == 1);
  CHECK(b.workers[0].argv == std::vector<std::string>{"python3", "-u", "x.py"});
  CHECK(b.workers[0].env.at("RANK") == "5");
  CHECK(b.workers[0].env.at("EMPTY").empty());
  CHECK(b.env == std::map<std::string, std::string>{{"WORLD_SIZE", "8"}, {"CUDA_VISIBLE_DEVICES", "0,1"}});

  WorkerExited e;
  e.rank = 7;
  e.status = ExitStatus::Signaled(9);
  e.stderr_tail = {"a", "b"};
  e.stopped = true;
  e.last_step = 17;
  WorkerExited e2 = RoundTrip(e);
  CHECK(e2.last_step == 17);
  CHECK(e2.status == ExitStatus::Signaled(9));
  CHECK(e2.stderr_tail.size() == 2);
  CHECK(e2.stopped);

  Output o{0, 3, Stream::kStderr, {"line one", ""}};
  Output o2 = RoundTrip(o);
  CHECK(o2.stream == Stream::kStderr);
  CHECK(o2.lines == std::vector<std::string>{"line one", ""});

  CHECK(RoundTrip(Stop{4, 30000, "job is stopping"}).reason == "job is stopping");
  CHECK(RoundTrip(AgentDone{6}).generation == 6);
  CHECK(RoundTrip(Heartbeat{1, 99}).sequence == 99);
  AgentFailed failed = RoundTrip(AgentFailed{3, "cannot create log directory '/x': Permission denied"});
  CHECK(failed.generation == 3);
  CHECK(failed.reason == "cannot create log directory '/x': Permission denied");

  WorkerStalled stalled = RoundTrip(WorkerStalled{2, 5, 41, 3100, 3000, "stopped"});
  CHECK(stalled.state == "stopped");
  CHECK(stalled.generation == 2);
  CHECK(stalled.rank == 5);
  CHECK(stalled.last_step == 41);
  CHECK(stalled.silence_ms == 3100);
  CHECK(stalled.timeout_ms == 3000);
  CHECK(RoundTrip(Release{4}).generation == 4);
  CHECK(RoundTrip(Release{4}).exit_code == -1);
  CHECK(RoundTrip(Release{5, 75}).exit_code == 75);
  CHECK(RoundTrip(Release{0, 75, "the place of node 1 (b) is still held"}).reason == "the place of node 1 (b) is still held");
  CHECK(RoundTrip(Release{4}).reason.empty());

  OutputLost lost = RoundTrip(
      OutputLost{2, 1, Stream::kStderr, "/logs/j/rank1.stderr.log", "No space left on device", 4096, 12, true});
  CHECK(lost.generation == 2);
  CHECK(lost.rank == 1);
  CHECK(lost.stream == Stream::kStderr);
  CHECK(lost.path == "/logs/j/rank1.stderr.log");
  CHECK(lost.error == "No space left on device");
  CHECK(lost.lost_bytes == 4096);
  CHECK(lost.lost_lines == 12);
  CHECK(lost.final);
  CHECK_FALSE(RoundTrip(OutputLost{0, 0, Stream::kStdout, "p", "e", 1, 1, false}).final);

  SnapshotPeers peers = RoundTrip(SnapshotPeers{2, {"10.0.0.4:40001", "[fd00::5]:40002"}});
  CHECK(peers.generation == 2);
  CHECK(peers.peers == std::vector<std::string>{"10.0.0.4:40001", "[fd00::5]:40002"});
  // More peers than copies can be asked for is not a message a launcher sends.
  Result<Message> many = Decode(Encode(SnapshotPeers{2, {"a:1", "b:1", "c:1", "d:1"}}));
  CHECK(many.status().code() == StatusCode::kInvalidArgument);
  CHECK(many.status().message().find("4 peers, more than 3") != std::string::npos);

  AgentStopping st = RoundTrip(AgentStopping{3, "the agent received SIGTERM", 15});
  CHECK(st.generation == 3);
  CHECK(st.reason == "the agent received SIGTERM");
  CHECK(st.signal == 15);
}

TEST_CASE("WORKER_PROGRESS carries the step and exactly the figures present") {
  WorkerProgress none = RoundTrip(WorkerProgress{3, 7, -1, {}});
  CHECK(none.generation == 3);
  CHECK(none.rank == 7);
  CHECK(none.step == -1);
  CHECK(none.figures.empty());
  CHECK(Encode(WorkerProgress{3, 7, -1, {}}).payload.size() == 4 + 4 + 8 + 4);

  ProgressFigures all;
  all.step_ms = 198.25;
  all.compute_ms = 150.5;
  all.loss = -2.5;
  all.tokens_per_s = 1e6;
  all.val_loss = 3.0;
  all.val_step = 40;
  all.ckpt_s = 0.0;
  all.ckpt_bytes = 123456789012;
  all.ckpt_step = 40;
  WorkerProgress full = RoundTrip(WorkerProgress{1, 2, 41, all});
  CHECK(full.step == 41);
  CHECK(full.figures == all);
  CHECK(Encode(WorkerProgress{1, 2, 41, all}).payload.size() == 20 + 9 * 8);

  ProgressFigures some;
  some.loss = 2.25;
  some.ckpt_step = 8;
  CHECK(RoundTrip(WorkerProgress{0, 0, 9, some}).figures == some);
}

TEST_CASE("WORKER_PROGRESS with a figure that is not finite, negative, or an unknown bit is malformed") {
  ProgressFigures f;
  f.step_ms = 1.0;
  const wire::Frame good = Encode(WorkerProgress{0, 4, 1, f});
  const auto with_double = [&](double v) {
    wire::Frame bad = good;
    const uint64_t bits = std::bit_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) bad.payload[20 + i] = static_cast<char>((bits >> (8 * (7 - i))) & 0xff);
    return Decode(bad);
  };
  CHECK(with_double(2.0).ok());
  CHECK(with_double(std::numeric_limits<double>::quiet_NaN()).status().message() ==
        "malformed control message of type 76 (28 bytes): rank 4 step_ms nan is not a finite number >= 0");
  CHECK(with_double(-1.0).status().message() ==
        "malformed control message of type 76 (28 bytes): rank 4 step_ms -1 is not a finite number >= 0");
  wire::Frame unknown = good;
  unknown.payload[16] = 0x01;  // the mask's top byte: bit 24
  CHECK(Decode(unknown).status().message() ==
        "malformed control message of type 76 (28 bytes): unknown figure bits 16777216");
  ProgressFigures count;
  count.ckpt_bytes = 5;
  wire::Frame negative = Encode(WorkerProgress{0, 4, 1, count});
  for (int i = 0; i < 8; ++i) negative.payload[20 + i] = static_cast<char>(0xff);
  CHECK(Decode(negative).status().message() ==
        "malformed control message of type 76 (28 bytes): rank 4 ckpt_bytes -1 is negative");
}

TEST_CASE("AGENT_STOPPING with a signal number outside 0..64 is malformed") {
  for (int32_t sig : {-1, 65, 1 << 20}) {
    CAPTURE(sig);
    wire::Frame f = Encode(AgentStopping{0, "x", 1});
    // The signal is the payload's last 4 bytes (big-endian i32, docs/protocol.md).
    for (int i = 0; i < 4; ++i) f.payload[f.payload.size() - 4 + i] = static_cast<char>((sig >> (8 * (3 - i))) & 0xff);
    auto m = Decode(f);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message() == "malformed control message of type 72 (" + std::to_string(f.payload.size()) +
                                      " bytes): signal " + std::to_string(sig) +
                                      " is not a signal number (0 for none)");
  }
}

TEST_CASE("OUTPUT_LOST with a stream other than stdout or stderr is malformed") {
  for (uint8_t stream : {0, 3, 255}) {
    CAPTURE(static_cast<int>(stream));
    wire::Frame f = Encode(OutputLost{0, 1, Stream::kStdout, "p", "e", 1, 1, false});
    f.payload[8] = static_cast<char>(stream);  // after i32 generation, i32 rank (docs/protocol.md)
    auto m = Decode(f);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message() == "malformed control message of type 77 (" + std::to_string(f.payload.size()) +
                                      " bytes): unknown stream " + std::to_string(stream));
  }
}

TEST_CASE("ASSIGNMENT with a bind_core_list CPU outside 0..8191 is malformed") {
  for (int32_t cpu : {-1, 8192, 1 << 30}) {
    CAPTURE(cpu);
    Assignment a;
    a.bind_cores_to_rank = true;
    a.bind_core_list = {0};
    wire::Frame f = Encode(a);
    // The one CPU is the 4 bytes before the payload's last three fields, await_release,
    // store_proxy and fence_agent_pid (big-endian i32, docs/protocol.md).
    for (int i = 0; i < 4; ++i) f.payload[f.payload.size() - 14 + i] = static_cast<char>((cpu >> (8 * (3 - i))) & 0xff);
    auto m = Decode(f);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message() == "malformed control message of type 65 (" + std::to_string(f.payload.size()) +
                                      " bytes): bind_core_list holds CPU " + std::to_string(cpu) +
                                      ", outside 0..8191");
  }
}

TEST_CASE("ASSIGNMENT with a negative fence_agent_pid is malformed") {
  Assignment a;
  a.fence_agent_pid = -5;
  wire::Frame f = Encode(a);
  auto m = Decode(f);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message() == "malformed control message of type 65 (" + std::to_string(f.payload.size()) +
                                    " bytes): fence_agent_pid -5 is negative");
}

TEST_CASE("Decoding rejects unknown types, truncated payloads and trailing bytes") {
  CHECK(Decode({200, ""}).status().code() == StatusCode::kInvalidArgument);
  wire::Frame f = Encode(Stop{1, 10, "x"});
  wire::Frame truncated{f.type, f.payload.substr(0, f.payload.size() - 1)};
  CHECK_FALSE(Decode(truncated).ok());
  wire::Frame trailing{f.type, f.payload + "junk"};
  CHECK_FALSE(Decode(trailing).ok());
  wire::Frame bad_stream = Encode(Output{0, 0, Stream::kStdout, {}});
  bad_stream.payload[8] = 9;  // stream byte after generation and rank
  CHECK_FALSE(Decode(bad_stream).ok());
}

TEST_CASE("Exit statuses map to shell exit codes and readable names") {
  CHECK(ShellExitCode(ExitStatus::Exited(3)) == 3);
  CHECK(ShellExitCode(ExitStatus::Signaled(9)) == 137);
  CHECK(ShellExitCode(ExitStatus::Signaled(15)) == 143);
  CHECK(DescribeExitStatus(ExitStatus::Exited(0)) == "exit code 0");
  CHECK(DescribeExitStatus(ExitStatus::Signaled(9)) == "signal 9 (SIGKILL)");
  CHECK(DescribeExitStatus(ExitStatus::Signaled(11)) == "signal 11 (SIGSEGV)");
  CHECK(DescribeExitStatus(ExitStatus::Signaled(50)) == "signal 50");
  CHECK(ExitStatus::FromWaitStatus(3 << 8) == ExitStatus::Exited(3));
  CHECK(ExitStatus::FromWaitStatus(9) == ExitStatus::Signaled(9));
}

}  // namespace
}  // namespace dslaunch::control
