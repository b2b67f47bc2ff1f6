// ReplicaSender: sends this node's completed in-memory snapshots to peer nodes' agents
// (docs/checkpoint.md, "Copies on peer nodes"; docs/protocol.md, "Snapshot copies").
//
// A thread of its own looks at the header of every slot of this node's workers every
// kSlotPollInterval (and sleeps while no worker asked for snapshot memory). A slot that holds a
// complete snapshot it has not answered for yet, and whose header asks for copies (replicas > 0),
// is sent whole to the first `replicas` peers of the current generation, one after the other, each
// over an authenticated connection kept open for the next. Then its answer goes into the slot's
// header (`acked`): the step when every peer stored it, else FailedAck(step) with a line saying
// which peer failed and why; the worker's trainer waits for that answer before its next snapshot.
// If the slot was rewritten meanwhile, no answer is written (the peer refused the torn copy by its
// CRC-32C). Without peers yet (the generation's SNAPSHOT_PEERS has not come), a snapshot waits up
// to kPeersWait, then fails.
//
// Threading: Watch, SetPeers and the destructor on the session's thread; the sending on the
// sender's own thread, joined by the destructor (which cuts off a copy in flight).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/snapshot/slot_header.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "common/wire.h"

namespace dslaunch::agent::replica {

inline constexpr std::chrono::milliseconds kSlotPollInterval{2};
inline constexpr std::chrono::seconds kPeersWait{30};
// Connecting to a peer (retried while refused) and its answer to a whole copy.
inline constexpr std::chrono::seconds kPeerConnectTimeout{2};
inline constexpr std::chrono::seconds kPeerAnswerTimeout{60};
// A peer that takes no bytes of a copy for this long fails it (SO_SNDTIMEO).
inline constexpr std::chrono::seconds kPeerStallTimeout{10};

// Writes `answer` into the header of the slot in memory file `fd` if the slot still holds the
// content `header` describes (its step, CRC-32C and generation): true. False, with nothing
// written, when the slot was rewritten meanwhile (the answer was about the old content).
bool WriteAnswer(int fd, const snapshot::SlotHeader& header, int64_t answer);

struct SenderOptions {
  std::string job_id;
  std::string secret;
  // A line about a failed copy (called from the sender's thread).
  std::function<void(const std::string&)> warn;
};

class ReplicaSender {
 public:
  explicit ReplicaSender(SenderOptions options);
  ~ReplicaSender();
  ReplicaSender(const ReplicaSender&) = delete;
  ReplicaSender& operator=(const ReplicaSender&) = delete;

  // This node's local rank `local_rank` writes its snapshots into the memory files `slots`
  // (duplicated here; a local rank already watched is left as it is).
  Status Watch(int local_rank, const std::vector<int>& slots);
  // The peers' addresses of the current generation, in order (the next nodes of the ring). A
  // snapshot already answered is not sent again; the next goes to the new peers. A copy in flight
  // to a node that is no longer a peer is cut off (failed).
  void SetPeers(std::vector<std::string> peers);

  // Copies sent and stored, for the tests and the log.
  uint64_t stored() const;

 private:
  struct Slot {
    UniqueFd fd;
    std::string name;  // "local rank 1, slot 0"
    // The content last answered for: step, CRC-32C and generation of its header.
    std::optional<std::tuple<int64_t, uint32_t, int32_t>> answered;
    std::optional<std::chrono::steady_clock::time_point> waiting_since;  // for peers
  };
  struct Connection {
    UniqueFd fd;
    wire::FrameDecoder in;
  };

  void Run();
  // One look at `slot`: sends it where it asks, answers in its header.
  void Look(Slot& slot, const std::vector<std::string>& peers);
  Status SendTo(const std::string& peer, const Slot& slot, const snapshot::SlotHeader& h, uint64_t bytes);

  const SenderOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;  // appended under mu_; each Slot is the thread's
  std::set<int> watched_;                     // guarded by mu_: the local ranks of slots_
  std::vector<std::string> peers_;     // guarded by mu_
  uint64_t peers_serial_ = 0;          // guarded by mu_: raised by SetPeers
  uint64_t stored_ = 0;                // guarded by mu_
  int in_flight_ = -1;                 // guarded by mu_: the socket of the copy being sent
  std::string in_flight_peer_;         // guarded by mu_: and its peer
  std::map<std::string, Connection> connections_;  // the thread's own
  std::thread thread_;
};

}  // namespace dslaunch::agent::replica
