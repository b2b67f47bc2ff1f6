// The node's kernel choice (runtime/train/kernel_choice.h): the probe's products per model, the
// variables that steer it, and the decision per mode. The processes (the
// probes, the lock, the re-execution) are tests/runtime/worker_kernel_proc_test.cc's.
#include "runtime/train/kernel_choice.h"

#include <doctest/doctest.h>

#include <string>

namespace dslaunch::runtime {
namespace {

using ops::KernelRate;
using ops::ProductShape;

TrainConfig Gpt(int n_embd, int micro_batch, int seq_len) {
  TrainConfig config;
  GptConfig gpt;
  gpt.n_layer = 2, gpt.n_head = 2, gpt.n_embd = n_embd, gpt.block_size = seq_len, gpt.vocab_size = 256;
  config.model = gpt;
  config.batch.micro_batch_per_gpu = micro_batch;
  config.data.seq_len = seq_len;
  return config;
}

double PassFlops(const std::vector<ProductShape>& products) {
  double flops = 0;
  for (const ProductShape& s : products) flops += s.flops();
  return flops;
}

TEST_CASE("the probe times the model's own block, rows cut to about 1 GFLOP per pass, sizes raised for tiny models") {
  // gpt-demo.json: 8 x 128 rows of width 128, cut to 1e9 / (72 x 128^2) = 847 rows.
  auto demo = ProbeProducts(Gpt(128, 8, 128));
  REQUIRE(demo.size() == 12);
  CHECK(demo[0].n == 847);
  CHECK(demo[0].in == 128);
  CHECK(demo[0].out == 384);
  CHECK(ProbeProducts(Gpt(128, 4, 128))[0].n == 512);  // below the cut: the model's rows
  // gpt-bench.json: 8 x 256 rows of width 512: cut to 1e9 / (72 x 512^2) = 52 rows.
  auto bench = ProbeProducts(Gpt(512, 8, 256));
  CHECK(bench[0].n == 52);
  CHECK(bench[0].in == 512);
  // GPT-2 XL's width: 5 rows would be the cut; 16 is the floor (TimeProducts keeps to its budget).
  auto wide = ProbeProducts(Gpt(1600, 4, 1024));
  CHECK(wide[0].n == 16);
  CHECK(wide[0].in == 1600);
  // Beyond 2048 wide the probe stops growing: its largest weight stays 8192 x 2048.
  auto widest = ProbeProducts(Gpt(65536, 1, 8));
  CHECK(widest[0].in == 2048);
  CHECK(widest[0].n == 16);
  for (const ProductShape& s : widest) CHECK(static_cast<double>(s.in) * s.out <= 8192.0 * 2048);
  // A test's tiny model: 16 wide, 2 x 8 rows -> 128 wide, 64 rows.
  auto tiny = ProbeProducts(Gpt(16, 2, 8));
  CHECK(tiny[0].n == 64);
  CHECK(tiny[0].in == 128);
  for (const auto& config : {Gpt(128, 8, 128), Gpt(512, 8, 256), Gpt(768, 12, 1024), Gpt(16, 1, 1)}) {
    CHECK(PassFlops(ProbeProducts(config)) <= 1.01e9);
  }
}

TEST_CASE("an mlp's probe is its layers' products at its micro-batch, at least 64 rows") {
  TrainConfig config;
  config.model = MlpConfig{{784, 128, 10}};
  config.batch.micro_batch_per_gpu = 32;
  auto products = ProbeProducts(config);
  REQUIRE(products.size() == 6);
  CHECK(products[0].n == 64);
  CHECK(products[0].in == 784);
  CHECK(products[0].out == 128);
  CHECK(products[5].in == 128);
  CHECK(products[5].out == 10);
  config.batch.micro_batch_per_gpu = 500;
  CHECK(ProbeProducts(config)[0].n == 500);
  config.model = MlpConfig{{1 << 20, 10}};
  config.batch.micro_batch_per_gpu = 1 << 20;
  CHECK(ProbeProducts(config)[0].in == 4096);
  CHECK(ProbeProducts(config)[0].n == 4096);
}

TEST_CASE("DSLAUNCH_SGEMM_KERNEL and the user's OPENBLAS_CORETYPE steer the choice") {
  using Mode = KernelRequest::Mode;
  CHECK(ParseKernelRequest({})->mode == Mode::kAuto);
  CHECK(ParseKernelRequest({{"DSLAUNCH_SGEMM_KERNEL", ""}})->mode == Mode::kAuto);
  CHECK(ParseKernelRequest({{"DSLAUNCH_SGEMM_KERNEL", "auto"}})->source == "timed on this node");
  auto def = ParseKernelRequest({{"DSLAUNCH_SGEMM_KERNEL", "default"}});
  CHECK(def->mode == Mode::kDefault);
  CHECK(def->source == "DSLAUNCH_SGEMM_KERNEL=default");
  auto forced = ParseKernelRequest({{"DSLAUNCH_SGEMM_KERNEL", "Haswell"}});
  CHECK(forced->mode == Mode::kForced);
  CHECK(forced->core_type == "Haswell");
  for (const char* bad : {"haswell", "Prescott", "SkylakeX ", "-", "auto,default", "Zen"}) {
    auto parsed = ParseKernelRequest({{"DSLAUNCH_SGEMM_KERNEL", bad}});
    REQUIRE_MESSAGE(!parsed.ok(), bad);
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK(parsed.status().message().find("DSLAUNCH_SGEMM_KERNEL='") == 0);
    CHECK(parsed.status().message().find("auto, default or one of SkylakeX, Haswell, Sandybridge") != std::string::npos);
  }
  // The user's own variable wins, whatever DSLAUNCH_SGEMM_KERNEL says.
  auto user = ParseKernelRequest({{"OPENBLAS_CORETYPE", "Sandybridge"}, {"DSLAUNCH_SGEMM_KERNEL", "SkylakeX"}});
  CHECK(user->mode == Mode::kDefault);
  CHECK(user->source == "OPENBLAS_CORETYPE=Sandybridge set by the user");
  // ... but not the one a re-execution set: that process chooses as its first run did.
  auto applied = ParseKernelRequest({{"OPENBLAS_CORETYPE", "SkylakeX"}, {"DSLAUNCH_SGEMM_APPLIED", "SkylakeX"}});
  CHECK(applied->mode == Mode::kAuto);
  auto changed = ParseKernelRequest({{"OPENBLAS_CORETYPE", "Haswell"}, {"DSLAUNCH_SGEMM_APPLIED", "SkylakeX"}});
  CHECK(changed->mode == Mode::kDefault);
}

TEST_CASE("what is timed and what is decided, per mode") {
  ops::CpuFeatures cpu;
  cpu.avx = cpu.avx2 = cpu.fma = true;
  CHECK(CoreTypesToTime({}, cpu) == std::vector<std::string>{"Haswell", "Sandybridge"});
  CHECK(CoreTypesToTime({KernelRequest::Mode::kDefault, "", ""}, cpu).empty());
  CHECK(CoreTypesToTime({KernelRequest::Mode::kForced, "SkylakeX", ""}, cpu) == std::vector<std::string>{"SkylakeX"});

  const std::vector<KernelRate> rates = {{"", "Prescott", 27, true, ""}, {"Haswell", "Haswell", 75, true, ""}};
  CHECK(DecideKernel({}, rates)->core_type == "Haswell");
  auto kept = DecideKernel({KernelRequest::Mode::kDefault, "", "x"}, {rates[0]});
  REQUIRE(kept.ok());
  CHECK(kept->core_type.empty());
  CHECK(kept->kernel == "Prescott");
  // Forced: taken even when slower than the default.
  auto forced = DecideKernel({KernelRequest::Mode::kForced, "Haswell", "x"},
                             {{"", "Prescott", 99, true, ""}, {"Haswell", "Haswell", 75, true, ""}});
  REQUIRE(forced.ok());
  CHECK(forced->core_type == "Haswell");
  CHECK(forced->default_kernel == "Prescott");
  // ... but never when inexact or failed.
  auto wrong = DecideKernel({KernelRequest::Mode::kForced, "Haswell", "DSLAUNCH_SGEMM_KERNEL=Haswell"},
                            {{"", "Prescott", 99, true, ""}, {"Haswell", "", 0, false, "exit 1"}});
  REQUIRE(!wrong.ok());
  CHECK(wrong.status().code() == StatusCode::kFailedPrecondition);
  CHECK(wrong.status().message().find("DSLAUNCH_SGEMM_KERNEL=Haswell") != std::string::npos);
  CHECK(wrong.status().message().find("error=exit 1") != std::string::npos);
  CHECK(!DecideKernel({KernelRequest::Mode::kDefault, "", "x"}, {{"", "P", 9, false, ""}}).ok());
}

}  // namespace
}  // namespace dslaunch::runtime
