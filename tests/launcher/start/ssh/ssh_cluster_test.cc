// SSH against real sshds in network namespaces (scripts/netns-cluster.sh): SshConnection's host key
// policy, authentication, timeouts and commands, and SshAgentStarter's Preflight and Start with a
// stand-in agent script. Uses the cluster of the CTest fixture (DSLAUNCH_CLUSTER_DIR), or brings
// up its own 3 nodes when run directly as root; otherwise every case is reported as skipped, or
// fails where the cluster is required (tests/support/skip.h).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "launcher/start/ssh/agent_starter.h"
#include "launcher/start/ssh/connection.h"
#include "tests/launcher/start/ssh/ssh_test_cluster.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

using namespace ssh_test;

// A stand-in for dslaunch-agent: --version answers per node (172.30.77.12 is "old"); otherwise it
// reads the secret from stdin, prints its arguments and the secret, and exits 7, or with
// `--job_id sleep` records its pid and sleeps.
std::string WriteFakeAgent(const TempDir& dir) {
  std::string path = dir.path() + "/fake-agent";
  WriteFile(path,
            "#!/bin/sh\n"
            "if [ \"$1\" = --version ]; then\n"
            "  case \"$SSH_CONNECTION\" in\n"
            "    *' " + Addr(2) + " '*) echo 'dslaunch-agent 0.0.0-old' ;;\n"
            "    *) echo 'dslaunch-agent 0.1.0' ;;\n"
            "  esac\n"
            "  exit 0\n"
            "fi\n"
            "read -r secret\n"
            "echo \"args:$*\"\n"
            "echo \"got:$secret\"\n"
            "echo 'on stderr' >&2\n"
            "case \"$*\" in *'--job_id sleep'*)\n"
            "  echo $$ > \"$(dirname \"$0\")/sleep.pid\"; echo sleeping; exec sleep 60 ;;\n"
            "esac\n"
            "exit 7\n",
            0755);
  return path;
}

pid_t ReadPid(const std::string& path) {
  pid_t pid = 0;
  for (auto start = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - start < kEventTimeout;) {
    std::ifstream(path) >> pid;
    if (pid > 0) return pid;
    std::this_thread::sleep_for(10ms);
  }
  return pid;
}

TEST_CASE("Connect authenticates with the cluster key and Run returns output and exit status") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  auto start = std::chrono::steady_clock::now();
  auto conn = SshConnection::Connect("", Addr(0), c->Options());
  MESSAGE("connect + auth to one node: " << Ms(std::chrono::steady_clock::now() - start) << " ms");
  REQUIRE_MESSAGE(conn.ok(), conn.status().ToString());
  CHECK((*conn)->host() == Addr(0));
  CHECK((*conn)->user() == "root");
  CHECK((*conn)->local_address() == "172.30.77.1");
  auto r = (*conn)->Run("echo hi; echo err >&2; exit 3", std::chrono::steady_clock::now() + kEventTimeout);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->out == "hi\n");
  CHECK(r->err == "err\n");
  CHECK(r->exit == ExitStatus::Exited(3));
  // The session stays usable for further commands.
  auto again = (*conn)->Run("echo \"$SSH_CONNECTION\"", std::chrono::steady_clock::now() + kEventTimeout);
  REQUIRE(again.ok());
  CHECK(Contains(again->out, " " + Addr(0) + " 22"));
  CHECK(again->exit.success());
  auto slow = (*conn)->Run("sleep 5", std::chrono::steady_clock::now() + 200ms);
  CHECK(slow.status().code() == StatusCode::kDeadlineExceeded);
}

