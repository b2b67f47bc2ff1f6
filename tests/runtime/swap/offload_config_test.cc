#include "runtime/swap/offload_config.h"

#include <doctest/doctest.h>

#include <functional>

namespace dslaunch::runtime::swap {
namespace {

TEST_CASE("The offload blocks default to DeepSpeed's values and validate as given") {
  AioConfig aio;
  CHECK(aio.block_size == 1048576);
  CHECK(aio.queue_depth == 8);
  CHECK(aio.intra_op_parallelism == 1);
  CHECK_FALSE(aio.single_submit);
  CHECK(aio.overlap_events);
  CHECK(ValidateAioConfig(aio).ok());
  OffloadOptimizerConfig opt;
  CHECK(opt.buffer_count == 4);
  CHECK(ValidateOffloadOptimizerConfig(opt).ok());
  OffloadParamConfig param;
  CHECK(param.buffer_count == 5);
  CHECK(param.buffer_size == 100000000);
  CHECK(param.max_in_cpu == 1000000000);
  CHECK(ValidateOffloadParamConfig(param, 1).ok());
}

TEST_CASE("ValidateAioConfig names the key, the value and the rule") {
  struct Case {
    const char* name;
    std::function<void(AioConfig&)> edit;
    const char* message;
  };
  const Case cases[] = {
      {"zero block", [](AioConfig& c) { c.block_size = 0; }, "aio.block_size: must be a positive multiple of 4096"},
      {"unaligned block", [](AioConfig& c) { c.block_size = 1000000; }, "got 1000000"},
      {"huge block", [](AioConfig& c) { c.block_size = uint64_t{1} << 31; }, "aio.block_size"},
      {"zero depth", [](AioConfig& c) { c.queue_depth = 0; }, "aio.queue_depth: must be in [1, 4096], got 0"},
      {"deep queue", [](AioConfig& c) { c.queue_depth = 5000; }, "got 5000"},
      {"no threads", [](AioConfig& c) { c.intra_op_parallelism = 0; }, "aio.intra_op_parallelism: must be >= 1, got 0"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    AioConfig aio;
    c.edit(aio);
    Status s = ValidateAioConfig(aio);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message().find(c.message) != std::string::npos);
  }
  AioConfig ok;
  ok.block_size = 262144;
  ok.queue_depth = 32;
  CHECK(ValidateAioConfig(ok).ok());
}

TEST_CASE("offload_optimizer on nvme needs a path and at least one buffer") {
  OffloadOptimizerConfig c;
  c.device = OffloadDevice::kNvme;
  Status s = ValidateOffloadOptimizerConfig(c);
  CHECK(s.message().find("zero_optimization.offload_optimizer.nvme_path: required") == 0);
  c.nvme_path = "/local_nvme";
  CHECK(ValidateOffloadOptimizerConfig(c).ok());
  c.buffer_count = 0;
  s = ValidateOffloadOptimizerConfig(c, "cfg.json: zero_optimization.offload_optimizer");
  CHECK(s.message() == "cfg.json: zero_optimization.offload_optimizer.buffer_count: must be >= 1, got 0");
}

TEST_CASE("offload_param needs stage 3, a path on nvme, buffers and a buffer size") {
  OffloadParamConfig c;
  c.device = OffloadDevice::kNvme;
  c.nvme_path = "/local_nvme";
  CHECK(ValidateOffloadParamConfig(c, 3).ok());
  Status s = ValidateOffloadParamConfig(c, 2);
  CHECK(s.message().find("zero_optimization.offload_param.device: \"nvme\" needs zero_optimization.stage 3") == 0);
  CHECK(s.message().find("stage is 2") != std::string::npos);
  c.device = OffloadDevice::kCpu;
  CHECK_FALSE(ValidateOffloadParamConfig(c, 1).ok());
  c.device = OffloadDevice::kNvme;
  c.nvme_path.clear();
  CHECK(ValidateOffloadParamConfig(c, 3).message().find(".nvme_path: required") != std::string::npos);
  c.nvme_path = "/x";
  c.buffer_size = 0;
  CHECK(ValidateOffloadParamConfig(c, 3).message().find(".buffer_size: must be >= 1") != std::string::npos);
  c.buffer_size = 1;
  c.buffer_count = -1;
  CHECK(ValidateOffloadParamConfig(c, 3).message().find(".buffer_count: must be >= 1, got -1") != std::string::npos);
}

TEST_CASE("ParseOffloadDevice takes DeepSpeed's three names and rejects others by name") {
  CHECK(*ParseOffloadDevice("none", "x") == OffloadDevice::kNone);
  CHECK(*ParseOffloadDevice("cpu", "x") == OffloadDevice::kCpu);
  CHECK(*ParseOffloadDevice("nvme", "x") == OffloadDevice::kNvme);
  auto bad = ParseOffloadDevice("NVMe", "zero_optimization.offload_param");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "zero_optimization.offload_param.device: must be \"none\", \"cpu\" or \"nvme\", got \"NVMe\"");
  for (auto d : {OffloadDevice::kNone, OffloadDevice::kCpu, OffloadDevice::kNvme}) {
    CHECK(*ParseOffloadDevice(OffloadDeviceName(d), "x") == d);
  }
}

TEST_CASE("Accepted keys that change nothing here get a note, the others none") {
  CHECK_FALSE(NoteFor(AioConfig{}).has_value());
  AioConfig aio;
  aio.intra_op_parallelism = 4;
  CHECK(NoteFor(aio)->find("aio.intra_op_parallelism: 4 accepted") == 0);
  OffloadOptimizerConfig opt;
  CHECK(NotesFor(opt).empty());
  opt.pin_memory = true;
  CHECK(NotesFor(opt).empty());  // pinning nothing: the state is not offloaded
  opt.device = OffloadDevice::kCpu;
  std::vector<KeyNote> notes = NotesFor(opt);
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].key == "device");
  CHECK(notes[0].text == "\"cpu\" accepted; the optimizer state already lives in host memory on this CPU runtime, "
                         "so nothing moves");
  CHECK(notes[1].key == "pin_memory");
  OffloadParamConfig param;
  param.device = OffloadDevice::kNvme;
  CHECK(NotesFor(param).empty());
  param.device = OffloadDevice::kCpu;
  notes = NotesFor(param);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].text.find("the parameters already live in host memory") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::runtime::swap
