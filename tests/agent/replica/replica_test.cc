// Copies of in-memory snapshots on peer nodes (agent/replica/): slots written by the runtime's own
// SnapshotSlot into real memory files, the receiving store, and a real ReplicaServer and
// ReplicaSender on loopback TCP with the job's handshake. What is kept (only whole copies with
// their CRC-32C, sealed), what the sender answers in the slot's header, and what a copy cut off or
// corrupted on the way, a wrong secret or an absent peer leave behind (nothing, and a failed answer).
#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "agent/replica/replica_protocol.h"
#include "agent/replica/replica_sender.h"
#include "agent/replica/replica_server.h"
#include "agent/replica/replica_store.h"
#include "common/auth/handshake.h"
#include "common/endpoint/endpoint_client.h"
#include "common/message_types.h"
#include "runtime/checkpoint/memory_snapshot.h"
#include "tests/support/subprocess.h"

namespace dslaunch::agent::replica {
namespace {

using runtime::EngineSnapshot;
using runtime::SlotOrigin;
using runtime::SnapshotInfo;
using runtime::SnapshotSlot;
using testing::WaitFor;

constexpr char kJob[] = "replica-test";
constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";
constexpr auto kWait = std::chrono::seconds(10);

UniqueFd MemoryFile() {
  const int fd = ::memfd_create("test-slot", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  return UniqueFd(fd);
}

UniqueFd Dup(int fd) { return UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 3)); }

// A snapshot slice of `floats` elements of two tensors, values from `seed`.
struct Slice {
  std::vector<float> master, moment;
  EngineSnapshot snap;
  Slice(float seed, size_t floats = 1000) {
    for (size_t i = 0; i < floats; ++i) {
      master.push_back(seed + static_cast<float>(i));
      moment.push_back(-seed / static_cast<float>(i + 1));
    }
    snap.range = {0, floats};
    snap.tensors = {{"master", master}, {"exp_avg", moment}};
  }
};

// Writes a snapshot into the memory file `fd` as a worker does.
void WriteSlot(int fd, SnapshotInfo info, int replicas, int generation = 0, size_t floats = 1000) {
  SnapshotSlot slot(Dup(fd), "slot");
  Slice slice(static_cast<float>(info.step) + static_cast<float>(info.rank) / 4, floats);
  REQUIRE(slot.Write(info, R"({"step": )" + std::to_string(info.step) + "}", slice.snap, {},
                     SlotOrigin{generation, replicas})
              .ok());
}

std::string Bytes(int fd) {
  std::string all;
  char buf[65536];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), at);
    REQUIRE(n >= 0);
    if (n == 0) return all;
    all.append(buf, static_cast<size_t>(n));
    at += n;
  }
}

snapshot::SlotHeader HeaderOf(int fd) {
  snapshot::SlotHeader h{};
  REQUIRE(::pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h)));
  return h;
}

int64_t AckedOf(int fd) { return HeaderOf(fd).acked; }

// Puts the slot in `fd` into `store` as the server does, the bytes after the header in pieces;
// `keep` of them only, and with byte `flip` (an offset after the header) changed, when given.
Status Feed(ReplicaStore& store, int fd, std::optional<size_t> keep = std::nullopt,
            std::optional<size_t> flip = std::nullopt) {
  std::string all = Bytes(fd);
  snapshot::SlotHeader h{};
  std::memcpy(&h, all.data(), sizeof(h));
  if (flip) all[snapshot::kHeaderBytes + *flip] ^= 0x20;
  DSLAUNCH_ASSIGN_OR_RETURN(IncomingCopy copy, store.Begin(h, all.size()));
  const std::string_view rest = std::string_view(all).substr(snapshot::kHeaderBytes, keep.value_or(std::string::npos));
  for (size_t at = 0; at < rest.size(); at += 1500) DSLAUNCH_RETURN_IF_ERROR(copy.Append(rest.substr(at, 1500)));
  return store.Keep(std::move(copy));
}

