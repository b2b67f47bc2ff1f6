// In-memory snapshots on real memory files (memfd_create): a slot's round trip, a write cut
// short and a corrupt byte refused by name, which slot MemorySnapshots writes, the descriptors
// from the agent's variable; and which snapshot a restart restores (pure).
#include "runtime/checkpoint/memory_snapshot.h"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "runtime/checkpoint/memory_restore.h"

namespace dslaunch::runtime {
namespace {

UniqueFd MemoryFile() {
  const int fd = ::memfd_create("test-snapshot", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  return UniqueFd(fd);
}

// A snapshot of a slice of 5 elements of two tensors, with element values from `seed`.
struct Fixture {
  std::vector<float> master, exp_avg;
  EngineSnapshot snap;
  explicit Fixture(float seed) {
    for (int i = 0; i < 5; ++i) {
      master.push_back(seed + static_cast<float>(i));
      exp_avg.push_back(-seed - static_cast<float>(i) / 8);
    }
    snap.range = {10, 15};
    snap.tensors = {{"master", master}, {"exp_avg", exp_avg}};
  }
};

TEST_CASE("A slot gives back what was written: the step, rank, world, meta.json and every tensor") {
  SnapshotSlot slot(MemoryFile(), "slot 0");
  Fixture f(1.5f);
  REQUIRE(slot.Write({12, 1, 3}, R"({"step": 12})", f.snap).ok());
  Result<SnapshotInfo> info = slot.Check();
  REQUIRE_MESSAGE(info.ok(), info.status().ToString());
  CHECK(*info == SnapshotInfo{12, 1, 3});
  CHECK(slot.meta() == R"({"step": 12})");
  CHECK(std::vector<float>(slot.tensor(0).begin(), slot.tensor(0).end()) == f.master);
  CHECK(std::vector<float>(slot.tensor(1).begin(), slot.tensor(1).end()) == f.exp_avg);

  // Written again at another step, with a streamed tensor (state on disk), in pieces.
  Fixture g(7.0f);
  g.snap.stream = [&](size_t index, const EngineSnapshot::Sink& sink) {
    const std::vector<float>& t = index == 0 ? g.master : g.exp_avg;
    DSLAUNCH_RETURN_IF_ERROR(sink(std::span<const float>(t).first(2)));
    return sink(std::span<const float>(t).subspan(2));
  };
  g.snap.tensors = {{"master", {}}, {"exp_avg", {}}};
  REQUIRE(slot.Write({13, 1, 3}, R"({"step": 13})", g.snap).ok());
  info = slot.Check();
  REQUIRE(info.ok());
  CHECK(info->step == 13);
  CHECK(std::vector<float>(slot.tensor(1).begin(), slot.tensor(1).end()) == g.exp_avg);
}

TEST_CASE("An empty slot, a write cut short and a flipped byte are not snapshots, each said by name") {
  UniqueFd fd = MemoryFile();
  const int raw = fd.get();
  SnapshotSlot slot(std::move(fd), "slot 1");
  Result<SnapshotInfo> info = slot.Check();
  CHECK(info.status().code() == StatusCode::kNotFound);
  CHECK(info.status().message() == "in-memory snapshot slot 1: empty");

  Fixture f(2.0f);
  REQUIRE(slot.Write({4, 0, 1}, "{}", f.snap).ok());
  slot.Clear();  // as a write that stopped before its end leaves it
  info = slot.Check();
  CHECK(info.status().code() == StatusCode::kNotFound);
  CHECK(info.status().message() == "in-memory snapshot slot 1: no complete snapshot (a write did not finish)");

  REQUIRE(slot.Write({4, 0, 1}, "{}", f.snap).ok());
  REQUIRE(slot.Check().ok());
  const off_t last = ::lseek(raw, 0, SEEK_END) - 1;
  char byte = 0;
  REQUIRE(::pread(raw, &byte, 1, last) == 1);
  byte = static_cast<char>(byte ^ 0x10);
  REQUIRE(::pwrite(raw, &byte, 1, last) == 1);
  info = slot.Check();
  CHECK(info.status().code() == StatusCode::kDataLoss);
  CHECK(info.status().message().rfind("in-memory snapshot slot 1: corrupt: CRC-32C ", 0) == 0);
  CHECK(info.status().message().find(", its header records ") != std::string::npos);
}

// The step each of `mine`'s own slots holds a complete snapshot of, -1 for none, in slot order.
std::vector<int64_t> StepsIn(MemorySnapshots& mine) {
  std::vector<int64_t> held;
  for (SnapshotSlot& s : mine.slots()) {
    Result<SnapshotInfo> info = s.Check();
    held.push_back(info.ok() ? info->step : -1);
  }
  return held;
}

// A rank's two slots, empty.
MemorySnapshots TwoSlots() {
  std::vector<SnapshotSlot> slots;
  slots.emplace_back(MemoryFile(), "slot 0");
  slots.emplace_back(MemoryFile(), "slot 1");
  return MemorySnapshots(std::move(slots));
}

TEST_CASE("Snapshots alternate between the two slots and never overwrite the newest committed one") {
  MemorySnapshots mine = TwoSlots();
  Fixture f(1.0f);
  auto steps = [&] { return StepsIn(mine); };
  REQUIRE(mine.Write({1, 0, 2}, "{}", f.snap).ok());
  CHECK(steps() == std::vector<int64_t>{1, -1});
  mine.Committed(1);
  REQUIRE(mine.Write({2, 0, 2}, "{}", f.snap).ok());
  CHECK(steps() == std::vector<int64_t>{1, 2});
  // Step 2 not committed (a rank failed to write it): step 3 replaces it, 1 stays.
  REQUIRE(mine.Write({3, 0, 2}, "{}", f.snap).ok());
  CHECK(steps() == std::vector<int64_t>{1, 3});
  mine.Committed(3);
  REQUIRE(mine.Write({4, 0, 2}, "{}", f.snap).ok());
  CHECK(steps() == std::vector<int64_t>{4, 3});
  // A run that resumed from step 3 keeps only that one.
  mine.KeepOnly(3);
  CHECK(steps() == std::vector<int64_t>{-1, 3});
  REQUIRE(mine.Write({4, 0, 2}, "{}", f.snap).ok());
  CHECK(steps() == std::vector<int64_t>{4, 3});
  mine.KeepOnly(std::nullopt);  // a run that did not resume from memory
  CHECK(steps() == std::vector<int64_t>{-1, -1});
  CHECK(mine.bytes() > 0);
}

TEST_CASE("A pinned slot is not written until unpinned: the next snapshots take the other, even the committed one") {
  MemorySnapshots mine = TwoSlots();
  Fixture f(1.0f);
  auto steps = [&] { return StepsIn(mine); };
  REQUIRE(mine.Write({1, 0, 2}, "{}", f.snap).ok());
  mine.Committed(1);
  REQUIRE(mine.Write({2, 0, 2}, "{}", f.snap).ok());
  CHECK(mine.Pin(7) == nullptr);  // no slot holds it
  const SnapshotSlot* pinned = mine.Pin(2);  // an asynchronous save of step 2 reads it
  REQUIRE(pinned == &mine.slots()[1]);
  CHECK(pinned->tensors() == 2);
  mine.Committed(2);
  // Slot 1 holds the newest committed step and is pinned: step 3 goes to slot 0, and so does 4,
  // over the committed 3: the pinned slot keeps step 2 whole meanwhile.
  REQUIRE(mine.Write({3, 0, 2}, "{}", f.snap).ok());
  mine.Committed(3);
  REQUIRE(mine.Write({4, 0, 2}, "{}", f.snap).ok());
  CHECK(steps() == std::vector<int64_t>{4, 2});
  mine.Unpin();
  mine.Committed(4);
  REQUIRE(mine.Write({5, 0, 2}, "{}", f.snap).ok());
  CHECK(steps() == std::vector<int64_t>{4, 5});
}

TEST_CASE("DSLAUNCH_SNAPSHOT_FDS must name two open descriptors") {
  UniqueFd a = MemoryFile(), b = MemoryFile();
  const std::string good = std::to_string(a.get()) + "," + std::to_string(b.get());
  Result<MemorySnapshots> mine = MemorySnapshots::FromEnv(good);
  REQUIRE(mine.ok());
  (void)a.Release();  // owned by `mine` now
  (void)b.Release();
  CHECK(mine->slots().size() == 2);
  for (const std::string bad : {"", "7", "x,y", "3,", "99999,99998", "1,2"}) {
    CAPTURE(bad);
    Result<MemorySnapshots> refused = MemorySnapshots::FromEnv(bad);
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    CHECK(refused.status().message().find("DSLAUNCH_SNAPSHOT_FDS='" + bad + "': expected two open descriptors") == 0);
  }
}

TEST_CASE("The peers' copies are read-only extra slots, and the next snapshot waits for the agent's answer") {
  UniqueFd a = MemoryFile(), b = MemoryFile(), copy = MemoryFile();
  Fixture f(2.0f);
  {
    SnapshotSlot peer(UniqueFd(::dup(copy.get())), "peer");
    REQUIRE(peer.Write({5, 3, 4}, "{}", f.snap).ok());
  }
  const std::vector<int> own_fds = {a.get(), b.get()};
  const std::string own = std::to_string(a.get()) + "," + std::to_string(b.get());
  Result<MemorySnapshots> mine = MemorySnapshots::FromEnv(own, std::to_string(copy.get()));
  REQUIRE_MESSAGE(mine.ok(), mine.status().ToString());
  (void)a.Release();
  (void)b.Release();
  (void)copy.Release();
  CHECK(mine->slots().size() == 2);
  std::vector<SnapshotSlot*> readable = mine->Readable();
  REQUIRE(readable.size() == 3);
  CHECK(readable[2]->name() == "peer copy 0");
  Result<SnapshotInfo> held = readable[2]->Check();
  REQUIRE(held.ok());
  CHECK(*held == SnapshotInfo{5, 3, 4});
  CHECK(readable[2]->Write({6, 3, 4}, "{}", f.snap).code() == StatusCode::kInternal);  // never written
  CHECK(MemorySnapshots::FromEnv(own, "x").status().message().find("DSLAUNCH_SNAPSHOT_REPLICA_FDS='x'") == 0);

  // Without copies asked for, the next snapshot never waits.
  std::optional<int64_t> failed;
  Status first = mine->Write({1, 0, 2}, "{}", f.snap);
  REQUIRE_MESSAGE(first.ok(), first.ToString());
  CHECK(mine->Answered(&failed));
  // With one: it waits until the agent answers in the slot's header, stored or failed.
  mine->set_origin(SlotOrigin{0, 1});
  REQUIRE(mine->Write({2, 0, 2}, "{}", f.snap).ok());
  CHECK_FALSE(mine->Answered(&failed));
  // The agent's answer: written into the header of the memory file that holds step 2.
  auto answer = [&](int64_t value) {
    for (int fd : own_fds) {
      snapshot::SlotHeader h{};
      if (::pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) continue;  // never written
      if (h.complete == 1 && h.step == 2) REQUIRE(::pwrite(fd, &value, sizeof(value), snapshot::kAckedOffset) == 8);
    }
  };
  answer(1);  // an answer about another step is none
  CHECK_FALSE(mine->Answered(&failed));
  answer(snapshot::FailedAck(2));
  CHECK(mine->Answered(&failed));
  CHECK(failed == 2);  // said once
  failed.reset();
  CHECK(mine->Answered(&failed));
  CHECK(failed == std::nullopt);
  REQUIRE(mine->Write({3, 0, 2}, "{}", f.snap).ok());
  CHECK_FALSE(mine->Answered(&failed));
  mine->KeepOnly(std::nullopt);  // a new run does not wait for the old one's answer
  CHECK(mine->Answered(&failed));
}

std::optional<SnapshotInfo> At(int64_t step, int rank, int world) { return SnapshotInfo{step, rank, world}; }

TEST_CASE("A restart restores the newest step whose snapshot every rank of its run has, from the lowest holder") {
  // Two ranks, two slots each: step 6 complete on both, step 7 written by rank 0 only.
  HeldSnapshots held = {{At(6, 0, 2), At(7, 0, 2)}, {At(6, 1, 2), std::nullopt}};
  std::optional<SnapshotPlan> plan = PlanSnapshotRestore(held);
  REQUIRE(plan);
  CHECK(plan->step == 6);
  CHECK(plan->world == 2);
  CHECK(plan->sources == std::vector<SnapshotSource>{{0, 0}, {1, 0}});

  // Shrunk to one rank that holds both old ranks' snapshots (four slots).
  held = {{At(9, 1, 2), At(8, 1, 2), At(9, 0, 2), At(8, 0, 2)}};
  plan = PlanSnapshotRestore(held);
  REQUIRE(plan);
  CHECK(plan->step == 9);
  CHECK(plan->sources == std::vector<SnapshotSource>{{0, 2}, {0, 0}});

  // Grown: a new rank without snapshots; the old rank's is broadcast from rank 0.
  held = {{At(3, 0, 1), std::nullopt}, {std::nullopt, std::nullopt}};
  plan = PlanSnapshotRestore(held);
  REQUIRE(plan);
  CHECK(plan->sources == std::vector<SnapshotSource>{{0, 0}});
  // The same snapshot on two ranks: the lowest rank is the source.
  held = {{std::nullopt, At(3, 0, 1)}, {At(3, 0, 1), std::nullopt}};
  CHECK(PlanSnapshotRestore(held)->sources == std::vector<SnapshotSource>{{0, 1}});
}

TEST_CASE("Without a complete set the restart says what is missing") {
  HeldSnapshots held = {{std::nullopt, std::nullopt}, {std::nullopt, std::nullopt}};
  CHECK_FALSE(PlanSnapshotRestore(held));
  CHECK(DescribeMissingSnapshots(held) == "no rank holds a complete snapshot");
  // Rank 1's node was lost with its snapshots; rank 0 holds only its own.
  held = {{At(12, 0, 2), At(11, 0, 2)}};
  CHECK_FALSE(PlanSnapshotRestore(held));
  CHECK(DescribeMissingSnapshots(held) ==
        "the newest, of step 12 on 2 ranks, lacks the snapshot of rank 1 (lost with its node, or never completed)");
  held = {{At(5, 0, 4), std::nullopt}};
  CHECK(DescribeMissingSnapshots(held) ==
        "the newest, of step 5 on 4 ranks, lacks the snapshots of ranks 1, 2, 3 (lost with their nodes, or never "
        "completed)");
}

}  // namespace
}  // namespace dslaunch::runtime
