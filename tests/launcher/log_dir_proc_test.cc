// Proc tests: where the real launcher and agent put the per-rank logs, and what they refuse
// (docs/launcher.md, "Log files"). TMPDIR points into each test's directory, so the per-user
// default lands there too.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/exit_codes.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
// Hang guard for one launcher run; the jobs themselves take well under a second.
constexpr std::chrono::seconds kRunTimeout{60};

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// `dslaunch [options] --no_python /bin/echo hello` on two local ranks, with TMPDIR inside `dir`.
ProcessResult Echo(const TempDir& dir, std::vector<std::string> options) {
  std::vector<std::string> argv = {kLauncher, "--nproc_per_node", "2", "--grace_period", "1"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", "/bin/echo", "hello"});
  return RunProcess(argv, kRunTimeout, {"TMPDIR=" + dir.path()});
}

std::string DefaultBase(const TempDir& dir) { return dir.path() + "/dslaunch-" + std::to_string(::getuid()); }

// The agents' private directories of job `job` left in `dir` (their TMPDIR): agent/node/secret_dir.h.
std::vector<std::string> SecretDirsOf(const TempDir& dir, const std::string& job) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind("dslaunch-" + job + "-n", 0) == 0) found.push_back(name);
  }
  return found;
}

TEST_CASE("By default logs go to a private per-user directory, files readable by their owner only") {
  TempDir dir;
  auto r = Echo(dir, {"--job_id", "j1"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string job = DefaultBase(dir) + "/j1";
  CHECK(ReadText(job + "/rank1.stdout.log") == "hello\n");
  CHECK(Mode(DefaultBase(dir)) == 0700);
  CHECK(Mode(job) == 0700);
  CHECK(Mode(job + "/rank1.stdout.log") == 0600);
  CHECK(Mode(job + "/rank1.stderr.log") == 0600);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/dslaunch"));
}

TEST_CASE("A default log directory that others may write to is refused, and the reason is the root cause") {
  TempDir dir;
  const std::string base = DefaultBase(dir);
  std::filesystem::create_directory(base);
  ::chmod(base.c_str(), 0777);
  auto r = Echo(dir, {"--job_id", "j2"});
  CHECK(r.exit_code == kExitInfrastructure);  // the agent could not start (AGENT_FAILED)
  CHECK(Contains(r.err, "dslaunch: job j2 failed: node 0 on host localhost: log directory '" + base +
                            "' is writable by other users (mode 0777): run 'chmod go-w " + base + "'"));
  CHECK_FALSE(Contains(r.err, "lost the agent"));
  CHECK(std::filesystem::is_empty(base));
}

TEST_CASE("A default log directory that another user owns is refused") {
  if (::geteuid() != 0) return;  // only root can give a directory away; the mode case above runs always
  TempDir dir;
  const std::string base = DefaultBase(dir);
  std::filesystem::create_directory(base, dir.path());
  ::chmod(base.c_str(), 0700);
  constexpr uid_t kOtherUser = 54321;
  REQUIRE(::chown(base.c_str(), kOtherUser, kOtherUser) == 0);
  auto r = Echo(dir, {"--job_id", "j3"});
  CHECK(r.exit_code == kExitInfrastructure);  // the agent could not start (AGENT_FAILED)
  CHECK(Contains(r.err, "dslaunch: job j3 failed: node 0 on host localhost: log directory '" + base +
                            "' belongs to uid 54321, not to this user (uid 0)"));
}

TEST_CASE("A log directory that cannot be created is reported as the job's root cause, not a lost agent") {
  TempDir dir;
  std::ofstream(dir.path() + "/file") << "not a directory\n";
  auto r = Echo(dir, {"--log_dir", dir.path() + "/file/logs", "--job_id", "j4"});
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructure);  // the agent could not start (AGENT_FAILED)
  CHECK(Contains(r.err, "dslaunch: job j4 failed: node 0 on host localhost: cannot create log directory '" +
                            dir.path() + "/file/logs': Not a directory\n"));
  CHECK_FALSE(Contains(r.err, "lost the agent"));
  // The agent removed its private directory (the job's secret file) before it reported the
  // failure, after which the launcher may kill it at once.
  CHECK(SecretDirsOf(dir, "j4").empty());
}

TEST_CASE("A log file is never opened through a planted symbolic link") {
  TempDir dir;
  const std::string victim = dir.path() + "/victim";
  std::ofstream(victim) << "precious\n";
  std::filesystem::create_directories(dir.path() + "/L/j5");
  std::filesystem::create_symlink(victim, dir.path() + "/L/j5/rank0.stdout.log");
  auto r = Echo(dir, {"--log_dir", dir.path() + "/L", "--job_id", "j5"});
  CHECK(r.exit_code == kExitInfrastructure);  // the agent could not start (AGENT_FAILED)
  CHECK(ReadText(victim) == "precious\n");
  CHECK(Contains(r.err, "dslaunch: job j5 failed: node 0 on host localhost: log file '" + dir.path() +
                            "/L/j5/rank0.stdout.log' already exists: job id 'j5' was used before on this node"));
  CHECK(r.out.empty());  // no worker ran
}

TEST_CASE("A reused job id is refused and the earlier run's logs stay as they were") {
  TempDir dir;
  const std::vector<std::string> options = {"--log_dir", dir.path() + "/L", "--job_id", "j6"};
  auto first = Echo(dir, options);
  REQUIRE(first.exit_code == 0);
  const std::string log = dir.path() + "/L/j6/rank0.stdout.log";
  REQUIRE(ReadText(log) == "hello\n");
  std::ofstream(log, std::ios::app) << "first run's last words\n";
  auto second = Echo(dir, options);
  CHECK(second.exit_code == kExitInfrastructure);
  CHECK(Contains(second.err, "job id 'j6' was used before on this node; choose another --job_id, or move '" +
                                 dir.path() + "/L/j6' away"));
  CHECK(ReadText(log) == "hello\nfirst run's last words\n");
}

TEST_CASE("A job id that is not a plain directory name is refused before anything starts") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/L");
  for (const char* id : {"..", "a/b", "."}) {
    CAPTURE(id);
    auto r = Echo(dir, {"--log_dir", dir.path() + "/L", "--job_id", id});
    CHECK(r.exit_code == 2);
    CHECK(Contains(r.err, "dslaunch: --job_id: job id '" + std::string(id) + "'"));
  }
  CHECK(std::filesystem::is_empty(dir.path() + "/L"));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/rank0.stdout.log"));
}

