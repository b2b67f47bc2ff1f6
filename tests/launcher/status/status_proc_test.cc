// dslaunch --status_port 0 with real agents and workers: the page, the JSON, the metrics and the
// log tails over real TCP while the job runs; `dslaunch status` and `dslaunch logs` through the
// state file; and after the end, the state file gone and `dslaunch logs` reading the log files.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "launcher/status/job_state_file.h"
#include "launcher/status/status_client.h"
#include "tests/support/raw_connection.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

using testing::RunProcess;
using testing::Subprocess;
using testing::TempDir;
using testing::WaitFor;

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
constexpr auto kTimeout = std::chrono::seconds(60);

// Two ranks that print a line each and wait for `stop` to appear in `dir`.
std::vector<std::string> JobArgv(const TempDir& dir, const std::string& job_id, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {kLauncher, "--job_id", job_id, "--nproc_per_node", "2", "--grace_period", "2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const std::string script = "echo \"hello from rank $RANK\"; while [ ! -e " + dir.path() + "/stop ]; do sleep 0.05; done";
  argv.insert(argv.end(), {"--no_python", "/bin/sh", "-c", script});
  return argv;
}

std::optional<JobStateRecord> StateRecord(const TempDir& dir, const std::string& job_id) {
  auto records = ReadJobStates(JobStateDir(dir.path(), ::getuid()));
  if (!records.ok()) return std::nullopt;
  for (const auto& r : *records) {
    if (r.job_id == job_id) return r;
  }
  return std::nullopt;
}

TEST_CASE("dslaunch --status_port 0 serves the running job, and dslaunch status and logs find it") {
  TempDir dir;
  const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
  Subprocess launcher(JobArgv(dir, "status-job", {"--status_port", "0"}), env);
  std::optional<JobStateRecord> record;
  REQUIRE(WaitFor([&] { return (record = StateRecord(dir, "status-job")).has_value(); }, kTimeout));
  CHECK(record->pid == launcher.pid());
  CHECK(record->url.starts_with("http://127.0.0.1:"));
  CHECK(record->token.size() == 64);
  CHECK(record->token.find_first_not_of("0123456789abcdef") == std::string::npos);
  // Both ranks running and their lines in the launcher's tail.
  REQUIRE(WaitFor([&] {
    auto logs = HttpGet(record->url, record->token, "/api/logs?rank=1");
    return logs.ok() && logs->body == "hello from rank 1\n";
  }, kTimeout));
  nlohmann::json view;
  REQUIRE(WaitFor([&] {  // the launcher publishes its view at most every 200 ms
    auto job = HttpGet(record->url, record->token, "/api/job");
    if (!job.ok()) return false;
    view = nlohmann::json::parse(job->body);
    return view["ranks"].size() == 2 && view["ranks"][0]["state"] == "running" && view["ranks"][1]["state"] == "running";
  }, kTimeout));
  CHECK(view["job_id"] == "status-job");
  REQUIRE(view["ranks"].size() == 2);
  CHECK(view["ranks"][0]["pid"].get<int64_t>() > 0);
  // Without the token (what any other user of the machine has): nothing but the 401.
  for (const char* target : {"/", "/api/job", "/api/logs?rank=1", "/metrics"}) {
    CAPTURE(target);
    auto stranger = HttpGet(record->url, "", target);
    REQUIRE(stranger.ok());
    CHECK(stranger->status == 401);
    CHECK(stranger->body.find("hello") == std::string::npos);
  }
  // The token is on no command line and in no environment of the job's processes (ps, /proc).
  for (const int64_t pid : {static_cast<int64_t>(launcher.pid()), view["ranks"][0]["pid"].get<int64_t>(),
                            view["ranks"][1]["pid"].get<int64_t>()}) {
    for (const char* file : {"cmdline", "environ"}) {
      CAPTURE(pid);
      CAPTURE(file);
      std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      CHECK(!text.empty());
      CHECK(text.find(record->token) == std::string::npos);
    }
  }
  auto page = HttpGet(record->url, record->token, "/");
  REQUIRE(page.ok());
  CHECK(page->body.find("<table id=\"ranks\">") != std::string::npos);
  auto metrics = HttpGet(record->url, record->token, "/metrics");
  REQUIRE(metrics.ok());
  CHECK(metrics->body.find("dslaunch_job_info{job_id=\"status-job\"} 1\n") != std::string::npos);
  if (std::filesystem::exists("/usr/bin/promtool")) {  // the unit tier requires it (prometheus_text_test.cc)
    std::ofstream(dir.path() + "/metrics.txt") << metrics->body;
    auto check = RunProcess({"/bin/sh", "-c", "/usr/bin/promtool check metrics < " + dir.path() + "/metrics.txt"}, kTimeout);
    INFO("promtool: " << check.out << check.err);
    CHECK(check.exit_code == 0);
  }

  auto status = RunProcess({kLauncher, "status"}, kTimeout, env);
  CHECK(status.exit_code == 0);
  CHECK(status.out.starts_with("job status-job  "));
  CHECK(status.out.find("page: " + record->url) != std::string::npos);
  auto logs = RunProcess({kLauncher, "logs", "status-job", "0"}, kTimeout, env);
  CHECK(logs.exit_code == 0);
  CHECK(logs.out == "hello from rank 0\n");

  std::ofstream(dir.path() + "/stop") << "";
  auto end = launcher.Wait(kTimeout);
  INFO(end.err);
  CHECK(end.exit_code == 0);
  CHECK(end.err.find("dslaunch: status page at " + record->url + "?token=" + record->token + "\n") != std::string::npos);
  CHECK(!StateRecord(dir, "status-job"));  // removed at exit
  CHECK(!HttpGet(record->url, record->token, "/api/job", std::chrono::seconds(2)).ok());
  // The finished job's log, from its file.
  auto after = RunProcess({kLauncher, "logs", "status-job", "1"}, kTimeout, env);
  CHECK(after.exit_code == 0);
  CHECK(after.out.find("rank1.stdout.log <==\nhello from rank 1\n") != std::string::npos);
}

// An event stream of the page (/api/events) on a raw socket, as a browser's EventSource holds it.
class EventStream {
 public:
  EventStream(const std::string& url, const std::string& token) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    auto base = ParseBaseUrl(url);
    REQUIRE(base.ok());
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(base->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    const std::string request = "GET /api/events?token=" + token + " HTTP/1.1\r\nHost: 127.0.0.1:" +
                                std::to_string(base->port) + "\r\n\r\n";
    REQUIRE(::write(fd_, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  }
  ~EventStream() { ::close(fd_); }

  // Reads until `until` appears in what was read, or the server closes (true), or the deadline.
  bool Read(const std::string& until, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!until.empty() && text_.find(until) != std::string::npos) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[8192];
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0) return true;
      text_.append(buf, static_cast<size_t>(n));
    }
    return false;
  }
  // The JSON of the last "data:" event read.
  nlohmann::json LastEvent() const {
    const size_t at = text_.rfind("data: ");
    if (at == std::string::npos) return nullptr;
    return nlohmann::json::parse(text_.substr(at + 6, text_.find("\n\n", at) - at - 6));
  }

 private:
  int fd_;
  std::string text_;
};

