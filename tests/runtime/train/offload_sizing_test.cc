// Offload buffers sized to fit (runtime/train/offload_sizing.h): the keys a train.json leaves out
// or sets to "auto", parsed and sized against a budget; an explicit value that cannot fit refused
// with one that would; the advice of the memory check when the buffers dominate; and the edge's
// parsers (VmHWM, the compute threads).
#include "runtime/train/offload_sizing.h"

#include <doctest/doctest.h>

#include <string>

#include "runtime/train/available_memory.h"

namespace dslaunch::runtime {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Result<TrainConfig> Parse(const std::string& zero) {
  const std::string text = R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW"},
      "fp16": {"enabled": true}, "zero_optimization": )" + zero + R"(,
      "model": {"type": "gpt", "n_layer": 8, "n_head": 16, "n_embd": 1024, "block_size": 128, "vocab_size": 256},
      "data": {"train": "train.bin"}, "train": {"steps": 1}})";
  return ParseTrainConfig(text, "train.json", 1, [](const std::string& path) -> Result<std::string> {
    return NotFoundError(path);
  });
}

// The issue's model: a 101M-parameter gpt at stage 3, fp16, optimizer state and parameters on NVMe.
const std::string kBothOnNvme = R"({"stage": 3,
    "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"},
    "offload_param": {"device": "nvme", "nvme_path": "/nvme"}})";

const ProcessFootprint kFootprint{2, 5e6, 5e6};

TEST_CASE("The offload buffer keys accept \"auto\" and record where each value came from") {
  auto c = Parse(R"({"stage": 3, "sub_group_size": "auto", "reduce_bucket_size": 1000,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme", "buffer_count": "auto"},
      "offload_param": {"device": "nvme", "nvme_path": "/nvme", "buffer_size": "auto", "max_in_cpu": 0}})");
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->buffer_keys[BufferKey::kSubGroupSize] == KeySource::kAuto);
  CHECK(c->buffer_keys[BufferKey::kReduceBucketSize] == KeySource::kExplicit);
  CHECK(c->buffer_keys[BufferKey::kPrefetchBucketSize] == KeySource::kDefault);
  CHECK(c->buffer_keys[BufferKey::kOptimizerBufferCount] == KeySource::kAuto);
  CHECK(c->buffer_keys[BufferKey::kParamBufferCount] == KeySource::kDefault);
  CHECK(c->buffer_keys[BufferKey::kParamBufferSize] == KeySource::kAuto);
  CHECK(c->buffer_keys[BufferKey::kParamMaxInCpu] == KeySource::kExplicit);
  CHECK(c->engine.zero.reduce_bucket_size == 1000);
  CHECK(c->engine.zero.sub_group_size == 1'000'000'000);  // DeepSpeed's default until sized

  // "auto" elsewhere is still the Hugging Face Trainer's placeholder, and a wrong type says "auto" is allowed.
  auto other = Parse(R"({"stage": 3, "allgather_bucket_size": "auto"})");
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().message() == "train.json: $.zero_optimization.allgather_bucket_size: 1 value is \"auto\", "
                                    "which only the Hugging Face Trainer fills in; give it a value");
  auto wrong = Parse(R"({"stage": 3, "sub_group_size": "big"})");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message() ==
        "train.json: $.zero_optimization.sub_group_size: expected an integer >= 1 or \"auto\", got \"big\"");
}

