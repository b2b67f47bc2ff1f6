#include "agent/store_proxy/request_combiner.h"

#include <algorithm>

#include "common/check.h"
#include "common/message_types.h"
#include "common/wire.h"

namespace dslaunch::agent {
namespace {

bool Combines(uint8_t op) {
  return op == msg::kStoreAdd || op == msg::kStoreGet || op == msg::kStoreWait;
}

bool Waits(uint8_t op) { return op == msg::kStoreGet || op == msg::kStoreWait; }

// The lane of a combinable request: its op and its key (WAIT: its key list, in order).
std::string LaneName(const StoreRequest& r) {
  wire::ByteWriter w;
  w.U8(r.type);
  if (r.type == msg::kStoreWait) {
    w.StringList(r.keys);
  } else {
    w.String(r.key);
  }
  return w.Take();
}

bool AddOverflows(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum);
}

// The time left until `deadline`, rounded up to a millisecond, at least 0: the server then waits
// at least until the deadline.
std::chrono::milliseconds TimeLeft(RequestCombiner::TimePoint deadline, RequestCombiner::TimePoint now) {
  if (deadline <= now) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
}

}  // namespace

std::string RestateTimeout(const std::string& message, std::chrono::milliseconds timeout) {
  constexpr std::string_view kWithin = " within ";
  size_t at = message.rfind(kWithin);
  std::string base = at == std::string::npos ? message : message.substr(0, at);
  if (timeout.count() == 0) return base;
  return base + std::string(kWithin) + std::to_string(timeout.count()) + " ms";
}

void RequestCombiner::Submit(LocalId id, StoreRequest request, TimePoint now) {
  ++members_;
  Member m;
  m.id = id;
  if (!Combines(request.type)) {
    Batch b;
    b.members.push_back(m);
    b.request = std::move(request);
    pass_through_.push_back(std::move(b));
    return;
  }
  m.delta = request.delta;
  m.timeout = request.timeout;
  m.deadline = now + request.timeout;
  std::string name = LaneName(request);
  Lane& lane = lanes_[name];
  Join(lane, name, std::move(request), m);
}

void RequestCombiner::Join(Lane& lane, const std::string& name, StoreRequest request, Member m) {
  lanes_waiting_.insert(name);
  if (!lane.waiting.empty()) {
    Batch& last = lane.waiting.back();
    if (request.type != msg::kStoreAdd || !AddOverflows(last.request.delta, m.delta)) {
      if (request.type == msg::kStoreAdd) last.request.delta += m.delta;
      last.members.push_back(m);
      return;
    }
  }
  Batch b;
  b.lane = name;
  b.request = std::move(request);
  b.request.delta = m.delta;
  b.members.push_back(m);
  lane.waiting.push_back(std::move(b));
}

void RequestCombiner::Enqueue(Batch batch, bool front) {
  lanes_waiting_.insert(batch.lane);
  Lane& lane = lanes_[batch.lane];
  if (front) {
    lane.waiting.push_front(std::move(batch));
  } else {
    lane.waiting.push_back(std::move(batch));
  }
}

std::vector<UpstreamRequest> RequestCombiner::TakeSends(TimePoint now) {
  std::vector<UpstreamRequest> out;
  while (!pass_through_.empty()) {
    Batch b = std::move(pass_through_.front());
    pass_through_.pop_front();
    Send(std::move(b), now, out);
  }
  for (auto it = lanes_waiting_.begin(); it != lanes_waiting_.end();) {
    auto lane = lanes_.find(*it);
    if (lane != lanes_.end() && !lane->second.waiting.empty()) {
      Batch& front = lane->second.waiting.front();
      bool due = false;
      if (Waits(front.request.type)) {
        for (const Member& m : front.members) due = due || m.deadline <= now;
      }
      if (lane->second.in_flight == 0 || due) {
        Batch b = std::move(front);
        lane->second.waiting.pop_front();
        Send(std::move(b), now, out);
      }
    }
    bool empty = lane == lanes_.end() || lane->second.waiting.empty();
    it = empty ? lanes_waiting_.erase(it) : std::next(it);
  }
  return out;
}

void RequestCombiner::Send(Batch batch, TimePoint now, std::vector<UpstreamRequest>& out) {
  if (Waits(batch.request.type)) {
    TimePoint earliest = TimePoint::max();
    for (const Member& m : batch.members) earliest = std::min(earliest, m.deadline);
    batch.request.timeout = TimeLeft(earliest, now);
  }
  if (!batch.lane.empty()) ++lanes_[batch.lane].in_flight;
  const uint64_t tag = next_tag_++;
  out.push_back(UpstreamRequest{tag, batch.request});
  in_flight_.emplace(tag, std::move(batch));
  ++upstream_requests_;
}

