// torchrun's and DeepSpeed's flags (docs/cli.md, "torchrun's and DeepSpeed's flags"): each accepted
// with its meaning, or refused at parse time saying what to use instead; --tee and --redirects with
// torchrun's values; suggestions in the user's spelling; the expected form of a bad number.
#include <doctest/doctest.h>

#include "launcher/cli/cli.h"

namespace dslaunch::launcher {
namespace {

Result<CliCommand> Parse(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), "dslaunch");
  return ParseCommandLine(args, env);
}

StdStreamsSpec All(StdStreams s) { return StdStreamsSpec{s, {}}; }

TEST_CASE("torchtitan's torchrun command line runs as a job on this machine") {
  auto c = Parse({"--nproc_per_node=2", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0", "--local-ranks-filter",
                  "0", "--role", "rank", "--tee", "3", "-m", "torchtitan.train", "--job.config_file", "x.toml"});
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  const CliOptions& o = c->options;
  // Port 0 on one node is torchrun's "any free port": no rendezvous, a local job as --standalone.
  CHECK_FALSE(o.rendezvous.has_value());
  CHECK(o.job_id.empty());
  CHECK(o.num_gpus == 2);
  CHECK(o.role == "rank");
  CHECK(o.console.tee == All(StdStreams::kBoth));
  CHECK(o.console.redirects == All(StdStreams::kNone));
  CHECK(o.console.local_ranks == std::set<int>{0});
  CHECK(o.module);
  CHECK(o.program == "torchtitan.train");
  CHECK(o.program_args == std::vector<std::string>{"--job.config_file", "x.toml"});
  CHECK(c->notes.empty());
}

TEST_CASE("--rdzv_endpoint with port 0 is refused for more than one node, naming why") {
  for (std::vector<std::string> args : {std::vector<std::string>{"--rdzv-endpoint", "localhost:0", "--nnodes", "2", "x"},
                                        std::vector<std::string>{"--rdzv-endpoint", "h:0", "--nnodes", "1:3", "x"},
                                        std::vector<std::string>{"--rdzv-endpoint", "h:0", "--node_rank", "1", "x"}}) {
    auto c = Parse(args);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message() ==
          "node mode: port 0 (any free port) is for a one-node job; with more nodes every node must know the "
          "rendezvous port: give one other than 0");
  }
  // The job keeps the id --rdzv_id gives it.
  auto named = Parse({"--rdzv-endpoint", "localhost:0", "--rdzv-id", "titan", "--node-rank", "0", "x"});
  REQUIRE_MESSAGE(named.ok(), named.status().ToString());
  CHECK_FALSE(named->options.rendezvous.has_value());
  CHECK_FALSE(named->options.node_rank.has_value());
  CHECK(named->options.job_id == "titan");
}

TEST_CASE("--tee takes torchrun's value from the next word only when it has a value's shape") {
  struct Case {
    std::vector<std::string> args;
    StdStreamsSpec tee;
    std::string program;
    std::vector<std::string> program_args;
  };
  const StdStreamsSpec per_rank{StdStreams::kNone, {{0, StdStreams::kBoth}, {1, StdStreams::kStderr}}};
  for (const Case& c : {
           Case{{"--tee", "3", "--no_python", "/bin/echo", "hi"}, All(StdStreams::kBoth), "/bin/echo", {"hi"}},
           Case{{"--tee", "1", "x.py"}, All(StdStreams::kStdout), "x.py", {}},
           Case{{"-t", "2", "x.py"}, All(StdStreams::kStderr), "x.py", {}},
           Case{{"-t0", "x.py"}, All(StdStreams::kNone), "x.py", {}},
           Case{{"--tee=0:3,1:2", "x.py"}, per_rank, "x.py", {}},
           Case{{"--tee", "0:3,1:2", "x.py"}, per_rank, "x.py", {}},
       }) {
    CAPTURE(c.args[0]);
    auto r = Parse(c.args);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->options.console.tee == c.tee);
    CHECK(r->options.program == c.program);
    CHECK(r->options.program_args == c.program_args);
  }
  // Without a value's shape next, --tee stays dslaunch's switch: everything on the console.
  auto program = Parse({"--tee", "train.py", "3"});
  REQUIRE(program.ok());
  CHECK(program->options.console.tee == All(StdStreams::kBoth));
  CHECK(program->options.program == "train.py");
  CHECK(program->options.program_args == std::vector<std::string>{"3"});
  // "--" ends the options: a program named 3 runs only when asked for so.
  auto named_3 = Parse({"--tee", "--", "3"});
  REQUIRE(named_3.ok());
  CHECK(named_3->options.console.tee == All(StdStreams::kBoth));
  CHECK(named_3->options.program == "3");
}

