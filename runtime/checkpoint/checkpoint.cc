#include "runtime/checkpoint/checkpoint.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "common/file_io.h"
#include "runtime/checkpoint/safetensors.h"

namespace dslaunch::runtime {
namespace fs = std::filesystem;
namespace {

constexpr char kLatest[] = "latest";
constexpr char kMeta[] = "meta.json";

std::string ShardFileName(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "rank%05d.safetensors", rank);
  return buf;
}

// Every rank's (ok, crc32c, bytes) after writing its shard, moved bit for bit through an fp32
// all-gather (AllGather copies bytes; nothing is added).
struct ShardReport {
  bool ok = false;
  uint32_t crc32c = 0;
  uint64_t bytes = 0;
};

Result<std::vector<ShardReport>> GatherReports(Communicator& comm, const ShardReport& mine) {
  const uint32_t words[4] = {mine.ok ? 1u : 0u, mine.crc32c, static_cast<uint32_t>(mine.bytes),
                             static_cast<uint32_t>(mine.bytes >> 32)};
  std::vector<float> local(4), all(4 * static_cast<size_t>(comm.world_size()));
  for (int i = 0; i < 4; ++i) local[static_cast<size_t>(i)] = std::bit_cast<float>(words[i]);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const float>(local), std::span<float>(all),
                                          std::vector<size_t>(static_cast<size_t>(comm.world_size()), 4))
                               .WithContext("checkpoint: gathering the shards' checksums"));
  std::vector<ShardReport> reports;
  for (int r = 0; r < comm.world_size(); ++r) {
    auto word = [&](int i) { return std::bit_cast<uint32_t>(all[static_cast<size_t>(4 * r + i)]); };
    reports.push_back({word(0) == 1, word(1), static_cast<uint64_t>(word(2)) | (static_cast<uint64_t>(word(3)) << 32)});
  }
  return reports;
}

// Agrees on failure: every rank learns whether any rank failed (and which, the lowest).
Result<int> FirstFailedRank(Communicator& comm, bool failed) {
  float flag = failed ? static_cast<float>(comm.world_size() - comm.rank()) : 0.0f;
  DSLAUNCH_RETURN_IF_ERROR(comm.AllReduce(std::span<float>(&flag, 1), ReduceOp::kMax).WithContext("checkpoint"));
  return flag > 0 ? comm.world_size() - static_cast<int>(flag) : -1;
}

// Writes a small file atomically and makes its directory entry durable.
Status WriteDurably(const std::string& path, const std::string& text) {
  DSLAUNCH_RETURN_IF_ERROR(WriteFileAtomically(path, text));
  return FsyncDirectory(fs::path(path).parent_path().string());
}

// Deletes complete checkpoints (with meta.json) older than the newest `keep` complete ones.
void ApplyRetention(const std::string& dir, int keep) {
  std::vector<std::pair<int64_t, fs::path>> complete;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("global_step", 0) != 0 || !fs::exists(entry.path() / kMeta, ec)) continue;
    char* end = nullptr;
    const long long step = std::strtoll(name.c_str() + 11, &end, 10);
    if (end == name.c_str() + 11 || *end != '\0') continue;
    complete.emplace_back(step, entry.path());
  }
  std::sort(complete.begin(), complete.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < complete.size(); ++i) fs::remove_all(complete[i].second, ec);
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

}  // namespace

std::string CheckpointName(int64_t step) { return "global_step" + std::to_string(step); }

namespace {

// The phases of a save, shared by SaveCheckpoint and AsyncCheckpoint.

// Collective: rank 0 clears what a crashed earlier attempt at this step may have left and creates
// the directory; every rank learns whether that worked.
Status PrepareStepDirectory(const std::string& dir, const std::string& step_dir, Communicator& comm) {
  Status prepared;
  if (comm.rank() == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!ec) fs::remove_all(step_dir, ec);
    if (!ec) fs::create_directories(step_dir, ec);
    if (ec) prepared = InternalError("checkpoint: cannot create " + step_dir + ": " + ec.message());
  }
  DSLAUNCH_ASSIGN_OR_RETURN(int failed, FirstFailedRank(comm, !prepared.ok()));
  if (failed >= 0) return prepared.ok() ? AbortedError("checkpoint: rank 0 could not create " + step_dir) : prepared;
  return Status::Ok();
}

