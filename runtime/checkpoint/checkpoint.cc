#include "runtime/checkpoint/checkpoint.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "common/check.h"
#include "common/file_io.h"
#include "runtime/checkpoint/checkpoint_directory.h"
#include "runtime/checkpoint/names.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/shard_reader.h"
#include "runtime/comm/agreement.h"

namespace dslaunch::runtime {
namespace fs = std::filesystem;
namespace {

std::string Join(const fs::path& dir, std::string_view name) { return (dir / name).string(); }

// What each rank reports after writing its shard.
struct ShardReport {
  bool ok = false;
  uint32_t crc32c = 0;
  uint64_t bytes = 0;
};
// A report on the wire: ok (0 or 1), crc32c, bytes, as int64.
constexpr size_t kReportFields = 3;

Result<std::vector<ShardReport>> GatherReports(Communicator& comm, const ShardReport& mine) {
  const size_t world = static_cast<size_t>(comm.world_size());
  const int64_t local[kReportFields] = {mine.ok ? 1 : 0, mine.crc32c, static_cast<int64_t>(mine.bytes)};
  std::vector<int64_t> all(kReportFields * world);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const int64_t>(local), std::span<int64_t>(all),
                                          std::vector<size_t>(world, kReportFields))
                               .WithContext("checkpoint: gathering the shards' checksums"));
  std::vector<ShardReport> reports;
  for (size_t r = 0; r < world; ++r) {
    const int64_t* field = &all[kReportFields * r];
    reports.push_back({field[0] == 1, static_cast<uint32_t>(field[1]), static_cast<uint64_t>(field[2])});
  }
  return reports;
}

std::string OptimizerMismatch(const std::vector<std::string>& saved, const std::vector<std::string>& wanted) {
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  return "the checkpoint holds optimizer state [" + join(saved) + "] but this run's optimizer needs [" + join(wanted) +
         "]";
}

// The phases of a save, shared by SaveCheckpoint and AsyncCheckpoint.

// The errno text at the end of a FileSystem error ("create directory D: Not a directory").
std::string Reason(const Status& status) {
  const std::string& m = status.message();
  const size_t colon = m.rfind(": ");
  return colon == std::string::npos ? m : m.substr(colon + 2);
}

FileSystem& FilesOf(const SaveOptions& options) {
  return options.file_system != nullptr ? *options.file_system : LocalFileSystem();
}

// Collective: rank 0 clears what a crashed earlier attempt at this step may have left and creates
// the directory; every rank learns whether that worked.
Status PrepareStepDirectory(FileSystem& files, const std::string& dir, const std::string& step_dir,
                            Communicator& comm) {
  Status prepared;
  if (comm.rank() == 0) {
    prepared = files.CreateDirectories(dir);
    if (prepared.ok()) prepared = files.RemoveAll(step_dir);
    if (prepared.ok()) prepared = files.CreateDirectories(step_dir);
    if (!prepared.ok()) prepared = InternalError("checkpoint: cannot create " + step_dir + ": " + Reason(prepared));
  }
  DSLAUNCH_ASSIGN_OR_RETURN(int failed, FirstFailedRank(comm, !prepared.ok(), "checkpoint"));
  if (failed >= 0) return prepared.ok() ? AbortedError("checkpoint: rank 0 could not create " + step_dir) : prepared;
  return Status::Ok();
}

// What this rank's shard holds: its partition as meta.json records it, and which elements of the
// engine's slice go into the file (ranges counted from the slice's start, in order).
struct ShardPlan {
  CheckpointPartition partition;
  std::vector<ShardRange> kept;
};

// The shard of `rank` whose engine holds `range` of its flat buffer: the range itself (version 1),
// or for a model part its pieces of the whole model without what another rank saves (version 2).
ShardPlan PlanShard(const CheckpointRun& run, int rank, ShardRange range) {
  ShardPlan plan;
  plan.partition.rank = rank;
  plan.partition.file = ShardFileName(rank);
  if (run.part == nullptr) {
    plan.partition.begin = range.begin;
    plan.partition.end = range.end;
    plan.kept = {{0, range.size()}};
    return plan;
  }
  for (const ShardRange& kept : Without(range, run.part->saved_elsewhere)) {
    for (const WholePiece& piece : PiecesOf(run.part->pieces, kept)) AppendPiece(plan.partition.pieces, piece);
    plan.kept.push_back({kept.begin - range.begin, kept.end - range.begin});
  }
  return plan;
}

