// ControlLink: the agent's end of its control connection to the launcher (docs/protocol.md,
// "Agent control messages"): framing, sending in order, receiving, and heartbeats both ways. It
// owns the connection and knows no message's meaning: what a message means, and what a lost
// launcher means for the workers, is the session's (agent/agent_session.h), which the link tells
// through ControlLinkListener.
//
// Sending: Send queues a frame; frames are written one at a time, in the order queued. A write
// that fails closes the link for sending: the queue is dropped, later sends are dropped, and the
// listener hears OnWriteFailed.
// Receiving: every frame read is a sign of life of the launcher. A PROXIED_REPLY frame (the store
// proxy shares the connection) goes to OnProxiedReply as it is; any other is decoded and goes to
// OnMessage; one that does not decode is a warning, and the link reads on. A read that fails (the
// launcher closed, a reset) is OnLost(kClosed); bytes that are no frame are OnLost(kUnreadable);
// reading ends with either.
// Heartbeats: every heartbeat interval (none when it is zero) the link checks the launcher's
// silence and sends HEARTBEAT of the current generation with the next sequence number. Silence
// longer than the heartbeat timeout (zero: never) is OnLost(kSilent), once, and never after
// another loss; a check more than a timeout after the previous one means the agent itself was
// not running (common/heartbeat.h, CheckerWasSuspended) and gives the launcher a fresh timeout.
// Finish ends heartbeats and calls OnFinished once the queue is written (or failed), or at once.
//
// Threading: everything on the io_context's one thread; listener calls come from its handlers
// (and from Finish). The listener and the io_context outlive the link. Asio stays in
// control_link.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/control_messages.h"
#include "common/unique_fd.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace dslaunch::agent {

// Why the link stopped hearing the launcher. `reason` is a whole clause for the agent's log and
// its AGENT_STOPPING: "lost the connection to the launcher (End of file)", "unreadable control
// stream from the launcher: ...", "no heartbeat from the launcher for 3.2 s (was it stopped or
// cut off?)".
struct LinkLoss {
  enum class Kind { kClosed, kUnreadable, kSilent };
  Kind kind;
  std::string reason;
};

// What the link tells the session. Called on the io_context thread.
class ControlLinkListener {
 public:
  virtual ~ControlLinkListener() = default;
  // A decoded control message from the launcher (HEARTBEAT included).
  virtual void OnMessage(control::Message message) = 0;
  // A PROXIED_REPLY payload, for the node's store proxy.
  virtual void OnProxiedReply(std::string_view payload) = 0;
  // The launcher is lost (see LinkLoss): kClosed or kUnreadable once at most, ending the reads;
  // kSilent once at most, and only before either.
  virtual void OnLost(const LinkLoss& loss) = 0;
  // A write failed: nothing more will be sent.
  virtual void OnWriteFailed() = 0;
  // After Finish: the queue is written, failed, or was not waited for. Once.
  virtual void OnFinished() = 0;
  // A line for the agent's log, without its prefix (a message that does not decode).
  virtual void OnWarning(std::string_view line) = 0;
};

struct ControlLinkOptions {
  using Clock = std::chrono::steady_clock;
  std::chrono::milliseconds heartbeat_interval{0};  // ASSIGNMENT's heartbeat_interval_ms; 0: none
  std::chrono::milliseconds heartbeat_timeout{0};   // ASSIGNMENT's heartbeat_timeout_ms; 0: never lost by silence
  int generation = 0;                               // what HEARTBEAT carries, until set_generation
  std::function<Clock::time_point()> now = Clock::now;  // the silence's clock (a test's own)
  // Bytes the registration read past the ASSIGNMENT (agent/control/registration.h): their frames
  // are delivered first, from the event loop, before anything read from the connection.
  std::string received;
};

class ControlLink {
 public:
  // Takes the connected, authenticated and registered `fd`. Nothing happens before Start.
  ControlLink(boost::asio::io_context& io, UniqueFd fd, ControlLinkListener& listener, ControlLinkOptions options);
  ~ControlLink();
  ControlLink(const ControlLink&) = delete;
  ControlLink& operator=(const ControlLink&) = delete;

  // Starts reading and the heartbeats.
  void Start();
  // The generation later heartbeats carry.
  void set_generation(int generation);

  // Queues a control message, or a raw frame (the store proxy's PROXIED), behind those queued.
  // Dropped once a write has failed.
  void Send(const control::Message& message);
  void SendFrame(uint8_t type, std::string_view payload);
  // Writes `message` now, blocking, ignoring failure (a broken connection has no one to tell).
  // Only while the event loop does not run (before it starts: AGENT_FAILED of a failed start).
  void WriteNow(const control::Message& message);

  // Ends heartbeats; OnFinished follows once every queued frame is written or a write failed,
  // or at once when `flush` is false, nothing is queued, or a read or write has failed already
  // (no launcher to hear it: a cut network may never take the bytes). Idempotent: only the
  // first call counts.
  void Finish(bool flush);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dslaunch::agent