// Local: this rank's shard, fsynced.
Result<WriteResult> WriteShard(const std::string& step_dir, int64_t step, int rank, int world, ShardRange range,
                               const std::vector<std::pair<std::string, std::span<const float>>>& state,
                               const CheckpointFaultHook& fault) {
  if (fault) fault("before_shard", step, step_dir);
  const std::string shard_path = (fs::path(step_dir) / ShardFileName(rank)).string();
  std::vector<TensorData> tensors;
  for (const auto& [name, data] : state) {
    tensors.push_back({name, "F32", {static_cast<int64_t>(data.size())}, data.data(), data.size_bytes()});
  }
  const std::map<std::string, std::string> metadata = {{"format", kCheckpointFormatName},
                                                       {"step", std::to_string(step)},
                                                       {"rank", std::to_string(rank)},
                                                       {"world_size", std::to_string(world)},
                                                       {"begin", std::to_string(range.begin)},
                                                       {"end", std::to_string(range.end)}};
  WriteOptions write_options;
  write_options.fsync = true;
  Result<WriteResult> written = WriteSafetensors(shard_path, tensors, metadata, write_options);
  if (written.ok() && fault) fault("mid_shard", step, shard_path);
  return written;
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

// Collective: gathers the shards' reports; rank 0 writes meta.json, then `latest`, then applies
// retention; every rank learns the outcome.
Result<SaveResult> CompleteCheckpoint(const std::string& dir, const std::string& step_dir, int64_t step,
                                      const Result<WriteResult>& written, const SnapshotCounters& counters,
                                      Communicator& comm, const CheckpointRun& run, const SaveOptions& options) {
  const int rank = comm.rank(), world = comm.world_size();
  ShardReport mine{written.ok(), written.ok() ? written->crc32c : 0u, written.ok() ? written->bytes : 0u};
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<ShardReport> reports, GatherReports(comm, mine));
  for (int r = 0; r < world; ++r) {
    if (reports[static_cast<size_t>(r)].ok) continue;
    if (r == rank) return written.status().WithContext("checkpoint of step " + std::to_string(step));
    return AbortedError("checkpoint of step " + std::to_string(step) + ": rank " + std::to_string(r) +
                        " could not write its shard; " + (fs::path(dir) / kLatest).string() +
                        " still names the previous checkpoint");
  }
  Status finished;
  if (rank == 0) {
    if (options.fault) options.fault("before_meta", step, step_dir);
    CheckpointMeta meta;
    meta.step = step;
    meta.applied_steps = counters.applied_steps;
    meta.optimizer_step = counters.optimizer_step;
    meta.world_size = world;
    meta.zero_stage = run.zero_stage;
    meta.precision = run.precision;
    meta.model = run.model;
    meta.optimizer = run.optimizer;
    meta.numel = run.layout->numel();
    meta.global_batch = run.global_batch;
    meta.seed = run.seed;
    meta.state_tensors = counters.state_tensors;
    for (const auto& g : run.layout->groups()) {
      for (const auto& t : g.tensors) {
        meta.parameters.push_back({t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()), t.offset, t.numel});
      }
    }
    for (int r = 0; r < world; ++r) {
      const ShardRange range = ShardFor(run.layout->numel(), world, r);
      const ShardReport& report = reports[static_cast<size_t>(r)];
      meta.partitions.push_back({r, range.begin, range.end, ShardFileName(r), report.bytes, report.crc32c});
    }
    meta.loss_scaler = counters.loss_scaler;
    meta.config_sha256 = run.config_sha256;
    finished = WriteDurably((fs::path(step_dir) / kMeta).string(), CheckpointMetaToJson(meta));
    if (finished.ok()) {
      if (options.fault) options.fault("before_latest", step, (fs::path(dir) / kLatest).string());
      finished = WriteDurably((fs::path(dir) / kLatest).string(), CheckpointName(step) + "\n");
    }
    if (finished.ok() && options.keep_last > 0) ApplyRetention(dir, options.keep_last);
  }
  DSLAUNCH_ASSIGN_OR_RETURN(int failed, FirstFailedRank(comm, !finished.ok()));
  if (failed >= 0) {
    if (!finished.ok()) return finished.WithContext("checkpoint of step " + std::to_string(step));
    return AbortedError("checkpoint of step " + std::to_string(step) + ": rank 0 could not complete it");
  }
  SaveResult result;
  result.path = step_dir;
  for (const auto& r : reports) result.bytes += r.bytes;
  return result;
}

}  // namespace