TEST_CASE("--redirects, --no_tee, --local_ranks_filter and --enable_each_rank_log set what the console shows") {
  auto r = Parse({"-r", "3", "--tee", "2", "x"});
  REQUIRE(r.ok());
  CHECK(r->options.console.redirects == All(StdStreams::kBoth));
  CHECK(r->options.console.tee == All(StdStreams::kStderr));
  auto per_rank = Parse({"--redirects=0:1,1:2", "x"});
  REQUIRE(per_rank.ok());
  CHECK(per_rank->options.console.redirects ==
        StdStreamsSpec{StdStreams::kNone, {{0, StdStreams::kStdout}, {1, StdStreams::kStderr}}});
  auto no_tee = Parse({"--no_tee", "x"});
  REQUIRE(no_tee.ok());
  CHECK(no_tee->options.console.redirects == All(StdStreams::kBoth));
  CHECK(no_tee->options.console.ShowsNothing());
  auto filter = Parse({"--local_ranks_filter=0,3", "x"});
  REQUIRE(filter.ok());
  CHECK(filter->options.console.local_ranks == std::set<int>{0, 3});
  // DeepSpeed's --enable_each_rank_log DIR: each rank's output in files under DIR, not on the console.
  auto each = Parse({"--enable_each_rank_log", "/logs", "x"});
  REQUIRE(each.ok());
  CHECK(each->options.log_dir == "/logs");
  CHECK(each->options.console.redirects == All(StdStreams::kBoth));
  // DeepSpeed's default value "None" is no directory at all.
  auto none = Parse({"--enable_each_rank_log=None", "x"});
  REQUIRE(none.ok());
  CHECK(none->options.log_dir.empty());
  CHECK(none->options.console == ConsoleStreams{});
  // torchrun's PET_TEE: 1 is stdout, not "set the flag".
  auto env = Parse({"x"}, {{"PET_TEE", "1"}, {"PET_REDIRECTS", "3"}});
  REQUIRE(env.ok());
  CHECK(env->options.console.tee == All(StdStreams::kStdout));
  CHECK(env->options.console.redirects == All(StdStreams::kBoth));
}

TEST_CASE("Bad console options are refused naming the option and the expected form") {
  const std::string form =
      "expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or LOCAL_RANK:N pairs such as 0:3,1:2";
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  for (const Case& c : {
           Case{{"--tee=5", "x"}, "--tee '5': " + form},
           Case{{"--redirects", "both", "x"}, "--redirects 'both': " + form},
           Case{{"--no_tee", "--tee", "3", "x"},
                "--no_tee and --tee exclude each other: --no_tee is --redirects 3; keep one of them"},
           Case{{"--no_tee", "-r", "1", "x"},
                "--no_tee and --redirects exclude each other: --no_tee is --redirects 3; keep one of them"},
           Case{{"--local_ranks_filter", "a", "x"},
                "--local_ranks_filter 'a': 'a' is not a local rank; expected local ranks such as 0 or 0,1,3"},
           Case{{"--enable_each_rank_log", "/a", "--log_dir", "/b", "x"},
                "--enable_each_rank_log /a and --log_dir /b disagree: both name the log directory; keep one of them"},
       }) {
    CAPTURE(c.error);
    auto r = Parse(c.args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.error);
  }
}