// Appends the elements of `kept` that lie in `piece`, elements [*at, *at + piece.size()) of the
// slice (pieces arrive in order); advances *at.
Status AppendKept(const TensorAppend& append, const std::vector<ShardRange>& kept, size_t* at,
                  std::span<const float> piece) {
  for (const ShardRange& k : kept) {
    const size_t lo = std::max(k.begin, *at), hi = std::min(k.end, *at + piece.size());
    if (lo < hi) DSLAUNCH_RETURN_IF_ERROR(append(piece.data() + (lo - *at), (hi - lo) * sizeof(float)));
  }
  *at += piece.size();
  return Status::Ok();
}

// Local: this rank's shard, fsynced.
// `stream`, when set, produces the tensors whose state is not resident (EngineSnapshot::stream):
// they are written as they are read from the swap file, with no whole copy in memory.
Result<WriteResult> WriteShard(FileSystem& files, const std::string& step_dir, int64_t step, int world,
                               const ShardPlan& plan,
                               const std::vector<std::pair<std::string, std::span<const float>>>& state,
                               const decltype(EngineSnapshot::stream)& stream = nullptr) {
  const size_t elements = plan.partition.elements();
  std::vector<TensorData> tensors;
  for (size_t i = 0; i < state.size(); ++i) {
    const auto& [name, data] = state[i];
    const bool whole = plan.kept.size() == 1 && plan.kept[0].size() == data.size();
    if (!stream && whole) {
      tensors.push_back({name, "F32", {static_cast<int64_t>(data.size())}, data.data(), data.size_bytes(), nullptr});
      continue;
    }
    TensorData t{name, "F32", {static_cast<int64_t>(elements)}, nullptr, elements * sizeof(float), nullptr};
    if (stream) {
      t.source = [&stream, &plan, i](const TensorAppend& append) {
        size_t at = 0;
        return stream(i, [&](std::span<const float> piece) { return AppendKept(append, plan.kept, &at, piece); });
      };
    } else {
      t.source = [&plan, data](const TensorAppend& append) {
        size_t at = 0;
        return AppendKept(append, plan.kept, &at, data);
      };
    }
    tensors.push_back(std::move(t));
  }
  std::map<std::string, std::string> metadata = ShardHeaderOf(step, world, plan.partition);
  metadata["format"] = kCheckpointFormatName;
  WriteOptions write_options;
  write_options.fsync = true;
  write_options.file_system = &files;
  return WriteSafetensors(Join(step_dir, plan.partition.file), tensors, metadata, write_options);
}

// Collective (a model part's save): every rank's pieces, in rank order, for rank 0's meta.json.
Result<std::vector<std::vector<WholePiece>>> GatherPieces(Communicator& comm, const std::vector<WholePiece>& mine) {
  const size_t world = static_cast<size_t>(comm.world_size());
  const int64_t count = static_cast<int64_t>(mine.size());
  std::vector<int64_t> counts(world);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const int64_t>(&count, 1), std::span<int64_t>(counts),
                                          std::vector<size_t>(world, 1))
                               .WithContext("checkpoint: gathering the shards' pieces"));
  std::vector<int64_t> local;
  for (const WholePiece& p : mine) {
    for (uint64_t field : {p.begin, p.stride, p.run, p.count}) local.push_back(static_cast<int64_t>(field));
  }
  std::vector<size_t> sizes;
  size_t total = 0;
  for (int64_t c : counts) sizes.push_back(4 * static_cast<size_t>(c)), total += sizes.back();
  std::vector<int64_t> all(total);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const int64_t>(local), std::span<int64_t>(all), sizes)
                               .WithContext("checkpoint: gathering the shards' pieces"));
  std::vector<std::vector<WholePiece>> pieces(world);
  size_t at = 0;
  for (size_t r = 0; r < world; ++r) {
    for (int64_t k = 0; k < counts[r]; ++k, at += 4) {
      pieces[r].push_back({static_cast<uint64_t>(all[at]), static_cast<uint64_t>(all[at + 1]),
                           static_cast<uint64_t>(all[at + 2]), static_cast<uint64_t>(all[at + 3])});
    }
  }
  return pieces;
}

// What meta.json records of the engine, taken with the snapshot.
struct SnapshotCounters {
  int64_t optimizer_step = 0;
  int64_t applied_steps = 0;
  LossScaler::State loss_scaler;
  std::vector<std::string> state_tensors;
};

