#include "launcher/plan/exported_env.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "launcher/plan/env_contract.h"

namespace dslaunch::launcher {
namespace {

using Env = std::map<std::string, std::string>;

Env Exported(const ExportOptions& options) {
  Result<Env> env = ExportedEnvironment(options);
  REQUIRE_MESSAGE(env.ok(), env.status().ToString());
  return *env;
}

TEST_CASE("ExportedEnvironment takes DeepSpeed's prefixes, PATH and LD_LIBRARY_PATH from the launcher") {
  ExportOptions options;
  options.launcher_env = {
      {"NCCL_DEBUG", "INFO"},
      {"NCCL_IB_HCA", "mlx5_0"},
      {"PYTHONPATH", "/src"},
      {"PYTHONUNBUFFERED", "1"},
      {"UCX_TLS", "tcp"},
      {"MLFLOW_TRACKING_URI", "http://mlflow:5000"},
      {"PATH", "/usr/bin"},
      {"LD_LIBRARY_PATH", "/usr/local/cuda/lib64"},
      // Not exported: other names, near misses, and lower case (DeepSpeed matches case-sensitively).
      {"HOME", "/home/u"},
      {"CUDA_HOME", "/usr/local/cuda"},
      {"MY_NCCL_DEBUG", "x"},
      {"nccl_debug", "x"},
      {"PATHS", "x"},
      {"LD_PRELOAD", "x"},
      {"MV2_ENABLE_AFFINITY", "0"},
      {"HF_TOKEN", "hf_x"},
  };
  const Env want = {
      {"NCCL_DEBUG", "INFO"},
      {"NCCL_IB_HCA", "mlx5_0"},
      {"PYTHONPATH", "/src"},
      {"PYTHONUNBUFFERED", "1"},
      {"UCX_TLS", "tcp"},
      {"MLFLOW_TRACKING_URI", "http://mlflow:5000"},
      {"PATH", "/usr/bin"},
      {"LD_LIBRARY_PATH", "/usr/local/cuda/lib64"},
  };
  CHECK(Exported(options) == want);
}

TEST_CASE("IsExportedByDefault matches prefixes and exact names") {
  for (const char* name : {"NCCL", "NCCL_SOCKET_IFNAME", "PYTHONHOME", "PYTHON_X", "UCX_NET_DEVICES",
                           "MLFLOW_RUN_ID", "PATH", "LD_LIBRARY_PATH"}) {
    CAPTURE(name);
    CHECK(IsExportedByDefault(name));
  }
  for (const char* name : {"", "PATH_X", "XPATH", "LD_LIBRARY_PATH2", "CUDA_VISIBLE_DEVICES", "NCC",
                           "Nccl_DEBUG", "OMP_NUM_THREADS"}) {
    CAPTURE(name);
    CHECK_FALSE(IsExportedByDefault(name));
  }
}

TEST_CASE("ExportedEnvironment layers launcher env < env files in order < --export in order") {
  ExportOptions options;
  options.launcher_env = {{"NCCL_DEBUG", "WARN"}, {"PATH", "/usr/bin"}, {"FROM_SHELL", "shell"},
                          {"UCX_TLS", "rc"}};
  options.env_files = {
      {"/home/u/.deepspeed_env", {{"NCCL_DEBUG", "INFO"}, {"A", "home-ds"}, {"B", "home-ds"}}},
      {"/home/u/.dslaunch_env", {{"B", "home"}, {"C", "home"}, {"C", "home-again"}}},
      {"/work/.dslaunch_env", {{"C", "cwd"}, {"D", "cwd"}, {"UCX_TLS", "tcp"}}},
  };
  options.exports = {"D=cli", "E=first", "E=second", "FROM_SHELL", "UCX_TLS"};
  const Env want = {
      {"NCCL_DEBUG", "INFO"},   // a file beats the launcher env
      {"PATH", "/usr/bin"},     // untouched
      {"A", "home-ds"},         // only in one file
      {"B", "home"},            // .dslaunch_env beats .deepspeed_env
      {"C", "cwd"},             // the working directory beats home; within a file the last line wins
      {"D", "cli"},             // --export beats files
      {"E", "second"},          // the last --export wins
      {"FROM_SHELL", "shell"},  // --export NAME copies the launcher's value
      {"UCX_TLS", "rc"},        // ...even over a file
  };
  CHECK(Exported(options) == want);
}

TEST_CASE("ExportedEnvironment puts the working directory in front of PYTHONPATH, as DeepSpeed does") {
  ExportOptions options;
  options.working_directory = "/work/run";
  CHECK(Exported(options) == Env{{"PYTHONPATH", "/work/run"}});

  options.launcher_env = {{"PYTHONPATH", ""}};
  CHECK(Exported(options) == Env{{"PYTHONPATH", "/work/run"}});

  options.launcher_env = {{"PYTHONPATH", "/src:/lib"}};
  CHECK(Exported(options) == Env{{"PYTHONPATH", "/work/run:/src:/lib"}});

  // An env file or --export still replaces the whole value.
  options.env_files = {{"f", {{"PYTHONPATH", "/from/file"}}}};
  CHECK(Exported(options) == Env{{"PYTHONPATH", "/from/file"}});
  options.exports = {"PYTHONPATH=/from/cli"};
  CHECK(Exported(options) == Env{{"PYTHONPATH", "/from/cli"}});
}

TEST_CASE("ExportedEnvironment accepts both --export forms") {
  ExportOptions options;
  options.launcher_env = {{"WANDB_PROJECT", "p"}, {"EMPTY", ""}};
  options.exports = {"WANDB_PROJECT", "EMPTY", "X=", "Y=a=b", "Z= spaced "};
  CHECK(Exported(options) ==
        Env{{"WANDB_PROJECT", "p"}, {"EMPTY", ""}, {"X", ""}, {"Y", "a=b"}, {"Z", " spaced "}});
}

TEST_CASE("ExportedEnvironment reports a bad --export by name, never by value") {
  struct Case {
    std::string token;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"", "--export: empty value; expected NAME or NAME=VALUE"},
      {"=hunter2", "--export: invalid variable name '' (letters, digits and '_', not starting with a digit)"},
      {"1X=hunter2", "--export: invalid variable name '1X' (letters, digits and '_', not starting with "
                     "a digit)"},
      {"MY-TOKEN=hunter2", "--export: invalid variable name 'MY-TOKEN' (letters, digits and '_', not "
                           "starting with a digit)"},
      {"UNSET_VAR", "--export UNSET_VAR: UNSET_VAR is not set in the launcher's environment; use "
                    "--export UNSET_VAR=VALUE to give a value"},
      {"RANK=3", "--export RANK: RANK is set by dslaunch for each worker (docs/launch-plan.md) and "
                 "cannot be exported"},
      {"CUDA_VISIBLE_DEVICES", "--export CUDA_VISIBLE_DEVICES: CUDA_VISIBLE_DEVICES is set by dslaunch "
                               "for each worker (docs/launch-plan.md) and cannot be exported"},
      {std::string("A=x\0y", 5), "--export A: value holds a NUL byte"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.token);
    ExportOptions options;
    options.launcher_env = {{"CUDA_VISIBLE_DEVICES", "0"}};
    options.exports = {"OK=1", c.token};
    Result<Env> got = ExportedEnvironment(options);
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == StatusCode::kInvalidArgument);
    CHECK(got.status().message() == c.want);
    CHECK(got.status().message().find("hunter2") == std::string::npos);
  }
}