TEST_CASE("A page's event stream open when the job ends gets its outcome, exit code and duration, then its end") {
  struct Case {
    const char* name;
    const char* rank1;  // rank 1's last command, after `stop` appears
    int exit_code;
    const char* outcome;
  };
  for (const Case& c : {Case{"succeeds", "true", 0, "succeeded"}, Case{"fails", "exit 3", 3, "failed"}}) {
    CAPTURE(c.name);
    TempDir dir;
    const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
    const std::string job_id = std::string("end-") + c.name;
    const std::string script = "while [ ! -e " + dir.path() + "/stop ]; do sleep 0.05; done; if [ \"$RANK\" = 1 ]; then " +
                               c.rank1 + "; fi";
    Subprocess launcher({kLauncher, "--job_id", job_id, "--nproc_per_node", "2", "--grace_period", "2",
                         "--status_port", "0", "--no_python", "/bin/sh", "-c", script},
                        env);
    std::optional<JobStateRecord> record;
    REQUIRE(WaitFor([&] { return (record = StateRecord(dir, job_id)).has_value(); }, kTimeout));
    EventStream stream(record->url, record->token);
    stream.Read("\"state\":\"running\"", kTimeout);  // the stream is open and the job runs
    REQUIRE(stream.LastEvent().is_object());
    std::ofstream(dir.path() + "/stop") << "";
    CHECK(stream.Read("", kTimeout));  // the server closes it as the launcher exits
    auto end = launcher.Wait(kTimeout);
    INFO(end.err);
    CHECK(end.exit_code == c.exit_code);
    const nlohmann::json last = stream.LastEvent();
    REQUIRE(last.is_object());
    CHECK(last["state"] == "finished");
    CHECK(last["outcome"] == c.outcome);
    CHECK(last["exit_code"] == c.exit_code);
    REQUIRE(last["ended_ms"].is_number_integer());
    CHECK(last["duration_ms"] == last["ended_ms"].get<int64_t>() - last["started_ms"].get<int64_t>());
    CHECK(last["duration_ms"].get<int64_t>() >= 0);
    CHECK(last["ranks"][1]["exit_code"] == c.exit_code);
  }
}