SnapshotCounters CountersOf(const EngineSnapshot& snap) {
  SnapshotCounters c{snap.optimizer_step, snap.applied_steps, snap.loss_scaler, {}};
  for (const auto& [name, data] : snap.tensors) c.state_tensors.push_back(name);
  return c;
}

// meta.json of a save whose shards every rank reported written; `pieces` (a model part's save)
// every rank's pieces.
CheckpointMeta MetaOf(int64_t step, int world, const SnapshotCounters& counters, const CheckpointRun& run,
                      const std::vector<ShardReport>& reports,
                      const std::vector<std::vector<WholePiece>>& pieces = {}) {
  CheckpointMeta meta;
  meta.step = step;
  meta.applied_steps = counters.applied_steps;
  meta.optimizer_step = counters.optimizer_step;
  meta.world_size = world;
  meta.grid = run.grid;
  meta.zero_stage = run.zero_stage;
  meta.precision = run.precision;
  meta.model = run.model;
  meta.optimizer = run.optimizer;
  meta.numel = run.layout->numel();
  meta.global_batch = run.global_batch;
  meta.seed = run.seed;
  meta.state_tensors = counters.state_tensors;
  meta.parameters = CheckpointParametersOf(*run.layout);
  for (int r = 0; r < world; ++r) {
    const ShardReport& report = reports[static_cast<size_t>(r)];
    if (run.part != nullptr) {
      DSLAUNCH_CHECK(pieces.size() == reports.size()) << pieces.size() << " ranks' pieces for " << world << " ranks";
      meta.partitions.push_back({r, 0, 0, ShardFileName(r), report.bytes, report.crc32c, pieces[r]});
      continue;
    }
    const ShardRange range = ShardFor(run.layout->numel(), world, r);
    meta.partitions.push_back({r, range.begin, range.end, ShardFileName(r), report.bytes, report.crc32c, {}});
  }
  meta.loss_scaler = counters.loss_scaler;
  meta.config_sha256 = run.config_sha256;
  return meta;
}

// Rank 0: meta.json (which makes the checkpoint complete), then `latest`, then retention.
Status PublishCheckpoint(FileSystem& files, const std::string& dir, const std::string& step_dir,
                         const CheckpointMeta& meta, int keep_last) {
  DSLAUNCH_RETURN_IF_ERROR(WriteFileDurably(files, Join(step_dir, kMetaFileName), CheckpointMetaToJson(meta)));
  DSLAUNCH_RETURN_IF_ERROR(WriteFileDurably(files, Join(dir, kLatestFileName), LatestFileText(meta.step)));
  if (keep_last > 0) ApplyRetention(files, dir, keep_last);
  // A crash's leftovers go once a newer checkpoint is complete; this save's directory has its
  // meta.json now, and no other save is in flight (one at a time).
  RemoveUnfinishedStepDirectories(files, dir, meta.step);
  return Status::Ok();
}

// Rank 0, after a save that failed before its meta.json was written: removes the partial step
// directory, so that a full disk does not keep it. A directory with meta.json is a complete
// checkpoint (only `latest` failed) and stays. Returns the failure, with a word when the removal
// failed too.
Status RemovePartial(FileSystem& files, const std::string& step_dir, Status failure, int rank) {
  if (rank != 0 || files.Exists(Join(step_dir, kMetaFileName))) return failure;
  const Status removed = files.RemoveAll(step_dir);
  if (removed.ok()) return failure;
  return Status(failure.code(), failure.message() + "; the partial " + step_dir +
                                    " could not be removed either (" + removed.message() + "): remove it by hand");
}

