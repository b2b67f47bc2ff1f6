// RequestCombiner: the pure core of an agent's store proxy (docs/protocol.md, "Store proxy",
// "Combining"). It takes the store requests of the node's workers and decides which requests go
// upstream to the launcher, combining those with the same op and key; then it turns each upstream
// reply into the answers of the workers' requests. No I/O, no clock: times are arguments.
//
// Rules (each keeps the store linearizable: an upstream request is sent after every member it
// carries was submitted, and answered before any of them is):
//  - ADD: members with the same key, submitted while no ADD of that key is in flight or before
//    the next TakeSends, become one ADD of their summed delta; member i of k gets the result minus
//    the deltas of the members after it. A combined ADD that fails is sent again member by member.
//  - GET, WAIT: members with the same op and key (key list) become one request whose timeout is
//    the shortest any member has left; the reply is fanned out. A deadline error answers the
//    members whose deadline has passed (the message names their own timeout) and sends the others
//    again with the time they have left. A batch waiting behind an in-flight request is sent anyway
//    once a member's deadline comes.
//  - SET, COMPARE_SET, DELETE, CHECK, NUM_KEYS: one upstream request each.
// A member never joins a request already sent.
//
// Not thread-safe; the proxy's event loop owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/store/proxy_protocol.h"
#include "common/store/store_protocol.h"

namespace dslaunch::agent {

// Names one worker request inside the proxy; the shell maps it back to its local connection.
using LocalId = uint64_t;

struct UpstreamRequest {
  uint64_t tag = 0;
  StoreRequest request;
};

// The answer of one worker request: msg::kStoreOk or msg::kStoreError and that frame's payload.
struct LocalAnswer {
  LocalId id = 0;
  uint8_t type = 0;
  std::string payload;
};

class RequestCombiner {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // A worker's request `id` (unique among the requests not yet answered; checked), received at
  // `now`. Its answer comes out of OnReply or FailAll, exactly once.
  void Submit(LocalId id, StoreRequest request, TimePoint now);

  // The requests to send upstream now: every waiting batch whose op and key has nothing in
  // flight, and every waiting GET or WAIT batch a member of which has reached its deadline.
  std::vector<UpstreamRequest> TakeSends(TimePoint now);

  // The upstream's reply to `reply.tag`: the answers it settles (members re-sent, for a failed
  // combined ADD or a GET or WAIT with time left, go out with the next TakeSends). An unknown tag
  // is kInvalidArgument (the upstream is broken).
  Result<std::vector<LocalAnswer>> OnReply(const ProxiedReply& reply, TimePoint now);

  // The upstream is gone: every request not yet answered is answered with `why` (a STORE_ERROR).
  std::vector<LocalAnswer> FailAll(const Status& why);

  // When TakeSends must run though nothing arrives: the earliest deadline of a member of a GET
  // or WAIT batch that waits behind an in-flight request; nullopt if none.
  std::optional<TimePoint> NextDeadline() const;

  // Requests sent upstream so far (what combining saves is measured by this).
  uint64_t upstream_requests() const { return upstream_requests_; }
  // The tag of the next upstream request: every tag sent so far is below it (tags are never reused,
  // FailAll included).
  uint64_t next_tag() const { return next_tag_; }
  // Upstream requests sent and not yet answered.
  size_t in_flight() const { return in_flight_.size(); }
  // Worker requests received and not yet answered.
  size_t pending_members() const { return members_; }

 private:
  struct Member {
    LocalId id = 0;
    int64_t delta = 0;                      // ADD
    TimePoint deadline;                     // GET, WAIT
    std::chrono::milliseconds timeout{0};   // GET, WAIT: as the worker asked
  };
  struct Batch {
    std::string lane;      // op and key(s); empty for a request that passes through alone
    StoreRequest request;  // the op and key(s); ADD: delta is the members' sum
    std::vector<Member> members;
  };
  struct Lane {
    std::deque<Batch> waiting;  // ADD: in order; GET, WAIT: at most one
    size_t in_flight = 0;
  };

  void Enqueue(Batch batch, bool front);
  void Join(Lane& lane, const std::string& name, StoreRequest request, Member m);
  void Send(Batch batch, TimePoint now, std::vector<UpstreamRequest>& out);
  void Settle(Batch batch, const ProxiedReply& reply, TimePoint now,
              std::vector<LocalAnswer>& out);
  void SettleAdd(Batch batch, const ProxiedReply& reply, std::vector<LocalAnswer>& out);
  void SettleWait(Batch batch, const ProxiedReply& reply, TimePoint now,
                  std::vector<LocalAnswer>& out);
  void Answer(const Member& m, uint8_t type, std::string payload, std::vector<LocalAnswer>& out);

  std::map<std::string, Lane> lanes_;
  std::set<std::string> lanes_waiting_;  // lanes with a waiting batch
  std::deque<Batch> pass_through_;       // waiting one-to-one requests
  std::unordered_map<uint64_t, Batch> in_flight_;
  uint64_t next_tag_ = 1;
  uint64_t upstream_requests_ = 0;
  size_t members_ = 0;
};

// `message` of a GET or WAIT deadline error, restated for a request that asked for `timeout`:
// "key not set within 4987 ms" becomes "key not set within 5000 ms" (no "within" for 0), as the
// server would have told that request.
std::string RestateTimeout(const std::string& message, std::chrono::milliseconds timeout);

}  // namespace dslaunch::agent