TEST_CASE("Output that a full log file cannot take still reaches the status page's tail") {
  TempDir dir;
  const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
  // Log files may grow to 64 KiB (RLIMIT_FSIZE, inherited by the agent): rank 1's 20,000 lines
  // (140,000 bytes) do not fit (docs/launcher.md, "Log files").
  // The console's 20,000 lines go to /dev/null: a test pipe that nobody drains until the end
  // would fill and hold the launcher in its write.
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$@\" > /dev/null", "sh",
                                   "/usr/bin/prlimit", "--fsize=65536", "--", kLauncher, "--job_id", "full-log",
                                   "--nproc_per_node", "2", "--status_port", "0", "--log_dir", dir.path() + "/L",
                                   "--no_python", "/bin/sh", "-c",
                                   "if [ \"$RANK\" = 1 ]; then seq 100000 119999; fi; while [ ! -e " + dir.path() +
                                       "/stop ]; do sleep 0.05; done"};
  Subprocess launcher(argv, env);
  std::optional<JobStateRecord> record;
  REQUIRE(WaitFor([&] { return (record = StateRecord(dir, "full-log")).has_value(); }, kTimeout));
  // The page's tail (kept in the launcher's memory) has the last line; the file does not.
  CHECK(WaitFor([&] {
    auto logs = HttpGet(record->url, record->token, "/api/logs?rank=1&lines=1");
    return logs.ok() && logs->body == "119999\n";
  }, kTimeout));
  const std::string file = dir.path() + "/L/full-log/rank1.stdout.log";
  CHECK(std::filesystem::file_size(file) == 65536);
  std::ofstream(dir.path() + "/stop") << "";
  auto end = launcher.Wait(kTimeout);
  INFO(end.err);
  CHECK(end.exit_code == 0);
  CHECK(end.err.find("dslaunch:   rank 1, stdout: 10638 lines (74464 bytes) not in '" + file + "': File too large\n") !=
        std::string::npos);
}

TEST_CASE("dslaunch without --status_port serves nothing and dslaunch status says how to get a page") {
  TempDir dir;
  const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
  std::ofstream(dir.path() + "/stop") << "";
  auto r = RunProcess(JobArgv(dir, "no-page", {}), kTimeout, env);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("status page") == std::string::npos);
  CHECK(!std::filesystem::exists(JobStateDir(dir.path(), ::getuid())));
  auto status = RunProcess({kLauncher, "status"}, kTimeout, env);
  CHECK(status.exit_code == 1);
  CHECK(status.err.find("start one with --status_port PORT") != std::string::npos);
}

TEST_CASE("dslaunch --status_port on a port in use fails before starting anything") {
  TempDir dir;
  const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
  Subprocess first(JobArgv(dir, "first", {"--status_port", "0"}), env);
  std::optional<JobStateRecord> record;
  REQUIRE(WaitFor([&] { return (record = StateRecord(dir, "first")).has_value(); }, kTimeout));
  auto url = ParseBaseUrl(record->url);
  REQUIRE(url.ok());
  auto second = RunProcess(JobArgv(dir, "second", {"--status_port", std::to_string(url->port)}), kTimeout, env);
  CHECK(second.exit_code == 75);
  CHECK(second.err.find("dslaunch: --status_port " + std::to_string(url->port) + ": cannot listen on 127.0.0.1:") == 0);
  CHECK(second.out.find("hello") == std::string::npos);
  std::ofstream(dir.path() + "/stop") << "";
  CHECK(first.Wait(kTimeout).exit_code == 0);
}

