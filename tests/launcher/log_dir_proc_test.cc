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

}  // namespace
}  // namespace dslaunch::testing
