// The memory check before allocating (runtime/train/memory_estimate.h): the estimate against the
// engine's own accounting and the models' real buffers, the message, and the readers of
// /proc/meminfo and the cgroup files (runtime/train/available_memory.h).
#include "runtime/train/memory_estimate.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "runtime/engine/engine.h"
#include "runtime/models/gpt.h"
#include "runtime/models/mlp.h"
#include "runtime/train/available_memory.h"
#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime {
namespace {

TrainConfig TinyGpt() {
  TrainConfig c;
  c.batch = {8, 2, 2};
  c.model = GptConfig{2, 2, 16, 8, 32};
  c.data.seq_len = 8;
  c.engine.zero.reduce_bucket_size = 700;
  c.engine.zero.stage3_param_persistence_threshold = 100;
  return c;
}

TEST_CASE("The estimate of the engine's states is the engine's own accounting, at every stage and precision") {
  for (int world : {1, 2, 3}) {
    for (int stage : {0, 1, 2, 3}) {
      for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
        for (OptimizerKind optimizer : {OptimizerKind::kAdamW, OptimizerKind::kSgd}) {
          CAPTURE(world);
          CAPTURE(stage);
          CAPTURE(PrecisionName(precision));
          CAPTURE(OptimizerTypeName(optimizer));
          TrainConfig c = TinyGpt();
          c.engine.zero.stage = stage;
          c.engine.precision = precision;
          c.engine.optimizer.kind = optimizer;
          c.engine.optimizer.momentum = optimizer == OptimizerKind::kSgd ? 0.9 : 0.0;
          GptModel model(std::get<GptConfig>(c.model), 2);
          std::vector<float> initial(model.layout().numel(), 0.5f);
          testing::ThreadCommunicatorGroup group(world, std::chrono::seconds(10));
          MemoryStats rank0;
          std::vector<std::thread> threads;
          for (int r = 0; r < world; ++r) {
            threads.emplace_back([&, r] {
              auto engine = Engine::Create(model.layout(), group.Get(r), c.engine, initial);
              REQUIRE(engine.ok());
              if (r == 0) rank0 = (*engine)->memory();
            });
          }
          for (auto& t : threads) t.join();
          const MemoryEstimate m = EstimateTrainingMemory(c, world);
          CHECK(m.parameters == static_cast<double>(rank0.parameters));
          CHECK(m.gradients == static_cast<double>(rank0.gradients));
          CHECK(m.optimizer_state == static_cast<double>(rank0.optimizer_state));
          CHECK(m.activations == static_cast<double>(model.activation_bytes()));
          // At least the start-up's buffer: the largest group's initial values.
          size_t largest = 0;
          for (const auto& g : model.layout().groups()) largest = std::max(largest, g.numel);
          CHECK(m.buffers >= 4.0 * static_cast<double>(largest));
        }
      }
    }
  }
}