Result<SaveResult> SaveCheckpoint(const std::string& dir, int64_t step, const Engine& engine, Communicator& comm,
                                  const CheckpointRun& run, const SaveOptions& options) {
  // The ranks start together, so that the time measured is the save's, not a peer's lateness.
  DSLAUNCH_RETURN_IF_ERROR(comm.Barrier().WithContext("checkpoint"));
  const auto start = std::chrono::steady_clock::now();
  const std::string step_dir = (fs::path(dir) / CheckpointName(step)).string();
  DSLAUNCH_RETURN_IF_ERROR(PrepareStepDirectory(dir, step_dir, comm));
  const EngineSnapshot snap = engine.Snapshot();
  Result<WriteResult> written =
      WriteShard(step_dir, step, comm.rank(), comm.world_size(), snap.range, snap.tensors, options.fault);
  DSLAUNCH_ASSIGN_OR_RETURN(SaveResult result,
                            CompleteCheckpoint(dir, step_dir, step, written, CountersOf(snap), comm, run, options));
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
  std::vector<std::pair<std::string, std::span<const float>>> copies;  // in the caller's buffers
  std::optional<Result<WriteResult>> written;                       // set by the writer thread
  std::atomic<bool> done{false};
  std::thread writer;
  std::chrono::steady_clock::time_point start;
  double stall_seconds = 0.0;
};

Result<std::unique_ptr<AsyncCheckpoint>> AsyncCheckpoint::Start(const std::string& dir, int64_t step,
                                                                const Engine& engine, Communicator& comm,
                                                                const CheckpointRun& run, const SaveOptions& options,
                                                                AsyncCheckpointBuffers& buffers) {
  DSLAUNCH_RETURN_IF_ERROR(comm.Barrier().WithContext("checkpoint"));
  auto state = std::make_unique<State>();
  state->start = std::chrono::steady_clock::now();
  state->dir = dir;
  state->step_dir = (fs::path(dir) / CheckpointName(step)).string();
  state->step = step;
  state->run = run;
  state->options = options;
  DSLAUNCH_RETURN_IF_ERROR(PrepareStepDirectory(dir, state->step_dir, comm));
  const EngineSnapshot snap = engine.Snapshot();
  state->counters = CountersOf(snap);
  buffers.tensors.resize(snap.tensors.size());
  for (size_t i = 0; i < snap.tensors.size(); ++i) {
    const auto& [name, data] = snap.tensors[i];
    std::vector<float>& copy = buffers.tensors[i];
    copy.resize(data.size());  // the same size every time: no new pages after the first save
    std::copy(data.begin(), data.end(), copy.begin());
    state->copies.emplace_back(name, std::span<const float>(copy));
  }
  state->stall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - state->start).count();
  State* s = state.get();
  const int rank = comm.rank(), world = comm.world_size();
  const ShardRange range = snap.range;
  s->writer = std::thread([s, rank, world, range] {
    s->written = WriteShard(s->step_dir, s->step, rank, world, range, s->copies, s->options.fault);
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
                                                                   *state_->written, state_->counters, comm,
                                                                   state_->run, state_->options));
  const auto now = std::chrono::steady_clock::now();
  result.seconds = std::chrono::duration<double>(now - state_->start).count();
  result.stall_seconds = state_->stall_seconds + std::chrono::duration<double>(now - finish_start).count();
  return result;
}

