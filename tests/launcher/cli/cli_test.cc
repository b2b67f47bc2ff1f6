#include "launcher/cli/cli.h"

#include <doctest/doctest.h>

#include <sstream>

namespace dslaunch::launcher {
namespace {

Result<CliCommand> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dslaunch");
  return ParseCommandLine(args);
}

TEST_CASE("ParseCommandLine passes everything after PROGRAM through untouched") {
  auto c = Parse({"-H", "hosts", "--num_gpus", "2", "train.py", "--hostfile", "x", "-m", "--dry-run"});
  REQUIRE(c.ok());
  const CliOptions& o = c->options;
  CHECK(o.hostfile == "hosts");
  CHECK(o.num_gpus == 2);
  CHECK(o.program == "train.py");
  CHECK(o.program_args == std::vector<std::string>{"--hostfile", "x", "-m", "--dry-run"});
  CHECK_FALSE(o.module);
  CHECK_FALSE(o.dry_run.has_value());
}

TEST_CASE("ParseCommandLine reads every option") {
  auto c = Parse({"--hostfile=h", "-i", "a:0@b", "--num_nodes", "2", "--nproc_per_node", "4", "--master_addr",
                  "10.0.0.1", "--master_port", "1234", "--no_local_rank", "--log_dir", "/l", "--no_tee",
                  "--grace_period", "1.5", "--save_pid", "--dry-run=json", "--job_id", "J", "-m", "pkg.mod"});
  REQUIRE(c.ok());
  const CliOptions& o = c->options;
  CHECK(o.hostfile == "h");
  CHECK(o.include == "a:0@b");
  CHECK(o.num_nodes == 2);
  CHECK(o.num_gpus == 4);
  CHECK(o.master_addr == "10.0.0.1");
  CHECK(o.master_port == 1234);
  CHECK(o.no_local_rank);
  CHECK(o.log_dir == "/l");
  CHECK(o.console.ShowsNothing());
  CHECK(o.grace_period == std::chrono::milliseconds(1500));
  CHECK(o.save_pid == "");
  CHECK(o.dry_run == DryRunFormat::kJson);
  CHECK(o.job_id == "J");
  CHECK(o.module);
  CHECK(o.program == "pkg.mod");
}

TEST_CASE("ParseCommandLine reads DeepSpeed's core binding options") {
  auto c = Parse({"--bind_cores_to_rank", "--bind_core_list", "0-3,8,10-11", "x"});
  REQUIRE(c.ok());
  CHECK(c->options.bind_cores_to_rank);
  CHECK(c->options.bind_core_list == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  auto all = Parse({"--bind_cores_to_rank", "x"});
  REQUIRE(all.ok());
  CHECK(all->options.bind_cores_to_rank);
  CHECK_FALSE(all->options.bind_core_list.has_value());
  auto none = Parse({"x"});
  REQUIRE(none.ok());
  CHECK_FALSE(none->options.bind_cores_to_rank);
}

TEST_CASE("ParseCommandLine takes the last value of a repeated option, as argparse does") {
  auto c = Parse({"--grace_period", "2", "--grace_period", "0.5", "x"});
  REQUIRE(c.ok());
  CHECK(c->options.grace_period == std::chrono::milliseconds(500));
}

TEST_CASE("ParseCommandLine defaults") {
  auto c = Parse({"train.py"});
  REQUIRE(c.ok());
  CHECK_FALSE(c->options.hostfile.has_value());
  CHECK(c->options.master_port == 29500);
  CHECK(c->options.console == ConsoleStreams{});
  CHECK(c->options.grace_period == kDefaultGracePeriod);
  auto d = Parse({"--dry-run", "train.py"});
  REQUIRE(d.ok());
  CHECK(d->options.dry_run == DryRunFormat::kTable);
  CHECK(d->options.program == "train.py");
}

TEST_CASE("ParseCommandLine rejects bad input and says what is wrong") {
  struct Case {
    std::vector<std::string> args;
    const char* expect;
  };
  for (const Case& c : {Case{{"--hostfiel", "h", "x.py"}, "did you mean '--hostfile'?"},
                        Case{{"--frobnicate", "x.py"}, "unknown option '--frobnicate'"},
                        Case{{"--num_gpus"}, "num_gpus"},
                        Case{{"--master_port", "70000", "x.py"}, "not a TCP port"},
                        Case{{"--grace_period", "-1", "x.py"}, "--grace_period"},
                        Case{{"--dry-run=yaml", "x.py"}, "expected 'table' or 'json'"},
                        Case{{"-m", "--no_python", "x"}, "exclude each other"},
                        Case{{}, "missing PROGRAM"},
                        Case{{"--nproc_per_node", "2", "", "x"}, "empty PROGRAM"},
                        Case{{"--no_tee=99999999999999999999", "x"},
                             "option '--no_tee' takes no value: '--no_tee=99999999999999999999'"},
                        Case{{"--no_python=1", "x"}, "option '--no_python' takes no value"},
                        Case{{"--num_gpus", "two", "x.py"}, "two"},
                        Case{{"--bind_core_list", "0-3", "x"},
                             "--bind_core_list '0-3' needs --bind_cores_to_rank (DeepSpeed ignores it without)"},
                        Case{{"--bind_cores_to_rank", "--bind_core_list", "0-3,2", "x"},
                             "--bind_core_list '0-3,2': '2' after '0-3': items must be ascending and must not "
                             "overlap (expected e.g. 0-3,8,10-11)"},
                        Case{{"--bind_cores_to_rank", "--bind_core_list", "", "x"},
                             "--bind_core_list '': no cores listed"}}) {
    CAPTURE(c.expect);
    auto r = Parse(c.args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(c.expect) != std::string::npos);
  }
}

TEST_CASE("ParseCommandLine refuses an empty value for every numeric option, which CLI11 would read as 0") {
  // The message names the option by its first name (--nproc_per_node is an alias of --num_gpus).
  for (auto [option, shown] : {std::pair{"--rdzv_port", "--rdzv_port"}, {"--grace_period", "--grace_period"},
                               {"--heartbeat_timeout", "--heartbeat_timeout"}, {"--master_port", "--master_port"},
                               {"--ssh_port", "--ssh_port"},
                               {"--num_nodes", "--num_nodes"}, {"--node_rank", "--node_rank"},
                               {"--ssh_connect_timeout", "--ssh_connect_timeout"},
                               {"--ssh_fanout", "--ssh_fanout"}, {"--ssh_tree_threshold", "--ssh_tree_threshold"},
                               {"--heartbeat_interval", "--heartbeat_interval"}, {"--max_restarts", "--max_restarts"},
                               {"--min_elastic_nodes", "--min_elastic_nodes"},
                               {"--max_elastic_nodes", "--max_elastic_nodes"},
                               {"--watchdog_timeout", "--watchdog_timeout"}}) {
    CAPTURE(std::string(option));
    auto r = Parse({option, "", "--no_python", "x"});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == std::string(shown) + ": empty value, expected a number");
  }
  // --nproc_per_node also takes torchrun's keywords, so it says so.
  auto nproc = Parse({"--nproc_per_node", "", "--no_python", "x"});
  REQUIRE_FALSE(nproc.ok());
  CHECK(nproc.status().message() == "--nproc_per_node '': expected a number of workers per node, or auto, gpu or cpu");
  // 0 itself is a value: for --rdzv_port it asks for any free port (a one-node --no_ssh job).
  auto zero = Parse({"--no_ssh", "--node_rank", "0", "--master_addr", "h", "--job_id", "j", "--rdzv_port", "0",
                     "--no_python", "x"});
  REQUIRE(zero.ok());
  CHECK(zero->options.rdzv_port == 0);
}

TEST_CASE("ParseCommandLine keeps durations in a range that cannot overflow") {
  struct Case {
    std::vector<std::string> args;
    const char* error;  // exact message
  };
  for (const Case& c : {
           Case{{"--grace_period", "1e10", "x"}, "--grace_period 1e+10: expected seconds from 0 to 86400"},
           Case{{"--grace_period", "86400.5", "x"}, "--grace_period 86400.5: expected seconds from 0 to 86400"},
           Case{{"--grace_period", "-0.5", "x"}, "--grace_period -0.5: expected seconds from 0 to 86400"},
           Case{{"--grace_period", "inf", "x"}, "--grace_period inf: expected seconds from 0 to 86400"},
           Case{{"--grace_period", "nan", "x"}, "--grace_period nan: expected seconds from 0 to 86400"},
           Case{{"--heartbeat_timeout", "1e300", "x"}, "--heartbeat_timeout 1e+300: expected seconds from 1 to 86400"},
           Case{{"--heartbeat_timeout", "0.0001", "x"}, "--heartbeat_timeout 0.0001: expected seconds from 1 to 86400"},
           Case{{"--heartbeat_timeout", "0.999", "x"}, "--heartbeat_timeout 0.999: expected seconds from 1 to 86400"},
           Case{{"--ssh_connect_timeout", "1e10", "x"},
                "--ssh_connect_timeout 1e+10: expected seconds from 0.001 to 3600"},
           Case{{"--ssh_connect_timeout", "0", "x"}, "--ssh_connect_timeout 0: expected seconds from 0.001 to 3600"},
       }) {
    CAPTURE(c.error);
    auto r = Parse(c.args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.error);
  }
  auto edges = Parse({"--grace_period", "86400", "--heartbeat_timeout", "1", "--ssh_connect_timeout", "0.001", "x"});
  REQUIRE(edges.ok());
  CHECK(edges->options.grace_period == kMaxGracePeriod);
  CHECK(edges->options.heartbeat_timeout == kMinHeartbeatTimeout);
  CHECK(edges->options.ssh.connect_timeout == std::chrono::milliseconds(1));
  auto zero = Parse({"--grace_period", "0", "x"});
  REQUIRE(zero.ok());
  CHECK(zero->options.grace_period == std::chrono::milliseconds(0));
}

TEST_CASE("ParseCommandLine validates --job_id") {
  auto ok = Parse({"--job_id", "run-7.a_b", "x"});
  REQUIRE(ok.ok());
  CHECK(ok->options.job_id == "run-7.a_b");
  struct Case {
    std::vector<std::string> args;
    const char* expect;
  };
  for (const Case& c : {Case{{"--job_id", "..", "x"}, "--job_id: job id '..' names a directory of its own"},
                        Case{{"--job_id", "a/b", "x"}, "--job_id: job id 'a/b': '/' is not allowed"},
                        Case{{"--job_id", "", "x"}, "--job_id: empty job id"},
                        Case{{"--job_id=", "x"}, "--job_id: empty job id"}}) {
    CAPTURE(c.expect);
    auto r = Parse(c.args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(c.expect) == 0);
  }
}

TEST_CASE("ParseCommandLine reads --opt= as an empty value, never taking the next word") {
  auto c = Parse({"--log_dir=", "--nproc_per_node", "4", "--include=", "x"});
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->options.log_dir.empty());
  CHECK(c->options.include.empty());
  CHECK(c->options.num_gpus == 4);
  CHECK(c->options.program == "x");
}

