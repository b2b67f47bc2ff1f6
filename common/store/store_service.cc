#include "common/store/store_service.h"

#include <charconv>
#include <deque>

#include "common/asio.h"
#include "common/endpoint/endpoint.h"
#include "common/message_types.h"
#include "common/store/store_protocol.h"

namespace dslaunch {
namespace {

using Clock = std::chrono::steady_clock;

// Names at most this many missing keys in a WAIT timeout message; the count covers the rest.
constexpr size_t kMaxKeysInMessage = 8;

std::string MissingKeys(const KvStore& store, const std::vector<std::string>& keys) {
  std::string out;
  size_t missing = 0;
  for (const auto& k : keys) {
    if (store.Get(k) != nullptr) continue;
    if (++missing <= kMaxKeysInMessage) out += (out.empty() ? "'" : ", '") + k + "'";
  }
  if (missing > kMaxKeysInMessage) {
    out += " and " + std::to_string(missing - kMaxKeysInMessage) + " more";
  }
  return out;
}

// What every generation's key prefix starts with.
constexpr std::string_view kGenerationKeyRoot = "gen/";

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// Every key a request names (NUM_KEYS: its prefix).
std::vector<std::string_view> NamedKeys(const StoreRequest& r) {
  if (r.type == msg::kStoreWait || r.type == msg::kStoreCheck) {
    return std::vector<std::string_view>(r.keys.begin(), r.keys.end());
  }
  return {r.key};
}

}  // namespace

std::string GenerationKeyPrefix(int generation) {
  return std::string(kGenerationKeyRoot) + std::to_string(generation) + "/";
}

struct StoreService::Timer {
  explicit Timer(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
};

// The handler of one store connection.
class StoreSession : public SessionHandler {
 public:
  StoreSession(std::shared_ptr<StoreService> service, std::shared_ptr<EndpointConnection> conn)
      : service_(std::move(service)),
        conn_(std::move(conn)),
        prefix_(GenerationKeyPrefix(conn_->generation())) {}
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

  void OnClose(const Status& why) override {
    closed_ = true;
    queued_.clear();
    Unpark();
  }