std::vector<std::pair<int, int64_t>> RanksAndSteps(const ReplicaStore& store) {
  std::vector<std::pair<int, int64_t>> held;
  for (const snapshot::SlotHeader& h : store.Held()) held.emplace_back(h.rank, h.step);
  return held;
}

TEST_CASE("A copy is kept only whole and with its CRC-32C, sealed, and a worker reads it as the snapshot") {
  UniqueFd slot = MemoryFile();
  WriteSlot(slot.get(), {7, 2, 4}, 1);
  ReplicaStore store;

  Status cut = Feed(store, slot.get(), 1000);
  CHECK(cut.code() == StatusCode::kDataLoss);
  CHECK(cut.message().rfind("the copy of step 7 of rank 2 (of 4): cut off at ", 0) == 0);
  Status flipped = Feed(store, slot.get(), std::nullopt, 4321);
  CHECK(flipped.code() == StatusCode::kDataLoss);
  CHECK(flipped.message().rfind("the copy of step 7 of rank 2 (of 4): corrupt: CRC-32C ", 0) == 0);
  CHECK(store.Held().empty());

  REQUIRE(Feed(store, slot.get()).ok());
  CHECK(RanksAndSteps(store) == std::vector<std::pair<int, int64_t>>{{2, 7}});
  CHECK(store.bytes() == Bytes(slot.get()).size());
  Result<std::vector<UniqueFd>> fds = store.Descriptors();
  REQUIRE(fds.ok());
  REQUIRE(fds->size() == 1);
  // Sealed: nobody writes into a copy a worker may be reading.
  const char byte = 'x';
  CHECK(::pwrite((*fds)[0].get(), &byte, 1, 200) < 0);
  CHECK(::mmap(nullptr, 4096, PROT_WRITE, MAP_SHARED, (*fds)[0].get(), 0) == MAP_FAILED);
  // The worker's read-only slot sees the snapshot, with the same bytes after the header.
  SnapshotSlot copy(std::move((*fds)[0]), "peer copy 0", SnapshotSlot::Access::kReadOnly);
  Result<SnapshotInfo> info = copy.Check();
  REQUIRE_MESSAGE(info.ok(), info.status().ToString());
  CHECK(*info == SnapshotInfo{7, 2, 4});
  SnapshotSlot original(Dup(slot.get()), "slot");
  REQUIRE(original.Check().ok());
  CHECK(std::vector<float>(copy.tensor(1).begin(), copy.tensor(1).end()) ==
        std::vector<float>(original.tensor(1).begin(), original.tensor(1).end()));
}

TEST_CASE("A header that does not add up is refused before anything is received") {
  UniqueFd slot = MemoryFile();
  WriteSlot(slot.get(), {3, 0, 2}, 1);
  ReplicaStore store;
  snapshot::SlotHeader h = HeaderOf(slot.get());
  const uint64_t size = Bytes(slot.get()).size();
  Result<IncomingCopy> longer = store.Begin(h, size + 64);
  CHECK(longer.status().code() == StatusCode::kDataLoss);
  CHECK(longer.status().message().find("but it holds " + std::to_string(size + 64) + " bytes") != std::string::npos);
  h.complete = 0;
  CHECK(store.Begin(h, size).status().code() == StatusCode::kNotFound);
  h.complete = 1;
  h.magic[7] = '1';
  CHECK(store.Begin(h, size).status().message().find("not a snapshot (bad magic)") != std::string::npos);
}

TEST_CASE("Two copies per rank are kept, and a copy written by a later generation drops the earlier ones") {
  ReplicaStore store;
  UniqueFd slot = MemoryFile();
  for (int64_t step : {1, 2, 3}) {
    WriteSlot(slot.get(), {step, 0, 2}, 1);
    REQUIRE(Feed(store, slot.get()).ok());
  }
  WriteSlot(slot.get(), {3, 1, 2}, 1);
  REQUIRE(Feed(store, slot.get()).ok());
  CHECK(RanksAndSteps(store) == std::vector<std::pair<int, int64_t>>{{0, 2}, {0, 3}, {1, 3}});
  // Generation 1 resumed (on 1 rank) and took its own snapshot: the copies of generation 0 go.
  WriteSlot(slot.get(), {5, 0, 1}, 1, /*generation=*/1);
  REQUIRE(Feed(store, slot.get()).ok());
  CHECK(RanksAndSteps(store) == std::vector<std::pair<int, int64_t>>{{0, 5}});
}

