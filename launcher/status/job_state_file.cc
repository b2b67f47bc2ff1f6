#include "launcher/status/job_state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace dslaunch::launcher {
namespace {

constexpr char kSuffix[] = ".json";

// Creates `path` with mode 0700 when missing; an existing one must be a directory of this user
// that others cannot write to.
Status PrivateDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return InternalError("cannot create '" + path + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return InternalError("cannot read '" + path + "': " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return FailedPreconditionError("'" + path + "' is not a directory; remove it");
  if (st.st_uid != ::getuid()) {
    return FailedPreconditionError("'" + path + "' belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
                                   std::to_string(::getuid()) + "); remove it, or set TMPDIR elsewhere");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return FailedPreconditionError("'" + path + "' is writable by other users: run 'chmod go-w " + path + "'");
  }
  return Status::Ok();
}

}  // namespace

std::string UserRuntimeBase(const std::string& temp_dir, uid_t uid) {
  return temp_dir + "/dslaunch-" + std::to_string(uid);
}

std::string JobStateDir(const std::string& temp_dir, uid_t uid) { return UserRuntimeBase(temp_dir, uid) + "/running"; }

std::string JobStateJson(const JobStateRecord& r) {
  nlohmann::json j = {{"job_id", r.job_id}, {"url", r.url},      {"token", r.token},
                      {"pid", r.pid},       {"log_dir", r.log_dir}, {"started_ms", r.started_ms}};
  return j.dump(2) + "\n";
}

Result<JobStateRecord> ParseJobStateJson(const std::string& text, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError(where + ": not a JSON object");
  JobStateRecord r;
  for (const char* key : {"job_id", "url", "log_dir"}) {
    if (!j.contains(key) || !j[key].is_string()) return InvalidArgumentError(where + ": " + key + ": expected a string");
  }
  for (const char* key : {"pid", "started_ms"}) {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      return InvalidArgumentError(where + ": " + key + ": expected an integer");
    }
  }
  if (j.contains("token")) {  // absent in the record of a launcher from before the token
    if (!j["token"].is_string()) return InvalidArgumentError(where + ": token: expected a string");
    r.token = j["token"];
  }
  r.job_id = j["job_id"];
  r.url = j["url"];
  r.log_dir = j["log_dir"];
  r.pid = j["pid"];
  r.started_ms = j["started_ms"];
  return r;
}

Status WriteJobState(const std::string& dir, const JobStateRecord& record) {
  const std::string parent = std::filesystem::path(dir).parent_path().string();
  DSLAUNCH_RETURN_IF_ERROR(PrivateDirectory(parent));
  DSLAUNCH_RETURN_IF_ERROR(PrivateDirectory(dir));
  const std::string path = dir + "/" + record.job_id + kSuffix;
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return InternalError("cannot write '" + temp + "': " + std::strerror(errno));
  const std::string text = JobStateJson(record);
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temp.c_str());
    return InternalError("cannot write '" + path + "': " + why);
  }
  return Status::Ok();
}

Result<std::vector<JobStateRecord>> ReadJobStates(const std::string& dir) {
  std::vector<JobStateRecord> records;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return records;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(kSuffix)) continue;  // a writer's temporary file
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    DSLAUNCH_ASSIGN_OR_RETURN(JobStateRecord r, ParseJobStateJson(text.str(), entry.path().string()));
    records.push_back(std::move(r));
  }
  if (ec) return InternalError("cannot list '" + dir + "': " + ec.message());
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.job_id < b.job_id; });
  return records;
}

void RemoveJobState(const std::string& dir, const std::string& job_id) {
  ::unlink((dir + "/" + job_id + kSuffix).c_str());
}

}  // namespace dslaunch::launcher