// Collective: gathers the shards' reports; rank 0 publishes the checkpoint; every rank learns the
// outcome.
Result<SaveResult> CompleteCheckpoint(const std::string& dir, const std::string& step_dir, int64_t step,
                                      const Result<WriteResult>& written, const SnapshotCounters& counters,
                                      const ShardPlan& shard, Communicator& comm, const CheckpointRun& run,
                                      const SaveOptions& options) {
  const int rank = comm.rank(), world = comm.world_size();
  const std::string what = "checkpoint of step " + std::to_string(step);
  ShardReport mine{written.ok(), written.ok() ? written->crc32c : 0u, written.ok() ? written->bytes : 0u};
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<ShardReport> reports, GatherReports(comm, mine));
  std::vector<std::vector<WholePiece>> pieces;
  if (run.part != nullptr) {
    DSLAUNCH_ASSIGN_OR_RETURN(pieces, GatherPieces(comm, shard.partition.pieces));
  }
  FileSystem& files = FilesOf(options);
  for (int r = 0; r < world; ++r) {
    if (reports[static_cast<size_t>(r)].ok) continue;
    // Every rank has finished writing (the reports say so): nothing writes into step_dir now.
    if (r == rank) return RemovePartial(files, step_dir, written.status().WithContext(what), rank);
    return RemovePartial(files, step_dir,
                         AbortedError(what + ": rank " + std::to_string(r) + " could not write its shard; " +
                                      Join(dir, kLatestFileName) + " still names the previous checkpoint"),
                         rank);
  }
  Status finished;
  if (rank == 0 && options.fence) {  // a stale generation's rank 0 must not name the newest checkpoint
    if (Status current = options.fence(); !current.ok()) {
      finished = AbortedError("not published, this generation is over (" + current.message() + "); " +
                              Join(dir, kLatestFileName) + " still names the previous checkpoint");
    }
  }
  if (rank == 0 && finished.ok()) {
    finished = PublishCheckpoint(files, dir, step_dir, MetaOf(step, world, counters, run, reports, pieces),
                                 options.keep_last);
  }
  DSLAUNCH_ASSIGN_OR_RETURN(int failed, FirstFailedRank(comm, !finished.ok(), "checkpoint"));
  if (failed >= 0) {
    if (!finished.ok()) return RemovePartial(files, step_dir, finished.WithContext(what), rank);
    return AbortedError(what + ": rank 0 could not complete it");
  }
  SaveResult result;
  result.path = step_dir;
  for (const auto& r : reports) result.bytes += r.bytes;
  return result;
}

}  // namespace

Result<std::vector<std::vector<WholePiece>>> GatherShardPieces(Communicator& comm, const CheckpointRun& run,
                                                               ShardRange range) {
  DSLAUNCH_CHECK(run.part != nullptr) << "the shard pieces of a model that is not split";
  return GatherPieces(comm, PlanShard(run, comm.rank(), range).partition.pieces);
}

CheckpointMeta MetaOfSnapshot(int64_t step, int world, const EngineSnapshot& snap, const CheckpointRun& run,
                              const std::vector<std::vector<WholePiece>>& pieces) {
  return MetaOf(step, world, CountersOf(snap), run, std::vector<ShardReport>(static_cast<size_t>(world)), pieces);
}

Result<SaveResult> SaveCheckpoint(const std::string& dir, int64_t step, const Engine& engine, Communicator& comm,
                                  const CheckpointRun& run, const SaveOptions& options) {
  // The ranks start together, so that the time measured is the save's, not a peer's lateness.
  DSLAUNCH_RETURN_IF_ERROR(comm.Barrier().WithContext("checkpoint"));
  const auto start = std::chrono::steady_clock::now();
  const std::string step_dir = Join(dir, StepDirectoryName(step));
  DSLAUNCH_RETURN_IF_ERROR(PrepareStepDirectory(FilesOf(options), dir, step_dir, comm));
  const EngineSnapshot snap = engine.Snapshot();
  const ShardPlan shard = PlanShard(run, comm.rank(), snap.range);
  Result<WriteResult> written =
      WriteShard(FilesOf(options), step_dir, step, comm.world_size(), shard, snap.tensors, snap.stream);
  DSLAUNCH_ASSIGN_OR_RETURN(SaveResult result, CompleteCheckpoint(dir, step_dir, step, written, CountersOf(snap),
                                                                   shard, comm, run, options));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.stall_seconds = result.seconds;
  return result;
}

struct AsyncCheckpoint::State {
  std::string dir, step_dir;
  int64_t step = 0;
  CheckpointRun run;
  SaveOptions options;
  SnapshotCounters counters;
  ShardPlan shard;
  std::vector<std::pair<std::string, std::span<const float>>> copies;  // in the caller's buffers
  std::optional<Result<WriteResult>> written;                       // set by the writer thread
  std::atomic<bool> done{false};
  std::thread writer;
  std::chrono::steady_clock::time_point start;
  double stall_seconds = 0.0;
  bool resident = false;  // `copies` are the step's in-memory snapshot
};