TEST_CASE("Output a log file cannot take is named on the console and in the summary, and still reaches the console") {
  TempDir dir;
  // Files may grow to 64 KiB (RLIMIT_FSIZE, set by util-linux's prlimit; the agent inherits the
  // limit and its writes fail with EFBIG, as they would with ENOSPC on a full disk). Rank 1 prints 20,000 lines
  // of 7 bytes (140,000 bytes): its file takes the first 65,536 bytes, 9,362 whole lines and the
  // start of the next; the rest (74,464 bytes, 10,638 lines counting the cut one) is lost.
  const std::string logs = dir.path() + "/L";
  auto r = RunProcess({"/usr/bin/prlimit", "--fsize=65536", "--", kLauncher, "--nproc_per_node", "2",
                       "--log_dir", logs, "--job_id", "j7", "--no_python", "/bin/sh", "-c",
                       "if [ \"$RANK\" = 1 ]; then seq 100000 119999; fi"},
                      kRunTimeout, {"TMPDIR=" + dir.path()});
  INFO(r.err);
  // The training (here: the printing) succeeded; the exit code says so, the summary says what the
  // logs lack.
  CHECK(r.exit_code == 0);
  const std::string file = logs + "/j7/rank1.stdout.log";
  CHECK(Contains(r.err, "dslaunch: rank 1: cannot write its stdout log '" + file +
                            "': File too large; its output is missing from that file from here on\n"));
  CHECK(Contains(r.err, "dslaunch: job j7: output was lost: 1 log file is incomplete\n"
                        "dslaunch:   rank 1, stdout: 10638 lines (74464 bytes) not in '" + file +
                            "': File too large\n"));
  CHECK(std::filesystem::file_size(file) == 65536);
  // What the file could not take still reached the launcher (the console; the status page's tail
  // is fed from the same lines).
  CHECK(Contains(r.out, "[rank 1] 119999\n"));
}

}  // namespace
}  // namespace dslaunch::testing