Result<std::vector<LocalAnswer>> RequestCombiner::OnReply(const ProxiedReply& reply, TimePoint now) {
  auto it = in_flight_.find(reply.tag);
  if (it == in_flight_.end()) {
    return InvalidArgumentError("the launcher answered tag " + std::to_string(reply.tag) +
                                ", which no request outstanding has");
  }
  Batch batch = std::move(it->second);
  in_flight_.erase(it);
  if (!batch.lane.empty()) {
    auto lane = lanes_.find(batch.lane);
    --lane->second.in_flight;
  }
  std::vector<LocalAnswer> out;
  const std::string name = batch.lane;
  Settle(std::move(batch), reply, now, out);
  // A lane with nothing waiting and nothing in flight is forgotten: most keys are used once.
  if (auto lane = lanes_.find(name);
      lane != lanes_.end() && lane->second.in_flight == 0 && lane->second.waiting.empty()) {
    lanes_.erase(lane);
  }
  return out;
}

void RequestCombiner::Settle(Batch batch, const ProxiedReply& reply, TimePoint now,
                             std::vector<LocalAnswer>& out) {
  switch (batch.request.type) {
    case msg::kStoreAdd: SettleAdd(std::move(batch), reply, out); return;
    case msg::kStoreGet:
    case msg::kStoreWait: SettleWait(std::move(batch), reply, now, out); return;
  }
  for (const Member& m : batch.members) Answer(m, reply.type, reply.payload, out);
}

void RequestCombiner::SettleAdd(Batch batch, const ProxiedReply& reply,
                                std::vector<LocalAnswer>& out) {
  if (reply.type == msg::kStoreError && batch.members.size() > 1) {
    // Alone, some of them might have succeeded (an overflow of the sum only): one by one.
    for (auto m = batch.members.rbegin(); m != batch.members.rend(); ++m) {
      Batch single;
      single.lane = batch.lane;
      single.request = batch.request;
      single.request.delta = m->delta;
      single.members.push_back(*m);
      Enqueue(std::move(single), /*front=*/true);
    }
    return;
  }
  int64_t value = 0;
  wire::ByteReader in(reply.payload);
  if (reply.type != msg::kStoreOk || !in.I64(value) || !in.Finished()) {
    for (const Member& m : batch.members) Answer(m, reply.type, reply.payload, out);
    return;
  }
  // Member i gets the value after its own delta, had the members run one after another.
  for (auto m = batch.members.rbegin(); m != batch.members.rend(); ++m) {
    Answer(*m, msg::kStoreOk, wire::ByteWriter().I64(value).Take(), out);
    value -= m->delta;
  }
}

void RequestCombiner::SettleWait(Batch batch, const ProxiedReply& reply, TimePoint now,
                                 std::vector<LocalAnswer>& out) {
  Status error;
  if (reply.type == msg::kStoreError) error = DecodeStoreError(reply.payload);
  if (error.code() != StatusCode::kDeadlineExceeded) {
    for (const Member& m : batch.members) Answer(m, reply.type, reply.payload, out);
    return;
  }
  // The server found the keys missing at its deadline, which no member's comes before.
  std::vector<Member> later;
  for (const Member& m : batch.members) {
    if (m.deadline > now) {
      later.push_back(m);
      continue;
    }
    Status mine = DeadlineExceededError(RestateTimeout(error.message(), m.timeout));
    Answer(m, msg::kStoreError, EncodeStoreError(mine), out);
  }
  if (later.empty()) return;
  Lane& lane = lanes_[batch.lane];
  for (const Member& m : later) Join(lane, batch.lane, batch.request, m);
}

void RequestCombiner::Answer(const Member& m, uint8_t type, std::string payload,
                             std::vector<LocalAnswer>& out) {
  DSLAUNCH_CHECK(members_ > 0) << "answered more requests than were submitted";
  --members_;
  out.push_back(LocalAnswer{m.id, type, std::move(payload)});
}

std::vector<LocalAnswer> RequestCombiner::FailAll(const Status& why) {
  std::vector<LocalAnswer> out;
  const std::string payload = EncodeStoreError(why);
  auto fail = [&](const Batch& b) {
    for (const Member& m : b.members) Answer(m, msg::kStoreError, payload, out);
  };
  for (const Batch& b : pass_through_) fail(b);
  for (const auto& [tag, b] : in_flight_) fail(b);
  for (const auto& [name, lane] : lanes_) {
    for (const Batch& b : lane.waiting) fail(b);
  }
  pass_through_.clear();
  in_flight_.clear();
  lanes_.clear();
  lanes_waiting_.clear();
  return out;
}

std::optional<RequestCombiner::TimePoint> RequestCombiner::NextDeadline() const {
  std::optional<TimePoint> next;
  for (const std::string& name : lanes_waiting_) {
    auto lane = lanes_.find(name);
    if (lane == lanes_.end()) continue;
    for (const Batch& b : lane->second.waiting) {
      if (!Waits(b.request.type)) continue;
      for (const Member& m : b.members) {
        if (!next || m.deadline < *next) next = m.deadline;
      }
    }
  }
  return next;
}

}  // namespace dslaunch::agent