// One request over a plain socket to `ip`:`port`, with the Host header and token given; the
// response's status code, or 0 when the connection was refused.
int RawGet(const std::string& ip, uint16_t port, const std::string& host, const std::string& token,
           const std::string& target) {
  testing::RawConnection c(ip, port);
  if (!c.connected()) return 0;
  std::string request = "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n";
  if (!token.empty()) request += "Authorization: Bearer " + token + "\r\n";
  c.Send(request + "\r\n");
  const std::string response = c.Read("\r\n");
  REQUIRE(response.starts_with("HTTP/1.1 "));
  return std::stoi(response.substr(9, 3));
}

// This machine's first IPv4 address that is not loopback ("" when it has none).
std::string NonLoopbackAddress() {
  auto r = RunProcess({"/usr/bin/hostname", "-I"}, kTimeout);
  std::istringstream words(r.out);
  std::string word;
  while (words >> word) {
    in_addr a{};
    if (::inet_pton(AF_INET, word.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) != 127) return word;
  }
  return "";
}

TEST_CASE("--status_bind 0.0.0.0 serves another address of the machine, which the default loopback bind does not") {
  const std::string other = NonLoopbackAddress();
  if (other.empty()) {
    std::printf("%s: network: this machine has no IPv4 address besides loopback\n", testing::kSkipToken);
    return;
  }
  for (bool open : {true, false}) {
    CAPTURE(open);
    TempDir dir;
    const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
    std::vector<std::string> extra = {"--status_port", "0"};
    if (open) extra.insert(extra.end(), {"--status_bind", "0.0.0.0"});
    Subprocess launcher(JobArgv(dir, "bind", extra), env);
    std::optional<JobStateRecord> record;
    REQUIRE(WaitFor([&] { return (record = StateRecord(dir, "bind")).has_value(); }, kTimeout));
    auto url = ParseBaseUrl(record->url);
    REQUIRE(url.ok());
    const std::string host = other + ":" + std::to_string(url->port);
    CHECK(RawGet(other, url->port, host, record->token, "/api/job") == (open ? 200 : 0));
    std::ofstream(dir.path() + "/stop") << "";
    CHECK(launcher.Wait(kTimeout).exit_code == 0);
  }
}

TEST_CASE("--status_host NAME lets requests for that name in, others stay refused; --status_metrics_open serves "
          "/metrics without the token, and nothing else") {
  TempDir dir;
  const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
  Subprocess launcher(
      JobArgv(dir, "named", {"--status_port", "0", "--status_host", "trainer.example", "--status_metrics_open"}), env);
  std::optional<JobStateRecord> record;
  REQUIRE(WaitFor([&] { return (record = StateRecord(dir, "named")).has_value(); }, kTimeout));
  auto url = ParseBaseUrl(record->url);
  REQUIRE(url.ok());
  const std::string port = ":" + std::to_string(url->port);
  CHECK(RawGet("127.0.0.1", url->port, "trainer.example" + port, record->token, "/api/job") == 200);
  CHECK(RawGet("127.0.0.1", url->port, "other.example" + port, record->token, "/api/job") == 403);
  CHECK(RawGet("127.0.0.1", url->port, "127.0.0.1" + port, "", "/metrics") == 200);
  CHECK(RawGet("127.0.0.1", url->port, "127.0.0.1" + port, "", "/api/job") == 401);
  std::ofstream(dir.path() + "/stop") << "";
  CHECK(launcher.Wait(kTimeout).exit_code == 0);
  // Without the option /metrics needs the token.
  TempDir closed_dir;
  Subprocess closed(JobArgv(closed_dir, "closed", {"--status_port", "0"}), {"TMPDIR=" + closed_dir.path()});
  std::optional<JobStateRecord> closed_record;
  REQUIRE(WaitFor([&] { return (closed_record = StateRecord(closed_dir, "closed")).has_value(); }, kTimeout));
  auto closed_url = ParseBaseUrl(closed_record->url);
  REQUIRE(closed_url.ok());
  CHECK(RawGet("127.0.0.1", closed_url->port, "127.0.0.1:" + std::to_string(closed_url->port), "", "/metrics") == 401);
  std::ofstream(closed_dir.path() + "/stop") << "";
  CHECK(closed.Wait(kTimeout).exit_code == 0);
}