TEST_CASE("ParseCommandLine reads --python") {
  auto c = Parse({"--python", "/venv/bin/python", "train.py"});
  REQUIRE(c.ok());
  CHECK(c->options.python == "/venv/bin/python");
  CHECK_FALSE(Parse({"train.py"})->options.python.has_value());
  auto empty = Parse({"--python", "", "train.py"});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message() == "--python: empty interpreter path");
  auto both = Parse({"--python", "/p", "--no_python", "a.out"});
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().message() ==
        "--python and --no_python exclude each other: --no_python starts PROGRAM directly");
}

TEST_CASE("ParseCommandLine reads the multi-node options") {
  auto c = Parse({"--ssh_user", "u", "--ssh_port", "2222", "--ssh_identity", "k1", "--ssh_identity", "k2",
                  "--ssh_known_hosts", "kh", "--ssh_accept_new_host_keys", "--ssh_connect_timeout", "2.5",
                  "--agent_path", "/opt/a", "--export", "A", "--export", "B=2", "--heartbeat_timeout", "3",
                  "--ssh_fanout", "4", "--ssh_tree_threshold", "2", "x"});
  REQUIRE(c.ok());
  const CliOptions& o = c->options;
  CHECK(o.ssh.fanout == 4);
  CHECK(o.ssh.tree_threshold == 2);
  CHECK(o.ssh.user == "u");
  CHECK(o.ssh.port == 2222);
  CHECK(o.ssh.identities == std::vector<std::string>{"k1", "k2"});
  CHECK(o.ssh.known_hosts == "kh");
  CHECK(o.ssh.accept_new_host_keys);
  CHECK(o.ssh.connect_timeout == std::chrono::milliseconds(2500));
  CHECK(o.agent_path == "/opt/a");
  CHECK(o.exports == std::vector<std::string>{"A", "B=2"});
  CHECK(o.heartbeat_timeout == std::chrono::milliseconds(3000));
  CHECK_FALSE(o.no_ssh);
  auto defaults = Parse({"x"});
  REQUIRE(defaults.ok());
  CHECK(defaults->options.ssh.fanout == kSshDefaultFanout);
  CHECK(defaults->options.ssh.tree_threshold == kSshDefaultTreeThreshold);
  for (const char* bad : {"--ssh_fanout", "--ssh_tree_threshold"}) {
    CAPTURE(bad);
    auto r = Parse({bad, "0", "x"});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().starts_with(std::string(bad) + " 0 must be at least 1"));
  }
}

