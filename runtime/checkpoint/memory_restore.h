// Restoring from in-memory snapshots (docs/checkpoint.md, "Snapshots in memory"): which snapshot
// the ranks can restore together (pure), and the collective that restores it, at any world size
// and ZeRO stage, as a checkpoint on disk is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/memory_snapshot.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/engine.h"

namespace dslaunch::runtime {

// What each rank of this run holds: held[r][slot], nullopt for a slot without a complete snapshot.
using HeldSnapshots = std::vector<std::vector<std::optional<SnapshotInfo>>>;

// Where the snapshot of one rank of the saving run is: a rank of this run and its slot.
struct SnapshotSource {
  int holder = 0;
  int slot = 0;
  friend bool operator==(const SnapshotSource&, const SnapshotSource&) = default;
};

struct SnapshotPlan {
  int64_t step = 0;
  int world = 0;                        // of the run that saved it
  std::vector<SnapshotSource> sources;  // per rank of that run: the lowest rank holding it
};

// The newest step whose snapshot every rank of its saving run has, somewhere among `held`; nullopt
// when there is none.
std::optional<SnapshotPlan> PlanSnapshotRestore(const HeldSnapshots& held);
// Why PlanSnapshotRestore found nothing, for the restart line: "no rank holds a complete
// snapshot", or "the newest, of step 12 on 2 ranks, lacks rank 1's".
std::string DescribeMissingSnapshots(const HeldSnapshots& held);

struct MemoryRestoreResult {
  CheckpointMeta meta;
  uint64_t bytes = 0;    // the snapshot's state, all ranks
  double seconds = 0.0;  // this rank's wall time
};

// Collective: restores `engine` from the newest snapshot every rank of its saving run has in
// `mine` on some rank of this run. Each rank checks its own slots first; one that is incomplete
// or corrupt is not used, and a line naming it and why goes to `notes` (this rank's). Ranges a rank
// needs from another's slots are broadcast by the lowest rank holding them. A model split over
// ranks (run.part) is restored part by part: each stage and tensor rank's part from the saving
// ranks of the same stage and tensor rank, over any number of data-parallel copies. kNotFound on
// every rank when no such snapshot exists (DescribeMissingSnapshots says why) or when it splits the
// model another way (checkpoint.dir maps that); a snapshot that does not fit the run, a slot whose
// sizes are not its rank's slice, or a failed collective, is the error of the lowest rank that
// failed.
Result<MemoryRestoreResult> RestoreFromMemory(MemorySnapshots& mine, Engine& engine, Communicator& comm,
                                              const CheckpointRun& run, std::vector<std::string>& notes);

}  // namespace dslaunch::runtime