TEST_CASE("An unknown host key is refused with its fingerprint, accept-new records it, a changed key is refused") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  SshOptions o = c->Options();
  o.known_hosts = dir.path() + "/known_hosts";  // does not exist yet
  auto keygen = RunProcess({"/usr/bin/ssh-keygen", "-lf", c->dir() + "/node1/ssh_host_ed25519_key.pub"}, 10s);
  REQUIRE(keygen.exit_code == 0);
  std::string fingerprint = keygen.out.substr(keygen.out.find(' ') + 1);
  fingerprint = fingerprint.substr(0, fingerprint.find(' '));  // "SHA256:..."

  auto refused = SshConnection::Connect("", Addr(1), o);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(refused.status().message(), "host key for " + Addr(1) + " is not in known_hosts"));
  CHECK(Contains(refused.status().message(), "ssh-ed25519 " + fingerprint));
  CHECK(Contains(refused.status().message(), "--ssh_accept_new_host_keys"));
  CHECK_FALSE(std::filesystem::exists(o.known_hosts));

  o.accept_new_host_keys = true;
  auto accepted = SshConnection::Connect("", Addr(1), o);
  REQUIRE_MESSAGE(accepted.ok(), accepted.status().ToString());
  std::string recorded = ReadFile(o.known_hosts);
  std::string host_key = c->HostPublicKey(1);
  CHECK(recorded.starts_with(Addr(1) + " " + host_key.substr(0, host_key.rfind(' '))));
  o.accept_new_host_keys = false;
  CHECK(SshConnection::Connect("", Addr(1), o).ok());

  // Node 0's key recorded for node 1's address: node 1's real key is a changed key.
  std::string other_key = c->HostPublicKey(0);
  WriteFile(o.known_hosts, Addr(1) + " " + other_key.substr(0, other_key.rfind(' ')) + "\n", 0600);
  std::string before = ReadFile(o.known_hosts);
  o.accept_new_host_keys = true;
  auto changed = SshConnection::Connect("", Addr(1), o);
  REQUIRE_FALSE(changed.ok());
  CHECK(changed.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(changed.status().message(), "host key for " + Addr(1) + " has CHANGED"));
  CHECK(Contains(changed.status().message(), fingerprint));
  CHECK(ReadFile(o.known_hosts) == before);

  // Hashed entries (`ssh-keygen -H`, HashKnownHosts yes) are recognized too.
  WriteFile(o.known_hosts, ReadFile(c->known_hosts()), 0600);
  REQUIRE(RunProcess({"/usr/bin/ssh-keygen", "-q", "-H", "-f", o.known_hosts}, 10s).exit_code == 0);
  REQUIRE_FALSE(Contains(ReadFile(o.known_hosts), Addr(1)));
  o.accept_new_host_keys = false;
  auto hashed = SshConnection::Connect("", Addr(1), o);
  CHECK_MESSAGE(hashed.ok(), hashed.status().ToString());
}

TEST_CASE("An unreachable host fails within the connect timeout and a closed port at once") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  SshOptions o = c->Options();
  o.connect_timeout = 1s;
  auto start = std::chrono::steady_clock::now();
  auto unreachable = SshConnection::Connect("", "172.30.77.99", o);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(unreachable.status().code() == StatusCode::kUnavailable);
  CHECK(Contains(unreachable.status().message(), "172.30.77.99"));
  CHECK(took < o.connect_timeout + 1s);
  o.port = 2;
  auto refused = SshConnection::Connect("", Addr(0), o);
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  CHECK(Contains(refused.status().message(), Addr(0) + ":2"));
}

TEST_CASE("A key the node does not authorize fails with the list of what was tried") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  std::string key = dir.path() + "/stranger";
  REQUIRE(RunProcess({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key}, 10s).exit_code == 0);
  SshOptions o = c->Options();
  o.identities = {dir.path() + "/missing", key};
  auto r = SshConnection::Connect("", Addr(0), o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(r.status().message(), "ssh to " + Addr(0) + ":22: authentication as 'root' failed; tried: "));
  CHECK(Contains(r.status().message(), "ssh-agent (SSH_AUTH_SOCK not set)"));
  CHECK(Contains(r.status().message(), dir.path() + "/missing (does not exist)"));
  CHECK(Contains(r.status().message(), key + " (refused)"));
}

TEST_CASE("Preflight names every failing node in one report and keeps nothing") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  SshOptions o = c->Options();
  o.connect_timeout = 1s;
  SshAgentStarter starter(o);
  PreflightChecks checks{WriteFakeAgent(dir), "dslaunch-agent 0.1.0", dir.path()};
  std::vector<NodePlan> nodes = {Node(0, Addr(0)), Node(1, Addr(1)), Node(2, "172.30.77.99"), Node(3, Addr(2))};
  Status s = starter.Preflight(nodes, checks);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  INFO(s.message());
  CHECK(s.message().starts_with("pre-flight failed on 2 of 4 nodes; nothing was started:\n"));
  CHECK(Contains(s.message(), "\n  node 2 (172.30.77.99): cannot connect"));
  CHECK(Contains(s.message(), "\n  node 3 (" + Addr(2) + "): agent '" + checks.agent_path +
                                  "' reports 'dslaunch-agent 0.0.0-old', the launcher needs 'dslaunch-agent 0.1.0'"));
  CHECK_FALSE(Contains(s.message(), "node 0"));
  CHECK_FALSE(Contains(s.message(), "node 1"));

  PreflightChecks missing{dir.path() + "/no-agent", "dslaunch-agent 0.1.0", dir.path() + "/no dir"};
  s = starter.Preflight({Node(0, Addr(0))}, missing);
  CHECK(Contains(s.message(),
                 "node 0 (" + Addr(0) + "): working directory '" + dir.path() + "/no dir' does not exist"));
  missing.working_directory = dir.path();
  s = starter.Preflight({Node(0, Addr(0))}, missing);
  CHECK(Contains(s.message(), "node 0 (" + Addr(0) + "): agent '" + dir.path() + "/no-agent' not found"));
}