TEST_CASE("ParseCommandLine checks that --no_ssh has what every node needs") {
  auto ok = Parse({"--no_ssh", "--node_rank", "1", "--master_addr", "n0", "--job_id", "J", "--rdzv_port", "1234", "x"});
  REQUIRE(ok.ok());
  CHECK(ok->options.no_ssh);
  CHECK(ok->options.node_rank == 1);
  CHECK(ok->options.rdzv_port == 1234);
  struct Case {
    std::vector<std::string> args;
    const char* expect;
  };
  for (const Case& c : {Case{{"--no_ssh", "--master_addr", "a", "--job_id", "J", "x"}, "--node_rank"},
                        Case{{"--no_ssh", "--node_rank", "0", "--job_id", "J", "x"}, "--master_addr"},
                        Case{{"--no_ssh", "--node_rank", "0", "--master_addr", "a", "x"}, "--job_id"},
                        Case{{"--node_rank", "0", "x"}, "needs the rendezvous endpoint"},
                        Case{{"--heartbeat_timeout", "0", "x"}, "--heartbeat_timeout"},
                        Case{{"--ssh_port", "0", "x"}, "not a TCP port"}}) {
    CAPTURE(c.expect);
    auto r = Parse(c.args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(c.expect) != std::string::npos);
  }
}

