// FramedStream: frames in and out of one Asio stream socket, for the store proxy's connections
// (agent/store_proxy/store_proxy.cc): a read loop feeding a wire::FrameDecoder, and a write queue.
// The owner (held by shared_ptr in every callback) gets OnFrame(frame) and OnStreamError(status);
// after Close() no callback reaches it. Includes Asio: include only from .cc files.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "common/asio.h"
#include "common/endpoint/endpoint.h"
#include "common/status.h"
#include "common/wire.h"

namespace dslaunch::agent {

// Bytes per read from a socket: a burst of small store requests in one system call.
constexpr size_t kFramedReadChunkBytes = 16u << 10;

// Frames in and out of one stream socket: a read loop feeding a decoder and a write queue. Owned
// by shared_ptr; every callback holds it and checks `closed`.
template <typename Socket>
class FramedStream {
 public:
  explicit FramedStream(Socket socket) : socket_(std::move(socket)) {}

  template <typename Owner>
  void Read(std::shared_ptr<Owner> owner) {
    socket_.async_read_some(asio::buffer(buffer_), [this, owner](const boost::system::error_code& ec, size_t n) {
      if (closed_) return;
      if (ec) {
        owner->OnStreamError(ec == asio::error::eof ? UnavailableError("closed by the peer")
                                                    : UnavailableError(ec.message()));
        return;
      }
      decoder_.Feed(buffer_.data(), n);
      for (;;) {
        auto next = decoder_.Next();
        if (!next.ok()) {
          owner->OnStreamError(next.status());
          return;
        }
        if (!next->has_value()) break;
        owner->OnFrame(std::move(**next));
        if (closed_) return;
      }
      Read(owner);
    });
  }

  template <typename Owner>
  void Send(std::shared_ptr<Owner> owner, uint8_t type, std::string_view payload) {
    if (closed_) return;
    wire::AppendFrame(type, payload, pending_);
    if (pending_.size() > kMaxQueuedSendBytes) {
      owner->OnStreamError(UnavailableError("peer is not reading"));
      return;
    }
    if (!writing_) Write(owner);
  }

  // Closes once the queued frames are written (at once if none).
  void CloseAfterFlush() {
    close_after_flush_ = true;
    if (!writing_ && pending_.empty()) Close();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  bool closed() const { return closed_; }
  Socket& socket() { return socket_; }

 private:
  template <typename Owner>
  void Write(std::shared_ptr<Owner> owner) {
    writing_ = true;
    in_flight_.swap(pending_);
    pending_.clear();
    asio::async_write(socket_, asio::buffer(in_flight_), [this, owner](const boost::system::error_code& ec, size_t) {
      writing_ = false;
      in_flight_.clear();
      if (closed_) return;
      if (ec) {
        owner->OnStreamError(UnavailableError(ec.message()));
      } else if (!pending_.empty()) {
        Write(owner);
      } else if (close_after_flush_) {
        Close();
      }
    });
  }

  Socket socket_;
  std::array<char, kFramedReadChunkBytes> buffer_{};
  wire::FrameDecoder decoder_;
  std::string pending_, in_flight_;
  bool writing_ = false;
  bool close_after_flush_ = false;
  bool closed_ = false;
};

}  // namespace dslaunch::agent
