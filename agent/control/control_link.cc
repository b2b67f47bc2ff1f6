// The Asio half of agent/control/control_link.h: one stream descriptor, one heartbeat timer.
#include "agent/control/control_link.h"

#include <array>
#include <deque>

#include "common/asio.h"
#include "common/heartbeat.h"
#include "common/message_types.h"
#include "common/text.h"
#include "common/wire.h"

namespace dslaunch::agent {
namespace {

// Bytes read from the connection at a time.
constexpr size_t kReadChunkBytes = 64u << 10;

}  // namespace

class ControlLink::Impl {
 public:
  Impl(asio::io_context& io, UniqueFd fd, ControlLinkListener& listener, ControlLinkOptions options)
      : listener_(listener),
        options_(std::move(options)),
        stream_(io, fd.Release()),
        heartbeat_timer_(io),
        launcher_heartbeat_(options_.heartbeat_timeout, options_.now()),
        last_heartbeat_check_(options_.now()),
        generation_(options_.generation) {}

  void Start() {
    if (options_.received.empty()) {
      Read();
    } else {
      decoder_.Feed(options_.received.data(), options_.received.size());
      asio::post(stream_.get_executor(), [this] {
        if (Drain()) Read();
      });
    }
    ScheduleHeartbeat();
  }

  void set_generation(int generation) { generation_ = generation; }

  void SendFrame(uint8_t type, std::string_view payload) {
    if (write_failed_) return;
    outbox_.push_back(wire::EncodeFrame(type, payload));
    if (outbox_.size() == 1) Flush();
  }

  void WriteNow(const control::Message& message) {
    wire::Frame f = control::Encode(message);
    std::string bytes = wire::EncodeFrame(f.type, f.payload);
    boost::system::error_code ignored;
    asio::write(stream_, asio::buffer(bytes), ignored);
  }

  void Finish(bool flush) {
    if (finishing_) return;
    finishing_ = true;
    heartbeat_timer_.cancel();
    if (!flush || outbox_.empty() || write_failed_ || read_failed_) listener_.OnFinished();
  }

 private:
  void Flush() {
    asio::async_write(stream_, asio::buffer(outbox_.front()), [this](boost::system::error_code ec, size_t) {
      if (ec) {
        write_failed_ = true;
        outbox_.clear();
        listener_.OnWriteFailed();
        if (finishing_) listener_.OnFinished();
        return;
      }
      outbox_.pop_front();
      if (!outbox_.empty()) {
        Flush();
      } else if (finishing_) {
        listener_.OnFinished();
      }
    });
  }

  void Read() {
    stream_.async_read_some(asio::buffer(read_buf_), [this](boost::system::error_code ec, size_t n) {
      if (ec) {
        read_failed_ = true;
        Lose(LinkLoss::Kind::kClosed, "lost the connection to the launcher (" + ec.message() + ")");
        return;
      }
      decoder_.Feed(read_buf_.data(), n);
      if (Drain()) Read();
    });
  }

  // Delivers every whole frame the decoder holds; false (the launcher lost) for an unreadable one.
  bool Drain() {
    while (true) {
      auto frame = decoder_.Next();
      if (!frame.ok()) {
        read_failed_ = true;
        Lose(LinkLoss::Kind::kUnreadable, "unreadable control stream from the launcher: " + frame.status().ToString());
        return false;
      }
      if (!frame->has_value()) return true;
      OnFrame(**frame);
    }
  }

  void OnFrame(const wire::Frame& frame) {
    launcher_heartbeat_.OnHeard(options_.now());
    if (frame.type == msg::kStoreProxiedReply) {
      listener_.OnProxiedReply(frame.payload);
      return;
    }
    auto message = control::Decode(frame);
    if (!message.ok()) {
      listener_.OnWarning(message.status().ToString());
      return;
    }
    listener_.OnMessage(std::move(*message));
  }

  void Lose(LinkLoss::Kind kind, std::string reason) {
    lost_ = true;
    listener_.OnLost(LinkLoss{kind, std::move(reason)});
  }

  // A launcher silent for the timeout (crashed host, cut network: the TCP connection may look
  // open for minutes) is lost like a closed connection.
  void ScheduleHeartbeat() {
    if (options_.heartbeat_interval.count() <= 0) return;
    heartbeat_timer_.expires_after(options_.heartbeat_interval);
    heartbeat_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || finishing_) return;
      const auto now = options_.now();
      if (CheckerWasSuspended(last_heartbeat_check_, now, options_.heartbeat_timeout)) {
        // The agent itself was not running (stopped, frozen): the launcher's silence is not its fault.
        launcher_heartbeat_.OnHeard(now);
      }
      last_heartbeat_check_ = now;
      if (options_.heartbeat_timeout.count() > 0 && !lost_ && launcher_heartbeat_.Expired(now)) {
        Lose(LinkLoss::Kind::kSilent, "no heartbeat from the launcher for " +
                                          FormatSeconds(launcher_heartbeat_.Silence(now)) +
                                          " (was it stopped or cut off?)");
        if (finishing_) return;  // the session ended on it (between generations)
      }
      SendFrame(control::Encode(control::Heartbeat{generation_, ++heartbeat_sequence_}));
      ScheduleHeartbeat();
    });
  }

  void SendFrame(const wire::Frame& f) { SendFrame(f.type, f.payload); }

  ControlLinkListener& listener_;
  const ControlLinkOptions options_;
  asio::posix::stream_descriptor stream_;
  // Receiving.
  std::array<char, kReadChunkBytes> read_buf_{};
  wire::FrameDecoder decoder_;
  bool read_failed_ = false;
  // Sending: frames in order, the front one being written.
  std::deque<std::string> outbox_;
  bool write_failed_ = false;
  // Heartbeats.
  asio::steady_timer heartbeat_timer_;
  HeartbeatMonitor launcher_heartbeat_;
  std::chrono::steady_clock::time_point last_heartbeat_check_;
  uint64_t heartbeat_sequence_ = 0;
  int generation_;
  bool lost_ = false;       // OnLost was called: silence is not reported after it
  bool finishing_ = false;  // Finish was called
};

ControlLink::ControlLink(asio::io_context& io, UniqueFd fd, ControlLinkListener& listener, ControlLinkOptions options)
    : impl_(std::make_unique<Impl>(io, std::move(fd), listener, std::move(options))) {}
ControlLink::~ControlLink() = default;
void ControlLink::Start() { impl_->Start(); }
void ControlLink::set_generation(int generation) { impl_->set_generation(generation); }
void ControlLink::Send(const control::Message& message) {
  wire::Frame f = control::Encode(message);
  impl_->SendFrame(f.type, f.payload);
}
void ControlLink::SendFrame(uint8_t type, std::string_view payload) { impl_->SendFrame(type, payload); }
void ControlLink::WriteNow(const control::Message& message) { impl_->WriteNow(message); }
void ControlLink::Finish(bool flush) { impl_->Finish(flush); }

}  // namespace dslaunch::agent