TEST_CASE("ParseCommandLine takes every port option in 1..65535 (--rdzv_port also 0) and refuses both neighbours") {
  for (const char* flag : {"--master_port", "--ssh_port", "--rdzv_port"}) {
    CAPTURE(flag);
    for (int port : {1, 65535}) {
      CAPTURE(port);
      auto ok = Parse({flag, std::to_string(port), "x"});
      REQUIRE_MESSAGE(ok.ok(), ok.status().ToString());
      const CliOptions& o = ok->options;
      CHECK((std::string(flag) == "--master_port" ? o.master_port
             : std::string(flag) == "--ssh_port"  ? o.ssh.port
                                                  : o.rdzv_port) == port);
    }
    // --rdzv_port 0 asks for any free port (a one-node --no_ssh job), so its lower neighbour is -1.
    const bool rdzv = std::string(flag) == "--rdzv_port";
    for (int port : {rdzv ? -1 : 0, 65536}) {
      CAPTURE(port);
      auto bad = Parse({flag, std::to_string(port), "x"});
      REQUIRE_FALSE(bad.ok());
      CHECK(bad.status().code() == StatusCode::kInvalidArgument);
      CHECK(bad.status().message() ==
            std::string(flag) + " " + std::to_string(port) + " is not a TCP port (1-65535" +
                (rdzv ? ", or 0 for any free port on a one-node job)" : ")"));
    }
  }
}

TEST_CASE("ParseCommandLine reads the fault-tolerance options") {
  auto c = Parse({"--max_restarts", "3", "--nnodes", "2:4", "--watchdog_timeout", "90.5", "--heartbeat_timeout", "3",
                  "--heartbeat_interval", "0.5", "-H", "h", "x"});
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  const CliOptions& o = c->options;
  CHECK(o.max_restarts == 3);
  REQUIRE(o.elastic_nodes.has_value());
  CHECK(o.elastic_nodes->min_nodes == 2);
  CHECK(o.elastic_nodes->max_nodes == 4);
  CHECK(o.elastic_nodes->option == "--nnodes 2:4");
  CHECK_FALSE(o.num_nodes.has_value());
  CHECK(o.watchdog_timeout == std::chrono::milliseconds(90500));
  CHECK(o.heartbeat_timeout == std::chrono::milliseconds(3000));
  CHECK(o.heartbeat_interval == std::chrono::milliseconds(500));

  auto d = Parse({"x"});
  REQUIRE(d.ok());
  CHECK(d->options.max_restarts == 0);
  CHECK_FALSE(d->options.elastic_nodes.has_value());
  CHECK_FALSE(d->options.watchdog_timeout.has_value());
  CHECK(d->options.heartbeat_timeout == kDefaultHeartbeatTimeout);
  CHECK(d->options.heartbeat_interval == kHeartbeatInterval);
}

TEST_CASE("ParseCommandLine derives the heartbeat interval from the timeout when none is given") {
  struct Case {
    std::string timeout;
    int64_t interval_ms;
  };
  for (const Case& c : {Case{"1", 333}, Case{"2", 666}, Case{"2.9", 966}, Case{"3", 1000}, Case{"10", 1000},
                        Case{"86400", 1000}}) {
    CAPTURE(c.timeout);
    auto r = Parse({"--heartbeat_timeout", c.timeout, "x"});
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->options.heartbeat_interval == std::chrono::milliseconds(c.interval_ms));
  }
}