Result<std::unique_ptr<AsyncCheckpoint>> AsyncCheckpoint::Start(const std::string& dir, int64_t step,
                                                                const Engine& engine, Communicator& comm,
                                                                const CheckpointRun& run, const SaveOptions& options,
                                                                AsyncCheckpointBuffers& buffers,
                                                                const std::vector<std::span<const float>>* resident) {
  DSLAUNCH_RETURN_IF_ERROR(comm.Barrier().WithContext("checkpoint"));
  auto state = std::make_unique<State>();
  state->start = std::chrono::steady_clock::now();
  state->dir = dir;
  state->step_dir = Join(dir, StepDirectoryName(step));
  state->step = step;
  state->run = run;
  state->options = options;
  DSLAUNCH_RETURN_IF_ERROR(PrepareStepDirectory(FilesOf(options), dir, state->step_dir, comm));
  const EngineSnapshot snap = engine.Snapshot();
  state->counters = CountersOf(snap);
  state->shard = PlanShard(run, comm.rank(), snap.range);
  state->resident = resident != nullptr;
  if (resident != nullptr) {
    // Already copied (the step's in-memory snapshot): the writer reads it where it is.
    if (resident->size() != snap.tensors.size()) {
      return InternalError("checkpoint of step " + std::to_string(step) + ": " + std::to_string(resident->size()) +
                           " resident tensors, the engine has " + std::to_string(snap.tensors.size()));
    }
    for (size_t i = 0; i < snap.tensors.size(); ++i) {
      if ((*resident)[i].size() != snap.range.size()) {
        return InternalError("checkpoint of step " + std::to_string(step) + ": resident " + snap.tensors[i].first +
                             " has " + std::to_string((*resident)[i].size()) + " elements, the rank's slice " +
                             std::to_string(snap.range.size()));
      }
      state->copies.emplace_back(snap.tensors[i].first, (*resident)[i]);
    }
  }
  if (resident == nullptr) {
    buffers.tensors.resize(snap.tensors.size());
    for (size_t i = 0; i < snap.tensors.size(); ++i) {
      const auto& [name, data] = snap.tensors[i];
      std::vector<float>& copy = buffers.tensors[i];
      copy.resize(snap.range.size());  // the same size every time: no new pages after the first save
      if (snap.stream) {
        // Offloaded state: the writer thread must not touch the swap file while training goes on,
        // so an asynchronous save copies it into memory like any other (docs/offload.md).
        size_t at = 0;
        DSLAUNCH_RETURN_IF_ERROR(snap.stream(i, [&](std::span<const float> piece) {
          std::copy(piece.begin(), piece.end(), copy.begin() + static_cast<std::ptrdiff_t>(at));
          at += piece.size();
          return Status::Ok();
        }));
      } else {
        std::copy(data.begin(), data.end(), copy.begin());
      }
      state->copies.emplace_back(name, std::span<const float>(copy));
    }
  }
  state->stall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - state->start).count();
  State* s = state.get();
  const int world = comm.world_size();
  s->writer = std::thread([s, world] {
    s->written = WriteShard(FilesOf(s->options), s->step_dir, s->step, world, s->shard, s->copies);
    s->done.store(true);
  });
  return std::unique_ptr<AsyncCheckpoint>(new AsyncCheckpoint(std::move(state)));
}

AsyncCheckpoint::AsyncCheckpoint(std::unique_ptr<State> state) : state_(std::move(state)) {}

AsyncCheckpoint::~AsyncCheckpoint() {
  if (state_ && state_->writer.joinable()) state_->writer.join();
}

int64_t AsyncCheckpoint::step() const { return state_->step; }
bool AsyncCheckpoint::written() const { return state_->done.load(); }
double AsyncCheckpoint::stall_seconds() const { return state_->stall_seconds; }

Result<SaveResult> AsyncCheckpoint::Finish(Communicator& comm) {
  // Training waits here too: for the writer if it is not done, and for completing the checkpoint.
  const auto finish_start = std::chrono::steady_clock::now();
  if (state_->writer.joinable()) state_->writer.join();
  DSLAUNCH_ASSIGN_OR_RETURN(SaveResult result, CompleteCheckpoint(state_->dir, state_->step_dir, state_->step,
                                                                   *state_->written, state_->counters, state_->shard,
                                                                   comm, state_->run, state_->options));
  const auto now = std::chrono::steady_clock::now();
  result.seconds = std::chrono::duration<double>(now - state_->start).count();
  result.stall_seconds = state_->stall_seconds + std::chrono::duration<double>(now - finish_start).count();
  result.from_snapshot = state_->resident;
  return result;
}

Result<CheckpointMeta> ReadCheckpointMeta(const std::string& path) {
  const std::string meta_path = Join(path, kMetaFileName);
  DSLAUNCH_ASSIGN_OR_RETURN(std::string text, ReadFile(meta_path));
  return CheckpointMetaFromJson(text, meta_path);
}

