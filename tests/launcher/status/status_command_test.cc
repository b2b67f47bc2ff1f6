#include "launcher/status/status_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/status/job_state_file.h"
#include "launcher/status/rank_log_files.h"
#include "tests/launcher/status/sample_view.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

Result<StatusCommand> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dslaunch");
  return ParseStatusCommand(args);
}

TEST_CASE("IsStatusSubcommand takes only the first argument as a subcommand") {
  CHECK(IsStatusSubcommand({"dslaunch", "status"}));
  CHECK(IsStatusSubcommand({"dslaunch", "logs", "J", "1"}));
  CHECK(!IsStatusSubcommand({"dslaunch", "--nproc_per_node", "2", "status"}));
  CHECK(!IsStatusSubcommand({"dslaunch", "./status"}));
  CHECK(!IsStatusSubcommand({"dslaunch", "status.py"}));
  CHECK(!IsStatusSubcommand({"dslaunch"}));
}

TEST_CASE("ParseStatusCommand reads status and logs") {
  auto s = Parse({"status"});
  REQUIRE(s.ok());
  CHECK(s->kind == StatusCommand::Kind::kStatus);
  CHECK(!s->job_id);
  auto sj = Parse({"status", "job-1"});
  REQUIRE(sj.ok());
  CHECK(sj->job_id == "job-1");
  auto l = Parse({"logs", "--lines", "20", "job-1", "3", "--log_dir", "/l"});
  REQUIRE(l.ok());
  CHECK(l->kind == StatusCommand::Kind::kLogs);
  CHECK(l->job_id == "job-1");
  CHECK(l->rank == 3);
  CHECK(l->lines == 20);
  CHECK(l->log_dir == "/l");
  auto help = Parse({"logs", "--help"});
  REQUIRE(help.ok());
  CHECK(help->print->starts_with("usage: dslaunch logs"));
}

TEST_CASE("ParseStatusCommand says what is wrong, with the usage") {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const Case cases[] = {
      {{"status", "a", "b"}, "expected at most JOB_ID, got 2"},
      {{"logs", "job-1"}, "expected JOB_ID RANK, got 1"},
      {{"logs", "job-1", "x"}, "RANK 'x': expected a whole number >= 0"},
      {{"logs", "job-1", "-1"}, "unknown option '-1'"},
      {{"logs", "--lines"}, "--lines needs a value"},
      {{"status", "--verbose"}, "unknown option '--verbose'"},
      {{"status", "../x"}, "'/' is not allowed"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.says);
    auto r = Parse(c.args);
    REQUIRE(!r.ok());
    CHECK(r.status().message().find(c.says) != std::string::npos);
    CHECK(r.status().message().find("usage: dslaunch") != std::string::npos);
  }
}

TEST_CASE("FormatStatusTable prints the job line and a row per rank") {
  const std::string t = FormatStatusTable(testing::SampleView());
  CHECK(t.starts_with("job 20261125-101500-abc123  running  generation 1 (1 restart)  uptime 1m35s\n"));
  CHECK(t.find("command: dslaunch-worker train.json --lr 3e-4\n") != std::string::npos);
  CHECK(t.find("RANK  HOST") != std::string::npos);
  std::istringstream lines(t);
  std::vector<std::string> rows;
  for (std::string l; std::getline(lines, l);) rows.push_back(l);
  REQUIRE(rows.size() == 7);  // job, command, header, 4 ranks
  CHECK(rows[4].find("failed") != std::string::npos);
  CHECK(rows[4].ends_with("exit 1"));
  CHECK(rows[3].find("1s ago") != std::string::npos);   // node 0's heartbeat, 1.2 s old
  CHECK(rows[3].find("198.5 ms") != std::string::npos);
  CHECK(rows[6].find("running (straggler)") != std::string::npos);
}