TEST_CASE("Start runs the agent with the secret on stdin and reports its output and exit code") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  SshAgentStarter starter(c->Options());
  PreflightChecks checks{WriteFakeAgent(dir), "dslaunch-agent 0.1.0", dir.path()};
  std::vector<NodePlan> nodes = {Node(0, Addr(0)), Node(1, Addr(1))};
  auto t0 = std::chrono::steady_clock::now();
  Status preflight = starter.Preflight(nodes, checks);
  REQUIRE_MESSAGE(preflight.ok(), preflight.ToString());
  auto t1 = std::chrono::steady_clock::now();
  Recorder recorders[2];
  std::vector<std::unique_ptr<AgentHandle>> handles;
  for (int i = 0; i < 2; ++i) {
    AgentCommand command{checks.agent_path, "ignored", 4242, "job-1", i, std::nullopt};
    auto handle = starter.Start(nodes[i], command, "s3cret-" + std::to_string(i), recorders[i].Callbacks());
    REQUIRE_MESSAGE(handle.ok(), handle.status().ToString());
    handles.push_back(std::move(handle).value());
  }
  auto t2 = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    Recorder& r = recorders[i];
    REQUIRE(r.WaitExit(kEventTimeout));
    std::lock_guard lock(r.mu);
    const std::string args = "args:--endpoint 172.30.77.1:4242 --job_id job-1 --node_rank " + std::to_string(i);
    CHECK(std::find(r.lines.begin(), r.lines.end(), args) != r.lines.end());
    CHECK(std::find(r.lines.begin(), r.lines.end(), "got:s3cret-" + std::to_string(i)) != r.lines.end());
    CHECK(std::find(r.lines.begin(), r.lines.end(), "on stderr") != r.lines.end());
    CHECK(*r.exit == ExitStatus::Exited(7));
    CHECK(r.detail == "ssh channel to " + Addr(i) + " closed");
  }
  MESSAGE("2 nodes: preflight " << Ms(t1 - t0) << " ms, start " << Ms(t2 - t1) << " ms, agents ended after "
                                << Ms(std::chrono::steady_clock::now() - t0) << " ms");
  handles.clear();
  CHECK(recorders[0].exits == 1);
}

TEST_CASE("Kill ends a running agent with SIGKILL, and a lost connection or a destroyed handle is handled") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  SshAgentStarter starter(c->Options());
  PreflightChecks checks{WriteFakeAgent(dir), "dslaunch-agent 0.1.0", dir.path()};
  AgentCommand command{checks.agent_path, "", 4242, "sleep", 0, std::nullopt};
  const std::string pid_file = dir.path() + "/sleep.pid";

  SUBCASE("Kill") {
    Recorder r;
    auto handle = starter.Start(Node(0, Addr(0)), command, "x", r.Callbacks());
    REQUIRE_MESSAGE(handle.ok(), handle.status().ToString());
    REQUIRE(r.WaitLine("sleeping", kEventTimeout));
    pid_t pid = ReadPid(pid_file);
    (*handle)->Kill();
    REQUIRE(r.WaitExit(kEventTimeout));
    CHECK(*r.exit == ExitStatus::Signaled(SIGKILL));
    CHECK(Contains(r.detail, "killed (KILL signal sent over ssh to " + Addr(0) + ")"));
    CHECK(testing::WaitFor([&] { return !testing::ProcessAlive(pid); }, kEventTimeout));
  }
  SUBCASE("the node's sshd session dies") {
    Recorder r;
    auto handle = starter.Start(Node(1, Addr(1)), command, "x", r.Callbacks());
    REQUIRE_MESSAGE(handle.ok(), handle.status().ToString());
    REQUIRE(r.WaitLine("sleeping", kEventTimeout));
    pid_t pid = ReadPid(pid_file);
    // The sleeper's parent is the sshd process serving this connection (ours, on a test node).
    std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    pid_t sshd_session = std::stoi(stat.substr(stat.rfind(')') + 4));
    REQUIRE(sshd_session > 1);
    ::kill(sshd_session, SIGKILL);
    REQUIRE(r.WaitExit(kEventTimeout));
    CHECK_FALSE(r.exit->has_value());
    CHECK(Contains(r.detail, Addr(1)));
    ::kill(pid, SIGKILL);
  }
  SUBCASE("destroying the handle stops reporting at once") {
    Recorder r;
    auto handle = starter.Start(Node(0, Addr(0)), command, "x", r.Callbacks());
    REQUIRE_MESSAGE(handle.ok(), handle.status().ToString());
    REQUIRE(r.WaitLine("sleeping", kEventTimeout));
    pid_t pid = ReadPid(pid_file);
    auto start = std::chrono::steady_clock::now();
    handle->reset();
    CHECK(std::chrono::steady_clock::now() - start < 1s);
    CHECK(r.exits == 0);
    ::kill(pid, SIGKILL);  // the stand-in keeps running without its channel; it is ours to end
  }
}

}  // namespace
}  // namespace dslaunch::launcher
