// The agent's private directory (agent/node/agent_dir.h): real directories and /proc.
#include "agent/node/agent_dir.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "agent/node/secret_dir.h"
#include "common/process_tree.h"
#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::agent {
namespace {

using dslaunch::testing::ReadWhole;
using dslaunch::testing::TempDir;

TEST_CASE("AgentDir makes the private directory with the secret, records started workers, and goes") {
  TempDir runtime;
  AgentDir dir;
  CHECK(dir.path().empty());
  REQUIRE(dir.Create(runtime.path(), "job-1", 2, "s3cret").ok());
  CHECK(dir.path() == runtime.path() + "/" + SecretDirName("job-1", 2, ::getpid()));
  struct stat st {};
  REQUIRE(::stat(dir.path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(dir.secret_file() == dir.path() + "/store.secret");
  CHECK(ReadWhole(dir.secret_file()) == "s3cret");
  CHECK(ReadWhole(dir.path() + "/" + kPidNamespaceFile) == OwnPidNamespace() + "\n");

  // This process stands in for a started worker: a live pid with a start time.
  REQUIRE(dir.RecordWorker(/*generation=*/4, /*rank=*/1, ::getpid()).ok());
  REQUIRE(dir.RecordWorker(4, 3, ::getpid()).ok());
  auto record = ParseFenceRecord(ReadWhole(dir.path() + "/" + kFenceRecordFile), "record");
  REQUIRE(record.ok());
  const uint64_t start_time = ReadProcessEntry(::getpid())->start_time;
  CHECK(record->agent.pid == ::getpid());
  CHECK(record->agent.start_time == start_time);
  REQUIRE(record->workers.size() == 2);
  CHECK(record->workers[0].generation == 4);
  CHECK(record->workers[0].rank == 1);
  CHECK(record->workers[0].leader.pid == ::getpid());
  CHECK(record->workers[0].leader.start_time == start_time);
  CHECK(record->workers[1].rank == 3);

  const std::string path = dir.path();
  dir.Remove();
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(dir.path().empty());
  dir.Remove();  // idempotent
}

TEST_CASE("AgentDir::Create names the directory it cannot make") {
  TempDir runtime;
  AgentDir dir;
  const Status made = dir.Create(runtime.path() + "/missing", "job-1", 0, "s3cret");
  CHECK(made.message() == "mkdir " + runtime.path() + "/missing/" + SecretDirName("job-1", 0, ::getpid()) +
                              ": No such file or directory");
  CHECK(dir.path().empty());
}

}  // namespace
}  // namespace dslaunch::agent
