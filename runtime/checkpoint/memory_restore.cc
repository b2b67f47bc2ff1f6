#include "runtime/checkpoint/memory_restore.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "common/check.h"
#include "common/process_grid.h"
#include "runtime/checkpoint/meta.h"
#include "runtime/comm/agreement.h"
#include "runtime/core/partition.h"

namespace dslaunch::runtime {
namespace {

// (step, world) pairs held anywhere, newest step first.
std::vector<std::pair<int64_t, int>> Candidates(const HeldSnapshots& held) {
  std::set<std::pair<int64_t, int>, std::greater<>> seen;
  for (const auto& slots : held) {
    for (const auto& s : slots) {
      if (s) seen.insert({s->step, s->world});
    }
  }
  return {seen.begin(), seen.end()};
}

// The slot of `slots` (one rank's) holding rank `rank`'s snapshot of `step` on `world` ranks.
std::optional<int> SlotHolding(const std::vector<std::optional<SnapshotInfo>>& slots, int64_t step, int world,
                               int rank) {
  for (size_t slot = 0; slot < slots.size(); ++slot) {
    if (slots[slot] == SnapshotInfo{step, rank, world}) return static_cast<int>(slot);
  }
  return std::nullopt;
}

// The lowest (rank, slot) holding rank `rank`'s snapshot of `step` on `world` ranks.
std::optional<SnapshotSource> FindHolder(const HeldSnapshots& held, int64_t step, int world, int rank) {
  for (size_t r = 0; r < held.size(); ++r) {
    if (std::optional<int> slot = SlotHolding(held[r], step, world, rank)) return SnapshotSource{static_cast<int>(r), *slot};
  }
  return std::nullopt;
}

// Slot fields on the wire, per slot: held (0 or 1), step, rank, world.
constexpr size_t kFields = 4;

ShardRange Intersect(const ShardRange& a, const ShardRange& b) {
  const size_t begin = std::max(a.begin, b.begin), end = std::min(a.end, b.end);
  return end > begin ? ShardRange{begin, end} : ShardRange{begin, begin};
}

// Where a rank's state lies in a run of `world` ranks on `grid`: the part of the model it holds
// (its pipeline stage and tensor rank; one part when the model is not split) and its place among
// that part's data-parallel copies, over which the engine partitions the part.
struct Seat {
  int part = 0;
  int copy = 0;
  int copies = 1;
};

// Every rank's seat in a run of `world` ranks on `grid` (which fits: meta.json's is checked).
std::vector<Seat> SeatsOf(const CheckpointGrid& grid, int world) {
  const Result<ProcessGrid> g = ProcessGrid::Create(world, grid.pipeline, grid.tensor);
  DSLAUNCH_CHECK(g.ok()) << g.status().ToString();
  std::vector<Seat> seats;
  for (int rank = 0; rank < world; ++rank) {
    const GridCoordinates at = g->CoordinatesOf(rank);
    seats.push_back({at.pipeline * grid.tensor + at.tensor, at.data, g->shape().data});
  }
  return seats;
}

// The slice of its part the snapshot of a rank holds: its engine's (ShardFor over the copies, at
// every ZeRO stage).
ShardRange SliceOf(const Seat& seat, size_t part_numel) { return ShardFor(part_numel, seat.copies, seat.copy); }

// The range of its part a rank of this run holds (ZeroEngine's owned slice).
ShardRange HeldRange(const Seat& seat, size_t part_numel, int zero_stage) {
  return zero_stage == 0 ? ShardRange{0, part_numel} : SliceOf(seat, part_numel);
}

}  // namespace

std::optional<SnapshotPlan> PlanSnapshotRestore(const HeldSnapshots& held) {
  for (const auto& [step, world] : Candidates(held)) {
    SnapshotPlan plan{step, world, {}};
    for (int k = 0; k < world; ++k) {
      std::optional<SnapshotSource> source = FindHolder(held, step, world, k);
      if (!source) break;
      plan.sources.push_back(*source);
    }
    if (static_cast<int>(plan.sources.size()) == world) return plan;
  }
  return std::nullopt;
}

std::string DescribeMissingSnapshots(const HeldSnapshots& held) {
  const auto candidates = Candidates(held);
  if (candidates.empty()) return "no rank holds a complete snapshot";
  const auto& [step, world] = candidates.front();
  std::string missing;
  int count = 0;
  for (int k = 0; k < world; ++k) {
    if (FindHolder(held, step, world, k)) continue;
    if (count < 8) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    ++count;
  }
  if (count > 8) missing += ", ... (" + std::to_string(count) + " in all)";
  return "the newest, of step " + std::to_string(step) + " on " + std::to_string(world) + " ranks, lacks the " +
         (count == 1 ? "snapshot of rank " : "snapshots of ranks ") + missing + " (lost with " +
         (count == 1 ? "its node" : "their nodes") + ", or never completed)";
}

Result<MemoryRestoreResult> RestoreFromMemory(MemorySnapshots& mine, Engine& engine, Communicator& comm,
                                              const CheckpointRun& run, std::vector<std::string>& notes) {
  const auto start = std::chrono::steady_clock::now();
  const int world = comm.world_size(), me = comm.rank();
  const std::vector<SnapshotSlot*> slots = mine.Readable();

  // Every rank's inventory, checked (header and CRC-32C) by its holder; ranks may hold different
  // numbers of slots (a rank whose node held two ranks' memory).
  int64_t slot_count = static_cast<int64_t>(slots.size());
  std::vector<int64_t> slot_counts(static_cast<size_t>(world));
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const int64_t>(&slot_count, 1), std::span<int64_t>(slot_counts),
                                          std::vector<size_t>(static_cast<size_t>(world), 1))
                               .WithContext("in-memory snapshot inventory"));
  std::vector<size_t> counts, offsets;
  size_t total = 0;
  for (int64_t n : slot_counts) {
    offsets.push_back(total);
    counts.push_back(static_cast<size_t>(n) * kFields);
    total += counts.back();
  }
  const size_t per_rank = slots.size() * kFields;
  std::vector<int64_t> own(per_rank, 0), all(total);
  for (size_t i = 0; i < slots.size(); ++i) {
    Result<SnapshotInfo> info = slots[i]->Check();
    if (info.ok()) {
      own[i * kFields + 0] = 1;
      own[i * kFields + 1] = info->step;
      own[i * kFields + 2] = info->rank;
      own[i * kFields + 3] = info->world;
    } else if (info.status().code() == StatusCode::kDataLoss) {
      notes.push_back(info.status().message() + ": not used");
    }
  }
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const int64_t>(own), std::span<int64_t>(all), counts)
                               .WithContext("in-memory snapshot inventory"));
  HeldSnapshots held(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    held[static_cast<size_t>(r)].resize(static_cast<size_t>(slot_counts[static_cast<size_t>(r)]));
    for (size_t i = 0; i < held[static_cast<size_t>(r)].size(); ++i) {
      const int64_t* f = all.data() + offsets[static_cast<size_t>(r)] + i * kFields;
      if (f[0] == 1) held[static_cast<size_t>(r)][i] = SnapshotInfo{f[1], static_cast<int>(f[2]), static_cast<int>(f[3])};
    }
  }
  const std::optional<SnapshotPlan> plan = PlanSnapshotRestore(held);
  if (!plan) return NotFoundError(DescribeMissingSnapshots(held));
  const std::string what = "in-memory snapshot of step " + std::to_string(plan->step);

  // meta.json's text, from the holder of the saving run's rank 0.
  const int meta_root = plan->sources[0].holder;
  std::vector<uint8_t> bytes;
  if (me == meta_root) {
    const std::string_view text = slots[static_cast<size_t>(plan->sources[0].slot)]->meta();
    bytes.assign(text.begin(), text.end());
  }
  int64_t length = static_cast<int64_t>(bytes.size());
  DSLAUNCH_RETURN_IF_ERROR(comm.Broadcast(std::span<int64_t>(&length, 1), meta_root).WithContext(what));
  bytes.resize(static_cast<size_t>(length));
  DSLAUNCH_RETURN_IF_ERROR(comm.Broadcast(std::span<uint8_t>(bytes), meta_root).WithContext(what));
  MemoryRestoreResult result;
  Status fits = [&]() -> Status {
    DSLAUNCH_ASSIGN_OR_RETURN(result.meta, CheckpointMetaFromJson(std::string(bytes.begin(), bytes.end()), what));
    if (result.meta.step != plan->step || result.meta.world_size != plan->world) {
      return DataLossError(what + ": its meta.json records step " + std::to_string(result.meta.step) + " on " +
                           std::to_string(result.meta.world_size) + " ranks");
    }
    return CheckCheckpointFits(result.meta, what, engine, run);
  }();
  DSLAUNCH_RETURN_IF_ERROR(AgreeOnFailureWithReason(comm, fits, "restore the " + what));
  const CheckpointMeta& meta = result.meta;
  const size_t tensors = meta.state_tensors.size();
  if (meta.grid.pipeline != run.grid.pipeline || meta.grid.tensor != run.grid.tensor) {
    // Parts of another split are pieces of the whole model: checkpoint.dir's loader maps them.
    return NotFoundError("the newest, of step " + std::to_string(plan->step) + ", splits the model as " +
                         DescribeGridShape({meta.grid.pipeline, meta.grid.data(plan->world), meta.grid.tensor}) +
                         ", this run as " +
                         DescribeGridShape({run.grid.pipeline, run.grid.data(world), run.grid.tensor}));
  }

  // Each part's elements, from a rank of this run that holds it (every part has one).
  const int64_t my_numel = static_cast<int64_t>(run.part != nullptr ? run.part->numel() : run.layout->numel());
  std::vector<int64_t> numels(static_cast<size_t>(world));
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const int64_t>(&my_numel, 1), std::span<int64_t>(numels),
                                          std::vector<size_t>(static_cast<size_t>(world), 1))
                               .WithContext(what));
  const std::vector<Seat> seats = SeatsOf(run.grid, world);               // this run's ranks
  const std::vector<Seat> saved_seats = SeatsOf(meta.grid, plan->world);  // the saving run's
  std::map<int, size_t> part_numel;
  for (int r = 0; r < world; ++r) {
    part_numel[seats[static_cast<size_t>(r)].part] = static_cast<size_t>(numels[static_cast<size_t>(r)]);
  }
  std::vector<ShardRange> slices;  // per saving rank
  for (const Seat& seat : saved_seats) slices.push_back(SliceOf(seat, part_numel.at(seat.part)));
  auto held_range = [&](int r) {
    return HeldRange(seats[static_cast<size_t>(r)], part_numel.at(seats[static_cast<size_t>(r)].part), run.zero_stage);
  };
  // The part of saving rank k's slice rank r needs: empty unless they hold the same part.
  auto needs = [&](int r, int k) {
    if (seats[static_cast<size_t>(r)].part != saved_seats[static_cast<size_t>(k)].part) return ShardRange{0, 0};
    return Intersect(held_range(r), slices[static_cast<size_t>(k)]);
  };

  // Every slot this rank reads holds what its saving rank's slice should: a slot of the right
  // step and rank but another size is damage, not a snapshot to read past its end.
  std::vector<int> local_slot(static_cast<size_t>(plan->world), -1);  // this rank's slot with saving rank k's
  Status sizes;
  for (int k = 0; k < plan->world && sizes.ok(); ++k) {
    local_slot[static_cast<size_t>(k)] =
        SlotHolding(held[static_cast<size_t>(me)], plan->step, plan->world, k).value_or(-1);
    if (local_slot[static_cast<size_t>(k)] < 0) continue;
    const SnapshotSlot& slot = *slots[static_cast<size_t>(local_slot[static_cast<size_t>(k)])];
    const size_t want = slices[static_cast<size_t>(k)].size();
    bool fits = slot.tensors() == tensors;
    for (size_t t = 0; t < tensors && fits; ++t) fits = slot.tensor(t).size() == want;
    if (!fits) {
      sizes = DataLossError(what + ": " + slot.name() + " holds " + std::to_string(slot.tensors()) + " tensors of " +
                            std::to_string(slot.tensors() > 0 ? slot.tensor(0).size() : 0) + " elements, rank " +
                            std::to_string(k) + "'s slice is " + std::to_string(tensors) + " of " +
                            std::to_string(want));
    }
  }
  DSLAUNCH_RETURN_IF_ERROR(AgreeOnFailureWithReason(comm, sizes, "read the " + what));

  // Each saving rank's slice: read in place where every rank that needs part of it holds it, else
  // broadcast by its holder and kept where this rank needs it.
  std::map<std::pair<int, size_t>, std::vector<float>> received;  // (k, tensor) -> my part of k's slice
  for (int k = 0; k < plan->world; ++k) {
    const ShardRange slice = slices[static_cast<size_t>(k)];
    bool everyone_local = true;
    for (int r = 0; r < world && everyone_local; ++r) {
      if (needs(r, k).size() == 0) continue;
      everyone_local = SlotHolding(held[static_cast<size_t>(r)], plan->step, plan->world, k).has_value();
    }
    if (everyone_local) continue;
    const SnapshotSource source = plan->sources[static_cast<size_t>(k)];
    const ShardRange part = needs(me, k);
    for (size_t t = 0; t < tensors; ++t) {
      std::vector<float> buffer(slice.size());
      if (me == source.holder) {
        const std::span<const float> from = slots[static_cast<size_t>(source.slot)]->tensor(t);
        std::copy(from.begin(), from.end(), buffer.begin());
      }
      DSLAUNCH_RETURN_IF_ERROR(comm.Broadcast(std::span<float>(buffer), source.holder).WithContext(what));
      if (part.size() > 0 && local_slot[static_cast<size_t>(k)] < 0) {
        received[{k, t}] = std::vector<float>(buffer.begin() + static_cast<std::ptrdiff_t>(part.begin - slice.begin),
                                              buffer.begin() + static_cast<std::ptrdiff_t>(part.end - slice.begin));
      }
    }
  }

  std::map<std::string, size_t> index;
  for (size_t t = 0; t < tensors; ++t) index[meta.state_tensors[t]] = t;
  const StateReader read = [&](const std::string& name, size_t begin, size_t end, float* out) -> Status {
    auto it = index.find(name);
    if (it == index.end()) return InternalError(what + ": no state tensor " + name);
    const size_t t = it->second;
    for (int k = 0; k < plan->world; ++k) {
      if (saved_seats[static_cast<size_t>(k)].part != seats[static_cast<size_t>(me)].part) continue;
      const ShardRange slice = slices[static_cast<size_t>(k)];
      const ShardRange piece = Intersect(ShardRange{begin, end}, slice);
      if (piece.size() == 0) continue;
      float* to = out + (piece.begin - begin);
      if (local_slot[static_cast<size_t>(k)] >= 0) {
        const std::span<const float> from = slots[static_cast<size_t>(local_slot[static_cast<size_t>(k)])]->tensor(t);
        std::copy_n(from.begin() + static_cast<std::ptrdiff_t>(piece.begin - slice.begin), piece.size(), to);
        continue;
      }
      auto got = received.find({k, t});
      const ShardRange part = needs(me, k);
      if (got == received.end() || piece.begin < part.begin || piece.end > part.end) {
        return InternalError(what + ": elements [" + std::to_string(piece.begin) + ", " + std::to_string(piece.end) +
                             ") of " + name + " were neither held nor received by this rank");
      }
      std::copy_n(got->second.begin() + static_cast<std::ptrdiff_t>(piece.begin - part.begin), piece.size(), to);
    }
    return Status::Ok();
  };
  Status read_status;
  const StateReader guarded = [&](const std::string& name, size_t begin, size_t end, float* out) -> Status {
    if (read_status.ok()) read_status = read(name, begin, end, out);
    return Status::Ok();
  };
  DSLAUNCH_RETURN_IF_ERROR(
      engine.Restore(guarded, meta.optimizer_step, meta.applied_steps, meta.loss_scaler).WithContext(what));
  DSLAUNCH_RETURN_IF_ERROR(AgreeOnFailureWithReason(comm, read_status, "read the " + what));
  result.bytes = 0;
  for (const ShardRange& slice : slices) result.bytes += slice.size() * tensors * sizeof(float);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dslaunch::runtime
