// The command line of node mode (docs/node-mode.md): torchrun's options and spellings, and the
// PET_ variables Kubernetes' PyTorchJob sets.
#include <doctest/doctest.h>

#include "launcher/cli/cli.h"
#include "launcher/start/agent_starter.h"

namespace dslaunch::launcher {
namespace {

Result<CliCommand> Parse(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), "dslaunch");
  return ParseCommandLine(args, env);
}

TEST_CASE("A torchrun c10d command line is node mode, with torchrun's dashed spellings") {
  auto c = Parse({"--nnodes=2", "--nproc-per-node=4", "--rdzv-id=job7", "--rdzv-backend=c10d",
                  "--rdzv-endpoint=node0.svc:29411", "--max-restarts", "3", "train.py", "--nproc-per-node", "9"});
  REQUIRE(c.ok());
  const CliOptions& o = c->options;
  REQUIRE(o.rendezvous.has_value());
  CHECK(o.rendezvous->host == "node0.svc");
  CHECK(o.rendezvous->port == 29411);
  CHECK(o.rendezvous->min_nodes == 2);
  CHECK(o.rendezvous->max_nodes == 2);
  CHECK_FALSE(o.rendezvous->node_rank.has_value());
  CHECK(o.rendezvous->join_timeout == kDefaultJoinTimeout);
  CHECK(o.rendezvous->last_call_timeout == kDefaultLastCallTimeout);
  CHECK(o.num_gpus == 4);
  CHECK(o.job_id == "job7");
  CHECK(o.max_restarts == 3);
  // The program's own arguments are never rewritten.
  CHECK(o.program_args == std::vector<std::string>{"--nproc-per-node", "9"});
}

TEST_CASE("A torchrun static command line is node mode with the endpoint on --master_addr at --rdzv_port") {
  auto c = Parse({"--nnodes", "2:4", "--node_rank", "1", "--master_addr", "10.0.0.5", "--master_port", "29500",
                  "--rdzv_conf", "join_timeout=90,last_call_timeout=5", "x.py"});
  REQUIRE(c.ok());
  const CliOptions& o = c->options;
  REQUIRE(o.rendezvous.has_value());
  CHECK(o.rendezvous->host == "10.0.0.5");
  CHECK(o.rendezvous->port == kDefaultRdzvPort);
  CHECK(o.rendezvous->min_nodes == 2);
  CHECK(o.rendezvous->max_nodes == 4);
  CHECK(o.rendezvous->node_rank == 1);
  CHECK(o.rendezvous->join_timeout == std::chrono::seconds(90));
  CHECK(o.rendezvous->last_call_timeout == std::chrono::seconds(5));
  CHECK(o.master_port == 29500);
  // Without --rdzv_id every node names the job after the endpoint.
  CHECK(o.job_id == "rdzv-10.0.0.5-29400");
}

TEST_CASE("Every option is read from PET_ variables when the command line does not give it") {
  std::map<std::string, std::string> env{{"PET_NNODES", "3"},          {"PET_NPROC_PER_NODE", "auto"},
                                         {"PET_NODE_RANK", "2"},       {"PET_MASTER_ADDR", "job-0.job"},
                                         {"PET_MASTER_PORT", "23456"}, {"PET_MAX_RESTARTS", "1"},
                                         {"PET_NO_PYTHON", "1"},       {"PET_RDZV_ID", "from-env"}};
  auto c = Parse({"--rdzv_id", "from-argv", "./a.out"}, env);
  REQUIRE(c.ok());
  const CliOptions& o = c->options;
  REQUIRE(o.rendezvous.has_value());
  CHECK(o.rendezvous->host == "job-0.job");
  CHECK(o.rendezvous->max_nodes == 3);
  CHECK(o.rendezvous->node_rank == 2);
  CHECK(o.master_port == 23456);
  CHECK(o.max_restarts == 1);
  CHECK(o.no_python);
  CHECK(o.nproc_keyword == NprocKeyword::kAuto);
  CHECK(o.job_id == "from-argv");  // the command line wins
}