TEST_CASE("ParseCommandLine keeps an explicit heartbeat interval within half the timeout") {
  struct Case {
    std::vector<std::string> args;
    int64_t interval_ms;  // 0: refused with `error`
    std::string error;
  };
  for (const Case& c : {
           Case{{"--heartbeat_interval", "0.1", "--heartbeat_timeout", "1"}, 100, ""},
           Case{{"--heartbeat_interval", "0.5", "--heartbeat_timeout", "1"}, 500, ""},
           Case{{"--heartbeat_interval", "5"}, 5000, ""},  // half the default timeout
           Case{{"--heartbeat_interval", "0.6", "--heartbeat_timeout", "1"}, 0,
                "--heartbeat_interval 0.6 is more than half of --heartbeat_timeout 1: one late heartbeat would make a "
                "lost node; lower the interval or raise the timeout"},
           Case{{"--heartbeat_interval", "5.001"}, 0,
                "--heartbeat_interval 5.001 is more than half of --heartbeat_timeout 10: one late heartbeat would make "
                "a lost node; lower the interval or raise the timeout"},
           Case{{"--heartbeat_interval", "0.099"}, 0, "--heartbeat_interval 0.099: expected seconds from 0.1 to 86400"},
           Case{{"--heartbeat_interval", "0"}, 0, "--heartbeat_interval 0: expected seconds from 0.1 to 86400"},
           Case{{"--heartbeat_interval", "inf"}, 0, "--heartbeat_interval inf: expected seconds from 0.1 to 86400"},
       }) {
    CAPTURE(c.error);
    std::vector<std::string> args = c.args;
    args.push_back("x");
    auto r = Parse(args);
    if (c.interval_ms == 0) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::kInvalidArgument);
      CHECK(r.status().message() == c.error);
    } else {
      REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      CHECK(r->options.heartbeat_interval == std::chrono::milliseconds(c.interval_ms));
    }
  }
}

TEST_CASE("ParseCommandLine reads --watchdog_timeout as seconds above 0") {
  auto edges = Parse({"--watchdog_timeout", "0.001", "x"});
  REQUIRE(edges.ok());
  CHECK(edges->options.watchdog_timeout == std::chrono::milliseconds(1));
  auto day = Parse({"--watchdog_timeout", "86400", "x"});
  REQUIRE(day.ok());
  CHECK(day->options.watchdog_timeout == kMaxWatchdogTimeout);
  for (std::string bad : {"0", "-1", "0.0004", "86400.5", "nan", "1e300"}) {
    CAPTURE(bad);
    auto r = Parse({"--watchdog_timeout", bad, "x"});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    std::ostringstream expect;
    expect << "--watchdog_timeout " << std::stod(bad)
           << ": expected seconds from 0.001 to 86400 (leave it out for no watchdog)";
    CHECK(r.status().message() == expect.str());
  }
}

TEST_CASE("ParseCommandLine reads the straggler rule's options (--straggler_factor 0: off), and refuses bad ones") {
  auto defaults = Parse({"x"});
  REQUIRE(defaults.ok());
  CHECK(defaults->options.stragglers.factor == kDefaultStragglerFactor);
  CHECK(defaults->options.stragglers.window == kDefaultStragglerWindow);
  CHECK(defaults->options.stragglers.margin_ms == kDefaultStragglerMarginMs);
  CHECK(defaults->options.stragglers.patience == kDefaultStragglerPatience);
  auto set = Parse({"--straggler_factor", "2.5", "--straggler_window", "50", "--straggler_margin_ms", "7.5",
                    "--straggler_patience", "12", "x"});
  REQUIRE(set.ok());
  CHECK(set->options.stragglers.factor == 2.5);
  CHECK(set->options.stragglers.window == 50);
  CHECK(set->options.stragglers.margin_ms == 7.5);
  CHECK(set->options.stragglers.patience == 12);
  auto off = Parse({"--straggler_factor", "0", "x"});
  REQUIRE(off.ok());
  CHECK(off->options.stragglers.factor == 0);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--straggler_factor", "1"},
       "--straggler_factor 1 must be above 1 (a rank that many times slower than its peers is flagged), or 0 to turn "
       "straggler detection off"},
      {{"--straggler_factor", "-3"},
       "--straggler_factor -3 must be above 1 (a rank that many times slower than its peers is flagged), or 0 to turn "
       "straggler detection off"},
      {{"--straggler_window", "0"}, "--straggler_window 0 must be 1..10000 steps"},
      {{"--straggler_margin_ms", "-5"},
       "--straggler_margin_ms -5 must be 0 or more (milliseconds per step a straggler is behind its peers' median at "
       "least)"},
      {{"--straggler_patience", "0"}, "--straggler_patience 0 must be 1..10000 checks in a row"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.message);
    std::vector<std::string> args = c.args;
    args.push_back("x");
    auto r = Parse(args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.message);
  }
}

