#include <doctest/doctest.h>

#include <algorithm>

#include "agent/workers/line_splitter.h"
#include "agent/workers/log_files.h"
#include "agent/workers/node_workers.h"
#include "agent/node/secret_dir.h"
#include "agent/workers/worker_env_on_node.h"
#include "common/control_messages.h"

namespace dslaunch::agent {
namespace {

TEST_CASE("LineSplitter yields whole lines across chunk boundaries") {
  LineSplitter s;
  CHECK(s.Feed("hel").empty());
  CHECK(s.Feed("lo\nwor") == std::vector<std::string>{"hello"});
  CHECK(s.Feed("ld\n\nlast") == std::vector<std::string>{"world", ""});
  CHECK(s.Finish() == std::vector<std::string>{"last"});
  CHECK(s.Finish().empty());
}

TEST_CASE("LineSplitter cuts a line longer than the limit into pieces") {
  LineSplitter s;
  std::string big(kMaxLineBytes * 2 + 10, 'x');
  auto lines = s.Feed(big);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].size() == kMaxLineBytes);
  CHECK(lines[1].size() == kMaxLineBytes);
  CHECK(s.Feed("\n") == std::vector<std::string>{std::string(10, 'x')});
  CHECK(s.Finish().empty());
}

// The lengths of `lines`: a failed comparison of 64 KiB lines is unreadable.
std::vector<size_t> Lengths(const std::vector<std::string>& lines) {
  std::vector<size_t> n;
  for (const auto& l : lines) n.push_back(l.size());
  return n;
}

TEST_CASE("LineSplitter keeps a line of exactly the limit whole, in whatever read its end arrives") {
  const std::string exact(kMaxLineBytes, 'y');
  LineSplitter s;
  SUBCASE("newline in the same read") {
    auto lines = s.Feed(exact + "\nz\n");
    CHECK(Lengths(lines) == std::vector<size_t>{kMaxLineBytes, 1});
    CHECK(lines == std::vector<std::string>{exact, "z"});
  }
  SUBCASE("newline in the next read") {
    CHECK(s.Feed(exact).empty());
    auto lines = s.Feed("\nz\n");
    CHECK(Lengths(lines) == std::vector<size_t>{kMaxLineBytes, 1});
    CHECK(lines == std::vector<std::string>{exact, "z"});
  }
  SUBCASE("carriage return and newline in the next reads") {
    CHECK(s.Feed(exact).empty());
    CHECK(s.Feed("\r") == std::vector<std::string>{exact + "\r"});
    CHECK(s.Feed("\n") == std::vector<std::string>{exact});
  }
  SUBCASE("one more byte in the next read: the full piece is cut there") {
    CHECK(s.Feed(exact).empty());
    auto lines = s.Feed("w\n");
    CHECK(Lengths(lines) == std::vector<size_t>{kMaxLineBytes, 1});
    CHECK(lines == std::vector<std::string>{exact, "w"});
  }
  SUBCASE("the line built over many reads") {
    for (size_t at = 0; at < kMaxLineBytes; at += 4096) CHECK(s.Feed(exact.substr(at, 4096)).empty());
    CHECK(s.Feed("\n") == std::vector<std::string>{exact});
  }
  CHECK(s.Finish().empty());
}

TEST_CASE("LineSplitter returns carriage-return pieces as transient lines, at once") {
  LineSplitter s;
  // Our progress bar: "bar\r" per step, then ordinary lines.
  CHECK(s.Feed("[#   ] 1/4\r") == std::vector<std::string>{"[#   ] 1/4\r"});
  CHECK(control::IsTransientLine("[#   ] 1/4\r"));
  CHECK(s.Feed("[##  ] 2/4\rstep 2 | loss 1\n") == std::vector<std::string>{"[##  ] 2/4\r", "step 2 | loss 1"});
  CHECK_FALSE(control::IsTransientLine("step 2 | loss 1"));
  // tqdm: a leading '\r' (no empty piece), and the final state kept by its newline, even when the
  // '\r' and the '\n' arrive in different chunks.
  CHECK(s.Feed("\r 50%|#\r100%|##\r") == std::vector<std::string>{" 50%|#\r", "100%|##\r"});
  CHECK(s.Feed("\n") == std::vector<std::string>{"100%|##"});
  // Windows line endings: each line once as transient, then as an ordinary line.
  CHECK(s.Feed("a\r\nb\r\n") == std::vector<std::string>{"a\r", "a", "b\r", "b"});
  CHECK(s.Finish().empty());
}