TEST_CASE("The state file round-trips and is private to the user") {
  testing::TempDir tmp;
  const std::string dir = JobStateDir(tmp.path(), ::getuid());
  JobStateRecord r{"job-1", "http://127.0.0.1:4242/", 77, "/l/job-1", 1000, "tok"};
  REQUIRE(WriteJobState(dir, r).ok());
  struct stat st {};
  REQUIRE(::stat((dir + "/job-1.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(UserRuntimeBase(tmp.path(), ::getuid()).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  auto all = ReadJobStates(dir);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 1);
  CHECK(all->front().url == r.url);
  CHECK(all->front().pid == 77);
  CHECK(all->front().token == "tok");
  RemoveJobState(dir, "job-1");
  CHECK(ReadJobStates(dir)->empty());
  std::ofstream(dir + "/bad.json") << "{\"job_id\": 1}";
  auto bad = ReadJobStates(dir);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == dir + "/bad.json: job_id: expected a string");
}

TEST_CASE("WriteJobState refuses a base directory others may write to") {
  testing::TempDir tmp;
  const std::string base = UserRuntimeBase(tmp.path(), ::getuid());
  REQUIRE(::mkdir(base.c_str(), 0777) == 0);
  REQUIRE(::chmod(base.c_str(), 0777) == 0);
  Status s = WriteJobState(JobStateDir(tmp.path(), ::getuid()), {"job-1", "http://127.0.0.1:1/", 1, "", 0, ""});
  REQUIRE(!s.ok());
  CHECK(s.message() == "'" + base + "' is writable by other users: run 'chmod go-w " + base + "'");
}

struct Run {
  int code;
  std::string out, err;
};

Run RunCommand(std::vector<std::string> args, const std::string& temp, std::function<bool(int64_t)> alive) {
  auto c = Parse(std::move(args));
  REQUIRE(c.ok());
  std::ostringstream out, err;
  const int code = RunStatusCommand(*c, {temp, ::getuid(), std::move(alive)}, out, err);
  return {code, out.str(), err.str()};
}

TEST_CASE("dslaunch status without a running job says how to get one, and skips a dead launcher's record") {
  testing::TempDir tmp;
  Run none = RunCommand({"status"}, tmp.path(), [](int64_t) { return true; });
  CHECK(none.code == 1);
  CHECK(none.err.find("no running job with a status page") != std::string::npos);
  CHECK(none.err.find("--status_port") != std::string::npos);
  REQUIRE(WriteJobState(JobStateDir(tmp.path(), ::getuid()), {"job-1", "http://127.0.0.1:1/", 99, "", 0, ""}).ok());
  Run stale = RunCommand({"status", "job-1"}, tmp.path(), [](int64_t) { return false; });
  CHECK(stale.code == 1);
  CHECK(stale.err.find("no running job 'job-1'") != std::string::npos);
  Run unreachable = RunCommand({"status"}, tmp.path(), [](int64_t) { return true; });
  CHECK(unreachable.code == 1);
  CHECK(unreachable.err.find("job job-1: cannot reach http://127.0.0.1:1/") != std::string::npos);
}

TEST_CASE("dslaunch status lists the jobs when several run") {
  testing::TempDir tmp;
  const std::string dir = JobStateDir(tmp.path(), ::getuid());
  REQUIRE(WriteJobState(dir, {"job-b", "http://127.0.0.1:2/", 2, "", 0, ""}).ok());
  REQUIRE(WriteJobState(dir, {"job-a", "http://127.0.0.1:1/", 1, "", 0, ""}).ok());
  Run r = RunCommand({"status"}, tmp.path(), [](int64_t) { return true; });
  CHECK(r.code == 0);
  CHECK(r.out.find("job-a   1    http://127.0.0.1:1/\njob-b   2    http://127.0.0.1:2/\n") != std::string::npos);
}

TEST_CASE("dslaunch logs of a finished job prints the newest generation's files of the rank") {
  testing::TempDir tmp;
  const std::string dir = UserRuntimeBase(tmp.path(), ::getuid()) + "/job-1";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/rank1.stdout.log") << "gen 0\n";
  std::ofstream(dir + "/rank1.gen2.stdout.log") << "a\nb\nc\n";
  std::ofstream(dir + "/rank1.gen2.stderr.log") << "oops\n";
  std::ofstream(dir + "/rank10.gen3.stdout.log") << "not rank 1\n";
  Run r = RunCommand({"logs", "--lines", "2", "job-1", "1"}, tmp.path(), [](int64_t) { return false; });
  CHECK(r.code == 0);
  CHECK(r.out == "==> " + dir + "/rank1.gen2.stdout.log <==\nb\nc\n==> " + dir + "/rank1.gen2.stderr.log <==\noops\n");
  Run other = RunCommand({"logs", "job-1", "3"}, tmp.path(), [](int64_t) { return false; });
  CHECK(other.code == 1);
  CHECK(other.err.find("no log of rank 3 in " + dir + ": a rank that ran on another node") != std::string::npos);
  std::ofstream(dir + "/rank0.stdout.log") << "only generation 0\n";
  std::ofstream(dir + "/rank0.stderr.log") << "";
  Run first = RunCommand({"logs", "job-1", "0"}, tmp.path(), [](int64_t) { return false; });
  CHECK(first.code == 0);
  CHECK(first.out == "==> " + dir + "/rank0.stdout.log <==\nonly generation 0\n==> " + dir + "/rank0.stderr.log <==\n");
  Run gone = RunCommand({"logs", "job-2", "0"}, tmp.path(), [](int64_t) { return false; });
  CHECK(gone.code == 1);
  CHECK(gone.err.find("give the same --log_dir DIR") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::launcher

namespace dslaunch::launcher {
namespace {

TEST_CASE("ReadLogTail reads the end of a regular file within its bound, and refuses anything else by name") {
  testing::TempDir tmp;
  const std::string file = tmp.path() + "/rank0.stdout.log";
  std::ofstream(file) << "first\nsecond\nthird\nno newline";
  auto all = ReadLogTail(file, 0);
  REQUIRE(all.ok());
  CHECK(all->text == "first\nsecond\nthird\nno newline\n");
  CHECK(all->file_bytes == 29);
  CHECK(!all->cut);
  CHECK(ReadLogTail(file, 2)->text == "third\nno newline\n");
  // Only the last 20 bytes: the partial line they start in is dropped.
  auto bounded = ReadLogTail(file, 0, 20);
  REQUIRE(bounded.ok());
  CHECK(bounded->cut);
  CHECK(bounded->text == "third\nno newline\n");
  const std::string rule =
      ": dslaunch logs reads only the regular files the agent writes; remove it, or read it yourself if you placed it "
      "there";
  std::filesystem::create_symlink(file, tmp.path() + "/link.log");  // even to a regular file
  auto link = ReadLogTail(tmp.path() + "/link.log", 0);
  REQUIRE(!link.ok());
  CHECK(link.status().code() == StatusCode::kFailedPrecondition);
  CHECK(link.status().message() == "'" + tmp.path() + "/link.log' is a symbolic link" + rule);
  auto dir = ReadLogTail(tmp.path(), 0);
  REQUIRE(!dir.ok());
  CHECK(dir.status().message() == "'" + tmp.path() + "' is a directory" + rule);
  REQUIRE(::mkfifo((tmp.path() + "/fifo.log").c_str(), 0600) == 0);  // opened without waiting for a writer
  auto fifo = ReadLogTail(tmp.path() + "/fifo.log", 0);
  REQUIRE(!fifo.ok());
  CHECK(fifo.status().message() == "'" + tmp.path() + "/fifo.log' is a FIFO" + rule);
  auto missing = ReadLogTail(tmp.path() + "/none.log", 0);
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace dslaunch::launcher
