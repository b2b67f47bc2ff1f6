#include "launcher/plan/visible_devices.h"

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

namespace dslaunch::launcher {
namespace {

FilterOptions Gpus(std::optional<int> num_gpus) { return FilterOptions{"", "", std::nullopt, num_gpus}; }

TEST_CASE("ParseVisibleDevices reads device ordinals in the order given") {
  struct Case {
    const char* value;
    std::vector<int> want;
  };
  for (const Case& c : {Case{"0,2", {0, 2}}, Case{"3", {3}}, Case{"2,0", {2, 0}}, Case{" 1 , 5 ", {1, 5}},
                        Case{"", {}}, Case{"  ", {}}, Case{"1023", {1023}}}) {
    CAPTURE(c.value);
    Result<std::vector<int>> got = ParseVisibleDevices(c.value);
    REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    CHECK(*got == c.want);
  }
}

TEST_CASE("ParseVisibleDevices refuses what is not a list of ordinals") {
  struct Case {
    const char* value;
    const char* error;
  };
  for (const Case& c :
       {Case{"GPU-8a1f2c3d", "CUDA_VISIBLE_DEVICES='GPU-8a1f2c3d': 'GPU-8a1f2c3d' is not a device ordinal; "
                             "dslaunch needs ordinals like 0,2 (not GPU or MIG UUIDs, not negative numbers)"},
        Case{"-1", "CUDA_VISIBLE_DEVICES='-1': '-1' is not a device ordinal; dslaunch needs ordinals like 0,2 "
                   "(not GPU or MIG UUIDs, not negative numbers)"},
        Case{"0,,1", "CUDA_VISIBLE_DEVICES='0,,1': empty item in the list"},
        Case{"0,", "CUDA_VISIBLE_DEVICES='0,': empty item in the list"},
        Case{",0", "CUDA_VISIBLE_DEVICES=',0': empty item in the list"},
        Case{"0:1", "CUDA_VISIBLE_DEVICES='0:1': '0:1' is not a device ordinal; dslaunch needs ordinals like 0,2 "
                    "(not GPU or MIG UUIDs, not negative numbers)"},
        Case{"[0]", "CUDA_VISIBLE_DEVICES='[0]': '[0]' is not a device ordinal; dslaunch needs ordinals like 0,2 "
                    "(not GPU or MIG UUIDs, not negative numbers)"},
        // A fullwidth digit one (UTF-8 EF BC 91) is not an ASCII ordinal.
        Case{"\xef\xbc\x91", "CUDA_VISIBLE_DEVICES='\xef\xbc\x91': '\xef\xbc\x91' is not a device ordinal; dslaunch "
                             "needs ordinals like 0,2 (not GPU or MIG UUIDs, not negative numbers)"},
        Case{"1,1", "CUDA_VISIBLE_DEVICES='1,1': device 1 is listed twice"},
        Case{"1024", "CUDA_VISIBLE_DEVICES='1024': device 1024 is beyond the limit of 1024 slots per host"},
        Case{"99999999999999999999", "CUDA_VISIBLE_DEVICES='99999999999999999999': device 99999999999999999999 "
                                     "is beyond the limit of 1024 slots per host"}}) {
    CAPTURE(c.value);
    Result<std::vector<int>> got = ParseVisibleDevices(c.value);
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == StatusCode::kInvalidArgument);
    CHECK(got.status().message() == c.error);
  }
}

TEST_CASE("SelectJobResources without CUDA_VISIBLE_DEVICES selects as usual") {
  Result<JobResources> local = SelectJobResources(std::nullopt, Gpus(3), std::nullopt);
  REQUIRE(local.ok());
  CHECK(local->resources == Resources{{"", "localhost", {0, 1, 2}}});
  CHECK_FALSE(local->no_devices);
  Result<JobResources> one = SelectJobResources(std::nullopt, Gpus(std::nullopt), std::nullopt);
  REQUIRE(one.ok());
  CHECK(one->resources == Resources{{"", "localhost", {0}}});
  Result<JobResources> too_many = SelectJobResources(std::nullopt, Gpus(65536), std::nullopt);
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().message() == "--num_gpus/--nproc_per_node 65536 exceeds the limit of 1024 slots per host");
}

TEST_CASE("NeedsGpuDiscovery holds only for a local job without a worker count or CUDA_VISIBLE_DEVICES") {
  CHECK(NeedsGpuDiscovery(false, Gpus(std::nullopt), std::nullopt));
  CHECK(NeedsGpuDiscovery(false, FilterOptions{"localhost:1", "", std::nullopt, std::nullopt}, std::nullopt));
  CHECK_FALSE(NeedsGpuDiscovery(true, Gpus(std::nullopt), std::nullopt));
  CHECK_FALSE(NeedsGpuDiscovery(false, Gpus(2), std::nullopt));
  CHECK_FALSE(NeedsGpuDiscovery(false, Gpus(std::nullopt), std::string("0,1")));
  CHECK_FALSE(NeedsGpuDiscovery(false, Gpus(std::nullopt), std::string("")));
}