TEST_CASE("ParseCommandLine reads --nnodes as N (--num_nodes) or MIN:MAX (an elastic range)") {
  struct Case {
    std::vector<std::string> args;
    std::optional<int> num_nodes;
    std::optional<NodeRange> range;  // option compared too
  };
  const Case cases[] = {
      {{"--nnodes", "4"}, 4, std::nullopt},
      {{"--nnodes", "4", "--num_nodes", "4"}, 4, std::nullopt},
      {{"--nnodes", "2:4"}, std::nullopt, NodeRange{2, 4, "--nnodes 2:4"}},
      {{"--nnodes", "4:4"}, std::nullopt, NodeRange{4, 4, "--nnodes 4:4"}},
      {{"--nnodes=1:1000"}, std::nullopt, NodeRange{1, 1000, "--nnodes 1:1000"}},
      {{"--num_nodes", "6", "--nnodes", "2:8"}, 6, NodeRange{2, 8, "--nnodes 2:8"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back("x");
    const std::string first = args[0];
    CAPTURE(first);
    auto r = Parse(args);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->options.num_nodes == c.num_nodes);
    REQUIRE(r->options.elastic_nodes.has_value() == c.range.has_value());
    if (c.range) {
      CHECK(r->options.elastic_nodes->min_nodes == c.range->min_nodes);
      CHECK(r->options.elastic_nodes->max_nodes == c.range->max_nodes);
      CHECK(r->options.elastic_nodes->option == c.range->option);
    }
    CHECK(r->options.max_restarts == 0);  // torchrun's default, range or not
  }
}

TEST_CASE("ParseCommandLine reads DeepSpeed's --elastic_training, --min_elastic_nodes and --max_elastic_nodes") {
  struct Case {
    std::vector<std::string> args;
    NodeRange range;
    int max_restarts;
    std::optional<int> num_nodes;
  };
  const Case cases[] = {
      {{"--elastic_training"}, NodeRange{1, std::nullopt, "--elastic_training"}, 100, std::nullopt},
      {{"--elastic_training", "--min_elastic_nodes", "2", "--max_elastic_nodes", "4"},
       NodeRange{2, 4, "--elastic_training --min_elastic_nodes 2 --max_elastic_nodes 4"}, 100, std::nullopt},
      {{"--elastic_training", "--max_elastic_nodes", "3", "--max_restarts", "0"},
       NodeRange{1, 3, "--elastic_training --max_elastic_nodes 3"}, 0, std::nullopt},
      {{"--elastic_training", "--num_nodes", "3"}, NodeRange{1, std::nullopt, "--elastic_training"}, 100, 3},
      // --nnodes N is --num_nodes N; the range stays DeepSpeed's.
      {{"--elastic_training", "--nnodes", "3", "--min_elastic_nodes", "2"},
       NodeRange{2, std::nullopt, "--elastic_training --min_elastic_nodes 2"}, 100, 3},
      // Both spellings of the same range.
      {{"--elastic_training", "--nnodes", "2:4", "--max_elastic_nodes", "4"}, NodeRange{2, 4, "--nnodes 2:4"}, 100,
       std::nullopt},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back("x");
    CAPTURE(c.range.option);
    auto r = Parse(args);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    REQUIRE(r->options.elastic_nodes.has_value());
    CHECK(r->options.elastic_nodes->min_nodes == c.range.min_nodes);
    CHECK(r->options.elastic_nodes->max_nodes == c.range.max_nodes);
    CHECK(r->options.elastic_nodes->option == c.range.option);
    CHECK(r->options.max_restarts == c.max_restarts);
    CHECK(r->options.num_nodes == c.num_nodes);
  }
}

TEST_CASE("ParseCommandLine refuses bad or conflicting node counts and restart budgets, naming the options") {
  struct Case {
    std::vector<std::string> args;
    std::string error;  // exact message
  };
  const char* range_grammar = ": expected N or MIN:MAX with 1 <= MIN <= MAX (e.g. 4 or 2:4)";
  for (const Case& c : {
           Case{{"--nnodes", "0"}, "--nnodes '0'"}, Case{{"--nnodes", "4:2"}, "--nnodes '4:2'"},
           Case{{"--nnodes", "0:2"}, "--nnodes '0:2'"}, Case{{"--nnodes", "-1"}, "--nnodes '-1'"},
           Case{{"--nnodes", "two"}, "--nnodes 'two'"}, Case{{"--nnodes", "2:"}, "--nnodes '2:'"},
           Case{{"--nnodes", ":4"}, "--nnodes ':4'"}, Case{{"--nnodes", "1:2:3"}, "--nnodes '1:2:3'"},
           Case{{"--nnodes", "2 :4"}, "--nnodes '2 :4'"}, Case{{"--nnodes", "+2"}, "--nnodes '+2'"},
           Case{{"--nnodes", "99999999999"}, "--nnodes '99999999999'"}, Case{{"--nnodes", ""}, "--nnodes ''"},
       }) {
    std::vector<std::string> args = c.args;
    args.push_back("x");
    CAPTURE(c.error);
    auto r = Parse(args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.error + range_grammar);
  }
  for (const Case& c : {
           Case{{"--nnodes", "3", "--num_nodes", "2"},
                "--nnodes 3 and --num_nodes 2 disagree: both give the number of nodes; keep one of them"},
           Case{{"--num_nodes", "2", "--nnodes", "3:4"},
                "--nnodes 3:4 needs at least 3 nodes but --num_nodes 2 selects fewer; select more nodes or lower the "
                "minimum"},
           Case{{"--elastic_training", "--min_elastic_nodes", "3", "--nnodes", "2"},
                "--elastic_training --min_elastic_nodes 3 needs at least 3 nodes but --nnodes 2 selects fewer; select "
                "more nodes or lower the minimum"},
           Case{{"--elastic_training", "--nnodes", "2:4", "--min_elastic_nodes", "1"},
                "--nnodes 2:4 and --min_elastic_nodes 1 disagree: both give the range of nodes; keep one of them"},
           Case{{"--elastic_training", "--nnodes", "2:4", "--max_elastic_nodes", "5"},
                "--nnodes 2:4 and --max_elastic_nodes 5 disagree: both give the range of nodes; keep one of them"},
           Case{{"--min_elastic_nodes", "2"},
                "--min_elastic_nodes 2 needs --elastic_training (DeepSpeed ignores it without), or give the range as "
                "--nnodes MIN:MAX"},
           Case{{"--max_elastic_nodes", "4", "--nnodes", "2:4"},
                "--max_elastic_nodes 4 needs --elastic_training (DeepSpeed ignores it without), or give the range as "
                "--nnodes MIN:MAX"},
           Case{{"--elastic_training", "--min_elastic_nodes", "0"},
                "--min_elastic_nodes 0: expected a number of nodes >= 1"},
           Case{{"--elastic_training", "--max_elastic_nodes", "-1"},
                "--max_elastic_nodes -1: expected a number of nodes >= 1"},
           Case{{"--elastic_training", "--min_elastic_nodes", "3", "--max_elastic_nodes", "2"},
                "--min_elastic_nodes 3 is above --max_elastic_nodes 2; the minimum must not exceed the maximum"},
           Case{{"--max_restarts", "-1"},
                "--max_restarts -1: expected a number of restarts >= 0 (0: the first failure ends the job)"},
           Case{{"--max-restartz", "3"},
                "unknown option '--max-restartz' (did you mean '--max-restarts'?); run 'dslaunch --help' for the list"},
       }) {
    std::vector<std::string> args = c.args;
    args.push_back("x");
    CAPTURE(c.error);
    auto r = Parse(args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.error);
  }
}

TEST_CASE("ElasticOptionsFor fills in what the command line left to the hostfile") {
  struct Case {
    std::vector<std::string> args;
    int candidates;
    ElasticOptions expect;
    std::string error;  // non-empty: refused with this message
  };
  for (const Case& c : {
           Case{{}, 4, {4, 4, 0}, ""},
           Case{{"--max_restarts", "2"}, 4, {4, 4, 2}, ""},
           Case{{"--nnodes", "2:4"}, 6, {2, 4, 0}, ""},
           Case{{"--nnodes", "2:8"}, 3, {2, 8, 0}, ""},
           Case{{"--nnodes", "3:3"}, 3, {3, 3, 0}, ""},
           Case{{"--elastic_training"}, 5, {1, 5, 100}, ""},
           Case{{"--elastic_training", "--min_elastic_nodes", "2"}, 5, {2, 5, 100}, ""},
           Case{{"--nnodes", "4:6"}, 3, {},
                "--nnodes 4:6: the job needs at least 4 nodes but the hostfile selection has 3; list more hosts or "
                "lower the minimum"},
           Case{{"--elastic_training", "--min_elastic_nodes", "2"}, 1, {},
                "--elastic_training --min_elastic_nodes 2: the job needs at least 2 nodes but the hostfile selection "
                "has 1; list more hosts or lower the minimum"},
       }) {
    std::vector<std::string> args = c.args;
    args.push_back("x");
    CAPTURE(c.candidates);
    CAPTURE(c.error);
    auto parsed = Parse(args);
    REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
    Result<ElasticOptions> e = ElasticOptionsFor(parsed->options, c.candidates);
    if (!c.error.empty()) {
      REQUIRE_FALSE(e.ok());
      CHECK(e.status().code() == StatusCode::kInvalidArgument);
      CHECK(e.status().message() == c.error);
      continue;
    }
    REQUIRE_MESSAGE(e.ok(), e.status().ToString());
    CHECK(e->min_nodes == c.expect.min_nodes);
    CHECK(e->max_nodes == c.expect.max_nodes);
    CHECK(e->max_restarts == c.expect.max_restarts);
  }
}

TEST_CASE("ParseCommandLine answers --help and --version with text to print") {
  auto h = Parse({"--help"});
  REQUIRE(h.ok());
  REQUIRE(h->print.has_value());
  CHECK(h->print->find("--hostfile") != std::string::npos);
  CHECK(h->print->find("Examples:") != std::string::npos);
  auto v = Parse({"--version"});
  REQUIRE(v.ok());
  CHECK(v->print->find("dslaunch ") == 0);
}

}  // namespace
}  // namespace dslaunch::launcher

