#include "common/store/store_service.h"

#include <charconv>

#include "common/asio.h"
#include "common/endpoint/endpoint.h"
#include "common/message_types.h"
#include "common/store/store_session.h"

namespace dslaunch {
namespace {

using Clock = std::chrono::steady_clock;

// Names at most this many missing keys in a WAIT timeout message; the count covers the rest.
constexpr size_t kMaxKeysInMessage = 8;

// What every generation's key prefix starts with.
constexpr std::string_view kGenerationKeyRoot = "gen/";

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

StoreAnswer Ok(wire::ByteWriter& w) { return StoreAnswer{msg::kStoreOk, w.Take()}; }
StoreAnswer Error(const Status& st) { return StoreAnswer{msg::kStoreError, EncodeStoreError(st)}; }

template <typename T, typename Write>
StoreAnswer OkOrError(const Result<T>& v, Write write) {
  if (!v.ok()) return Error(v.status());
  wire::ByteWriter w;
  write(w, *v);
  return Ok(w);
}

}  // namespace

struct StoreService::Timer {
  explicit Timer(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
};

StoreService::StoreService(asio::io_context& io) : timer_(std::make_unique<Timer>(io)) {}

StoreService::~StoreService() = default;

std::shared_ptr<StoreService> StoreService::Attach(asio::io_context& io, Endpoint& endpoint) {
  std::shared_ptr<StoreService> service(new StoreService(io));
  endpoint.SetSessionFactory(PeerRole::kStoreClient,
                             [service](std::shared_ptr<EndpointConnection> conn) {
                               return NewStoreSession(service, std::move(conn));
                             });
  return service;
}

std::unique_ptr<ProxySession> StoreService::OpenProxySession(std::shared_ptr<EndpointConnection> conn,
                                                             int generation) {
  return NewProxySession(shared_from_this(), std::move(conn), generation);
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

std::optional<StoreAnswer> StoreService::Execute(StoreRequest& r, int generation) {
  if (Status st = CheckGenerationKeys(r, generation); !st.ok()) return Error(st);
  wire::ByteWriter w;
  switch (r.type) {
    case msg::kStoreSet: {
      Status st = store_.Set(r.key, std::move(r.value));
      return st.ok() ? Ok(w) : Error(st);
    }
    case msg::kStoreGet:
    case msg::kStoreWait:
      if (auto answer = TryAnswer(r)) return answer;
      if (r.timeout.count() == 0) return TimedOut(r);
      return std::nullopt;
    case msg::kStoreAdd:
      return OkOrError(store_.Add(r.key, r.delta), [](wire::ByteWriter& o, int64_t v) { o.I64(v); });
    case msg::kStoreCompareSet:
      return OkOrError(store_.CompareSet(r.key, r.value, std::move(r.desired)),
                       [](wire::ByteWriter& o, const std::string& v) { o.String(v); });
    case msg::kStoreCheck: return Ok(w.Bool(store_.Check(r.keys)));
    case msg::kStoreDelete: return Ok(w.Bool(store_.Delete(r.key)));
    case msg::kStoreNumKeys: return Ok(w.I64(store_.NumKeys(r.key)));
  }
  DSLAUNCH_CHECK(false) << "not a store request type: " << int{r.type};
  return std::nullopt;
}

std::optional<StoreAnswer> StoreService::Resume(const StoreRequest& r, bool timed_out) {
  if (timed_out) return TimedOut(r);
  return TryAnswer(r);
}

std::optional<StoreAnswer> StoreService::TryAnswer(const StoreRequest& r) const {
  wire::ByteWriter w;
  if (r.type == msg::kStoreGet) {
    const std::string* v = store_.Get(r.key);
    if (v == nullptr) return std::nullopt;
    return Ok(w.String(*v));
  }
  if (!store_.Check(r.keys)) return std::nullopt;
  return Ok(w);
}

StoreAnswer StoreService::TimedOut(const StoreRequest& r) const {
  std::string what = r.type == msg::kStoreGet ? std::string("key not set")
                                              : "keys " + MissingKeys(store_, r.keys) + " not set";
  if (r.timeout.count() == 0) return Error(DeadlineExceededError(what));
  return Error(DeadlineExceededError(what + " within " + std::to_string(r.timeout.count()) + " ms"));
}

KvStore::WaiterId StoreService::Park(StoreWaiter* waiter, const StoreRequest& r,
                                     KvStore::TimePoint deadline) {
  KvStore::WaiterId id = next_waiter_id_++;
  std::vector<std::string> keys = r.type == msg::kStoreGet ? std::vector<std::string>{r.key} : r.keys;
  bool ready = store_.Watch(id, std::move(keys), deadline);
  DSLAUNCH_CHECK(!ready) << "parked a request whose keys exist";
  parked_.emplace(id, waiter);
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
      StoreWaiter* waiter = it->second;
      parked_.erase(it);
      waiter->OnWaiterDone(id, /*timed_out=*/false);
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
    StoreWaiter* waiter = it->second;
    parked_.erase(it);
    waiter->OnWaiterDone(id, /*timed_out=*/true);
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