TEST_CASE("SelectJobResources gives a local job the machine's GPUs as slots, one slot without GPUs") {
  Result<JobResources> four = SelectJobResources(std::nullopt, Gpus(std::nullopt), std::nullopt, 4);
  REQUIRE(four.ok());
  CHECK(four->resources == Resources{{"", "localhost", {0, 1, 2, 3}}});
  Result<JobResources> none = SelectJobResources(std::nullopt, Gpus(std::nullopt), std::nullopt, 0);
  REQUIRE(none.ok());
  CHECK(none->resources == Resources{{"", "localhost", {0}}});
  // --include / --exclude pick among the GPUs found.
  Result<JobResources> picked =
      SelectJobResources(std::nullopt, FilterOptions{"", "localhost:0,2", std::nullopt, std::nullopt}, std::nullopt, 4);
  REQUIRE(picked.ok());
  CHECK(picked->resources == Resources{{"", "localhost", {1, 3}}});
  // --nproc_per_node wins (the caller does not even count then).
  Result<JobResources> given = SelectJobResources(std::nullopt, Gpus(2), std::nullopt, 8);
  REQUIRE(given.ok());
  CHECK(given->resources == Resources{{"", "localhost", {0, 1}}});
}

TEST_CASE("SelectJobResources runs a local job on the launcher's visible devices only") {
  Result<JobResources> all = SelectJobResources(std::nullopt, Gpus(std::nullopt), "0,2");
  REQUIRE(all.ok());
  CHECK(all->resources == Resources{{"", "localhost", {0, 2}}});
  CHECK_FALSE(all->no_devices);

  // --num_gpus N takes the first N devices as listed; slots are ascending.
  Result<JobResources> first = SelectJobResources(std::nullopt, Gpus(2), "5,1,3");
  REQUIRE(first.ok());
  CHECK(first->resources == Resources{{"", "localhost", {1, 5}}});

  Result<JobResources> too_many = SelectJobResources(std::nullopt, Gpus(4), "0,2");
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().message() ==
        "--num_gpus/--nproc_per_node 4 but CUDA_VISIBLE_DEVICES='0,2' in the launcher's environment makes only 2 "
        "device(s) visible; ask for fewer workers or unset CUDA_VISIBLE_DEVICES");
}

TEST_CASE("SelectJobResources with an empty CUDA_VISIBLE_DEVICES hides every device from the workers") {
  Result<JobResources> cpu = SelectJobResources(std::nullopt, Gpus(4), "");
  REQUIRE(cpu.ok());
  CHECK(cpu->resources == Resources{{"", "localhost", {0, 1, 2, 3}}});
  CHECK(cpu->no_devices);
}

TEST_CASE("SelectJobResources refuses CUDA_VISIBLE_DEVICES with a hostfile or a slot filter") {
  Result<Hostfile> hostfile = ParseHostfile("localhost slots=4\n", "hosts");
  REQUIRE(hostfile.ok());
  Result<JobResources> with_hostfile = SelectJobResources(*hostfile, Gpus(std::nullopt), "0,2");
  REQUIRE_FALSE(with_hostfile.ok());
  CHECK(with_hostfile.status().message() ==
        "CUDA_VISIBLE_DEVICES='0,2' is set in the launcher's environment, but with --hostfile the hostfile's "
        "slots are the devices of every node: unset it (env -u CUDA_VISIBLE_DEVICES dslaunch ...) and choose "
        "devices with --include HOST:SLOT,SLOT");
  // Even empty: with a hostfile there is no single machine it could describe.
  CHECK_FALSE(SelectJobResources(*hostfile, Gpus(std::nullopt), "").ok());

  Result<JobResources> with_include =
      SelectJobResources(std::nullopt, FilterOptions{"localhost:1", "", std::nullopt, std::nullopt}, "0,2");
  REQUIRE_FALSE(with_include.ok());
  CHECK(with_include.status().message() ==
        "CUDA_VISIBLE_DEVICES='0,2' in the launcher's environment cannot be combined with --include (do slot ids "
        "count every device or only the visible ones?): drop the option to run on the visible devices, or unset "
        "CUDA_VISIBLE_DEVICES to choose slots yourself");
  Result<JobResources> with_exclude =
      SelectJobResources(std::nullopt, FilterOptions{"", "localhost:0", std::nullopt, std::nullopt}, "0,2");
  REQUIRE_FALSE(with_exclude.ok());
  CHECK(with_exclude.status().message().find("cannot be combined with --exclude") != std::string::npos);
  // Unset, the hostfile and the filters work as always.
  CHECK(SelectJobResources(*hostfile, FilterOptions{"localhost:1", "", std::nullopt, std::nullopt}, std::nullopt)
            ->resources == Resources{{"", "localhost", {1}}});
}

}  // namespace
}  // namespace dslaunch::launcher
