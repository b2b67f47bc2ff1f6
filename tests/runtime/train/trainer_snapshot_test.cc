// In-memory snapshots through the training loop, on in-process ranks with real memory files as
// their agents would hold them: a restart restores the newest complete snapshot and continues
// bitwise as the uninterrupted run, at every ZeRO stage, in fp32 and fp16; at another world size
// the state is re-partitioned; a model split into stages and tensor ranks restarts part by part; a
// corrupt snapshot is refused by name for the older one, and with none complete the restart
// resumes from checkpoint.dir, saying so.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/checkpoint/memory_snapshot.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/runtime/train/grid_gpt_config.h"
#include "tests/runtime/tiny_gpt_config.h"
#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

// One rank's memory files, held across runs as its agent holds them across generations.
struct AgentMemory {
  std::vector<UniqueFd> files;
  explicit AgentMemory(int slots = 2) {
    for (int i = 0; i < slots; ++i) {
      const int fd = ::memfd_create("test-agent-snapshot", MFD_CLOEXEC);
      REQUIRE(fd >= 0);
      files.emplace_back(fd);
    }
  }
  // What a worker of this rank gets: its own descriptors of the same files.
  std::vector<SnapshotSlot> Slots() const {
    std::vector<SnapshotSlot> slots;
    for (const UniqueFd& f : files) slots.emplace_back(UniqueFd(::dup(f.get())), "slot " + std::to_string(slots.size()));
    return slots;
  }
};

// The checkpoint tests' tiny GPT, in `precision`.
TrainConfig Config(int world, int stage, Precision precision, int steps) {
  TrainConfig c = TinyGptConfig(world, stage, steps);
  c.engine.precision = precision;
  return c;
}

struct Outcome {
  std::vector<TrainResult> results;
  std::vector<Status> failures;  // per rank, with Run's `expect_ok` false
  std::vector<std::vector<std::string>> lines;  // per rank
  std::string Text(int rank = 0) const {
    std::string all;
    for (const std::string& l : lines[static_cast<size_t>(rank)]) all += l + "\n";
    return all;
  }
};

// Copies on peer nodes: each snapshot asks for `replicas` copies; `copies[r]`: the memory whose
// snapshots rank r reads as a peer's copies at a restart; `answer`: each rank's agent answers
// "stored" for its rank's snapshot as soon as it is written (after the step, before the next one:
// the next all-reduce always sees the answer).
struct Peers {
  int replicas = 0;
  std::vector<std::vector<const AgentMemory*>> copies;
  bool answer = false;
};