TEST_CASE("A bad PET_ value is reported with the variable it came from") {
  auto bad = Parse({"x.py"}, {{"PET_NNODES", "two"}, {"PET_NODE_RANK", "0"}, {"PET_MASTER_ADDR", "m"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "--nnodes 'two': expected N or MIN:MAX with 1 <= MIN <= MAX (e.g. 4 or 2:4) (options from the environment: "
        "PET_MASTER_ADDR, PET_NNODES, PET_NODE_RANK)");
  auto flag = Parse({"x.py"}, {{"PET_NO_PYTHON", "yes please"}});
  REQUIRE_FALSE(flag.ok());
  CHECK(flag.status().message() ==
        "PET_NO_PYTHON='yes please': --no_python is a flag; expected 1 or true to set it, 0 or false to leave it off");
  auto off = Parse({"x.py"}, {{"PET_NO_PYTHON", "0"}});
  REQUIRE(off.ok());
  CHECK_FALSE(off->options.no_python);
}

TEST_CASE("--nproc_per_node takes a number or torchrun's auto, gpu and cpu") {
  for (auto [text, keyword] : {std::pair{"auto", NprocKeyword::kAuto}, {"gpu", NprocKeyword::kGpu},
                               {"cpu", NprocKeyword::kCpu}}) {
    auto c = Parse({"--nproc_per_node", text, "x.py"});
    REQUIRE(c.ok());
    CHECK(c->options.nproc_keyword == keyword);
    CHECK_FALSE(c->options.num_gpus.has_value());
  }
  auto bad = Parse({"--nproc_per_node", "4x", "x.py"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "--nproc_per_node '4x': expected a number of workers per node, or auto, gpu or cpu");
}

TEST_CASE("Node mode refuses what it cannot do, saying what to give instead") {
  struct Case {
    std::vector<std::string> args;
    const char* error;
  };
  for (const Case& c : {
           Case{{"--node_rank", "0", "x.py"},
                "node mode (--node_rank, --rdzv_id or --rdzv_conf without a hostfile) needs the rendezvous endpoint: "
                "--rdzv_endpoint HOST[:PORT] or --master_addr HOST, the address of the node that hosts it"},
           Case{{"--rdzv_endpoint", "a:b", "x.py"}, "--rdzv_endpoint 'a:b': port 'b' is not a TCP port (1-65535, or 0 for any free port on a one-node job)"},
           Case{{"--rdzv_endpoint", "fe80::1:29400", "x.py"},
                "--rdzv_endpoint 'fe80::1:29400': expected HOST[:PORT] (IPv6 in brackets: [ADDR]:PORT)"},
           Case{{"--rdzv_endpoint", "h", "--nnodes", "2", "--node_rank", "2", "x.py"},
                "--node_rank 2 is outside the 2 nodes of --nnodes"},
           Case{{"--rdzv_endpoint", "h", "--rdzv_backend", "etcd", "x.py"},
                "--rdzv_backend etcd: dslaunch's own store plays the part of torchrun's c10d and static backends; give "
                "c10d or static, or leave it out"},
           Case{{"--rdzv_endpoint", "h", "--rdzv_conf", "timeout=5", "x.py"},
                "--rdzv_conf: unknown key 'timeout'; dslaunch's rendezvous has join_timeout and last_call_timeout "
                "(seconds)"},
           Case{{"--rdzv_endpoint", "h", "--rdzv_conf", "join_timeout=0", "x.py"},
                "--rdzv_conf join_timeout='0': expected whole seconds from 1 to 86400"},
           Case{{"-H", "hosts", "--rdzv_endpoint", "h", "x.py"},
                "--rdzv_endpoint, --rdzv_id and --rdzv_conf are for node mode, where every node runs dslaunch itself; "
                "they exclude --hostfile"},
           Case{{"--standalone", "--nnodes", "2", "x.py"},
                "--standalone is a one-node job on this machine; it excludes --hostfile, --no_ssh, --rdzv_endpoint, "
                "--rdzv_id, --rdzv_conf, --node_rank and --nnodes above 1"},
           Case{{"--rdzv_endpoint", "h", "--rdzv_id", "a", "--job_id", "b", "x.py"},
                "--rdzv_id a and --job_id b disagree: both name the job; keep one of them"},
           Case{{"--rdzv_endpoint", "h", "--rdzv_id", "../x", "x.py"},
                "--rdzv_id: job id '../x': '/' is not allowed (a job id is 1 to 128 characters from A-Z a-z 0-9 '.' "
                "'_' '-', starting with a letter or digit)"},
       }) {
    CAPTURE(c.error);
    auto r = Parse(c.args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.error);
  }
}

TEST_CASE("--standalone and --nnodes 1 stay one-node jobs on this machine") {
  for (std::vector<std::string> args : {std::vector<std::string>{"--standalone", "--nproc_per_node", "2", "x.py"},
                                        std::vector<std::string>{"--nnodes", "1", "--nproc-per-node", "2", "x.py"}}) {
    auto c = Parse(args);
    REQUIRE(c.ok());
    CHECK_FALSE(c->options.rendezvous.has_value());
    CHECK(c->options.num_gpus == 2);
  }
}

}  // namespace
}  // namespace dslaunch::launcher

namespace dslaunch::launcher {
namespace {

TEST_CASE("--exit_codes and PET_EXIT_CODES choose how the exit classes are written; the default is the classes") {
  CHECK(Parse({"x.py"})->options.exit_codes == ExitCodeScheme::kClasses);
  CHECK(Parse({"--exit_codes", "kubeflow", "x.py"})->options.exit_codes == ExitCodeScheme::kKubeflow);
  CHECK(Parse({"--exit_codes=classes", "x.py"})->options.exit_codes == ExitCodeScheme::kClasses);
  // A manifest sets it in the pod's env; the command line still wins.
  CHECK(Parse({"x.py"}, {{"PET_EXIT_CODES", "kubeflow"}})->options.exit_codes == ExitCodeScheme::kKubeflow);
  CHECK(Parse({"--exit_codes", "classes", "x.py"}, {{"PET_EXIT_CODES", "kubeflow"}})->options.exit_codes ==
        ExitCodeScheme::kClasses);
  auto bad = Parse({"x.py"}, {{"PET_EXIT_CODES", "pytorchjob"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "--exit_codes 'pytorchjob': expected 'classes' (75 infrastructure, 76 requeue, the default) or 'kubeflow' "
        "(203 and 204, which a PyTorchJob with restartPolicy ExitCode retries) (options from the environment: "
        "PET_EXIT_CODES)");
}

TEST_CASE("A node-mode agent is told the exit-code scheme only when it is not the default") {
  AgentCommand ac{"/opt/dslaunch-agent", "job-0.job", 29400, "j", 1, AgentCommand::Join{2, std::chrono::seconds(300)}};
  const std::vector<std::string> base = {"/opt/dslaunch-agent", "--endpoint", "job-0.job:29400", "--job_id", "j",
                                         "--node_rank", "1", "--slots", "2", "--join_timeout", "300"};
  CHECK(AgentArgv(ac, ac.endpoint_host) == base);
  ac.exit_codes = ExitCodeScheme::kKubeflow;
  std::vector<std::string> kubeflow = base;
  kubeflow.insert(kubeflow.end(), {"--exit_codes", "kubeflow"});
  CHECK(AgentArgv(ac, ac.endpoint_host) == kubeflow);
}

}  // namespace
}  // namespace dslaunch::launcher
