#include "agent/replica/replica_sender.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/replica/replica_protocol.h"
#include "common/auth/handshake.h"
#include "common/endpoint/endpoint_client.h"
#include "common/message_types.h"

namespace dslaunch::agent::replica {

namespace {

using Clock = std::chrono::steady_clock;

// The slot's header and size now; nullopt when it holds no complete snapshot that checks.
std::optional<std::pair<snapshot::SlotHeader, uint64_t>> ReadHeader(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < snapshot::kHeaderBytes) return std::nullopt;
  snapshot::SlotHeader h{};
  if (::pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) return std::nullopt;
  if (!snapshot::CheckHeader(h, static_cast<size_t>(st.st_size), "").ok()) return std::nullopt;
  return std::pair(h, static_cast<uint64_t>(st.st_size));
}

std::tuple<int64_t, uint32_t, int32_t> Identity(const snapshot::SlotHeader& h) {
  return {h.step, h.crc32c, h.generation};
}

}  // namespace

bool WriteAnswer(int fd, const snapshot::SlotHeader& header, int64_t answer) {
  const auto now = ReadHeader(fd);
  if (!now || Identity(now->first) != Identity(header)) return false;
  return ::pwrite(fd, &answer, sizeof(answer), snapshot::kAckedOffset) == static_cast<ssize_t>(sizeof(answer));
}

ReplicaSender::ReplicaSender(SenderOptions options) : options_(std::move(options)) {
  thread_ = std::thread([this] { Run(); });
}

ReplicaSender::~ReplicaSender() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (in_flight_ >= 0) ::shutdown(in_flight_, SHUT_RDWR);  // a copy in flight stops at once
  }
  wake_.notify_all();
  thread_.join();
}

Status ReplicaSender::Watch(int local_rank, const std::vector<int>& slots) {
  std::vector<std::unique_ptr<Slot>> added;
  {
    std::lock_guard lock(mu_);
    if (watched_.contains(local_rank)) return Status::Ok();
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    const int fd = ::fcntl(slots[i], F_DUPFD_CLOEXEC, 3);
    if (fd < 0) {
      return ErrnoError("duplicate the descriptor of local rank " + std::to_string(local_rank) + "'s slot", errno);
    }
    auto slot = std::make_unique<Slot>();
    slot->fd = UniqueFd(fd);
    slot->name = "local rank " + std::to_string(local_rank) + ", slot " + std::to_string(i);
    added.push_back(std::move(slot));
  }
  {
    std::lock_guard lock(mu_);
    watched_.insert(local_rank);
    for (auto& s : added) slots_.push_back(std::move(s));
  }
  wake_.notify_all();
  return Status::Ok();
}

void ReplicaSender::SetPeers(std::vector<std::string> peers) {
  {
    std::lock_guard lock(mu_);
    // A copy in flight to a node that is no longer a peer (lost, cut off) stops now: its socket
    // could block for minutes, and the new ring's copies wait behind it.
    if (in_flight_ >= 0 && std::find(peers.begin(), peers.end(), in_flight_peer_) == peers.end()) {
      ::shutdown(in_flight_, SHUT_RDWR);
    }
    peers_ = std::move(peers);
    ++peers_serial_;
  }
  wake_.notify_all();
}

uint64_t ReplicaSender::stored() const {
  std::lock_guard lock(mu_);
  return stored_;
}

void ReplicaSender::Run() {
  uint64_t serial = 0;
  for (;;) {
    std::vector<Slot*> slots;
    std::vector<std::string> peers;
    bool new_peers = false;
    {
      std::unique_lock lock(mu_);
      // Nothing to look at (no worker asked for snapshot memory): asleep until Watch.
      if (slots_.empty()) {
        wake_.wait(lock, [this] { return stopping_ || !slots_.empty(); });
      } else {
        wake_.wait_for(lock, kSlotPollInterval, [this] { return stopping_; });
      }
      if (stopping_) return;
      for (const auto& s : slots_) slots.push_back(s.get());
      peers = peers_;
      new_peers = serial != peers_serial_;
      serial = peers_serial_;
    }
    if (new_peers) {
      // The ring changed: connections to nodes that are no longer peers close. A snapshot already
      // answered is not sent again: the next one goes to the new peers.
      for (auto it = connections_.begin(); it != connections_.end();) {
        it = std::find(peers.begin(), peers.end(), it->first) == peers.end() ? connections_.erase(it) : std::next(it);
      }
    }
    for (Slot* s : slots) Look(*s, peers);
  }
}