TEST_CASE("TailBuffer keeps the last lines in order") {
  TailBuffer t(3);
  for (int i = 0; i < 5; ++i) t.Add(std::to_string(i));
  CHECK(t.Lines() == std::vector<std::string>{"2", "3", "4"});
  TailBuffer none(0);
  none.Add("x");
  CHECK(none.Lines().empty());
}

TEST_CASE("NodeWorkers moves each worker from running to exited to reported") {
  NodeWorkers w;
  size_t a = w.Add(0, 100);
  size_t b = w.Add(1, 101);
  CHECK_FALSE(w.OnReaped(999, ExitStatus::Exited(0)).has_value());  // not ours
  CHECK(w.OnReaped(100, ExitStatus::Exited(0)) == a);
  CHECK(w.state(a) == WorkerState::kExited);
  CHECK(w.RunningGroups() == std::vector<pid_t>{101});
  w.MarkReported(a);
  CHECK_FALSE(w.AllReported());
  w.BeginStop();
  CHECK(w.OnReaped(101, ExitStatus::Signaled(15)) == b);
  CHECK(w.stopped(b));
  CHECK_FALSE(w.stopped(a));
  w.MarkReported(b);
  CHECK(w.AllReported());
  CHECK_FALSE(w.AllSucceeded());
}

TEST_CASE("Worker transitions other than running->exited->reported are illegal") {
  CHECK(IsLegalTransition(WorkerState::kRunning, WorkerState::kExited));
  CHECK(IsLegalTransition(WorkerState::kExited, WorkerState::kReported));
  CHECK_FALSE(IsLegalTransition(WorkerState::kRunning, WorkerState::kReported));
  CHECK_FALSE(IsLegalTransition(WorkerState::kReported, WorkerState::kRunning));
}

TEST_CASE("DefaultOmpThreads shares the cores among the node's workers, at least one each") {
  struct Case {
    int cores;
    int workers;
    int want;
  };
  const std::vector<Case> cases = {
      {8, 2, 4}, {8, 3, 2}, {2, 4, 1}, {1, 1, 1}, {16, 16, 1}, {64, 8, 8}, {0, 1, 1}, {-1, 2, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.cores);
    CAPTURE(c.workers);
    CHECK(DefaultOmpThreads(c.cores, c.workers) == c.want);
  }
}

TEST_CASE("CompleteWorkerEnvironment layers the plan over the node and adds node-local values") {
  std::map<std::string, std::string> base = {{"PATH", "/bin"}, {"RANK", "stale"}, {"WORLD_SIZE", "stale"}};
  std::map<std::string, std::string> node_planned = {
      {"RANK", "node"}, {"WORLD_SIZE", "8"}, {"DSLAUNCH_STORE", "<launcher>:1"}};
  std::map<std::string, std::string> worker_planned = {{"RANK", "3"}};
  NodeFacts node{8, 2, "/tmp/x/store.secret", "10.1.1.1:5000"};
  auto env = CompleteWorkerEnvironment(base, node_planned, worker_planned, node);
  CHECK(env == std::vector<std::string>{"DSLAUNCH_STORE=10.1.1.1:5000",
                                        "DSLAUNCH_STORE_SECRET_FILE=/tmp/x/store.secret",
                                        "NCCL_ASYNC_ERROR_HANDLING=1", "OMP_NUM_THREADS=4", "PATH=/bin", "RANK=3",
                                        "TORCH_NCCL_ASYNC_ERROR_HANDLING=1", "WORLD_SIZE=8"});
  base["OMP_NUM_THREADS"] = "7";
  env = CompleteWorkerEnvironment(base, node_planned, worker_planned, node);
  CHECK(std::find(env.begin(), env.end(), "OMP_NUM_THREADS=7") != env.end());
}

