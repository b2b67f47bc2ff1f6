// The agent's control link (agent/control/control_link.h) on a real socket pair and a real event
// loop, the session faked: what it delivers, what it sends, when it reports the launcher lost.
#include "agent/control/control_link.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include "common/asio.h"
#include "common/message_types.h"
#include "common/wire.h"

namespace dslaunch::agent {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Hang guard of one wait on the event loop.
constexpr auto kWaitLimit = std::chrono::seconds(10);

// The session, recording what the link tells it, in order.
struct FakeSession : ControlLinkListener {
  void OnMessage(control::Message message) override {
    events.push_back("message " + std::to_string(control::Encode(message).type));
    messages.push_back(std::move(message));
  }
  void OnProxiedReply(std::string_view payload) override { events.push_back("reply " + std::string(payload)); }
  void OnLost(const LinkLoss& loss) override { losses.push_back(loss); }
  void OnWriteFailed() override { ++write_failures; }
  void OnFinished() override { ++finished; }
  void OnWarning(std::string_view line) override { warnings.emplace_back(line); }

  std::vector<std::string> events;
  std::vector<control::Message> messages;
  std::vector<LinkLoss> losses;
  int write_failures = 0;
  int finished = 0;
  std::vector<std::string> warnings;
};

struct Fixture {
  explicit Fixture(ControlLinkOptions options = {}) {
    std::signal(SIGPIPE, SIG_IGN);  // as dslaunch-agent does: a write to a closed peer fails with EPIPE
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    launcher = UniqueFd(fds[1]);
    REQUIRE(::fcntl(launcher.get(), F_SETFL, O_NONBLOCK) == 0);
    link = std::make_unique<ControlLink>(io, UniqueFd(fds[0]), session, std::move(options));
  }

  // Runs the event loop until `done` holds (at most kWaitLimit).
  template <typename Done>
  void RunUntil(Done done) {
    const auto limit = Clock::now() + kWaitLimit;
    while (!done() && Clock::now() < limit) io.run_one_for(milliseconds(10));
    REQUIRE(done());
  }

  void Write(std::string_view bytes) { REQUIRE(::write(launcher.get(), bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size())); }
  static std::string Bytes(const control::Message& m) {
    wire::Frame f = control::Encode(m);
    return wire::EncodeFrame(f.type, f.payload);
  }

  // The frames the launcher's end has received so far, decoded.
  std::vector<control::Message> Received() {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(launcher.get(), buf, sizeof(buf))) > 0) decoder.Feed(buf, static_cast<size_t>(n));
    while (true) {
      auto frame = decoder.Next();
      REQUIRE(frame.ok());
      if (!frame->has_value()) break;
      auto m = control::Decode(**frame);
      REQUIRE(m.ok());
      received.push_back(std::move(*m));
    }
    return received;
  }

  asio::io_context io;
  UniqueFd launcher;
  FakeSession session;
  std::unique_ptr<ControlLink> link;
  wire::FrameDecoder decoder;
  std::vector<control::Message> received;
};

TEST_CASE("ControlLink delivers the launcher's frames in order, whole across reads, proxied replies undecoded") {
  Fixture f;
  f.link->Start();
  const std::string stop = Fixture::Bytes(control::Stop{0, 5000, "the job is ending"});
  f.Write(stop.substr(0, 5));
  f.io.poll();
  CHECK(f.session.events.empty());
  f.Write(stop.substr(5) + wire::EncodeFrame(msg::kStoreProxiedReply, "abc") +
          Fixture::Bytes(control::Release{0, 0, ""}));
  f.RunUntil([&] { return f.session.events.size() == 3; });
  CHECK(f.session.events == std::vector<std::string>{"message 69", "reply abc", "message 75"});
  const auto& got = std::get<control::Stop>(f.session.messages[0]);
  CHECK(got.grace_period_ms == 5000);
  CHECK(got.reason == "the job is ending");
  CHECK(f.session.losses.empty());
}

TEST_CASE("ControlLink delivers first what the registration read past the ASSIGNMENT, then what it reads") {
  ControlLinkOptions options;
  const std::string peers = Fixture::Bytes(control::SnapshotPeers{0, {"10.0.0.2:4000"}});
  options.received = peers + peers.substr(0, 3);  // a whole frame and the start of the next
  Fixture f(std::move(options));
  f.link->Start();
  CHECK(f.session.events.empty());  // from the event loop, not from Start
  f.Write(peers.substr(3));
  f.RunUntil([&] { return f.session.events.size() == 2; });
  CHECK(f.session.events == std::vector<std::string>{"message 78", "message 78"});
  CHECK(std::get<control::SnapshotPeers>(f.session.messages[1]).peers == std::vector<std::string>{"10.0.0.2:4000"});
}

TEST_CASE("ControlLink warns of a message that does not decode and reads on") {
  Fixture f;
  f.link->Start();
  const wire::Frame broken{70, "x"};  // AGENT_DONE with a truncated generation
  f.Write(wire::EncodeFrame(broken.type, broken.payload) + Fixture::Bytes(control::Heartbeat{0, 1}));
  f.RunUntil([&] { return f.session.messages.size() == 1; });
  CHECK(f.session.warnings == std::vector<std::string>{control::Decode(broken).status().ToString()});
  CHECK(std::holds_alternative<control::Heartbeat>(f.session.messages[0]));
  CHECK(f.session.losses.empty());
}