// How many different heartbeat times node 0 shows on the page of a job run with `options`
// during `window`, sampled every 50 ms.
size_t HeartbeatsSeen(const std::vector<std::string>& options, std::chrono::milliseconds window) {
  TempDir dir;
  const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
  std::vector<std::string> extra = {"--status_port", "0"};
  extra.insert(extra.end(), options.begin(), options.end());
  Subprocess launcher(JobArgv(dir, "beats", extra), env);
  std::optional<JobStateRecord> record;
  REQUIRE(WaitFor([&] { return (record = StateRecord(dir, "beats")).has_value(); }, kTimeout));
  std::set<int64_t> seen;
  const auto end = std::chrono::steady_clock::now() + window;
  while (std::chrono::steady_clock::now() < end) {
    auto job = HttpGet(record->url, record->token, "/api/job");
    if (job.ok()) {
      const nlohmann::json view = nlohmann::json::parse(job->body);
      if (view["nodes"].size() == 1 && view["nodes"][0]["last_heartbeat_ms"].get<int64_t>() > 0) {
        seen.insert(view["nodes"][0]["last_heartbeat_ms"].get<int64_t>());
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ofstream(dir.path() + "/stop") << "";
  CHECK(launcher.Wait(kTimeout).exit_code == 0);
  return seen.size();
}

TEST_CASE("--heartbeat_interval is the agents' pace: a quarter second shows four times the heartbeats of the default") {
  // In 4 s: about 16 heartbeats at 0.25 s, about 4 at the default 1 s (the page is published at
  // most every 200 ms, so a fast pace is undercounted, never overcounted).
  const size_t fast = HeartbeatsSeen({"--heartbeat_interval", "0.25"}, std::chrono::seconds(4));
  const size_t default_pace = HeartbeatsSeen({}, std::chrono::seconds(4));
  CAPTURE(fast);
  CAPTURE(default_pace);
  CHECK(fast >= 8);
  CHECK(default_pace <= 6);
}

TEST_CASE("dslaunch logs opens only regular files: a link to /dev/zero and a FIFO are refused at once, naming the file") {
  TempDir dir;
  const std::vector<std::string> env = {"TMPDIR=" + dir.path()};
  const std::string logs = dir.path() + "/logs";
  std::ofstream(dir.path() + "/stop") << "";
  auto run = RunProcess(JobArgv(dir, "tricked", {"--log_dir", logs}), kTimeout, env);
  REQUIRE(run.exit_code == 0);
  const std::string job_dir = logs + "/tricked";
  auto fine = RunProcess({kLauncher, "logs", "--log_dir", logs, "tricked", "0"}, kTimeout, env);
  CHECK(fine.exit_code == 0);
  CHECK(fine.out == "==> " + job_dir + "/rank0.stdout.log <==\nhello from rank 0\n==> " + job_dir +
                        "/rank0.stderr.log <==\n");
  // Someone who can write to the job directory replaces rank 0's log with a link to /dev/zero,
  // and rank 1's with a FIFO nobody writes to.
  REQUIRE(std::filesystem::remove(job_dir + "/rank0.stdout.log"));
  std::filesystem::create_symlink("/dev/zero", job_dir + "/rank0.stdout.log");
  REQUIRE(std::filesystem::remove(job_dir + "/rank1.stderr.log"));
  REQUIRE(::mkfifo((job_dir + "/rank1.stderr.log").c_str(), 0600) == 0);
  const std::string rule =
      ": dslaunch logs reads only the regular files the agent writes; remove it, or read it yourself if you placed it "
      "there\n";
  auto zero = RunProcess({kLauncher, "logs", "--log_dir", logs, "tricked", "0"}, kTimeout, env);
  CHECK(zero.exit_code == 1);
  CHECK(zero.out.empty());
  CHECK(zero.err == "dslaunch: job tricked rank 0: '" + job_dir + "/rank0.stdout.log' is a symbolic link" + rule);
  auto fifo = RunProcess({kLauncher, "logs", "--log_dir", logs, "tricked", "1"}, kTimeout, env);
  CHECK(fifo.exit_code == 1);
  CHECK(fifo.out.empty());
  CHECK(fifo.err == "dslaunch: job tricked rank 1: '" + job_dir + "/rank1.stderr.log' is a FIFO" + rule);
}

TEST_CASE("A program named status runs when given by its path: only a first argument \"status\" is the subcommand") {
  TempDir dir;
  const std::string program = dir.path() + "/status";
  std::ofstream(program) << "#!/bin/sh\necho ran status $RANK\n";
  std::filesystem::permissions(program, std::filesystem::perms::owner_all);
  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--no_python", program}, kTimeout,
                      {"TMPDIR=" + dir.path()});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("ran status 0") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::launcher
