// FakeIoEngine: io_engine.h's contract over an in-memory file, for tests of what drives an engine
// (SwapStream). Start records the request; the transfer happens at Wait, so a caller that reuses a
// buffer before waiting sees wrong data. It logs every call and can fail the Nth transfer.
#pragma once

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "runtime/swap/io_engine.h"

namespace dslaunch::testing {

class FakeIoEngine final : public runtime::swap::IoEngine {
 public:
  using IoOp = runtime::swap::IoOp;
  using IoRequest = runtime::swap::IoRequest;
  using IoTicket = runtime::swap::IoTicket;

  explicit FakeIoEngine(size_t file_bytes) : file_(file_bytes) {}

  // Transfer number `n` (1-based, counting reads and writes at Wait) fails with kInternal.
  void FailTransfer(uint64_t n) { fail_at_ = n; }

  Result<IoTicket> Start(const IoRequest& r) override {
    IoTicket t = next_++;
    pending_.emplace(t, r);
    log_.push_back(std::string(r.op == IoOp::kRead ? "start-read@" : "start-write@") + std::to_string(r.offset));
    max_in_flight_ = std::max(max_in_flight_, pending_.size());
    return t;
  }

  Status Wait(IoTicket t) override {
    auto it = pending_.find(t);
    DSLAUNCH_CHECK(it != pending_.end()) << "fake: unknown ticket " << t;
    IoRequest r = it->second;
    pending_.erase(it);
    log_.push_back(std::string(r.op == IoOp::kRead ? "wait-read@" : "wait-write@") + std::to_string(r.offset));
    if (++transfers_ == fail_at_) return InternalError("fake: transfer " + std::to_string(transfers_) + " fails");
    DSLAUNCH_CHECK(r.offset + r.buffer.size() <= file_.size()) << "fake: beyond the file";
    if (r.op == IoOp::kRead) {
      std::memcpy(r.buffer.data(), file_.data() + r.offset, r.buffer.size());
    } else {
      std::memcpy(file_.data() + r.offset, r.buffer.data(), r.buffer.size());
    }
    return Status::Ok();
  }

  std::string_view name() const override { return "fake"; }
  runtime::swap::IoStats stats() const override { return {transfers_, 0, max_in_flight_}; }

  std::vector<std::byte>& file() { return file_; }
  const std::vector<std::string>& log() const { return log_; }
  size_t in_flight() const { return pending_.size(); }

 private:
  std::vector<std::byte> file_;
  std::map<IoTicket, IoRequest> pending_;
  std::vector<std::string> log_;
  IoTicket next_ = 1;
  uint64_t transfers_ = 0;
  uint64_t fail_at_ = 0;
  size_t max_in_flight_ = 0;
};

}  // namespace dslaunch::testing