TEST_CASE("ControlLink reports a closed connection and an unreadable stream as a lost launcher, once") {
  SUBCASE("closed") {
    Fixture f;
    f.link->Start();
    f.launcher.Reset();
    f.RunUntil([&] { return !f.session.losses.empty(); });
    f.io.poll();
    REQUIRE(f.session.losses.size() == 1);
    CHECK(f.session.losses[0].kind == LinkLoss::Kind::kClosed);
    CHECK(f.session.losses[0].reason == "lost the connection to the launcher (End of file)");
  }
  SUBCASE("unreadable") {
    Fixture f;
    f.link->Start();
    const std::string garbage(8, '\0');  // a frame of length zero
    wire::FrameDecoder reference;
    reference.Feed(garbage.data(), garbage.size());
    const Status why = reference.Next().status();
    REQUIRE_FALSE(why.ok());
    f.Write(garbage + Fixture::Bytes(control::Heartbeat{0, 1}));
    f.RunUntil([&] { return !f.session.losses.empty(); });
    f.io.poll();
    REQUIRE(f.session.losses.size() == 1);
    CHECK(f.session.losses[0].kind == LinkLoss::Kind::kUnreadable);
    CHECK(f.session.losses[0].reason == "unreadable control stream from the launcher: " + why.ToString());
    CHECK(f.session.messages.empty());  // nothing after the broken frame is read
  }
}

// Heartbeats every millisecond, a timeout of one second on the test's clock `now`.
ControlLinkOptions OnTestClock(const Clock::time_point& now) {
  ControlLinkOptions options;
  options.heartbeat_interval = milliseconds(1);
  options.heartbeat_timeout = milliseconds(1000);
  options.now = [&now] { return now; };
  return options;
}

TEST_CASE("ControlLink sends heartbeats of its generation, counting up, and reports the launcher's silence once") {
  Clock::time_point now{};
  const Clock::time_point t0 = now;
  ControlLinkOptions options = OnTestClock(now);
  options.generation = 2;
  Fixture f(options);
  f.link->Start();
  // Each check sees the clock the test set after the previous heartbeat: 600 ms apart, so the
  // agent never looks suspended; the launcher says nothing.
  for (size_t beat = 1; beat <= 4; ++beat) {
    f.RunUntil([&] { return f.Received().size() == beat; });
    now = t0 + milliseconds(600) * static_cast<int>(beat);
    if (beat == 2) f.link->set_generation(5);
  }
  const auto received = f.Received();
  CHECK(std::get<control::Heartbeat>(received[0]).generation == 2);
  CHECK(std::get<control::Heartbeat>(received[0]).sequence == 1);
  CHECK(std::get<control::Heartbeat>(received[1]).sequence == 2);
  CHECK(std::get<control::Heartbeat>(received[2]).generation == 5);
  CHECK(std::get<control::Heartbeat>(received[3]).sequence == 4);
  // Checked at 0, 600, 1200 (silent 1.2 s: lost) and 1800 (not again).
  REQUIRE(f.session.losses.size() == 1);
  CHECK(f.session.losses[0].kind == LinkLoss::Kind::kSilent);
  CHECK(f.session.losses[0].reason == "no heartbeat from the launcher for 1.2 s (was it stopped or cut off?)");
}

TEST_CASE("ControlLink: a frame from the launcher restarts its silence") {
  Clock::time_point now{};
  const Clock::time_point t0 = now;
  Fixture f(OnTestClock(now));
  f.link->Start();
  for (size_t beat = 1; beat <= 4; ++beat) {
    f.RunUntil([&] { return f.Received().size() == beat; });
    now = t0 + milliseconds(600) * static_cast<int>(beat);
    if (beat == 1) {  // heard at 600: silent 600 ms at 1200, 1200 ms at 1800
      f.Write(Fixture::Bytes(control::Heartbeat{0, 1}));
      f.RunUntil([&] { return f.session.messages.size() == 1; });
    }
    if (beat == 3) CHECK(f.session.losses.empty());  // checked at 1200
  }
  REQUIRE(f.session.losses.size() == 1);  // checked at 1800
  CHECK(f.session.losses[0].reason == "no heartbeat from the launcher for 1.2 s (was it stopped or cut off?)");
}

TEST_CASE("ControlLink::Finish waits until what is queued is written, or not at all when told so") {
  SUBCASE("flush") {
    Fixture f;
    f.link->Send(control::AgentDone{3});
    f.link->Send(control::Heartbeat{3, 9});
    f.link->Finish(/*flush=*/true);
    f.RunUntil([&] { return f.session.finished == 1; });
    const auto received = f.Received();
    REQUIRE(received.size() == 2);
    CHECK(std::get<control::AgentDone>(received[0]).generation == 3);
    CHECK(std::get<control::Heartbeat>(received[1]).sequence == 9);
    f.link->Finish(true);
    CHECK(f.session.finished == 1);  // once
  }
  SUBCASE("nothing queued") {
    Fixture f;
    f.link->Finish(true);
    CHECK(f.session.finished == 1);
  }
  SUBCASE("no flush") {
    Fixture f;
    f.link->Send(control::AgentDone{3});
    f.link->Finish(/*flush=*/false);
    CHECK(f.session.finished == 1);
  }
}

TEST_CASE("ControlLink: a failed write drops the queue, says so, and ends a finishing link") {
  Fixture f;
  f.launcher.Reset();
  f.link->Send(control::AgentDone{0});
  f.link->Send(control::Heartbeat{0, 1});
  f.link->Finish(/*flush=*/true);
  CHECK(f.session.finished == 0);
  f.RunUntil([&] { return f.session.finished == 1; });
  CHECK(f.session.write_failures == 1);
  f.link->Send(control::Heartbeat{0, 2});  // dropped: nothing is written any more
  f.io.poll();
  CHECK(f.session.write_failures == 1);
}

}  // namespace
}  // namespace dslaunch::agent