// The agent's answer, as agent/replica/replica_sender.h writes it, for every complete slot of
// `memory` that asks for copies.
void AnswerCopies(const std::vector<const AgentMemory*>& memory) {
  for (const AgentMemory* m : memory) {
    for (const UniqueFd& f : m->files) {
      snapshot::SlotHeader h{};
      if (::pread(f.get(), &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) continue;
      if (h.complete == 1 && h.replicas > 0 && h.acked != h.step) {
        REQUIRE(::pwrite(f.get(), &h.step, sizeof(h.step), snapshot::kAckedOffset) == sizeof(h.step));
      }
    }
  }
}

// `config` on one rank per entry of `memory` (null: no snapshots), each snapshotting every step;
// split over the grid of its pipeline.stages and tensor_parallel.autotp_size.
Outcome Run(const TrainConfig& config, const std::vector<std::vector<const AgentMemory*>>& memory,
            const Peers& peers = {}, bool expect_ok = true) {
  const int world = static_cast<int>(memory.size());
  std::vector<std::optional<MemorySnapshots>> mine(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    std::vector<SnapshotSlot> slots, copies;
    for (const AgentMemory* m : memory[static_cast<size_t>(r)]) {
      for (SnapshotSlot& s : m->Slots()) slots.push_back(std::move(s));
    }
    if (static_cast<size_t>(r) < peers.copies.size()) {
      for (const AgentMemory* m : peers.copies[static_cast<size_t>(r)]) {
        for (const UniqueFd& f : m->files) {
          copies.emplace_back(UniqueFd(::dup(f.get())), "peer copy", SnapshotSlot::Access::kReadOnly);
        }
      }
    }
    if (!slots.empty()) {
      mine[static_cast<size_t>(r)].emplace(std::move(slots), std::move(copies));
      mine[static_cast<size_t>(r)]->set_origin(SlotOrigin{0, peers.replicas});
    }
  }
  Outcome out;
  out.lines.resize(static_cast<size_t>(world));
  auto results = testing::TrainOnGrid(world, config, testing::PatternTokens(true), [&](int rank) {
    TrainHooks hooks;
    hooks.print = [&out, rank](const std::string& line) { out.lines[static_cast<size_t>(rank)].push_back(line); };
    if (mine[static_cast<size_t>(rank)]) {
      hooks.snapshots = &*mine[static_cast<size_t>(rank)];
      hooks.snapshot_interval = 1;
    }
    if (peers.answer) {
      hooks.after_step = [&memory, rank](int64_t) { AnswerCopies(memory[static_cast<size_t>(rank)]); };
    }
    return hooks;
  });
  for (auto& r : results) {
    if (!expect_ok) {
      out.failures.push_back(r.status());
      continue;
    }
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    out.results.push_back(*r);
  }
  return out;
}

// `world` ranks without snapshots.
std::vector<std::vector<const AgentMemory*>> NoSnapshots(int world) {
  return std::vector<std::vector<const AgentMemory*>>(static_cast<size_t>(world));
}

// One rank per entry of `memory`, each with its own.
std::vector<std::vector<const AgentMemory*>> Own(const std::vector<AgentMemory>& memory) {
  std::vector<std::vector<const AgentMemory*>> own;
  for (const AgentMemory& m : memory) own.push_back({&m});
  return own;
}

// The steps `memory`'s slots hold complete snapshots of, ascending.
std::vector<int64_t> StepsHeld(const AgentMemory& memory) {
  std::vector<int64_t> steps;
  for (const UniqueFd& f : memory.files) {
    SnapshotSlot slot(UniqueFd(::dup(f.get())), "probe", SnapshotSlot::Access::kReadOnly);
    Result<SnapshotInfo> info = slot.Check();
    if (info.ok()) steps.push_back(info->step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

TrainConfig Restart(TrainConfig c) {
  c.checkpoint.restarted = true;
  return c;
}

TEST_CASE("A restart restores the newest snapshot from memory and continues bitwise as the uninterrupted run") {
  for (Precision precision : {Precision::kFp32, Precision::kFp16}) {
    for (int stage : {0, 1, 2, 3}) {
      CAPTURE(stage);
      CAPTURE(PrecisionName(precision));
      const std::vector<double> expected = Run(Config(2, stage, precision, 6), {{}, {}}).results[0].losses;
      REQUIRE(expected.size() == 6);
      const AgentMemory m0, m1;
      const Outcome first = Run(Config(2, stage, precision, 4), {{&m0}, {&m1}});  // then "killed"
      const Outcome second = Run(Restart(Config(2, stage, precision, 6)), {{&m0}, {&m1}});
      INFO(second.Text());
      CHECK(second.results[0].first_step == 4);
      CHECK(second.results[0].losses == std::vector<double>(expected.begin() + 4, expected.end()));
      CHECK(second.Text().find("restart: resumed from the in-memory snapshot at step 4 (saved by 2 ranks at ZeRO "
                               "stage " + std::to_string(stage) + ", " + std::string(PrecisionName(precision)) + "; ") !=
            std::string::npos);
    }
  }
}

TEST_CASE("With the optimizer state on NVMe, an explicit interval streams it into the snapshots, and the restart "
          "continues bitwise") {
  dslaunch::testing::TempDir disk("/var/tmp");
  TrainConfig c = Config(2, 2, Precision::kFp16, 6);
  c.engine.offload_optimizer.device = swap::OffloadDevice::kNvme;
  c.engine.offload_optimizer.nvme_path = disk.path();
  c.engine.zero.sub_group_size = 700;  // several records per rank, streamed one after the other
  const std::vector<double> expected = Run(c, {{}, {}}).results[0].losses;
  const AgentMemory m0, m1;
  TrainConfig first = c;
  first.train.steps = 4;
  Run(first, {{&m0}, {&m1}});
  const Outcome second = Run(Restart(c), {{&m0}, {&m1}});
  INFO(second.Text());
  CHECK(second.results[0].first_step == 4);
  CHECK(second.results[0].losses == std::vector<double>(expected.begin() + 4, expected.end()));
}

TEST_CASE("With copies on peer nodes, a snapshot is taken only once every rank's latest one has its answer") {
  const TrainConfig c = Config(2, 1, Precision::kFp32, 6);
  {
    // Nobody answers: the first snapshot stays the only one.
    const AgentMemory m0, m1;
    const Outcome out = Run(c, {{&m0}, {&m1}}, Peers{1, {}, false});
    CHECK(StepsHeld(m0) == std::vector<int64_t>{1});
    CHECK(StepsHeld(m1) == std::vector<int64_t>{1});
  }
  {
    // An agent that answers: one every step; the last two are held.
    const AgentMemory m0, m1;
    Run(c, {{&m0}, {&m1}}, Peers{1, {}, true});
    CHECK(StepsHeld(m0) == std::vector<int64_t>{5, 6});
    CHECK(StepsHeld(m1) == std::vector<int64_t>{5, 6});
  }
}

TEST_CASE("A lost node's ranks come back from the copies a peer holds: on a spare bitwise, on the survivor "
          "re-partitioned") {
  const std::vector<double> expected = Run(Config(2, 2, Precision::kFp32, 6), {{}, {}}).results[0].losses;
  const AgentMemory m0, m1;
  // Rank 1's memory is the copy rank 0's agent holds of it (the same bytes, sent whole).
  Run(Config(2, 2, Precision::kFp32, 4), {{&m0}, {&m1}}, Peers{1, {}, true});
  REQUIRE(StepsHeld(m1).back() == 4);
  // A spare in rank 1's place, with empty memory: rank 0 sends it rank 1's part from the copy.
  const AgentMemory spare;
  {
    const Outcome out = Run(Restart(Config(2, 2, Precision::kFp32, 6)), {{&m0}, {&spare}}, Peers{1, {{&m1}}, true});
    INFO(out.Text());
    CHECK(out.results[0].first_step == 4);
    CHECK(out.results[0].losses == std::vector<double>(expected.begin() + 4, expected.end()));
  }
  {
    // The spare's node lost too: rank 0 alone, from its own slot and the copy of the spare's.
    const Outcome out = Run(Restart(Config(1, 2, Precision::kFp32, 8)), {{&m0}}, Peers{0, {{&spare}}, false});
    INFO(out.Text());
    CHECK(out.results[0].first_step == 6);
    CHECK(out.Text().find("restart: resumed from the in-memory snapshot at step 6 (saved by 2 ranks at ZeRO stage 2") !=
          std::string::npos);
  }
}

double MaxRelativeDifference(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

TEST_CASE("At another world size the snapshots are re-partitioned: 2 ranks to 1, and 1 rank to 2") {
  const std::vector<double> expected = Run(Config(2, 2, Precision::kFp32, 6), {{}, {}}).results[0].losses;
  {
    const AgentMemory m0, m1;
    Run(Config(2, 2, Precision::kFp32, 4), {{&m0}, {&m1}});
    // One rank whose node held both ranks' memory.
    const Outcome one = Run(Restart(Config(1, 2, Precision::kFp32, 6)), {{&m0, &m1}});
    INFO(one.Text());
    CHECK(one.results[0].first_step == 4);
    CHECK(MaxRelativeDifference(one.results[0].losses, std::vector<double>(expected.begin() + 4, expected.end())) <=
          1e-5);
  }
  {
    const AgentMemory m0, fresh;
    Run(Config(1, 2, Precision::kFp32, 4), {{&m0}});
    // A new rank with empty memory: its part is broadcast by rank 0.
    const Outcome two = Run(Restart(Config(2, 3, Precision::kFp32, 6)), {{&m0}, {&fresh}});
    INFO(two.Text());
    CHECK(two.results[1].first_step == 4);
    CHECK(two.Text().find("restart: resumed from the in-memory snapshot at step 4 (saved by 1 ranks at ZeRO stage 2") !=
          std::string::npos);
    CHECK(MaxRelativeDifference(two.results[0].losses, std::vector<double>(expected.begin() + 4, expected.end())) <=
          1e-5);
  }
}

TEST_CASE("A model split into stages and tensor ranks restarts from its snapshots: bitwise on the same ranks, and "
          "on fewer data-parallel copies") {
  // 2 stages x 2 copies x 2 tensor ranks; rank = (stage x 2 + copy) x 2 + tensor.
  std::map<int, std::vector<double>> expected;  // by ZeRO stage
  for (int zero : {0, 1}) {
    CAPTURE(zero);
    const TrainConfig config = GridGptConfig(2, 2, 2, zero);
    expected[zero] = Run(config, NoSnapshots(8)).results[0].losses;
    REQUIRE(expected[zero].size() == 6);
    const std::vector<AgentMemory> memory(8);
    TrainConfig first = config;
    first.train.steps = 4;
    Run(first, Own(memory));  // then "killed"
    const Outcome same = Run(Restart(config), Own(memory));
    INFO(same.Text());
    CHECK(same.results[0].first_step == 4);
    CHECK(same.results[0].losses == std::vector<double>(expected[zero].begin() + 4, expected[zero].end()));
    CHECK(same.Text().find("restart: resumed from the in-memory snapshot at step 4 (saved by 8 ranks as 2 stages x 2 "
                           "data x 2 tensor at ZeRO stage " + std::to_string(zero)) != std::string::npos);
  }
  // On 4 ranks, one copy: each rank's node held the memory of both copies of its stage and tensor rank.
  const std::vector<AgentMemory> memory(8);
  TrainConfig first = GridGptConfig(2, 2, 2, 1);
  first.train.steps = 4;
  Run(first, Own(memory));
  std::vector<std::vector<const AgentMemory*>> both(4);
  for (int stage = 0; stage < 2; ++stage) {
    for (int tensor = 0; tensor < 2; ++tensor) {
      for (int copy = 0; copy < 2; ++copy) both[stage * 2 + tensor].push_back(&memory[(stage * 2 + copy) * 2 + tensor]);
    }
  }
  const Outcome fewer = Run(Restart(GridGptConfig(2, 2, 1, 1)), both);
  INFO(fewer.Text());
  CHECK(fewer.results[0].first_step == 4);
  CHECK(fewer.Text().find("restart: resumed from the in-memory snapshot at step 4 (saved by 8 ranks as 2 stages x 2 "
                          "data x 2 tensor at ZeRO stage 1") != std::string::npos);
  CHECK(MaxRelativeDifference(fewer.results[0].losses, std::vector<double>(expected[1].begin() + 4, expected[1].end())) <=
        1e-5);
}

TEST_CASE("A snapshot whose tensors are not its rank's slice is refused as damage on every rank, naming the slot") {
  const AgentMemory m0, m1;
  Run(Config(2, 1, Precision::kFp32, 4), {{&m0}, {&m1}});
  // Rank 1's snapshot of step 4 rewritten one element short per tensor, its header and CRC whole.
  bool rewritten = false;
  for (const UniqueFd& f : m1.files) {
    SnapshotSlot slot(UniqueFd(::dup(f.get())), "rank 1's slot");
    Result<SnapshotInfo> info = slot.Check();
    if (!info.ok() || info->step != 4) continue;
    const std::string meta(slot.meta());
    std::vector<std::vector<float>> data;
    for (size_t t = 0; t < slot.tensors(); ++t) data.emplace_back(slot.tensor(t).begin(), slot.tensor(t).end() - 1);
    EngineSnapshot short_snap;
    short_snap.range = {0, data[0].size()};
    for (const auto& d : data) short_snap.tensors.emplace_back("state", std::span<const float>(d));
    REQUIRE(slot.Write(*info, meta, short_snap).ok());
    rewritten = true;
  }
  REQUIRE(rewritten);
  const Outcome restart = Run(Restart(Config(2, 1, Precision::kFp32, 6)), {{&m0}, {&m1}}, {}, /*expect_ok=*/false);
  for (const Status& failure : restart.failures) {
    CHECK(failure.code() == StatusCode::kDataLoss);
    CHECK(failure.message().find("in-memory snapshot of step 4: ") != std::string::npos);
    INFO(failure.ToString());
    CHECK(failure.message().find(": slot ") != std::string::npos);
    CHECK(failure.message().find("holds 3 tensors of ") != std::string::npos);
  }
}

// Flips the last byte of whichever of `memory`'s files holds the snapshot of `step`.
void Corrupt(const AgentMemory& memory, int64_t step) {
  for (size_t i = 0; i < memory.files.size(); ++i) {
    SnapshotSlot slot(UniqueFd(::dup(memory.files[i].get())), "probe");
    Result<SnapshotInfo> info = slot.Check();
    if (!info.ok() || info->step != step) continue;
    const int fd = memory.files[i].get();
    const off_t last = ::lseek(fd, 0, SEEK_END) - 1;
    char byte = 0;
    REQUIRE(::pread(fd, &byte, 1, last) == 1);
    byte = static_cast<char>(byte ^ 0x01);
    REQUIRE(::pwrite(fd, &byte, 1, last) == 1);
    return;
  }
  FAIL("no snapshot of step " << step);
}

TEST_CASE("A corrupt snapshot is refused by name for the older one; with none complete, checkpoint.dir is used") {
  dslaunch::testing::TempDir dir;
  TrainConfig base = Config(2, 1, Precision::kFp32, 5);
  base.checkpoint.dir = dir.path() + "/ckpt";
  base.checkpoint.interval = 2;
  TrainConfig full = base;
  full.train.steps = 7;
  full.checkpoint.dir = dir.path() + "/reference";
  const std::vector<double> expected = Run(full, {{}, {}}).results[0].losses;

  const AgentMemory m0, m1;
  Run(base, {{&m0}, {&m1}});  // snapshots of steps 4 and 5 in memory; checkpoints 2, 4 and 5 on disk
  Corrupt(m1, 5);
  TrainConfig again = Restart(base);
  again.checkpoint.resume_newest = true;
  again.train.steps = 7;
  Outcome second = Run(again, {{&m0}, {&m1}});
  INFO(second.Text(0));
  INFO(second.Text(1));
  CHECK(second.Text(1).find("in-memory snapshot slot ") != std::string::npos);
  CHECK(second.Text(1).find(": corrupt: CRC-32C ") != std::string::npos);
  CHECK(second.Text(1).find(": not used") != std::string::npos);
  CHECK(second.results[0].first_step == 4);
  CHECK(second.Text().find("restart: resumed from the in-memory snapshot at step 4") != std::string::npos);
  CHECK(second.results[0].losses == std::vector<double>(expected.begin() + 4, expected.end()));

  // Both of rank 1's snapshots corrupt: the newest complete checkpoint on disk, said so.
  Corrupt(m1, 7);
  Corrupt(m1, 6);
  Outcome third = Run(again, {{&m0}, {&m1}});
  INFO(third.Text(0));
  CHECK(third.Text().find("restart: no complete in-memory snapshot (the newest, of step 7 on 2 ranks, lacks the "
                          "snapshot of rank 1 (lost with its node, or never completed)): using checkpoint.dir " +
                          base.checkpoint.dir) != std::string::npos);
  CHECK(third.Text().find("restart: resumed from " + base.checkpoint.dir + "/global_step7 at step 7") !=
        std::string::npos);
  CHECK(third.results[0].first_step == 7);
}

}  // namespace
}  // namespace dslaunch::runtime

namespace dslaunch::runtime {
namespace {

// Every file of a step directory but meta.json (which records when and how long), by name.
std::map<std::string, std::string> ShardFiles(const std::string& step_dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(step_dir)) {
    if (e.path().filename() == "meta.json") continue;
    files[e.path().filename().string()] = dslaunch::testing::ReadWhole(e.path().string());
  }
  return files;
}

TEST_CASE("An asynchronous checkpoint of a step with a snapshot is written from the snapshot, the same bytes as from "
          "the engine, also of a model split into stages and tensor ranks") {
  for (const bool split : {false, true}) {
    CAPTURE(split);
    dslaunch::testing::TempDir dir;
    TrainConfig c = split ? GridGptConfig(2, 2, 2, 1) : Config(2, 1, Precision::kFp32, 6);
    const int world = split ? 8 : 2;
    c.checkpoint.interval = 2;
    c.checkpoint.async = true;
    c.checkpoint.dir = dir.path() + "/engine";
    const Outcome plain = Run(c, NoSnapshots(world));
    c.checkpoint.dir = dir.path() + "/snapshot";
    const std::vector<AgentMemory> memory(static_cast<size_t>(world));
    const Outcome from_memory = Run(c, Own(memory));
    INFO(from_memory.Text());
    CHECK(from_memory.results[0].losses == plain.results[0].losses);
    CHECK(from_memory.Text().find("step 2 | checkpoint (async, from the in-memory snapshot) " + c.checkpoint.dir +
                                  "/global_step2: ") != std::string::npos);
    CHECK(plain.Text().find("step 2 | checkpoint (async) ") != std::string::npos);
    for (const char* step : {"/global_step2", "/global_step4"}) {
      CAPTURE(step);
      const auto expected = ShardFiles(dir.path() + "/engine" + step);
      REQUIRE(expected.size() >= 2);
      CHECK(ShardFiles(c.checkpoint.dir + step) == expected);
    }
    // The snapshots went on meanwhile: the newest is of the last step.
    CHECK(StepsHeld(memory[0]).back() == 6);
  }
}

}  // namespace
}  // namespace dslaunch::runtime