TEST_CASE("Keys left out of an NVMe offload are sized to fit the budget, with DeepSpeed's defaults where they fit") {
  auto c = Parse(kBothOnNvme);
  REQUIRE(c.ok());
  // DeepSpeed's defaults: the optimizer ring alone is 4 x 101M x 12 bytes.
  CHECK(EstimateTrainingMemory(*c, 1, kFootprint).total() > 5.0 * 1024 * kMiB);

  TrainConfig roomy = *c;
  auto kept = SizeOffloadBuffers(&roomy, 1, kFootprint, 64.0 * 1024 * kMiB, "MemAvailable", "train.json");
  REQUIRE(kept.ok());
  CHECK_FALSE(kept->shrunk);
  CHECK(roomy.engine.zero.sub_group_size == 1'000'000'000);
  CHECK(roomy.engine.offload_optimizer.buffer_count == 4);
  CHECK(roomy.engine.offload_param.buffer_count == 5);
  CHECK(roomy.engine.offload_param.buffer_size == 12'596'224);  // the largest group (a block): the bound is never hit

  const double budget = 600.0 * 1000 * 1000;  // the issue's 600 MB cgroup cap, one rank
  auto sized = SizeOffloadBuffers(&*c, 1, kFootprint, budget, "cgroup /x limit", "train.json");
  REQUIRE_MESSAGE(sized.ok(), sized.status().ToString());
  CHECK(sized->shrunk);
  const ZeroConfig& zero = c->engine.zero;
  CAPTURE(zero.sub_group_size);
  CHECK(zero.sub_group_size == 470'000);
  CHECK(zero.reduce_bucket_size == 470'000);
  CHECK(zero.stage3_prefetch_bucket_size == 470'000);
  CHECK(c->engine.offload_param.max_in_cpu == 470'000);
  CHECK(c->engine.offload_optimizer.buffer_count == kMinSizedOptimizerBuffers);
  CHECK(c->engine.offload_param.buffer_count == kMinSizedParamBuffers);
  CHECK(EstimateTrainingMemory(*c, 1, kFootprint).total() <= budget);
  // The next value of two significant digits does not fit: the largest was chosen.
  TrainConfig larger = *c;
  larger.engine.zero.sub_group_size = larger.engine.zero.reduce_bucket_size =
      larger.engine.zero.stage3_prefetch_bucket_size = 480'000;
  larger.engine.offload_param.max_in_cpu = 480'000;
  CHECK(EstimateTrainingMemory(larger, 1, kFootprint).total() > budget);
  CHECK(SizedBuffersLine(*sized) ==
        "offload buffers for 572.2 MiB per rank (DeepSpeed's defaults do not fit): zero_optimization.sub_group_size "
        "470000 (left out), zero_optimization.reduce_bucket_size 470000 (left out), "
        "zero_optimization.stage3_prefetch_bucket_size 470000 (left out), "
        "zero_optimization.offload_optimizer.buffer_count 3 (left out), zero_optimization.offload_param.buffer_count 2 "
        "(left out), zero_optimization.offload_param.buffer_size 12596224 (left out), "
        "zero_optimization.offload_param.max_in_cpu 470000 (left out)");
}

TEST_CASE("An explicit buffer key that cannot fit is refused with a value that would") {
  auto c = Parse(R"({"stage": 3, "sub_group_size": 1000000000,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"},
      "offload_param": {"device": "nvme", "nvme_path": "/nvme"}})");
  REQUIRE(c.ok());
  const double budget = 600.0 * 1000 * 1000;
  auto refused = SizeOffloadBuffers(&*c, 1, kFootprint, budget, "cgroup /x limit", "train.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message() ==
        "train.json: zero_optimization.sub_group_size: 1000000000 cannot fit, set it to at most 490000 (or to \"auto\" "
        "to have it sized): the run needs about 4.3 GiB per rank, 572.2 MiB available per rank (cgroup /x limit)");
  // The value it names fits, with the other keys as sized; the next one of two digits does not.
  c->engine.zero.sub_group_size = 490'000;
  CHECK(EstimateTrainingMemory(*c, 1, kFootprint).total() <= budget);
  c->engine.zero.sub_group_size = 500'000;
  CHECK(EstimateTrainingMemory(*c, 1, kFootprint).total() > budget);
}

TEST_CASE("Without NVMe offload, only \"auto\" keys are sized, and only those the run reads") {
  auto c = Parse(R"({"stage": 2, "reduce_bucket_size": "auto", "sub_group_size": "auto"})");
  REQUIRE(c.ok());
  const double budget = 2.2 * 1024 * kMiB;  // DeepSpeed's bucket (the whole model here) does not fit
  auto sized = SizeOffloadBuffers(&*c, 1, kFootprint, budget, "MemAvailable", "train.json");
  REQUIRE(sized.ok());
  REQUIRE(sized->keys.size() == 1);  // the reduce bucket; the sub-groups matter only on NVMe
  CHECK(sized->keys[0].key == BufferKey::kReduceBucketSize);
  CHECK(sized->keys[0].source == KeySource::kAuto);
  CHECK(c->engine.zero.reduce_bucket_size == 28'000'000);
  CHECK(EstimateTrainingMemory(*c, 1, kFootprint).total() <= budget);
  CHECK(c->engine.zero.sub_group_size == 1'000'000'000);

  auto left_out = Parse(R"({"stage": 2})");
  REQUIRE(left_out.ok());
  auto kept = SizeOffloadBuffers(&*left_out, 1, kFootprint, 600.0 * 1000 * 1000, "MemAvailable", "train.json");
  REQUIRE(kept.ok());
  CHECK(left_out->engine.zero.reduce_bucket_size == 500'000'000);  // DeepSpeed's default stands
  CHECK(kept->keys.empty());
  CHECK(SizedBuffersLine(*kept).empty());  // nothing offloaded, nothing sized: no line
  CHECK(SizedBuffersLine(*sized) == "offload buffers for 2.2 GiB per rank (DeepSpeed's defaults do not fit): "
                                    "zero_optimization.reduce_bucket_size 28000000 (auto)");
}

TEST_CASE("When the offload buffers are most of the need, the refusal names their keys") {
  auto c = Parse(kBothOnNvme);
  REQUIRE(c.ok());
  const Status s = CheckMemoryFits(EstimateTrainingMemory(*c, 1, kFootprint), 1,
                                   AvailableMemory{600.0 * 1000 * 1000, "cgroup /x limit"}, "train.json");
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() ==
        "train.json: model needs about 6.2 GiB per rank (parameters 193.0 MiB, gradients 193.0 MiB, optimizer state "
        "4.5 GiB, activations 80.9 MiB, buffers 1.2 GiB, process 37.5 MiB); this machine has 572.2 MiB available "
        "(cgroup /x limit). 5.7 GiB of it is buffers the offload keys set: lower zero_optimization.sub_group_size, "
        "reduce_bucket_size, stage3_prefetch_bucket_size, offload_optimizer.buffer_count, offload_param.buffer_count "
        "or offload_param.max_in_cpu, or leave them out (or \"auto\") to have them sized to fit");
}

TEST_CASE("VmHWM and the compute threads are read from the process's edges") {
  CHECK(ParsePeakResident("Name:\tdslaunch-worker\nVmPeak:\t  900 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 5 kB\n") ==
        123456.0 * 1024);
  CHECK_FALSE(ParsePeakResident("VmRSS:\t 5 kB\n").has_value());
  CHECK_FALSE(ParsePeakResident("VmHWM:\t lots kB\n").has_value());
  CHECK(ComputeThreads({}, 8) == 16);  // OpenMP's 8 and OpenBLAS's own 8
  CHECK(ComputeThreads({{"OMP_NUM_THREADS", "2"}}, 8) == 4);
  CHECK(ComputeThreads({{"OMP_NUM_THREADS", "2"}, {"OPENBLAS_NUM_THREADS", "1"}}, 8) == 3);
  CHECK(ComputeThreads({{"OMP_NUM_THREADS", "zero"}}, 3) == 6);
  CHECK(ComputeThreads({}, 0) == 2);
}

}  // namespace
}  // namespace dslaunch::runtime
