#include "runtime/checkpoint/fault_injecting_file_system.h"

#include <charconv>
#include <filesystem>

#include "runtime/checkpoint/names.h"

namespace dslaunch::runtime {
namespace {

namespace stdfs = std::filesystem;

constexpr SaveFaultPoint kPoints[] = {SaveFaultPoint::kBeforeShard, SaveFaultPoint::kMidShard,
                                      SaveFaultPoint::kBeforeMeta, SaveFaultPoint::kBeforeLatest};

constexpr char kSpecForm[] = "expected POINT@RANK@STEP, e.g. before_shard@1@4";

template <typename T>
std::optional<T> ParseNonNegative(std::string_view text) {
  T value{};
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The file's name with a durable write's temporary suffix taken off.
std::string BaseName(const std::string& path) {
  std::string name = stdfs::path(path).filename().string();
  const std::string suffix = TemporaryFileName("");
  if (name.ends_with(suffix)) name.resize(name.size() - suffix.size());
  return name;
}

// The step of the global_step<N> directory that holds `path`.
std::optional<int64_t> StepOf(const std::string& path) {
  return ParseStepDirectoryName(stdfs::path(path).parent_path().filename().string());
}

}  // namespace

std::string_view SaveFaultPointName(SaveFaultPoint point) {
  switch (point) {
    case SaveFaultPoint::kBeforeShard: return "before_shard";
    case SaveFaultPoint::kMidShard: return "mid_shard";
    case SaveFaultPoint::kBeforeMeta: return "before_meta";
    case SaveFaultPoint::kBeforeLatest: return "before_latest";
  }
  return "?";
}

Result<SaveFault> ParseSaveFault(std::string_view spec) {
  const std::string where = "'" + std::string(spec) + "': ";
  const size_t first = spec.find('@');
  const size_t second = first == std::string_view::npos ? first : spec.find('@', first + 1);
  if (second == std::string_view::npos || spec.find('@', second + 1) != std::string_view::npos) {
    return InvalidArgumentError(where + kSpecForm);
  }
  SaveFault fault;
  const std::string_view point = spec.substr(0, first);
  bool known = false;
  std::string names;
  for (SaveFaultPoint p : kPoints) {
    names += (names.empty() ? "" : ", ") + std::string(SaveFaultPointName(p));
    if (SaveFaultPointName(p) == point) {
      fault.point = p;
      known = true;
    }
  }
  if (!known) return InvalidArgumentError(where + "unknown point '" + std::string(point) + "'; the points are " + names);
  const std::optional<int> rank = ParseNonNegative<int>(spec.substr(first + 1, second - first - 1));
  if (!rank) return InvalidArgumentError(where + "RANK must be a non-negative integer; " + kSpecForm);
  const std::optional<int64_t> step = ParseNonNegative<int64_t>(spec.substr(second + 1));
  if (!step) return InvalidArgumentError(where + "STEP must be a non-negative integer; " + kSpecForm);
  fault.rank = *rank;
  fault.step = *step;
  return fault;
}

// A shard being written at mid_shard: on Close, cut to half its size, then the fault fires.
class FaultInjectingFileSystem::CutFile : public WritableFile {
 public:
  CutFile(FaultInjectingFileSystem& fs, std::unique_ptr<WritableFile> file, std::string path)
      : fs_(fs), file_(std::move(file)), path_(std::move(path)) {}
  Status Append(const void* data, size_t n) override { return file_->Append(data, n); }
  Status Sync() override { return file_->Sync(); }
  Status Close() override {
    DSLAUNCH_RETURN_IF_ERROR(file_->Close());
    std::error_code ec;
    stdfs::resize_file(path_, stdfs::file_size(path_, ec) / 2, ec);
    if (ec) return ErrnoError("cut " + path_ + " to half its size", ec.value());
    return fs_.Fire(path_);
  }

 private:
  FaultInjectingFileSystem& fs_;
  std::unique_ptr<WritableFile> file_;
  const std::string path_;
};

FaultInjectingFileSystem::FaultInjectingFileSystem(FileSystem& target, SaveFault fault, Action action)
    : FileSystemWrapper(target), fault_(fault), action_(std::move(action)) {}

bool FaultInjectingFileSystem::fired() const {
  std::lock_guard lock(mu_);
  return fired_;
}

Status FaultInjectingFileSystem::Fire(const std::string& path) {
  {
    std::lock_guard lock(mu_);
    if (fired_) return Status::Ok();
    fired_ = true;
  }
  return action_(fault_.point, path);
}

Result<std::unique_ptr<WritableFile>> FaultInjectingFileSystem::NewWritableFile(const std::string& path) {
  const std::string name = BaseName(path);
  const bool this_step = StepOf(path) == fault_.step;
  const bool shard = this_step && ParseShardFileName(name).has_value();
  switch (fault_.point) {
    case SaveFaultPoint::kBeforeShard:
      if (shard) DSLAUNCH_RETURN_IF_ERROR(Fire(stdfs::path(path).parent_path().string()));
      break;
    case SaveFaultPoint::kMidShard:
      if (shard) {
        DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, target().NewWritableFile(path));
        return std::unique_ptr<WritableFile>(new CutFile(*this, std::move(file), path));
      }
      break;
    case SaveFaultPoint::kBeforeMeta:
      if (this_step && name == kMetaFileName) DSLAUNCH_RETURN_IF_ERROR(Fire(path));
      break;
    case SaveFaultPoint::kBeforeLatest: {
      std::optional<int64_t> meta_step;
      {
        std::lock_guard lock(mu_);
        meta_step = meta_step_;
      }
      if (name == kLatestFileName && meta_step == fault_.step) {
        DSLAUNCH_RETURN_IF_ERROR(Fire(stdfs::path(path).parent_path().append(kLatestFileName).string()));
      }
      break;
    }
  }
  return target().NewWritableFile(path);
}

Status FaultInjectingFileSystem::Rename(const std::string& from, const std::string& to) {
  DSLAUNCH_RETURN_IF_ERROR(target().Rename(from, to));
  if (stdfs::path(to).filename() == kMetaFileName) {
    std::lock_guard lock(mu_);
    meta_step_ = StepOf(to);
  }
  return Status::Ok();
}

}  // namespace dslaunch::runtime