void ReplicaSender::Look(Slot& slot, const std::vector<std::string>& peers) {
  const auto read = ReadHeader(slot.fd.get());
  if (!read) return;
  const auto& [h, bytes] = *read;
  if (h.replicas <= 0 || slot.answered == Identity(h) || snapshot::AckOf(h.acked, h.step) != snapshot::Ack::kPending) {
    return;
  }
  const size_t wanted = static_cast<size_t>(std::min(h.replicas, snapshot::kMaxReplicas));
  int64_t answer = h.step;
  if (peers.empty()) {
    // The generation's peers are not known yet: the snapshot waits for them, for a while.
    if (!slot.waiting_since) slot.waiting_since = Clock::now();
    if (Clock::now() - *slot.waiting_since < kPeersWait) return;
    answer = snapshot::FailedAck(h.step);
    if (options_.warn) {
      options_.warn("the in-memory snapshot of " + snapshot::Describe(h) + " (" + slot.name +
                    ") was not copied: no peer node was named within " + std::to_string(kPeersWait.count()) + " s");
    }
  } else {
    for (size_t i = 0; i < std::min(wanted, peers.size()); ++i) {
      const Status sent = SendTo(peers[i], slot, h, bytes);
      if (sent.ok()) continue;
      answer = snapshot::FailedAck(h.step);
      if (options_.warn) {
        options_.warn("the in-memory snapshot of " + snapshot::Describe(h) + " (" + slot.name +
                      ") was not copied to the peer node at " + peers[i] + ": " + sent.ToString());
      }
    }
  }
  slot.waiting_since.reset();
  slot.answered = Identity(h);
  // The answer is for this content only: a slot rewritten meanwhile gets none.
  WriteAnswer(slot.fd.get(), h, answer);
}

Status ReplicaSender::SendTo(const std::string& peer, const Slot& slot, const snapshot::SlotHeader& h,
                             uint64_t bytes) {
  auto it = connections_.find(peer);
  if (it == connections_.end()) {
    DSLAUNCH_ASSIGN_OR_RETURN(UniqueFd fd, ConnectToEndpoint(peer, options_.job_id, options_.secret,
                                                             PeerRole::kSnapshotPeer, 0,
                                                             Clock::now() + kPeerConnectTimeout));
    // A peer that stops taking bytes (cut off) fails the copy after this, not after TCP's minutes.
    const timeval stall{static_cast<time_t>(kPeerStallTimeout.count()), 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof(stall));
    it = connections_.emplace(peer, Connection{std::move(fd), {}}).first;
  }
  const int fd = it->second.fd.get();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return AbortedError("the agent is stopping");
    in_flight_ = fd;
    in_flight_peer_ = peer;
  }
  Status sent = [&]() -> Status {
    snapshot::SlotHeader announced = h;
    announced.acked = snapshot::kNotAcked;
    DSLAUNCH_RETURN_IF_ERROR(SendFrame(fd, msg::kSnapshotCopy, EncodeCopyBegin(CopyBegin{announced, bytes})));
    // The slot after its header, from the memory file to the socket by the kernel.
    off_t at = static_cast<off_t>(snapshot::kHeaderBytes);
    while (static_cast<uint64_t>(at) < bytes) {
      const ssize_t n = ::sendfile(fd, slot.fd.get(), &at, static_cast<size_t>(bytes - static_cast<uint64_t>(at)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError("send " + slot.name, errno);
      if (n == 0) {
        return DataLossError(slot.name + " ended at " + std::to_string(at) + " of " + std::to_string(bytes) + " bytes");
      }
    }
    DSLAUNCH_ASSIGN_OR_RETURN(wire::Frame answer, ReceiveFrame(fd, it->second.in, Clock::now() + kPeerAnswerTimeout));
    if (answer.type == msg::kSnapshotRefused) {
      DSLAUNCH_ASSIGN_OR_RETURN(std::string why, DecodeCopyRefused(answer.payload));
      return UnavailableError("refused: " + why);
    }
    if (answer.type != msg::kSnapshotStored) {
      return InvalidArgumentError("expected SNAPSHOT_STORED, got a frame of type " + std::to_string(answer.type));
    }
    DSLAUNCH_ASSIGN_OR_RETURN(CopyStored stored, DecodeCopyStored(answer.payload));
    if (stored.step != h.step || stored.rank != h.rank) {
      return InvalidArgumentError("the peer stored step " + std::to_string(stored.step) + " of rank " +
                                  std::to_string(stored.rank));
    }
    return Status::Ok();
  }();
  {
    std::lock_guard lock(mu_);
    in_flight_ = -1;
    if (sent.ok()) ++stored_;
  }
  if (!sent.ok()) connections_.erase(peer);  // the next copy opens a new connection
  return sent;
}

}  // namespace dslaunch::agent::replica
