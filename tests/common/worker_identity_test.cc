#include "common/worker_identity.h"

#include <doctest/doctest.h>

namespace dslaunch {
namespace {

std::map<std::string, std::string> GoodEnv() {
  return {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
          {"NODE_RANK", "1"}, {"NNODES", "2"}, {"DSLAUNCH_RESTART_COUNT", "0"}, {"DSLAUNCH_JOB_ID", "j"},
          {"DSLAUNCH_STORE", "127.0.0.1:5000"}, {"DSLAUNCH_STORE_SECRET_FILE", "/tmp/s"}};
}

TEST_CASE("ParseWorkerIdentity reads the environment contract") {
  auto id = ParseWorkerIdentity(GoodEnv());
  REQUIRE(id.ok());
  CHECK(id->rank == 5);
  CHECK(id->world_size == 8);
  CHECK(id->local_world_size == 4);
  CHECK(id->num_nodes == 2);
  CHECK(id->store_address == "127.0.0.1:5000");
  CHECK(id->launcher_address == "127.0.0.1:5000");  // no proxy: the store is the launcher
}

TEST_CASE("ParseWorkerIdentity keeps the launcher's address beside the node's store proxy") {
  auto env = GoodEnv();
  env["DSLAUNCH_STORE"] = "unix:/tmp/d/store.sock";
  env["DSLAUNCH_LAUNCHER_ADDRESS"] = "10.0.0.1:4000";
  auto id = ParseWorkerIdentity(env);
  REQUIRE(id.ok());
  CHECK(id->store_address == "unix:/tmp/d/store.sock");
  CHECK(id->launcher_address == "10.0.0.1:4000");
}

TEST_CASE("ParseWorkerIdentity names the variable that is missing or malformed") {
  struct Case {
    const char* name;
    const char* value;  // nullptr: remove
    const char* expect;
  };
  for (const Case& c : {Case{"RANK", nullptr, "RANK is not set"}, Case{"RANK", "x", "RANK='x'"},
                        Case{"RANK", "8", "RANK=8 is not below WORLD_SIZE=8"},
                        Case{"LOCAL_RANK", "-1", "LOCAL_RANK='-1'"},
                        Case{"NODE_RANK", "2", "NODE_RANK=2 is not below NNODES=2"},
                        Case{"DSLAUNCH_STORE", nullptr, "DSLAUNCH_STORE is not set"}}) {
    CAPTURE(c.name);
    auto env = GoodEnv();
    if (c.value == nullptr) {
      env.erase(c.name);
    } else {
      env[c.name] = c.value;
    }
    auto id = ParseWorkerIdentity(env);
    REQUIRE_FALSE(id.ok());
    CHECK(id.status().message().find(c.expect) != std::string::npos);
  }
}

}  // namespace
}  // namespace dslaunch
