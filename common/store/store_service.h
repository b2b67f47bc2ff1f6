// StoreService: the rendezvous store served on the launcher's endpoint, for store clients
// (PeerRole::kStoreClient: workers, one request at a time, answers in request order) and for the
// agents' store proxies (PROXIED frames on an agent's control connection: many tagged requests,
// answers in any order; the launcher routes them to OpenProxySession's session; docs/protocol.md,
// "Store proxy"). It owns a KvStore and turns store requests
// (common/store/store_protocol.h) into KvStore calls; a GET or WAIT whose keys are missing is parked
// as a waiter until a SET from any client satisfies it or its deadline (now + the timeout the client
// sent) passes, which answers kDeadlineExceeded. Protocol: docs/protocol.md, "Store operations".
// The two kinds of session (common/store/store_session.h) share Execute, Resume and Park: there is
// one place where a request is carried out.
//
// One endpoint serves one job (the handshake checks the job id), so keys carry no job. They carry
// the generation: a connection of generation g (EndpointConnection::generation(), fenced by
// Endpoint::BeginGeneration), or a proxy session opened for generation g, may only name keys that start with "gen/<g>/" (GenerationKeyPrefix);
// a request naming any other key, or a NUM_KEYS prefix that does not start so, is answered with a
// STORE_ERROR kInvalidArgument and changes nothing (the connection stays open, as for a key over
// kMaxStoreKeyBytes). So a worker of another generation can neither read nor satisfy nor poison
// a rendezvous of this one, even when it builds its frames itself. The launcher's in-process
// calls (Set, DeletePrefix, DeleteGenerationsBefore) are not restricted.
//
// Threading: all methods, and all request handling, run on the io_context thread (or before it
// runs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "common/store/kv_store.h"
#include "common/store/store_protocol.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace dslaunch {

class Endpoint;
class EndpointConnection;
class ProxySession;

// Requests a client may queue behind a parked GET or WAIT before its connection is closed: the
// blocking StoreClient has one request in flight, so only a misbehaving peer comes near this.
inline constexpr size_t kMaxQueuedStoreRequests = 1024;

// What a request is answered with: msg::kStoreOk or msg::kStoreError, and that frame's payload.
struct StoreAnswer {
  uint8_t type = 0;
  std::string payload;
};

// Told when a parked request's waiter is done (a session implements it).
class StoreWaiter {
 public:
  virtual ~StoreWaiter() = default;
  // The waiter `id` registered by StoreService::Park: its keys all exist (timed_out false) or its
  // deadline passed (true). The id is no longer registered.
  virtual void OnWaiterDone(KvStore::WaiterId id, bool timed_out) = 0;
};

class StoreService : public std::enable_shared_from_this<StoreService> {
 public:
  // Creates a service and registers it on `endpoint` for PeerRole::kStoreClient. The endpoint
  // keeps the service alive (its session factory holds a reference); the returned pointer is for
  // in-process access. `io` must be the endpoint's io_context.
  static std::shared_ptr<StoreService> Attach(boost::asio::io_context& io, Endpoint& endpoint);

  // A session for the PROXIED frames an agent sends on `conn` (its control connection) as of
  // `generation`, replying on `conn` (common/store/store_session.h). The caller owns it and
  // decides when the generation is over for that agent: destroying the session cancels its
  // parked requests without answering them.
  std::unique_ptr<ProxySession> OpenProxySession(std::shared_ptr<EndpointConnection> conn, int generation);

  ~StoreService();
  StoreService(const StoreService&) = delete;
  StoreService& operator=(const StoreService&) = delete;

  // In-process writes by the launcher itself, with the same effect as a client's SET (parked
  // waiters are woken). Key as stored, i.e. including any "gen/<g>/" prefix.
  Status Set(std::string_view key, std::string value);

  // Removes every key starting with `prefix` (e.g. "gen/3/" once generation 3 is over); returns
  // how many. Parked waiters on those keys keep waiting.
  size_t DeletePrefix(std::string_view prefix);

  // Removes the keys of every generation before `generation` ("gen/<k>/..." for every decimal k <
  // generation); returns how many. The launcher calls it after Endpoint::BeginGeneration(
  // generation), which has closed those generations' connections: their parked GETs and WAITs
  // are dropped when the closes complete (OnClose), not answered.
  size_t DeleteGenerationsBefore(int generation);

  // Read access for the launcher and tests.
  const KvStore& store() const { return store_; }

  // --- For the sessions (common/store/store_session.cc). ---

  // Carries out `r` for a connection of `generation`: its answer, or nullopt for a GET or WAIT
  // whose keys are missing and whose timeout is not 0 (the caller parks it). A key outside the
  // generation is answered with kInvalidArgument and changes nothing. The caller sends the
  // answer, then calls Deliver() to answer the waiters the request made ready.
  std::optional<StoreAnswer> Execute(StoreRequest& r, int generation);
  // The answer of a parked GET or WAIT whose waiter is done: its value (or OK), the
  // kDeadlineExceeded error when timed out, or nullopt when a key it needed was deleted again
  // before the answer (the caller parks it again, with the same deadline).
  std::optional<StoreAnswer> Resume(const StoreRequest& r, bool timed_out);
  // Parks GET or WAIT `r` for `waiter` until `deadline`; returns the waiter id, which the waiter
  // sees in OnWaiterDone, exactly once, unless it calls Unpark first.
  KvStore::WaiterId Park(StoreWaiter* waiter, const StoreRequest& r, KvStore::TimePoint deadline);
  void Unpark(KvStore::WaiterId id);
  // Answers every waiter made ready by the last mutations. Re-entrant calls return at once;
  // the outermost call loops until nothing is ready.
  void Deliver();

 private:
  struct Timer;

  explicit StoreService(boost::asio::io_context& io);

  // The answer of a GET or WAIT if its keys exist; nullopt if it must wait.
  std::optional<StoreAnswer> TryAnswer(const StoreRequest& r) const;
  StoreAnswer TimedOut(const StoreRequest& r) const;
  void OnTimer();
  void RescheduleTimer();

  KvStore store_;
  std::unique_ptr<Timer> timer_;
  std::optional<KvStore::TimePoint> armed_deadline_;
  KvStore::WaiterId next_waiter_id_ = 1;
  std::unordered_map<KvStore::WaiterId, StoreWaiter*> parked_;
  bool delivering_ = false;
};

}  // namespace dslaunch