TEST_CASE("ExportedEnvironment drops contract variables from files, and checks hand-built files") {
  ExportOptions options;
  options.env_files = {{"f", {{"CUDA_VISIBLE_DEVICES", "0,1"}, {"RANK", "0"}, {"OMP_NUM_THREADS", "4"}}}};
  CHECK(Exported(options) == Env{{"OMP_NUM_THREADS", "4"}});

  options.env_files = {{"f", {{"BAD NAME", "x"}}}};
  Result<Env> bad_name = ExportedEnvironment(options);
  REQUIRE_FALSE(bad_name.ok());
  CHECK(bad_name.status().message() == "f: invalid variable name 'BAD NAME'");

  options.env_files = {{"f", {{"A", std::string("x\0y", 3)}}}};
  Result<Env> nul = ExportedEnvironment(options);
  REQUIRE_FALSE(nul.ok());
  CHECK(nul.status().message() == "f: A: value holds a NUL byte");
}

TEST_CASE("IsContractVariable covers every variable WorkerEnvironment sets") {
  LaunchPlan plan;
  NodePlan node;
  WorkerPlan worker;
  for (const auto& [name, value] : WorkerEnvironment(plan, node, worker, {})) {
    CAPTURE(name);
    CHECK(IsContractVariable(name));
  }
  CHECK(IsContractVariable("DSLAUNCH_STORE_SECRET_FILE"));
  CHECK(IsContractVariable("MASTER_ADDR"));
  CHECK_FALSE(IsContractVariable("OMP_NUM_THREADS"));
  CHECK_FALSE(IsContractVariable("NCCL_DEBUG"));
  CHECK_FALSE(IsContractVariable("rank"));
}