TEST_CASE("CompleteWorkerEnvironment gives the node's store proxy as DSLAUNCH_STORE and the launcher's address beside it") {
  NodeFacts node{8, 2, "/tmp/x/store.secret", "unix:/tmp/x/store.sock"};
  node.launcher_address = "10.1.1.1:5000";
  auto env = CompleteWorkerEnvironment({}, {{"DSLAUNCH_STORE", "<launcher>:1"}}, {}, node);
  CHECK(std::find(env.begin(), env.end(), "DSLAUNCH_STORE=unix:/tmp/x/store.sock") != env.end());
  CHECK(std::find(env.begin(), env.end(), "DSLAUNCH_LAUNCHER_ADDRESS=10.1.1.1:5000") != env.end());
}

TEST_CASE("CompleteWorkerEnvironment gives a core-bound worker one OpenMP thread per core of its set, the user's setting winning") {
  NodeFacts node{8, 2, "/tmp/x/store.secret", "10.1.1.1:5000"};
  node.bound_cores = 3;  // 8 cores would give 4 each unbound
  auto has = [](const std::vector<std::string>& env, const std::string& entry) {
    return std::find(env.begin(), env.end(), entry) != env.end();
  };
  CHECK(has(CompleteWorkerEnvironment({}, {}, {}, node), "OMP_NUM_THREADS=3"));
  node.bound_cores = 1;
  CHECK(has(CompleteWorkerEnvironment({}, {}, {}, node), "OMP_NUM_THREADS=1"));
  node.bound_cores = 3;
  CHECK(has(CompleteWorkerEnvironment({{"OMP_NUM_THREADS", "5"}}, {}, {}, node), "OMP_NUM_THREADS=5"));
  CHECK(has(CompleteWorkerEnvironment({}, {{"OMP_NUM_THREADS", "6"}}, {}, node), "OMP_NUM_THREADS=6"));
}

TEST_CASE("CompleteWorkerEnvironment defaults NCCL's, Gloo's and TensorPipe's interface to the route to the master, each user setting winning") {
  NodeFacts node{8, 2, "/tmp/x/store.secret", "10.1.1.1:5000", "", "eth1"};
  auto has = [](const std::vector<std::string>& env, const std::string& entry) {
    return std::find(env.begin(), env.end(), entry) != env.end();
  };
  auto env = CompleteWorkerEnvironment({}, {}, {}, node);
  CHECK(has(env, "NCCL_SOCKET_IFNAME=eth1"));
  CHECK(has(env, "GLOO_SOCKET_IFNAME=eth1"));
  CHECK(has(env, "TP_SOCKET_IFNAME=eth1"));
  // Set on the node, or exported by the user through the plan: theirs stays, and NCCL's pattern
  // syntax is not copied to Gloo, which does not read it.
  env = CompleteWorkerEnvironment({{"NCCL_SOCKET_IFNAME", "^lo,docker"}}, {{"GLOO_SOCKET_IFNAME", "ib0"}}, {}, node);
  CHECK(has(env, "NCCL_SOCKET_IFNAME=^lo,docker"));
  CHECK(has(env, "GLOO_SOCKET_IFNAME=ib0"));
  CHECK(has(env, "TP_SOCKET_IFNAME=eth1"));
  // An interface that could not be found sets none of them.
  node.master_interface.clear();
  env = CompleteWorkerEnvironment({}, {}, {}, node);
  CHECK(std::none_of(env.begin(), env.end(), [](const std::string& e) { return e.find("SOCKET_IFNAME=") != std::string::npos; }));
}