// A server and a sender on loopback, the sender watching local rank 0's two slots.
struct Pair {
  ReplicaStore store;
  std::unique_ptr<ReplicaServer> server;
  std::mutex mu;
  std::vector<std::string> warnings;
  std::unique_ptr<ReplicaSender> sender;
  UniqueFd slots[2] = {MemoryFile(), MemoryFile()};

  explicit Pair(const std::string& server_secret = kSecret) {
    std::signal(SIGPIPE, SIG_IGN);  // as dslaunch-agent does: sendfile to a closed peer fails with EPIPE
    auto warn = [this](const std::string& line) {
      std::lock_guard lock(mu);
      warnings.push_back(line);
    };
    auto started = ReplicaServer::Start("127.0.0.1", ServerOptions{kJob, server_secret, warn}, store);
    REQUIRE_MESSAGE(started.ok(), started.status().ToString());
    server = std::move(*started);
    sender = std::make_unique<ReplicaSender>(SenderOptions{kJob, kSecret, warn});
    REQUIRE(sender->Watch(0, {slots[0].get(), slots[1].get()}).ok());
  }
  std::string Warnings() {
    std::lock_guard lock(mu);
    std::string all;
    for (const std::string& w : warnings) all += w + "\n";
    return all;
  }
};

TEST_CASE("A completed slot goes to the peer, its header gets the answer, and the next one follows") {
  Pair p;
  WriteSlot(p.slots[0].get(), {3, 0, 2}, 1);
  // No peers named yet: the snapshot waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(AckedOf(p.slots[0].get()) == snapshot::kNotAcked);
  p.sender->SetPeers({p.server->address()});
  REQUIRE(WaitFor([&] { return AckedOf(p.slots[0].get()) == 3; }, kWait));
  CHECK(RanksAndSteps(p.store) == std::vector<std::pair<int, int64_t>>{{0, 3}});
  // The copy's bytes after the header are the slot's.
  Result<std::vector<UniqueFd>> fds = p.store.Descriptors();
  REQUIRE(fds.ok());
  CHECK(Bytes((*fds)[0].get()).substr(snapshot::kHeaderBytes) == Bytes(p.slots[0].get()).substr(snapshot::kHeaderBytes));

  // A runtime slot sees the answer as stored; the next snapshot, into the other slot, goes too.
  SnapshotSlot reader(Dup(p.slots[1].get()), "slot 1");
  Slice slice(4.0f);
  REQUIRE(reader.Write({4, 0, 2}, "{}", slice.snap, {}, SlotOrigin{0, 1}).ok());
  CHECK(reader.ack() != snapshot::Ack::kFailed);
  REQUIRE(WaitFor([&] { return reader.ack() == snapshot::Ack::kStored; }, kWait));
  CHECK(RanksAndSteps(p.store) == std::vector<std::pair<int, int64_t>>{{0, 3}, {0, 4}});
  CHECK(p.sender->stored() == 2);
  CHECK(p.Warnings().empty());

  // A slot that asks for no copies is left alone.
  WriteSlot(p.slots[0].get(), {5, 0, 2}, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(AckedOf(p.slots[0].get()) == snapshot::kNotAcked);
  CHECK(p.sender->stored() == 2);
}

TEST_CASE("A peer that is not there, or does not hold the job's secret, is a failed answer that says why") {
  SUBCASE("nobody listens") {
    Pair p;
    // A port nobody listens on: the server's, once it is gone.
    const std::string address = p.server->address();
    p.server.reset();
    WriteSlot(p.slots[0].get(), {6, 1, 4}, 1);
    p.sender->SetPeers({address});
    REQUIRE(WaitFor([&] { return AckedOf(p.slots[0].get()) == snapshot::FailedAck(6); }, kWait));
    CHECK(p.Warnings().find("the in-memory snapshot of step 6 of rank 1 (of 4) (local rank 0, slot 0) was not copied "
                            "to the peer node at " + address + ": ") != std::string::npos);
  }
  SUBCASE("another secret") {
    Pair p("fedcba9876543210fedcba9876543210");
    WriteSlot(p.slots[0].get(), {6, 1, 4}, 1);
    p.sender->SetPeers({p.server->address()});
    REQUIRE(WaitFor([&] { return AckedOf(p.slots[0].get()) == snapshot::FailedAck(6); }, kWait));
    CHECK(p.Warnings().find("wrong secret") != std::string::npos);
    CHECK(p.store.Held().empty());
  }
}

TEST_CASE("The answer is written only into a slot that still holds the snapshot it is about") {
  UniqueFd slot = MemoryFile();
  WriteSlot(slot.get(), {3, 0, 2}, 1);
  const snapshot::SlotHeader three = HeaderOf(slot.get());
  WriteSlot(slot.get(), {4, 0, 2}, 1);  // rewritten while step 3 was on its way
  CHECK_FALSE(WriteAnswer(slot.get(), three, 3));
  CHECK(AckedOf(slot.get()) == snapshot::kNotAcked);
  CHECK(WriteAnswer(slot.get(), HeaderOf(slot.get()), 4));
  CHECK(AckedOf(slot.get()) == 4);
}

// A peer that lets a sender in (the handshake, with the job's secret) and then reads nothing: a
// node cut off in the middle of a copy, as far as the sender can tell.
struct SilentPeer {
  UniqueFd listener, conn;
  std::string address;
  std::thread thread;
  SilentPeer() {
    listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0);
    REQUIRE(::listen(listener.get(), 4) == 0);
    REQUIRE(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    thread = std::thread([this] {
      conn = UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      Challenge challenge;
      challenge.server_nonce = std::string(kNonceBytes, 'n');
      if (!SendFrame(conn.get(), msg::kChallenge, EncodeChallenge(challenge)).ok()) return;
      wire::FrameDecoder in;
      Result<wire::Frame> auth = ReceiveFrame(conn.get(), in, std::chrono::steady_clock::now() + kWait);
      if (!auth.ok()) return;
      Result<AuthRequest> request = DecodeAuth(auth->payload);
      if (!request.ok()) return;
      SendFrame(conn.get(), msg::kAuthOk, EncodeAuthOk(ServerProof(kSecret, challenge, *request))).IgnoreError();
    });
  }
  ~SilentPeer() { thread.join(); }
};

TEST_CASE("A copy in flight to a node that leaves the ring is cut off at once, a failed answer") {
  Pair p;
  SilentPeer silent;
  // 32 MB: far more than the sockets buffer, so the sender blocks in the middle.
  WriteSlot(p.slots[0].get(), {8, 1, 2}, 1, 0, 4u << 20);
  p.sender->SetPeers({silent.address});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(AckedOf(p.slots[0].get()) == snapshot::kNotAcked);  // still sending
  // The next generation's ring no longer has that node; the stall timeout (10 s) is not waited for.
  p.sender->SetPeers({p.server->address()});
  REQUIRE(WaitFor([&] { return AckedOf(p.slots[0].get()) == snapshot::FailedAck(8); }, std::chrono::seconds(5)));
  CHECK(p.Warnings().find("was not copied to the peer node at " + silent.address) != std::string::npos);
}

TEST_CASE("The copy server serves snapshot peers only") {
  Pair p;
  Result<UniqueFd> agent = ConnectToEndpoint(p.server->address(), kJob, kSecret, PeerRole::kAgent, 0,
                                             std::chrono::steady_clock::now() + kWait);
  CHECK(agent.status().code() == StatusCode::kFailedPrecondition);
  CHECK(agent.status().message().find("an agent's snapshot copies serve snapshot peers only, not agent") !=
        std::string::npos);
}

TEST_CASE("A copy cut off or corrupted on the way is never kept, and the server goes on serving") {
  Pair p;
  UniqueFd slot = MemoryFile();
  WriteSlot(slot.get(), {9, 1, 2}, 1, 0, 300000);
  const std::string all = Bytes(slot.get());
  snapshot::SlotHeader h{};
  std::memcpy(&h, all.data(), sizeof(h));
  auto connect = [&] {
    Result<UniqueFd> fd = ConnectToEndpoint(p.server->address(), kJob, kSecret, PeerRole::kSnapshotPeer, 0,
                                            std::chrono::steady_clock::now() + kWait);
    REQUIRE_MESSAGE(fd.ok(), fd.status().ToString());
    return std::move(*fd);
  };
  {
    // Half the bytes, then the connection breaks (the sending node lost).
    UniqueFd fd = connect();
    REQUIRE(SendFrame(fd.get(), msg::kSnapshotCopy, EncodeCopyBegin(CopyBegin{h, all.size()})).ok());
    const std::string half = all.substr(snapshot::kHeaderBytes, all.size() / 2);
    REQUIRE(::send(fd.get(), half.data(), half.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(half.size()));
  }
  {
    // Every byte, one of them changed on the way: refused by its CRC-32C, then closed.
    UniqueFd fd = connect();
    std::string body = all.substr(snapshot::kHeaderBytes);
    body[body.size() / 3] ^= 1;
    // The header frame and the bytes in one write: the receiver's frame reader takes some of them.
    const std::string both = wire::EncodeFrame(msg::kSnapshotCopy, EncodeCopyBegin(CopyBegin{h, all.size()})) + body;
    for (size_t at = 0; at < both.size();) {
      const ssize_t n = ::send(fd.get(), both.data() + at, both.size() - at, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      at += static_cast<size_t>(n);
    }
    wire::FrameDecoder in;
    Result<wire::Frame> answer = ReceiveFrame(fd.get(), in, std::chrono::steady_clock::now() + kWait);
    REQUIRE(answer.ok());
    CHECK(answer->type == msg::kSnapshotRefused);
    Result<std::string> why = DecodeCopyRefused(answer->payload);
    REQUIRE(why.ok());
    CHECK(why->find("the copy of step 9 of rank 1 (of 2): corrupt: CRC-32C ") != std::string::npos);
  }
  REQUIRE(WaitFor([&] { return p.Warnings().find("corrupt") != std::string::npos; }, kWait));
  CHECK(p.store.Held().empty());
  // The sender's own copies still arrive.
  WriteSlot(p.slots[0].get(), {10, 0, 2}, 1);
  p.sender->SetPeers({p.server->address()});
  REQUIRE(WaitFor([&] { return AckedOf(p.slots[0].get()) == 10; }, kWait));
  CHECK(RanksAndSteps(p.store) == std::vector<std::pair<int, int64_t>>{{0, 10}});
}

TEST_CASE("The copy protocol's messages round-trip, and a payload of another size is refused") {
  CopyBegin begin;
  std::memcpy(begin.header.magic, snapshot::kMagic, sizeof(snapshot::kMagic));
  begin.header.step = 12;
  begin.bytes = 4096;
  Result<CopyBegin> back = DecodeCopyBegin(EncodeCopyBegin(begin));
  REQUIRE(back.ok());
  CHECK(back->header.step == 12);
  CHECK(back->bytes == 4096);
  CHECK(DecodeCopyBegin(EncodeCopyBegin(begin) + "x").status().code() == StatusCode::kInvalidArgument);
  Result<CopyStored> stored = DecodeCopyStored(EncodeCopyStored({12, 3}));
  REQUIRE(stored.ok());
  CHECK(stored->step == 12);
  CHECK(stored->rank == 3);
  CHECK(DecodeCopyStored("abc").status().code() == StatusCode::kInvalidArgument);
  CHECK(*DecodeCopyRefused(EncodeCopyRefused("why")) == "why");
}

}  // namespace
}  // namespace dslaunch::agent::replica