namespace dslaunch::launcher {
namespace {

TEST_CASE("ParseCommandLine reads --status_port, --status_bind, --status_host and --status_metrics_open") {
  auto off = Parse({"x.py"});
  REQUIRE(off.ok());
  CHECK(!off->options.status_port);
  CHECK(off->options.status_bind == "127.0.0.1");
  auto any = Parse({"--status_port", "0", "x.py"});
  REQUIRE(any.ok());
  CHECK(any->options.status_port == 0);
  auto all = Parse({"--status_port=8080", "--status_bind", "0.0.0.0", "x.py"});
  REQUIRE(all.ok());
  CHECK(all->options.status_port == 8080);
  CHECK(all->options.status_bind == "0.0.0.0");
  auto v6 = Parse({"--status_port", "1", "--status_bind", "::1", "x.py"});
  REQUIRE(v6.ok());
  CHECK(v6->options.status_bind == "::1");
  CHECK(v6->options.status_hosts.empty());
  CHECK(!v6->options.status_metrics_open);
  auto named = Parse({"--status_port", "0", "--status_host", "node7.cluster,10.0.0.7", "--status_host", "::2",
                      "--status_metrics_open", "x.py"});
  REQUIRE(named.ok());
  CHECK(named->options.status_hosts == std::vector<std::string>{"node7.cluster", "10.0.0.7", "::2"});
  CHECK(named->options.status_metrics_open);
}

TEST_CASE("ParseCommandLine rejects a bad --status_port, --status_bind or --status_host, saying what to give") {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const Case cases[] = {
      {{"--status_port", "65536", "x.py"}, "--status_port 65536 is not a TCP port (1-65535, or 0 for any free port)"},
      {{"--status_port", "-1", "x.py"}, "--status_port -1 is not a TCP port (1-65535, or 0 for any free port)"},
      {{"--status_bind", "0.0.0.0", "x.py"}, "--status_bind 0.0.0.0 needs --status_port PORT (0: any free port)"},
      {{"--status_port", "0", "--status_bind", "localhost", "x.py"},
       "--status_bind 'localhost': expected an IP address (127.0.0.1, 0.0.0.0 for every interface, ::1), not a name"},
      {{"--status_port", "0", "--status_bind", "", "x.py"},
       "--status_bind '': expected an IP address (127.0.0.1, 0.0.0.0 for every interface, ::1), not a name"},
      {{"--status_host", "a.b", "x.py"}, "--status_host needs --status_port PORT (0: any free port)"},
      {{"--status_metrics_open", "x.py"}, "--status_metrics_open needs --status_port PORT (0: any free port)"},
      {{"--status_port", "0", "--status_host", "node7:8080", "x.py"},
       "--status_host 'node7:8080': expected a host name or an IP address without a port (any port is accepted), "
       "the name a browser uses for this machine"},
      {{"--status_port", "0", "--status_host", "-x", "x.py"},
       "--status_host '-x': expected a host name or an IP address, the name a browser uses for this machine"},
      {{"--status_port", "0", "--status_host", "a b", "x.py"},
       "--status_host 'a b': expected a host name or an IP address, the name a browser uses for this machine"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    auto r = Parse(c.args);
    REQUIRE(!r.ok());
    CHECK(r.status().message() == c.message);
  }
}

}  // namespace
}  // namespace dslaunch::launcher