  // The parked request's keys all exist (timed_out false) or its deadline passed (true).
  void OnWaiterDone(bool timed_out) {
    Parked p = std::move(*parked_);
    parked_.reset();
    if (timed_out) {
      const StoreRequest& r = p.request;
      std::string what = r.type == msg::kStoreGet
                             ? std::string("key not set")
                             : "keys " + MissingKeys(service_->store_, r.keys) + " not set";
      Reply(DeadlineExceededError(what + " within " + std::to_string(r.timeout.count()) + " ms"));
    } else if (!TryAnswer(p.request)) {
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

  void Reply(const Status& st) { conn_->Send(msg::kStoreError, EncodeStoreError(st)); }
  void Reply(wire::ByteWriter& w) { conn_->Send(msg::kStoreOk, w.Take()); }

  // Answers a GET or WAIT if its keys exist; false if it must wait.
  bool TryAnswer(const StoreRequest& r) {
    KvStore& store = service_->store_;
    wire::ByteWriter w;
    if (r.type == msg::kStoreGet) {
      const std::string* v = store.Get(r.key);
      if (v == nullptr) return false;
      Reply(w.String(*v));
      return true;
    }
    if (!store.Check(r.keys)) return false;
    Reply(w);
    return true;
  }

  void Park(StoreRequest request, KvStore::TimePoint deadline) {
    std::vector<std::string> keys =
        request.type == msg::kStoreGet ? std::vector<std::string>{request.key} : request.keys;
    KvStore::WaiterId id = service_->Park(this, std::move(keys), deadline);
    parked_ = Parked{id, std::move(request), deadline};
  }

  void Unpark() {
    if (!parked_) return;
    service_->Unpark(parked_->id);
    parked_.reset();
  }

  // kInvalidArgument if `r` names a key outside this connection's generation.
  Status CheckGeneration(const StoreRequest& r) const {
    for (std::string_view key : NamedKeys(r)) {
      if (StartsWith(key, prefix_)) continue;
      return InvalidArgumentError(
          StoreOpName(r.type) + (r.type == msg::kStoreNumKeys ? " prefix '" : " key '") +
          std::string(key) + "' is outside generation " + std::to_string(conn_->generation()) +
          " of this connection (its keys start with '" + prefix_ + "')");
    }
    return Status::Ok();
  }

  void Execute(StoreRequest r) {
    if (Status st = CheckGeneration(r); !st.ok()) {
      Reply(st);
      return;
    }
    KvStore& store = service_->store_;
    wire::ByteWriter w;
    switch (r.type) {
      case msg::kStoreSet: {
        Status st = store.Set(r.key, std::move(r.value));
        if (st.ok()) {
          Reply(w);
        } else {
          Reply(st);
        }
        break;
      }
      case msg::kStoreGet:
      case msg::kStoreWait:
        if (TryAnswer(r)) break;
        if (r.timeout.count() == 0) {
          Reply(DeadlineExceededError(r.type == msg::kStoreGet
                                          ? std::string("key not set")
                                          : "keys " + MissingKeys(store, r.keys) + " not set"));
          break;
        }
        {
          KvStore::TimePoint deadline = Clock::now() + r.timeout;
          Park(std::move(r), deadline);
        }
        break;
      case msg::kStoreAdd: {
        auto v = store.Add(r.key, r.delta);
        if (v.ok()) {
          Reply(w.I64(*v));
        } else {
          Reply(v.status());
        }
        break;
      }
      case msg::kStoreCompareSet: {
        auto v = store.CompareSet(r.key, r.value, std::move(r.desired));
        if (v.ok()) {
          Reply(w.String(*v));
        } else {
          Reply(v.status());
        }
        break;
      }
      case msg::kStoreCheck: Reply(w.Bool(store.Check(r.keys))); break;
      case msg::kStoreDelete: Reply(w.Bool(store.Delete(r.key))); break;
      case msg::kStoreNumKeys: Reply(w.I64(store.NumKeys(r.key))); break;
    }
    service_->Deliver();
  }

  std::shared_ptr<StoreService> service_;
  std::shared_ptr<EndpointConnection> conn_;
  const std::string prefix_;  // GenerationKeyPrefix of the connection's generation
  std::optional<Parked> parked_;
  std::deque<StoreRequest> queued_;
  bool closed_ = false;
};

StoreService::StoreService(asio::io_context& io) : timer_(std::make_unique<Timer>(io)) {}

StoreService::~StoreService() = default;

std::shared_ptr<StoreService> StoreService::Attach(asio::io_context& io, Endpoint& endpoint) {
  std::shared_ptr<StoreService> service(new StoreService(io));
  endpoint.SetSessionFactory(PeerRole::kStoreClient,
                             [service](std::shared_ptr<EndpointConnection> conn) {
                               return std::make_unique<StoreSession>(service, std::move(conn));
                             });
  return service;
}

Status StoreService::Set(std::string_view key, std::string value) {
  DSLAUNCH_RETURN_IF_ERROR(store_.Set(key, std::move(value)));
  Deliver();
  return Status::Ok();
}

size_t StoreService::DeletePrefix(std::string_view prefix) { return store_.DeletePrefix(prefix); }

size_t StoreService::DeleteGenerationsBefore(int generation) {
  return store_.DeletePrefixIf(kGenerationKeyRoot, [generation](std::string_view key) {
    std::string_view rest = key.substr(kGenerationKeyRoot.size());
    int g = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), g);
    // Only "gen/<decimal>/...": a key such as "gen/x" or "gen/-1/" is no generation's.
    return ec == std::errc() && end != rest.data() && end < rest.data() + rest.size() &&
           *end == '/' && rest.front() != '-' && g < generation;
  });
}

KvStore::WaiterId StoreService::Park(StoreSession* session, std::vector<std::string> keys,
                                     KvStore::TimePoint deadline) {
  KvStore::WaiterId id = next_waiter_id_++;
  bool ready = store_.Watch(id, std::move(keys), deadline);
  DSLAUNCH_CHECK(!ready) << "parked a request whose keys exist";
  parked_.emplace(id, session);
  RescheduleTimer();
  return id;
}

void StoreService::Unpark(KvStore::WaiterId id) {
  store_.Cancel(id);
  parked_.erase(id);
  RescheduleTimer();
}

void StoreService::Deliver() {
  if (delivering_) return;
  delivering_ = true;
  for (;;) {
    std::vector<KvStore::WaiterId> ready = store_.TakeReady();
    if (ready.empty()) break;
    for (KvStore::WaiterId id : ready) {
      auto it = parked_.find(id);
      if (it == parked_.end()) continue;
      StoreSession* session = it->second;
      parked_.erase(it);
      session->OnWaiterDone(/*timed_out=*/false);
    }
  }
  delivering_ = false;
  RescheduleTimer();
}

void StoreService::OnTimer() {
  armed_deadline_.reset();
  for (KvStore::WaiterId id : store_.TakeExpired(Clock::now())) {
    auto it = parked_.find(id);
    if (it == parked_.end()) continue;
    StoreSession* session = it->second;
    parked_.erase(it);
    session->OnWaiterDone(/*timed_out=*/true);
  }
  Deliver();  // answers anything the drained requests made ready, and re-arms the timer
}

void StoreService::RescheduleTimer() {
  std::optional<KvStore::TimePoint> next = store_.NextDeadline();
  if (next == armed_deadline_) return;
  armed_deadline_ = next;
  if (!next) {
    timer_->timer.cancel();
    return;
  }
  timer_->timer.expires_at(*next);  // cancels the previous wait
  timer_->timer.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: re-armed or nothing left to wait for
    if (auto self = weak.lock()) self->OnTimer();
  });
}

}  // namespace dslaunch