Status CheckCheckpointFits(const CheckpointMeta& m, const std::string& what, const Engine& engine, const CheckpointRun& run) {
  const std::string where = what + ": ";
  if (m.model != run.model) {
    return FailedPreconditionError(where + "saved from model \"" + m.model + "\", this run trains \"" + run.model + "\"");
  }
  const std::vector<CheckpointParameter> mine = CheckpointParametersOf(*run.layout);
  for (size_t i = 0; i < std::max(mine.size(), m.parameters.size()); ++i) {
    if (i >= mine.size() || i >= m.parameters.size() || mine[i].name != m.parameters[i].name ||
        mine[i].shape != m.parameters[i].shape || mine[i].offset != m.parameters[i].offset) {
      const std::string saved = i < m.parameters.size() ? m.parameters[i].name : "(nothing)";
      const std::string here = i < mine.size() ? mine[i].name : "(nothing)";
      return FailedPreconditionError(where + "parameter " + std::to_string(i) + " is " + saved + " there and " + here +
                                     " here, or its shape or offset differs: the model section of train.json must "
                                     "match the run that saved it");
    }
  }
  std::vector<std::string> wanted;
  for (const auto& [name, data] : engine.Snapshot().tensors) wanted.push_back(name);
  if (m.state_tensors != wanted) return FailedPreconditionError(where + OptimizerMismatch(m.state_tensors, wanted));
  if (m.global_batch != run.global_batch) {
    return FailedPreconditionError(where + "saved with a global batch of " + std::to_string(m.global_batch) +
                                   " samples per step; this run has " + std::to_string(run.global_batch) +
                                   ". Resume with the same global batch: set train_batch_size to " +
                                   std::to_string(m.global_batch) +
                                   " and let gradient_accumulation_steps follow from the world size");
  }
  if (m.seed != run.seed) {
    return FailedPreconditionError(where + "saved with seed " + std::to_string(m.seed) + ", this run has seed " +
                                   std::to_string(run.seed) + ": the data order would change");
  }
  return Status::Ok();
}

Result<LoadResult> LoadCheckpoint(const std::string& path, Engine& engine, Communicator& comm,
                                  const CheckpointRun& run) {
  // Each rank reads and checks on its own; then all agree before any collective restore.
  DSLAUNCH_RETURN_IF_ERROR(comm.Barrier().WithContext("checkpoint load"));
  const auto start = std::chrono::steady_clock::now();
  LoadResult result;
  Status prepared = [&]() -> Status {
    DSLAUNCH_ASSIGN_OR_RETURN(result.meta, ReadCheckpointMeta(path));
    return CheckCheckpointFits(result.meta, "checkpoint " + path, engine, run);
  }();
  DSLAUNCH_RETURN_IF_ERROR(AgreeOnFailureWithReason(comm, prepared, "load checkpoint " + path));
  const CheckpointMeta& m = result.meta;
  if (!m.config_sha256.empty() && m.config_sha256 != run.config_sha256) {
    result.warning = "train.json differs from the one the checkpoint was saved with";
  }

  // Restore is collective; a rank whose reads fail still takes part (with what it read) so that no
  // peer waits, and the failure is agreed on afterwards.
  ShardReader shards(path, m);
  Status read_status;
  // The engine asks for ranges of its flat buffer; a model part's lie in the whole model's where
  // its placement says.
  auto read = [&](const std::string& name, size_t begin, size_t end, float* out) -> Status {
    if (run.part == nullptr) return shards.Read(name, begin, end, out);
    Status status;
    ForEachRun(PiecesOf(run.part->pieces, {begin, end}), [&](uint64_t from, uint64_t count) {
      if (status.ok()) status = shards.Read(name, from, from + count, out);
      out += count;
    });
    return status;
  };
  StateReader guarded = [&](const std::string& name, size_t begin, size_t end, float* out) -> Status {
    if (read_status.ok()) read_status = read(name, begin, end, out);
    return Status::Ok();
  };
  DSLAUNCH_RETURN_IF_ERROR(engine.Restore(guarded, m.optimizer_step, m.applied_steps, m.loss_scaler)
                               .WithContext("checkpoint " + path));
  DSLAUNCH_RETURN_IF_ERROR(AgreeOnFailureWithReason(comm, read_status, "read checkpoint " + path));
  for (const auto& p : m.partitions) result.bytes += p.bytes;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dslaunch::runtime