TEST_CASE("CompleteWorkerEnvironment sets PyTorch's NCCL error handling under both names unless the user set either") {
  NodeFacts node{8, 2, "/tmp/x/store.secret", "10.1.1.1:5000", "", "eth1"};
  auto has = [](const std::vector<std::string>& env, const std::string& entry) {
    return std::find(env.begin(), env.end(), entry) != env.end();
  };
  auto named = [](const std::vector<std::string>& env, const std::string& name) {
    return std::count_if(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; });
  };
  auto env = CompleteWorkerEnvironment({}, {}, {}, node);
  CHECK(has(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"));
  CHECK(has(env, "NCCL_ASYNC_ERROR_HANDLING=1"));
  env = CompleteWorkerEnvironment({}, {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}}, {}, node);
  CHECK(has(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING=0"));
  CHECK(named(env, "NCCL_ASYNC_ERROR_HANDLING") == 0);
  env = CompleteWorkerEnvironment({{"NCCL_ASYNC_ERROR_HANDLING", "3"}}, {}, {}, node);
  CHECK(has(env, "NCCL_ASYNC_ERROR_HANDLING=3"));
  CHECK(named(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == 0);
}

TEST_CASE("CompleteWorkerEnvironment never passes the job secret on, from the node or from the plan") {
  NodeFacts node{2, 1, "/tmp/x/store.secret", "", ""};
  auto env = CompleteWorkerEnvironment({{"DSLAUNCH_JOB_SECRET", "s3cret"}, {"PATH", "/bin"}},
                                       {{"DSLAUNCH_JOB_SECRET", "node-planned"}}, {{"DSLAUNCH_JOB_SECRET", "planned"}},
                                       node);
  CHECK(env == std::vector<std::string>{"DSLAUNCH_STORE_SECRET_FILE=/tmp/x/store.secret",
                                        "NCCL_ASYNC_ERROR_HANDLING=1", "OMP_NUM_THREADS=2", "PATH=/bin",
                                        "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"});
}

TEST_CASE("Secret directory names carry the agent's pid and parse back from the end") {
  CHECK(SecretDirName("20261122-185501-56270e", 3, 4242) == "dslaunch-20261122-185501-56270e-n3-4242");
  struct Row {
    const char* name;
    std::optional<pid_t> pid;
  };
  for (const Row& row : {Row{"dslaunch-20261122-185501-56270e-n3-4242", 4242}, Row{"dslaunch-j-n0-1", 1},
                         Row{"dslaunch-a-n1-b-n2-77", 77}, Row{"dslaunch-j-n0-", std::nullopt},
                         Row{"dslaunch-j-n-5", std::nullopt}, Row{"dslaunch-j-nx-5", std::nullopt},
                         Row{"dslaunch-n0-5", std::nullopt}, Row{"dslaunch-j-n0-12a", std::nullopt},
                         Row{"dslaunch-j-n0-1234567890", std::nullopt}, Row{"other-j-n0-5", std::nullopt},
                         Row{"dslaunch", std::nullopt}}) {
    CAPTURE(row.name);
    CHECK(SecretDirAgentPid(row.name) == row.pid);
  }
}

}  // namespace
}  // namespace dslaunch::agent

namespace dslaunch::agent {

TEST_CASE("WorkerFileName keeps generation 0's names and gives later generations their own") {
  CHECK(WorkerFileName(3, 0, "stdout.log") == "rank3.stdout.log");
  CHECK(WorkerFileName(3, 1, "stdout.log") == "rank3.gen1.stdout.log");
  CHECK(WorkerFileName(3, 2, "stderr.log") == "rank3.gen2.stderr.log");
  CHECK(WorkerFileName(0, 11, "error.json") == "rank0.gen11.error.json");
}

}  // namespace dslaunch::agent
