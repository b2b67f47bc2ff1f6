// StoreClient: the blocking client of the launcher's rendezvous store, used by workers (and by
// the Gloo adapter, common/store/gloo_store.h). Plain POSIX sockets, no Asio.
//
// Key namespacing: every key is sent as "gen/<generation>/<key>", and the connection is bound to
// the job and to the generation by the handshake. The server refuses a client of any generation
// but the job's current one, closes the connections of a generation when the next one begins,
// and refuses keys outside the connection's generation (common/store/store_service.h), so a worker of
// an earlier generation can never see, satisfy or poison the rendezvous of a later one. NumKeys
// counts only this generation's keys. Details in docs/protocol.md, "Generations and fencing".
//
// Errors carry the store address, the generation, the operation and the key, e.g.
//   "store 10.0.0.1:29500 gen 2: get 'nccl_id': deadline exceeded ..." (code kDeadlineExceeded).
// Codes: kDeadlineExceeded (GET/WAIT timed out, or no answer in time), kUnavailable (connection
// lost; the next call reconnects), kInvalidArgument (key or value over a limit),
// kFailedPrecondition (ADD on a non-counter, store full; at connect: a generation that has not
// started), kUnauthenticated (at connect), kAborted (at connect or reconnect: this generation is
// over; the job restarted without this worker, which should exit). A call blocked in Get or Wait
// when its generation ends fails with kUnavailable (the launcher closed the connection).
// A call whose connection broke is not retried: whether the server applied it is unknown.
//
// Thread-safety: all methods may be called from any thread; a mutex serialises the calls, so one
// thread's blocking Get or Wait delays the others' calls until it returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "common/wire.h"

namespace dslaunch {

// A non-blocking request (SET, ADD, ...) is answered at once by a live launcher; waiting longer
// than this for its answer means the launcher is hung.
inline constexpr std::chrono::seconds kStoreRequestTimeout{60};
// A GET or WAIT is answered by the server by its timeout; the client waits this much longer for
// the answer to cross the network before it gives up on the connection.
inline constexpr std::chrono::seconds kStoreReplyGrace{5};
// A call made after the connection broke reconnects for at most this long.
inline constexpr std::chrono::seconds kStoreReconnectTimeout{30};

struct StoreConfig {
  std::string address;  // host:port of the launcher's endpoint (DSLAUNCH_STORE)
  std::string job_id;
  int generation = 0;  // restart count (DSLAUNCH_RESTART_COUNT)
  std::string secret;  // never logged
};

class StoreClient {
 public:
  // Connects and authenticates as PeerRole::kStoreClient, retrying refused connections until
  // `deadline` (see ConnectToEndpoint for the error codes). kInvalidArgument for a negative
  // generation or a bad address.
  static Result<std::unique_ptr<StoreClient>> Connect(
      StoreConfig config, std::chrono::steady_clock::time_point deadline);

  // Creates or replaces `key`.
  Status Set(std::string_view key, std::string_view value);
  // The value of `key`, waiting up to `timeout` for it to be set (0: do not wait).
  Result<std::string> Get(std::string_view key, std::chrono::milliseconds timeout);
  // Adds `delta` to the counter at `key` (absent counts as 0); returns the new value.
  Result<int64_t> Add(std::string_view key, int64_t delta);
  // TCPStore compare-and-set; returns the value after the attempt (see KvStore::CompareSet).
  Result<std::string> CompareSet(std::string_view key, std::string_view expected,
                                 std::string_view desired);
  // Waits up to `timeout` until every key exists.
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Whether every key exists now.
  Result<bool> Check(const std::vector<std::string>& keys);
  // Removes `key`; returns whether it existed.
  Result<bool> Delete(std::string_view key);
  // Number of keys of this generation.
  Result<int64_t> NumKeys();

  const std::string& address() const { return config_.address; }
  int generation() const { return config_.generation; }
  // "gen/<generation>/": what is put in front of every key on the wire.
  const std::string& key_prefix() const { return prefix_; }

 private:
  explicit StoreClient(StoreConfig config);

  // One request/response round trip; returns the OK payload or the error, with `what` as context.
  // Caller holds mu_.
  Result<std::string> Call(uint8_t type, std::string payload, std::chrono::milliseconds wait,
                           const std::string& what);
  std::string Key(std::string_view key) const { return prefix_ + std::string(key); }
  std::string Context(std::string_view op, std::string_view key) const;

  const StoreConfig config_;
  const std::string prefix_;
  std::mutex mu_;
  UniqueFd fd_;                 // guarded by mu_; invalid after a broken connection
  wire::FrameDecoder decoder_;  // guarded by mu_
};

// A one-shot barrier of `world_size` participants through the store: each participant ADDs to
// "barrier/<name>/arrived"; the last one SETs "barrier/<name>/done"; all WAIT for it. A name is
// used once per generation. kDeadlineExceeded names how many arrived within `timeout`;
// kFailedPrecondition if more than world_size arrive (a reused name).
Status StoreBarrier(StoreClient& client, std::string_view name, int world_size,
                    std::chrono::milliseconds timeout);

}  // namespace dslaunch