TEST_CASE("torchrun's other flags are accepted with their meaning, or with a note where they change nothing") {
  auto run_path = Parse({"--run-path", "/abs/train", "--lr", "1"});
  REQUIRE(run_path.ok());
  CHECK(run_path->options.run_path);
  CHECK(run_path->options.program == "/abs/train");
  auto both = Parse({"--run_path", "--no-python", "x"});
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().message() ==
        "--run_path and --no_python exclude each other: --run_path runs PROGRAM as a Python script file");

  auto local_addr = Parse({"--nnodes", "2", "--rdzv-endpoint", "n0:29400", "--local-addr", "10.0.0.7", "x"});
  REQUIRE(local_addr.ok());
  CHECK(local_addr->options.local_addr == "10.0.0.7");
  CHECK(local_addr->notes.empty());

  auto noted = Parse({"--monitor-interval", "5", "--start-method", "fork", "--local_addr", "10.0.0.7", "x"});
  REQUIRE(noted.ok());
  CHECK(noted->notes ==
        std::vector<std::string>{
            "--local_addr 10.0.0.7: ignored outside node mode (the workers' MASTER_ADDR is --master_addr, else the "
            "first host)",
            "--monitor_interval: ignored: the agents hear of a worker's exit at once, without polling",
            "--start_method fork: ignored: every worker is a new process (fork and exec), as with spawn"});
  // spawn is what dslaunch does: nothing to note.
  auto spawn = Parse({"--start_method=spawn", "x"});
  REQUIRE(spawn.ok());
  CHECK(spawn->notes.empty());

  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  for (const Case& c : {
           Case{{"--start-method", "thread", "x"}, "--start_method: 'thread': expected spawn, fork or forkserver"},
           Case{{"--monitor_interval", "-1", "x"}, "--monitor_interval: expected seconds >= 0 (e.g. 0.1)"},
           Case{{"--role", "", "x"}, "--role: empty name; give the workers' ROLE_NAME or leave it out"},
           Case{{"--logs-specs", "mine", "x"},
                "--logs-specs: not supported: torchrun's LogsSpecs plugins (Python entry points) cannot load in "
                "dslaunch. Every rank's stdout and stderr are written to LOG_DIR/JOB_ID/rankN.stdout.log and "
                "rankN.stderr.log; choose the directory with --log_dir and the console's share with --redirects, "
                "--tee and --local_ranks_filter"},
       }) {
    CAPTURE(c.error);
    auto r = Parse(c.args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == c.error);
  }
}

