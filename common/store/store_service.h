// StoreService: the rendezvous store served on the launcher's endpoint for PeerRole::kStoreClient.
// It owns a KvStore and turns store requests (common/store/store_protocol.h) into KvStore calls; a GET
// or WAIT whose keys are missing parks the connection as a waiter until a SET from any client
// satisfies it or its deadline (now + the timeout the client sent) passes, which answers
// kDeadlineExceeded. Protocol: docs/protocol.md, "Store operations".
//
// One endpoint serves one job (the handshake checks the job id), so keys carry no job. They carry
// the generation: a connection of generation g (EndpointConnection::generation(), fenced by
// Endpoint::BeginGeneration) may only name keys that start with "gen/<g>/" (GenerationKeyPrefix);
// a request naming any other key, or a NUM_KEYS prefix that does not start so, is answered with a
// STORE_ERROR kInvalidArgument and changes nothing (the connection stays open, as for a key over
// kMaxStoreKeyBytes). So a worker of another generation can neither read nor satisfy nor poison
// a rendezvous of this one, even when it builds its frames itself. The launcher's in-process
// calls (Set, DeletePrefix, DeleteGenerationsBefore) are not restricted.
//
// Threading: all methods, and all request handling, run on the io_context thread (or before it
// runs). Requests on one connection are answered in order: requests that arrive while a GET or
// WAIT is parked are queued behind it.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "common/store/kv_store.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace dslaunch {

class Endpoint;
class StoreSession;

// Requests a client may queue behind a parked GET or WAIT before its connection is closed: the
// blocking StoreClient has one request in flight, so only a misbehaving peer comes near this.
inline constexpr size_t kMaxQueuedStoreRequests = 1024;

// "gen/<generation>/": the prefix of every key of that generation.
std::string GenerationKeyPrefix(int generation);

class StoreService : public std::enable_shared_from_this<StoreService> {
 public:
  // Creates a service and registers it on `endpoint` for PeerRole::kStoreClient. The endpoint
  // keeps the service alive (its session factory holds a reference); the returned pointer is for
  // in-process access. `io` must be the endpoint's io_context.
  static std::shared_ptr<StoreService> Attach(boost::asio::io_context& io, Endpoint& endpoint);

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

 private:
  friend class StoreSession;
  struct Timer;

  explicit StoreService(boost::asio::io_context& io);

  // Parks `session` as waiter for `keys` until `deadline`; returns the waiter id.
  KvStore::WaiterId Park(StoreSession* session, std::vector<std::string> keys,
                         KvStore::TimePoint deadline);
  void Unpark(KvStore::WaiterId id);
  // Answers every waiter made ready by the last mutations. Re-entrant calls return at once;
  // the outermost call loops until nothing is ready.
  void Deliver();
  void OnTimer();
  void RescheduleTimer();

  KvStore store_;
  std::unique_ptr<Timer> timer_;
  std::optional<KvStore::TimePoint> armed_deadline_;
  KvStore::WaiterId next_waiter_id_ = 1;
  std::unordered_map<KvStore::WaiterId, StoreSession*> parked_;
  bool delivering_ = false;
};

}  // namespace dslaunch