TEST_CASE("LooksSecret flags names holding TOKEN, SECRET, PASSWORD, PASSWD, KEY or CREDENTIAL") {
  struct Case {
    const char* name;
    bool secret;
  };
  const std::vector<Case> cases = {
      {"HF_TOKEN", true},
      {"AZUREML_RUN_TOKEN", true},
      {"hf_token", true},
      {"GITHUBTOKEN", true},
      {"AWS_SECRET_ACCESS_KEY", true},
      {"WANDB_API_KEY", true},
      {"ApiKey", true},
      {"MLFLOW_TRACKING_PASSWORD", true},
      {"DB_PASSWD", true},
      {"GOOGLE_APPLICATION_CREDENTIALS", true},
      {"Secret", true},
      // Substring matching on purpose: harmless false positives.
      {"KEYBOARD", true},
      {"MONKEY_PATCH", true},
      {"NCCL_DEBUG", false},
      {"PATH", false},
      {"PYTHONPATH", false},
      {"MLFLOW_TRACKING_URI", false},
      {"TOKE", false},
      {"KE_Y", false},
      {"", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CHECK(LooksSecret(c.name) == c.secret);
  }
}

TEST_CASE("RedactValue and RedactEnvironment hide only secret-looking values") {
  CHECK(RedactValue("HF_TOKEN", "hf_abc") == "<redacted>");
  CHECK(RedactValue("HF_TOKEN", "") == "<redacted>");
  CHECK(RedactValue("NCCL_DEBUG", "INFO") == "INFO");
  CHECK(RedactEnvironment({{"HF_TOKEN", "hf_abc"}, {"NCCL_DEBUG", "INFO"}, {"WANDB_API_KEY", "k"}}) ==
        Env{{"HF_TOKEN", "<redacted>"}, {"NCCL_DEBUG", "INFO"}, {"WANDB_API_KEY", "<redacted>"}});
}

TEST_CASE("RedactValue hides the credentials of URLs in any value") {
  struct Case {
    const char* value;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"https://bob:pass@host", "https://bob:***@host"},
      {"https://bob:pass@mlflow.example.com:5000/api?x=1#f", "https://bob:***@mlflow.example.com:5000/api?x=1#f"},
      {"https://ghp_token123@github.com/org/repo.git", "https://***@github.com/org/repo.git"},
      {"postgresql://u:p@ss@db:5432/x", "postgresql://u:***@db:5432/x"},
      {"http://a:b@h1,http://c:d@h2", "http://a:***@h1,http://c:***@h2"},
      {"x http://a:b@h y", "x http://a:***@h y"},
      {"https://host/path@not-userinfo", "https://host/path@not-userinfo"},
      {"https://host:8080/", "https://host:8080/"},
      {"https://@host", "https://@host"},
      {"file:///tmp/a@b", "file:///tmp/a@b"},
      {"user:pass@host", "user:pass@host"},  // not a URL
      {"://", "://"},
      {"", ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.value);
    CHECK(RedactValue("MLFLOW_TRACKING_URI", c.value) == c.want);
  }
  CHECK(RedactEnvironment({{"MLFLOW_TRACKING_URI", "https://bob:pass@host"}}) ==
        Env{{"MLFLOW_TRACKING_URI", "https://bob:***@host"}});
}

TEST_CASE("ExportedEnvironment exports secret-looking names like any other") {
  // Secrets travel to the workers (MLflow needs its password); they are only kept out of output.
  ExportOptions options;
  options.launcher_env = {{"MLFLOW_TRACKING_TOKEN", "t"}, {"HF_TOKEN", "h"}};
  options.exports = {"HF_TOKEN"};
  CHECK(Exported(options) == Env{{"MLFLOW_TRACKING_TOKEN", "t"}, {"HF_TOKEN", "h"}});
}

}  // namespace
}  // namespace dslaunch::launcher