TEST_CASE("DeepSpeed's flags are accepted with their meaning, or refused at parse time with what to do") {
  auto accel = Parse({"--num_accelerators", "3", "x"});
  REQUIRE(accel.ok());
  CHECK(accel->options.num_gpus == 3);

  auto noted = Parse({"--force_multi", "--no_ssh_check", "--comment", "run 7", "--launcher", "pdsh", "-H", "h", "x"});
  REQUIRE_MESSAGE(noted.ok(), noted.status().ToString());
  CHECK(noted->options.launcher == LauncherKind::kSsh);
  CHECK(noted->notes ==
        std::vector<std::string>{
            "--launcher pdsh: dslaunch starts the agents over SSH itself, as pdsh would (--launcher ssh)",
            "--no_ssh_check: ignored: the pre-flight over SSH is part of starting each node's agent",
            "--force_multi: ignored: other hosts always start over SSH, and a job on this machine alone runs here "
            "without SSH",
            "--comment: ignored: dslaunch passes no comment to srun"});

  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  for (const Case& c : {
           Case{{"--autotuning", "tune", "x"},
                "--autotuning: not supported: dslaunch does not run DeepSpeed's autotuner. Find a configuration with "
                "'deepspeed --autotuning tune ...' (or by hand), then start the job with it, without --autotuning"},
           Case{{"--autotuning=run", "x"},
                "--autotuning: not supported: dslaunch does not run DeepSpeed's autotuner. Find a configuration with "
                "'deepspeed --autotuning tune ...' (or by hand), then start the job with it, without --autotuning"},
           Case{{"--launcher_args", "-x NCCL_DEBUG", "x"},
                "--launcher_args: not supported: dslaunch starts its agents itself and has no pdsh, MPI or srun "
                "command line to extend. Use the --ssh_* options (port, user, identity, known_hosts) for SSH, and "
                "salloc/sbatch options for Slurm (srun steps run inside the allocation)"},
           Case{{"--venv_script", "/v/activate", "x"},
                "--venv_script: not supported: dslaunch sources no script on the nodes. Give the environment's "
                "interpreter instead: --python /path/to/venv/bin/python (the same path on every node), and --export "
                "NAME=VALUE for its variables"},
           Case{{"--launcher", "openmpi", "x"},
                "--launcher openmpi: dslaunch does not start jobs through MPI; its agents start the workers and give "
                "them the rank environment themselves. Use --launcher ssh (the default with a hostfile) or slurm "
                "(inside an allocation)"},
       }) {
    CAPTURE(c.error);
    auto r = Parse(c.args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.error);
  }
}

TEST_CASE("An unknown option is offered the nearest known one in the spelling it was written in") {
  struct Case {
    const char* option;
    const char* suggestion;
  };
  for (const Case& c : {Case{"--nproc-per-nod", "--nproc-per-node"}, Case{"--nproc_per_nod", "--nproc_per_node"},
                        Case{"--rdzv-endpiont", "--rdzv-endpoint"}, Case{"--max_restart", "--max_restarts"},
                        Case{"--launcher_arg", "--launcher_args"}, Case{"--hostfiel", "--hostfile"},
                        Case{"--dry_rnu", "--dry_run"}, Case{"--dry-rnu", "--dry-run"},
                        Case{"--local-rank-filter", "--local-ranks-filter"}}) {
    CAPTURE(c.option);
    auto r = Parse({c.option, "x"});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == std::string("unknown option '") + c.option + "' (did you mean '" + c.suggestion +
                                      "'?); run 'dslaunch --help' for the list");
  }
  // Either spelling of every option is accepted, --dry-run's too.
  auto dry = Parse({"--dry_run", "--no-local-rank", "x.py"});
  REQUIRE(dry.ok());
  CHECK(dry->options.dry_run == DryRunFormat::kTable);
  CHECK(dry->options.no_local_rank);
}

TEST_CASE("A bad number says what a valid value looks like") {
  struct Case {
    std::vector<std::string> args;
    const char* error;
  };
  for (const Case& c : {
           Case{{"--grace_period=abc", "x"}, "--grace_period: 'abc' is not a number of seconds (e.g. 30 or 0.5)"},
           Case{{"--heartbeat-timeout", "10s", "x"},
                "--heartbeat_timeout: '10s' is not a number of seconds (e.g. 30 or 0.5)"},
           Case{{"--num_nodes", "1.5", "x"}, "--num_nodes: '1.5' is not a whole number (e.g. 4)"},
           Case{{"--master_port", "http", "x"}, "--master_port: 'http' is not a TCP port number (e.g. 29500)"},
           Case{{"--straggler_factor", "abc", "x"}, "--straggler_factor: 'abc' is not a number (e.g. 1.5)"},
           Case{{"--max_restarts", "99999999999", "x"},
                "--max_restarts: '99999999999' is out of range: expected a whole number (e.g. 4)"},
           Case{{"--store_proxy", "maybe", "x"}, "--store_proxy: 'maybe': expected on or off"},
       }) {
    CAPTURE(c.error);
    auto r = Parse(c.args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.error);
  }
}

}  // namespace
}  // namespace dslaunch::launcher