TEST_CASE("At stage 3 the prefetch run is stage3_prefetch_bucket_size elements, between the largest group and the "
          "model, in fp32 copies and their staging") {
  TrainConfig c = TinyGpt();
  c.engine.zero.stage = 3;
  GptModel model(std::get<GptConfig>(c.model), 2);
  size_t largest = 0;
  for (const auto& g : model.layout().groups()) largest = std::max(largest, g.numel);
  const double numel = static_cast<double>(model.layout().numel());
  auto buffers_with = [&](int64_t bucket) {
    TrainConfig t = c;
    t.engine.zero.stage3_prefetch_bucket_size = bucket;
    return EstimateTrainingMemory(t, 2);
  };
  const MemoryEstimate none = buffers_with(0);  // a run of the group asked for alone
  const int64_t between = static_cast<int64_t>(largest) + 1000;
  REQUIRE(static_cast<double>(between) < numel);
  // fp32: each element of the run is a live fp32 copy and its fp32 staging, 8 bytes.
  constexpr double kPerElement = 8;
  CHECK(buffers_with(between).buffers - none.buffers == 1000 * kPerElement);
  CHECK(buffers_with(between).keyed - none.keyed == 1000 * kPerElement);
  CHECK(buffers_with(1'000'000'000).buffers - none.buffers == (numel - static_cast<double>(largest)) * kPerElement);
}

TEST_CASE("With the state and parameters on disk no transient buffer is the model's size, unless it is imported") {
  TrainConfig c = TinyGpt();
  c.model = GptConfig{12, 2, 32, 8, 32};
  c.engine.zero.stage = 3;
  c.engine.precision = Precision::kBf16;
  c.engine.zero.sub_group_size = 1000;
  c.engine.zero.stage3_prefetch_bucket_size = 1000;  // DeepSpeed's 5e7 would gather this whole model at once
  c.engine.offload_optimizer.device = swap::OffloadDevice::kNvme;
  c.engine.offload_optimizer.nvme_path = "/var/tmp";
  c.engine.offload_param.device = swap::OffloadDevice::kNvme;
  c.engine.offload_param.nvme_path = "/var/tmp";
  GptModel model(std::get<GptConfig>(c.model), 2);
  const double numel = static_cast<double>(model.layout().numel());
  const MemoryEstimate streamed = EstimateTrainingMemory(c, 1);
  CAPTURE(streamed.buffers);
  CAPTURE(numel);
  // The initial values are read a group at a time; the step's gradient a sub-group at a time: less
  // than half of one fp32 copy of the model.
  CHECK(streamed.buffers < 4.0 * numel / 2);
  c.model_init_from = "model.safetensors";  // imported: the whole fp32 model is read first
  CHECK(EstimateTrainingMemory(c, 1).buffers >= 4.0 * numel);
}

TEST_CASE("The models' activation formulas are their constructors' allocations") {
  for (GptConfig g : {GptConfig{1, 1, 8, 4, 16}, GptConfig{3, 4, 32, 17, 256}}) {
    for (int batch : {1, 3}) {
      GptModel model(g, batch);
      CHECK(GptModel::ActivationBytes(g, batch) == static_cast<double>(model.activation_bytes()));
      CHECK(GptModel::NumParameters(g) == static_cast<double>(model.layout().numel()));
      double sum = 0;
      for (double s : GptModel::GroupSizes(g)) sum += s;
      CHECK(sum == static_cast<double>(model.layout().numel()));
    }
  }
  const std::vector<int> widths = {784, 300, 7, 10};
  MlpModel mlp(widths, 5);
  CHECK(MlpModel::ActivationBytes(widths, 5) == static_cast<double>(mlp.activation_bytes()));
  double sum = 0;
  for (double s : MlpModel::GroupSizes(widths)) sum += s;
  CHECK(sum == static_cast<double>(mlp.layout().numel()));
}

TEST_CASE("With activation checkpointing the estimate's activations are the recomputing model's buffers") {
  TrainConfig c = TinyGpt();
  c.model = GptConfig{4, 2, 16, 8, 32};
  double previous = EstimateTrainingMemory(c, 1).activations;
  for (int recompute = 1; recompute <= 4; ++recompute) {
    CAPTURE(recompute);
    std::get<GptConfig>(c.model).recompute_blocks = recompute;
    GptModel model(GptConfig{4, 2, 16, 8, 32, recompute}, 2);
    const double activations = EstimateTrainingMemory(c, 1).activations;
    CHECK(activations == static_cast<double>(model.activation_bytes()));
    CHECK((recompute == 1 ? activations == previous : activations < previous));  // one block recomputed saves nothing
    previous = activations;
  }
}

TEST_CASE("A model that cannot fit is refused with what it needs and what the machine has") {
  // The n_layer 4000 (the demo's other dimensions): before, std::bad_alloc while the model
  // was built. Figures by hand: 793,153,792 parameters (x4 bytes each for parameters and gradients,
  // x8 for AdamW's moments); activations 93.9 GiB, of which the attention matrices (4000 layers x
  // 8 sequences x 4 heads x 256^2 floats) are 31.25 GiB; buffers: Gloo's all-reduce temporary of
  // one reduction chunk (5e8 floats, 1.9 GiB; fp32 at stage 0 reduces its gradient in place);
  // process: 24 MiB and 2 MiB for each of the default footprint's one compute thread.
  TrainConfig c = TinyGpt();
  c.batch = {16, 8, 1};
  c.model = GptConfig{4000, 4, 128, 256, 256};
  c.engine.zero.reduce_bucket_size = 500'000'000;
  const MemoryEstimate m = EstimateTrainingMemory(c, 2);
  const Status s = CheckMemoryFits(m, 2, AvailableMemory{23.1 * (1 << 30), "MemAvailable"}, "train.json");
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(s.message() ==
        "train.json: model needs about 107.6 GiB per rank (parameters 3.0 GiB, gradients 3.0 GiB, optimizer state "
        "5.9 GiB, activations 93.9 GiB, buffers 1.9 GiB, process 26.0 MiB) x 2 ranks on this node = 215.2 GiB; this "
        "machine has 23.1 GiB available (MemAvailable). Lower train_micro_batch_size_per_gpu, model.block_size or the "
        "model's size");
  // The same run fits a machine with enough memory; one rank's need is compared per rank.
  CHECK(CheckMemoryFits(m, 2, AvailableMemory{m.total() * 2, "MemAvailable"}, "train.json").ok());
  CHECK_FALSE(CheckMemoryFits(m, 2, AvailableMemory{m.total() * 2 - 1, "MemAvailable"}, "train.json").ok());
  // A model whose states dominate gets the other advice.
  c.model = GptConfig{1000, 64, 4096, 16, 256};
  c.batch = {2, 1, 1};
  const Status big = CheckMemoryFits(EstimateTrainingMemory(c, 2), 1, AvailableMemory{1e12, "cgroup limit"}, "t.json");
  CHECK(big.message().find("Use a higher zero_optimization.stage, more nodes, fp16/bf16, or a smaller model") !=
        std::string::npos);
}

double Numel(const TrainConfig& c) {
  double numel = 0;
  for (double g : ParameterGroupSizes(c)) numel += g;
  return numel;
}

TEST_CASE("In-memory snapshots add two copies of the rank's state slice and three on each peer node, and a refusal "
          "names them") {
  TrainConfig c = TinyGpt();
  c.engine.optimizer.kind = OptimizerKind::kAdamW;  // master weights and two moments: 12 bytes each
  c.engine.zero.stage = 1;
  const double shard = std::ceil(Numel(c) / 2);
  const MemoryEstimate without = EstimateTrainingMemory(c, 2);
  ProcessFootprint slots;
  slots.snapshot_slots = 2;
  const MemoryEstimate with = EstimateTrainingMemory(c, 2, slots);
  CHECK(without.snapshots == 0);
  CHECK(with.snapshots == 2 * (3 * shard * 4 + kSnapshotMetaBytes));
  CHECK(with.total() - without.total() == with.snapshots);
  const Status s = CheckMemoryFits(with, 2, AvailableMemory{1e6, "MemAvailable"}, "train.json");
  REQUIRE_FALSE(s.ok());
  CAPTURE(s.message());
  CHECK(s.message().find(", process 26.0 MiB, in-memory snapshots 2.1 MiB) x 2 ranks on this node") != std::string::npos);
  CHECK(CheckMemoryFits(without, 2, AvailableMemory{1e6, "MemAvailable"}, "train.json").message().find("snapshots") ==
        std::string::npos);

  // Copied to one peer node: the node also holds up to three copies of each rank of the node before it.
  CHECK(SnapshotSlots(false, 1) == 0);
  CHECK(SnapshotSlots(true, 0) == 2);
  CHECK(SnapshotSlots(true, 1) == 5);
  slots.snapshot_slots = SnapshotSlots(true, 1);
  CHECK(EstimateTrainingMemory(c, 2, slots).snapshots == 2.5 * with.snapshots);
}

TEST_CASE("overlap_comm adds a second bucket and its reduced part at stages 2-3, a staging chunk at stage 1 with "
          "16-bit storage") {
  TrainConfig c = TinyGpt();
  c.engine.zero.reduce_bucket_size = 700;
  auto added = [&](int stage, Precision precision) {
    c.engine.zero.stage = stage;
    c.engine.precision = precision;
    c.engine.zero.overlap_comm = false;
    const double off = EstimateTrainingMemory(c, 2).total();
    c.engine.zero.overlap_comm = true;
    const double on = EstimateTrainingMemory(c, 2).total();
    c.engine.zero.overlap_comm = false;
    return (on - off) / 4;  // floats
  };
  double largest = 0;
  for (double g : ParameterGroupSizes(c)) largest = std::max(largest, g);
  const double chunk = std::max(largest, 700.0);
  const double shard = std::ceil(Numel(c) / 2);
  CHECK(added(2, Precision::kFp32) == chunk + std::min(chunk, shard));
  CHECK(added(3, Precision::kBf16) == chunk + std::min(chunk, shard));
  CHECK(added(1, Precision::kBf16) == chunk);
  CHECK(added(1, Precision::kFp32) == 0);  // reduced in place from the gradient
  CHECK(added(0, Precision::kFp32) == 0);  // nothing queued at stage 0
}

TEST_CASE("MemAvailable and cgroup limits are read from the files' text") {
  CHECK(ParseMemAvailable("MemTotal:       32594380 kB\nMemFree:  1 kB\nMemAvailable:   23452380 kB\n") ==
        23452380.0 * 1024);
  CHECK_FALSE(ParseMemAvailable("MemTotal: 5 kB\n").has_value());
  CHECK_FALSE(ParseMemAvailable("MemAvailable: lots\n").has_value());
  const auto cgroups = ParseMemoryCgroups("9:name=systemd:/\n4:memory:/job/a\n3:cpu,memory:/x\n0::/user.slice/s\n");
  REQUIRE(cgroups.size() == 3);
  CHECK((cgroups[0].path == "/job/a" && !cgroups[0].v2));
  CHECK((cgroups[1].path == "/x" && !cgroups[1].v2));
  CHECK((cgroups[2].path == "/user.slice/s" && cgroups[2].v2));
  CHECK(CgroupRoom("1073741824\n", "73741824\n") == 1e9);
  CHECK(CgroupRoom("100", "200") == 0.0);
  CHECK_FALSE(CgroupRoom("max\n", "5").has_value());
  CHECK_FALSE(CgroupRoom("9223372036854771712\n", "5").has_value());  // v1: no limit
  CHECK(FormatBytesHuman(512) == "512 B");
  CHECK(FormatBytesHuman(1.5 * (1 << 20)) == "1.5 MiB");
}

}  // namespace
}  // namespace dslaunch::runtime
