// Bounded randomized tests of the agent control messages (common/control_messages.h): random and
// mutated frames must decode to an error or to a valid message that encodes back to the same
// bytes; never a crash, an exception, or an allocation out of proportion to the frame. Seed and
// case count: tests/support/fuzz_cases.h.
#include <doctest/doctest.h>

#include <random>

#include "common/control_messages.h"
#include "tests/support/allocation_counter.h"
#include "tests/support/byte_mutator.h"
#include "tests/support/fuzz_cases.h"

namespace dslaunch::control {
namespace {

using testing::AllocationCounter;
using testing::FuzzCases;
using testing::FuzzSeed;
using testing::Mutate;
using testing::RandomBelow;
using testing::RandomBytes;

constexpr size_t kMaxAllocationPerInputByte = testing::kDecoderAllocationPerInputByte;
constexpr size_t kAllocationSlack = testing::kDecoderAllocationSlack;

int32_t RandomI32(std::mt19937_64& rng) {
  const int32_t edges[] = {0, 1, -1, INT32_MIN, INT32_MAX};
  return RandomBelow(rng, 3) == 0 ? edges[RandomBelow(rng, std::size(edges))]
                                  : static_cast<int32_t>(RandomBelow(rng, 64));
}

std::vector<std::string> RandomList(std::mt19937_64& rng) {
  std::vector<std::string> v(RandomBelow(rng, 4));
  for (auto& s : v) s = RandomBytes(rng, 16);
  return v;
}

// A message of every type, with random field values the encoder can produce.
Message RandomMessage(std::mt19937_64& rng) {
  switch (RandomBelow(rng, 11)) {
    case 0:
      return Register{RandomBytes(rng, 16), RandomI32(rng), RandomI32(rng),
                      static_cast<uint32_t>(rng()), RandomBytes(rng, 8), RandomBytes(rng, 16),
                      static_cast<int64_t>(rng()), RandomI32(rng), RandomBytes(rng, 20)};
    case 1: {
      Assignment a;
      a.generation = RandomI32(rng);
      a.node_rank = RandomI32(rng);
      a.log_dir = RandomBytes(rng, 16);
      a.working_dir = RandomBytes(rng, 16);
      a.grace_period_ms = static_cast<int64_t>(rng());
      a.tee = RandomBelow(rng, 2) == 1;
      a.heartbeat_interval_ms = static_cast<int64_t>(rng());
      a.heartbeat_timeout_ms = static_cast<int64_t>(rng());
      for (size_t n = RandomBelow(rng, 3); n > 0; --n) {
        WorkerAssignment w{RandomI32(rng), RandomI32(rng), RandomList(rng), {}};
        for (size_t k = RandomBelow(rng, 3); k > 0; --k) w.env[RandomBytes(rng, 8)] = RandomBytes(rng, 8);
        a.workers.push_back(std::move(w));
      }
      return a;
    }
    case 2: return WorkerStarted{RandomI32(rng), RandomI32(rng), static_cast<int64_t>(rng()), RandomBytes(rng, 16)};
    case 3: {
      WorkerExited m;
      m.generation = RandomI32(rng);
      m.rank = RandomI32(rng);
      m.pid = static_cast<int64_t>(rng());
      m.status = RandomBelow(rng, 2) == 0
                     ? ExitStatus::Exited(static_cast<int>(RandomBelow(rng, kMaxExitCode + 1)))
                     : ExitStatus::Signaled(1 + static_cast<int>(RandomBelow(rng, kMaxSignalNumber)));
      m.stopped = RandomBelow(rng, 2) == 1;
      m.stderr_tail = RandomList(rng);
      m.log_path = RandomBytes(rng, 16);
      return m;
    }
    case 4:
      return Output{RandomI32(rng), RandomI32(rng),
                    RandomBelow(rng, 2) == 0 ? Stream::kStdout : Stream::kStderr, RandomList(rng)};
    case 5: return Stop{RandomI32(rng), static_cast<int64_t>(rng()), RandomBytes(rng, 24)};
    case 6: return AgentDone{RandomI32(rng)};
    case 7: {
      WorkerProgress m{RandomI32(rng), RandomI32(rng), static_cast<int64_t>(rng()), {}};
      if (RandomBelow(rng, 2) == 1) m.figures.loss = static_cast<double>(RandomI32(rng)) / 7.0;
      if (RandomBelow(rng, 2) == 1) m.figures.step_ms = static_cast<double>(RandomBelow(rng, 100000)) / 3.0;
      if (RandomBelow(rng, 2) == 1) m.figures.ckpt_bytes = static_cast<int64_t>(RandomBelow(rng, 1u << 30));
      return m;
    }
    case 8:
      return OutputLost{RandomI32(rng),  RandomI32(rng), RandomBelow(rng, 2) == 0 ? Stream::kStdout : Stream::kStderr,
                        RandomBytes(rng, 24), RandomBytes(rng, 24), rng(), rng(), RandomBelow(rng, 2) == 1};
    case 9: {
      SnapshotPeers m{RandomI32(rng), {}};
      for (size_t n = RandomBelow(rng, 4); n > 0; --n) m.peers.push_back(RandomBytes(rng, 20));
      return m;
    }
    default: return Heartbeat{RandomI32(rng), rng()};
  }
}

TEST_CASE("Random and mutated control frames decode to an error or a message that encodes back") {
  const uint64_t seed = FuzzSeed();
  const int cases = FuzzCases(5000);
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  int decoded = 0;
  for (int i = 0; i < cases; ++i) {
    CAPTURE(i);
    wire::Frame frame = Encode(RandomMessage(rng));
    switch (RandomBelow(rng, 5)) {
      case 0: break;
      case 1:
      case 2:
      case 3: frame.payload = Mutate(frame.payload, rng); break;
      case 4:  // a random type in and around the control range, random bytes
        frame.type = static_cast<uint8_t>(60 + RandomBelow(rng, 20));
        frame.payload = RandomBytes(rng);
        break;
    }
    CAPTURE(int{frame.type});
    Result<Message> m = InternalError("not decoded");
    {
      AllocationCounter counter;
      m = Decode(frame);
      CAPTURE(counter.largest());
      CHECK(counter.bytes() <= kMaxAllocationPerInputByte * frame.payload.size() + kAllocationSlack);
    }
    if (!m.ok()) {
      CHECK(m.status().code() == StatusCode::kInvalidArgument);
      continue;
    }
    ++decoded;
    // Valid means canonical: what decodes encodes back to exactly the bytes received.
    wire::Frame again = Encode(*m);
    CHECK(int{again.type} == int{frame.type});
    if (std::holds_alternative<Assignment>(*m)) {
      // Environment entries may arrive in any order (they decode into a map), but none may be
      // dropped: same size, and decoding again changes nothing.
      CHECK(again.payload.size() == frame.payload.size());
      auto twice = Decode(again);
      REQUIRE(twice.ok());
      CHECK(Encode(*twice).payload == again.payload);
    } else {
      CHECK(again.payload == frame.payload);
    }
    if (auto* exited = std::get_if<WorkerExited>(&*m)) {
      // The launcher turns this into its own exit code (ShellExitCode): it must be one.
      CHECK(ShellExitCode(exited->status) >= 0);
      CHECK(ShellExitCode(exited->status) <= 255);
    }
  }
  CHECK(decoded > cases / 4);
}

TEST_CASE("An ASSIGNMENT whose counts claim more than the frame holds is refused cheaply") {
  Assignment a;
  wire::Frame f = Encode(a);
  // The worker count is the last field of an empty ASSIGNMENT: claim 2^32-1 workers, then 1 MiB.
  f.payload.replace(f.payload.size() - 4, 4, std::string(4, '\xff'));
  f.payload += std::string(1 << 20, '\0');
  AllocationCounter counter;
  CHECK(Decode(f).status().code() == StatusCode::kInvalidArgument);
  CHECK(counter.bytes() <= kMaxAllocationPerInputByte * f.payload.size() + kAllocationSlack);
}

// Found by the randomized test above: an agent could report an exit code of 256 (which the
// launcher, exiting with it, turned into 0: success) or a signal of 2^31-1 (128 + it overflows).
TEST_CASE("WORKER_EXITED with an exit code or signal that waitpid cannot report is malformed") {
  for (ExitStatus bad : {ExitStatus::Exited(256), ExitStatus::Exited(-1), ExitStatus::Signaled(0),
                         ExitStatus::Signaled(65), ExitStatus::Signaled(INT32_MAX)}) {
    CAPTURE(DescribeExitStatus(bad));
    WorkerExited m;
    m.status = bad;
    CHECK(Decode(Encode(m)).status().code() == StatusCode::kInvalidArgument);
  }
  for (ExitStatus good : {ExitStatus::Exited(0), ExitStatus::Exited(255), ExitStatus::Signaled(1),
                          ExitStatus::Signaled(64)}) {
    CAPTURE(DescribeExitStatus(good));
    WorkerExited m;
    m.status = good;
    auto back = Decode(Encode(m));
    REQUIRE(back.ok());
    CHECK(std::get<WorkerExited>(*back).status == good);
  }
}

// Found by the randomized test above: a repeated variable was kept silently, the last one winning.
TEST_CASE("ASSIGNMENT with an environment variable twice for one worker is malformed") {
  Assignment a;
  a.workers.push_back({0, 0, {"prog"}, {{"A", "1"}, {"B", "2"}}});
  wire::Frame f = Encode(a);
  // Rename B to A: the entries are "A"="1", "A"="2".
  size_t at = f.payload.rfind(std::string("\0\0\0\1B", 5));
  REQUIRE(at != std::string::npos);
  f.payload[at + 4] = 'A';
  auto back = Decode(f);
  CHECK(back.status().code() == StatusCode::kInvalidArgument);
  CHECK(back.status().message().find("environment variable 'A' twice") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::control