Result<std::optional<std::string>> ResolveCheckpoint(const CheckpointConfig& config) {
  auto from_latest = [](const fs::path& dir, bool required) -> Result<std::optional<std::string>> {
    const fs::path latest = dir / kLatest;
    std::error_code ec;
    if (!fs::exists(latest, ec)) {
      if (required) return NotFoundError(dir.string() + " has neither meta.json nor a `latest` file: not a checkpoint");
      return std::optional<std::string>();
    }
    DSLAUNCH_ASSIGN_OR_RETURN(std::string name, ReadFile(latest.string()));
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    if (name.empty() || name.find('/') != std::string::npos) {
      return DataLossError(latest.string() + ": does not name a checkpoint directory");
    }
    const fs::path target = dir / name;
    if (!fs::exists(target / kMeta, ec)) {
      return DataLossError(latest.string() + " names " + target.string() + ", which has no meta.json (incomplete)");
    }
    return std::optional<std::string>(target.string());
  };
  if (config.resume_newest && !config.dir.empty()) {
    DSLAUNCH_ASSIGN_OR_RETURN(std::optional<std::string> newest, from_latest(config.dir, false));
    if (newest) return newest;  // else what `load` names: nothing, or the checkpoint the run started from
  }
  switch (config.load) {
    case CheckpointLoad::kNone:
      return std::optional<std::string>();
    case CheckpointLoad::kLatest:
      if (config.dir.empty()) return InvalidArgumentError("checkpoint.load \"auto\" needs checkpoint.dir");
      return from_latest(config.dir, false);
    case CheckpointLoad::kPath: {
      std::error_code ec;
      if (fs::exists(fs::path(config.load_path) / kMeta, ec)) return std::optional<std::string>(config.load_path);
      if (!fs::is_directory(config.load_path, ec)) {
        return NotFoundError("checkpoint.load: " + config.load_path + " does not exist");
      }
      return from_latest(config.load_path, true);
    }
  }
  return std::optional<std::string>();
}

Result<CheckpointMeta> ReadCheckpointMeta(const std::string& path) {
  const std::string meta_path = (fs::path(path) / kMeta).string();
  DSLAUNCH_ASSIGN_OR_RETURN(std::string text, ReadFile(meta_path));
  return CheckpointMetaFromJson(text, meta_path);
}

