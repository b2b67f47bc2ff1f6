#include "common/store/store_session.h"

#include <list>
#include <unordered_map>
#include <unordered_set>

#include "common/message_types.h"
#include "common/store/proxy_protocol.h"
#include "common/store/store_service.h"

namespace dslaunch {
namespace {

using Clock = std::chrono::steady_clock;

// A store client's connection: one answer per request, in request order.
class StoreSession : public SessionHandler, public StoreWaiter {
 public:
  StoreSession(std::shared_ptr<StoreService> service, std::shared_ptr<EndpointConnection> conn)
      : service_(std::move(service)), conn_(std::move(conn)) {}
  ~StoreSession() override { Unpark(); }

  Status OnFrame(wire::Frame frame) override {
    DSLAUNCH_ASSIGN_OR_RETURN(StoreRequest request, DecodeStoreRequest(frame));
    if (parked_) {
      if (queued_.size() >= kMaxQueuedStoreRequests) {
        return FailedPreconditionError(std::to_string(kMaxQueuedStoreRequests) +
                                       " requests queued behind a blocked " +
                                       StoreOpName(parked_->request.type));
      }
      queued_.push_back(std::move(request));
      return Status::Ok();
    }
    Execute(std::move(request));
    return Status::Ok();
  }

  void OnClose(const Status&) override {
    closed_ = true;
    queued_.clear();
    Unpark();
  }

  void OnWaiterDone(KvStore::WaiterId, bool timed_out) override {
    Parked p = std::move(*parked_);
    parked_.reset();
    if (auto answer = service_->Resume(p.request, timed_out)) {
      Reply(*answer);
    } else {
      // A key it needed was deleted again before the answer: keep waiting until the same deadline.
      Park(std::move(p.request), p.deadline);
    }
    while (!closed_ && !parked_ && !queued_.empty()) {
      StoreRequest next = std::move(queued_.front());
      queued_.pop_front();
      Execute(std::move(next));
    }
  }

 private:
  struct Parked {
    KvStore::WaiterId id = 0;
    StoreRequest request;
    KvStore::TimePoint deadline;
  };

  void Reply(const StoreAnswer& a) { conn_->Send(a.type, a.payload); }

  void Park(StoreRequest request, KvStore::TimePoint deadline) {
    KvStore::WaiterId id = service_->Park(this, request, deadline);
    parked_ = Parked{id, std::move(request), deadline};
  }

  void Unpark() {
    if (!parked_) return;
    service_->Unpark(parked_->id);
    parked_.reset();
  }

  void Execute(StoreRequest r) {
    if (auto answer = service_->Execute(r, conn_->generation())) {
      Reply(*answer);
    } else {
      const KvStore::TimePoint deadline = Clock::now() + r.timeout;
      Park(std::move(r), deadline);
    }
    service_->Deliver();
  }

  std::shared_ptr<StoreService> service_;
  std::shared_ptr<EndpointConnection> conn_;
  std::optional<Parked> parked_;
  // Requests behind a parked one. A list, not a deque: an empty std::deque allocates its first
  // block (about 600 B), per connection of every rank on the direct path, for a queue that is
  // almost always empty.
  std::list<StoreRequest> queued_;
  bool closed_ = false;
};

// An agent's store proxy for one generation: tagged requests, answered in any order.
class StoreProxySession : public ProxySession, public StoreWaiter {
 public:
  StoreProxySession(std::shared_ptr<StoreService> service, std::shared_ptr<EndpointConnection> conn,
                    int generation)
      : service_(std::move(service)), conn_(std::move(conn)), generation_(generation) {}
  ~StoreProxySession() override {
    for (const auto& [id, p] : parked_) service_->Unpark(id);
  }

  Status OnProxied(std::string_view payload) override {
    DSLAUNCH_ASSIGN_OR_RETURN(ProxiedRequest p, DecodeProxiedRequest(payload));
    if (!tags_.insert(p.tag).second) {
      return InvalidArgumentError("store proxy reused tag " + std::to_string(p.tag) +
                                  " of a request still outstanding");
    }
    if (tags_.size() > kMaxProxiedRequestsInFlight) {
      return FailedPreconditionError("store proxy has more than " +
                                     std::to_string(kMaxProxiedRequestsInFlight) +
                                     " requests outstanding");
    }
    if (auto answer = service_->Execute(p.request, generation_)) {
      Reply(p.tag, *answer);
    } else {
      KvStore::TimePoint deadline = Clock::now() + p.request.timeout;
      Park(Parked{p.tag, std::move(p.request), deadline});
    }
    service_->Deliver();
    return Status::Ok();
  }

  int generation() const override { return generation_; }

  void OnWaiterDone(KvStore::WaiterId id, bool timed_out) override {
    auto it = parked_.find(id);
    if (it == parked_.end()) return;
    Parked p = std::move(it->second);
    parked_.erase(it);
    if (auto answer = service_->Resume(p.request, timed_out)) {
      Reply(p.tag, *answer);
    } else {
      Park(std::move(p));  // a key went away again: wait until the same deadline
    }
  }

 private:
  struct Parked {
    uint64_t tag = 0;
    StoreRequest request;
    KvStore::TimePoint deadline;
  };

  void Reply(uint64_t tag, const StoreAnswer& a) {
    tags_.erase(tag);
    conn_->Send(msg::kStoreProxiedReply, EncodeProxiedReply(tag, a.type, a.payload));
  }

  void Park(Parked p) {
    KvStore::WaiterId id = service_->Park(this, p.request, p.deadline);
    parked_.emplace(id, std::move(p));
  }

  std::shared_ptr<StoreService> service_;
  std::shared_ptr<EndpointConnection> conn_;
  const int generation_;
  std::unordered_map<KvStore::WaiterId, Parked> parked_;
  std::unordered_set<uint64_t> tags_;  // outstanding: received and not answered
};

}  // namespace

std::unique_ptr<SessionHandler> NewStoreSession(std::shared_ptr<StoreService> service,
                                                std::shared_ptr<EndpointConnection> conn) {
  return std::make_unique<StoreSession>(std::move(service), std::move(conn));
}

std::unique_ptr<ProxySession> NewProxySession(std::shared_ptr<StoreService> service,
                                              std::shared_ptr<EndpointConnection> conn, int generation) {
  return std::make_unique<StoreProxySession>(std::move(service), std::move(conn), generation);
}

}  // namespace dslaunch