Result<LoadResult> LoadCheckpoint(const std::string& path, Engine& engine, Communicator& comm,
                                  const CheckpointRun& run) {
  // Each rank reads and checks on its own; then all agree before any collective restore.
  DSLAUNCH_RETURN_IF_ERROR(comm.Barrier().WithContext("checkpoint load"));
  const auto start = std::chrono::steady_clock::now();
  LoadResult result;
  std::vector<std::optional<SafetensorsFile>> files;
  auto prepare = [&]() -> Status {
    DSLAUNCH_ASSIGN_OR_RETURN(result.meta, ReadCheckpointMeta(path));
    const CheckpointMeta& m = result.meta;
    const std::string where = "checkpoint " + path + ": ";
    if (m.model != run.model) return FailedPreconditionError(where + "saved from model \"" + m.model + "\", this run trains \"" + run.model + "\"");
    std::vector<CheckpointParameter> mine;
    for (const auto& g : run.layout->groups()) {
      for (const auto& t : g.tensors) mine.push_back({t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()), t.offset, t.numel});
    }
    for (size_t i = 0; i < std::max(mine.size(), m.parameters.size()); ++i) {
      if (i >= mine.size() || i >= m.parameters.size() || mine[i].name != m.parameters[i].name ||
          mine[i].shape != m.parameters[i].shape || mine[i].offset != m.parameters[i].offset) {
        const std::string saved = i < m.parameters.size() ? m.parameters[i].name : "(nothing)";
        const std::string here = i < mine.size() ? mine[i].name : "(nothing)";
        return FailedPreconditionError(where + "parameter " + std::to_string(i) + " is " + saved +
                                       " there and " + here + " here, or its shape or offset differs: the model "
                                       "section of train.json must match the run that saved it");
      }
    }
    const std::vector<std::string> wanted = [&] {
      std::vector<std::string> names;
      for (const auto& [name, data] : engine.Snapshot().tensors) names.push_back(name);
      return names;
    }();
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
    if (!m.config_sha256.empty() && m.config_sha256 != run.config_sha256) {
      result.warning = "train.json differs from the one the checkpoint was saved with";
    }
    files.resize(m.partitions.size());  // opened and checked when first read
    return Status::Ok();
  };
  Status prepared = prepare();
  DSLAUNCH_ASSIGN_OR_RETURN(int failed, FirstFailedRank(comm, !prepared.ok()));
  if (failed >= 0) {
    if (!prepared.ok()) return prepared;
    return AbortedError("rank " + std::to_string(failed) + " could not load checkpoint " + path + " (see its error)");
  }

  const CheckpointMeta& m = result.meta;
  Status read_status;
  // Opens (once) and verifies the shard of partition p.
  auto open = [&](size_t p) -> Result<const SafetensorsFile*> {
    if (!files[p]) {
      const std::string file = (fs::path(path) / m.partitions[p].file).string();
      DSLAUNCH_ASSIGN_OR_RETURN(uint32_t crc, SafetensorsFile::FileCrc32c(file));
      if (crc != m.partitions[p].crc32c) {
        char buf[96];
        std::snprintf(buf, sizeof(buf), " is corrupt: CRC-32C %08x, meta.json records %08x", crc, m.partitions[p].crc32c);
        return DataLossError(file + buf);
      }
      DSLAUNCH_ASSIGN_OR_RETURN(SafetensorsFile opened, SafetensorsFile::Open(file));
      files[p].emplace(std::move(opened));
    }
    return &*files[p];
  };
  StateReader read = [&](const std::string& name, size_t begin, size_t end, float* out) -> Status {
    for (size_t p = 0; p < m.partitions.size(); ++p) {
      const CheckpointPartition& part = m.partitions[p];
      const uint64_t b = std::max<uint64_t>(begin, part.begin), e = std::min<uint64_t>(end, part.end);
      if (b >= e) continue;
      DSLAUNCH_ASSIGN_OR_RETURN(const SafetensorsFile* file, open(p));
      const SafetensorsTensor* tensor = file->Find(name);
      if (tensor == nullptr || tensor->dtype != "F32" || tensor->end - tensor->begin != (part.end - part.begin) * sizeof(float)) {
        return DataLossError((fs::path(path) / part.file).string() + ": no F32 tensor \"" + name + "\" of " +
                             std::to_string(part.end - part.begin) + " elements");
      }
      DSLAUNCH_RETURN_IF_ERROR(
          file->Read(*tensor, (b - part.begin) * sizeof(float), out + (b - begin), (e - b) * sizeof(float)));
    }
    return Status::Ok();
  };
  // Restore is collective; a rank whose reads fail still takes part (with what it read) so that no
  // peer waits, and the failure is agreed on afterwards.
  StateReader guarded = [&](const std::string& name, size_t begin, size_t end, float* out) -> Status {
    if (read_status.ok()) read_status = read(name, begin, end, out);
    return Status::Ok();
  };
  DSLAUNCH_RETURN_IF_ERROR(engine.Restore(guarded, m.optimizer_step, m.applied_steps, m.loss_scaler)
                               .WithContext("checkpoint " + path));
  DSLAUNCH_ASSIGN_OR_RETURN(failed, FirstFailedRank(comm, !read_status.ok()));
  if (failed >= 0) {
    if (!read_status.ok()) return read_status;
    return AbortedError("rank " + std::to_string(failed) + " could not read checkpoint " + path + " (see its error)");
  }
  for (const auto& p : m.partitions) result.bytes += p.bytes;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dslaunch::runtime
