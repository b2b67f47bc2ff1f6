// The disk's sequential rates for swap files (docs/offload.md, docs/benchmarks.md): plain
// synchronous O_DIRECT I/O in large requests (the disk's yardstick), then the buffer ring
// (runtime/swap/swap_stream.h) writing, reading and read-modify-writing the same bytes in
// sub-groups through io_uring and through pread/pwrite, an optimizer step on disk (the bundled
// AdamW inside the ring's read-modify-write, against the update and the I/O alone), and a
// STREAM-style triad as the memory
// yardstick. Each figure is the median of --iters timed runs after one warm-up; the ring's reads
// are checked (every sub-group carries its index). GB/s = 10^9 bytes/s; the read-modify-write
// rate counts the bytes read plus the bytes written.
// Built with the benchmarks, not registered with CTest; scripts/bench-offload-io.sh runs it.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/engine/optimizer.h"
#include "runtime/swap/aligned_buffer.h"
#include "runtime/swap/swap_directory.h"
#include "runtime/swap/swap_file.h"
#include "runtime/swap/swap_stream.h"

namespace {

using namespace dslaunch;
using namespace dslaunch::runtime::swap;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "swap_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const Status& s) {
  if (!s.ok()) Die(s.ToString());
}

// Median GB/s of `iters` runs of `fn` after one warm-up run; fn moves `bytes` bytes per run.
double MedianGbPerSecond(int iters, double bytes, const std::function<void()>& fn) {
  std::vector<double> rates;
  for (int i = 0; i <= iters; ++i) {
    auto start = Clock::now();
    fn();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (i > 0) rates.push_back(bytes / seconds / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

void Report(const char* what, double gbps) { std::printf("%-44s %8.3f GB/s\n", what, gbps); }

// Plain synchronous O_DIRECT pwrite/pread of the whole file in `request` bytes per call.
void PlainDirect(const std::string& dir, uint64_t total, uint64_t request, int iters) {
  std::string path = dir + "/swap_bench.plain";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) Die("open " + path + " with O_DIRECT: " + std::strerror(errno));
  auto buffer = AlignedBuffer::Allocate(request, 4096);
  if (!buffer.ok()) Die(buffer.status().ToString());
  std::memset(buffer->data(), 0x5a, buffer->size());
  auto pass = [&](bool write) {
    for (uint64_t off = 0; off < total; off += request) {
      ssize_t n = write ? ::pwrite(fd, buffer->data(), request, static_cast<off_t>(off))
                        : ::pread(fd, buffer->data(), request, static_cast<off_t>(off));
      if (n != static_cast<ssize_t>(request)) Die(std::string(write ? "pwrite" : "pread") + " failed: " + std::strerror(errno));
    }
    if (write && ::fdatasync(fd) != 0) Die(std::string("fdatasync: ") + std::strerror(errno));
  };
  Report("plain O_DIRECT write", MedianGbPerSecond(iters, total, [&] { pass(true); }));
  Report("plain O_DIRECT read", MedianGbPerSecond(iters, total, [&] { pass(false); }));
  ::close(fd);
  ::unlink(path.c_str());
}

// The ring over a swap file of total / record sub-groups with the engine of `backend`.
void Ring(const std::string& dir, uint64_t total, uint64_t record, int buffers, const AioConfig& aio,
          IoBackend backend, int iters) {
  auto file = SwapFile::Create({dir, SwapKind::kOptimizer, 0, record, total / record});
  if (!file.ok()) Die(file.status().ToString());
  if (file->warning()) std::printf("note: %s\n", file->warning()->c_str());
  IoEngineChoice choice = MakeIoEngine(backend, aio);
  if (choice.warning) std::printf("note: %s\n", choice.warning->c_str());
  auto stream = SwapStream::Create(&*file, choice.engine.get(), buffers);
  if (!stream.ok()) Die(stream.status().ToString());
  std::vector<uint64_t> groups(file->record_count(), record);
  std::string name = std::string("ring (") + std::string(choice.engine->name()) + ") ";
  auto stamp = [](size_t g, std::span<std::byte> b) {
    std::memcpy(b.data(), &g, sizeof g);  // what the read pass checks
    return Status::Ok();
  };
  auto check = [](size_t g, std::span<std::byte> b) {
    uint64_t got = 0;
    std::memcpy(&got, b.data(), sizeof got);
    return got == g ? Status::Ok() : DataLossError("sub-group " + std::to_string(g) + " read back " + std::to_string(got));
  };
  Report((name + "write").c_str(),
         MedianGbPerSecond(iters, total, [&] { Check(stream->Run({false, true}, groups, stamp)); }));
  Report((name + "read").c_str(),
         MedianGbPerSecond(iters, total, [&] { Check(stream->Run({true, false}, groups, check)); }));
  Report((name + "read-modify-write").c_str(),
         MedianGbPerSecond(iters, 2.0 * total, [&] { Check(stream->Run({true, true}, groups, check)); }));
}

// Seconds of one run of fn (no warm-up: callers take the median of several).
double Seconds(const std::function<void()>& fn) {
  auto start = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// An optimizer step on disk: every sub-group's record holds E fp32 master weights, then E first
// and E second moments (12 bytes per element); the gradient is in memory. The update is the
// bundled AdamW as it is called today: its OptimizerState holds std::vectors, so the moments are
// copied in and out of the record around the call (a span-based state would avoid the copies).
// Reports the step through the ring (read-modify-write) against the update alone (the same
// copies and arithmetic on an in-memory record) and the I/O alone (the ring with no update).
void OffloadedStep(const std::string& dir, uint64_t total, uint64_t record, int buffers, const AioConfig& aio,
                   IoBackend backend, int iters) {
  using namespace dslaunch::runtime;
  const size_t elements = record / 12 / 1024 * 1024;  // per sub-group; 4 KiB-aligned thirds
  const uint64_t group_bytes = 12 * elements;
  const size_t groups = total / record;
  auto file = SwapFile::Create({dir, SwapKind::kOptimizer, 0, group_bytes, groups});
  if (!file.ok()) Die(file.status().ToString());
  IoEngineChoice choice = MakeIoEngine(backend, aio);
  if (choice.warning) std::printf("note: %s\n", choice.warning->c_str());
  auto stream = SwapStream::Create(&*file, choice.engine.get(), buffers);
  if (!stream.ok()) Die(stream.status().ToString());
  std::vector<uint64_t> bytes(groups, group_bytes);
  OptimizerParams params{OptimizerKind::kAdamW, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0.0};
  OptimizerState state = OptimizerState::For(params, elements);
  std::vector<float> grad(elements, 0.01f);
  const std::vector<DecaySegment> segments = {{0, elements, true}};
  long step = 0;
  auto update = [&](size_t, std::span<std::byte> b) {
    float* p = reinterpret_cast<float*>(b.data());
    std::memcpy(state.m.data(), p + elements, elements * sizeof(float));
    std::memcpy(state.v.data(), p + 2 * elements, elements * sizeof(float));
    state.step = step;
    OptimizerStep(params, params.lr, {p, elements}, grad, segments, state);
    std::memcpy(p + elements, state.m.data(), elements * sizeof(float));
    std::memcpy(p + 2 * elements, state.v.data(), elements * sizeof(float));
    return Status::Ok();
  };
  auto zeros = [](size_t, std::span<std::byte> b) {
    std::memset(b.data(), 0, b.size());
    return Status::Ok();
  };
  auto nothing = [](size_t, std::span<std::byte>) { return Status::Ok(); };
  Check(stream->Run({false, true}, bytes, zeros));
  auto record_in_memory = AlignedBuffer::Allocate(group_bytes, 4096);
  std::vector<double> alone, io, together;
  for (int i = 0; i <= iters; ++i) {
    ++step;
    double a = Seconds([&] {
      for (size_t g = 0; g < groups; ++g) Check(update(g, record_in_memory->bytes().first(group_bytes)));
    });
    double b = Seconds([&] { Check(stream->Run({true, true}, bytes, nothing)); });
    double c = Seconds([&] { Check(stream->Run({true, true}, bytes, update)); });
    if (i > 0) alone.push_back(a), io.push_back(b), together.push_back(c);
  }
  // The moments of element 0 after `step` updates of a constant gradient stay positive and finite.
  Check(stream->Run({true, false}, {bytes.data(), 1}, [&](size_t, std::span<std::byte> b) {
    float v = 0;
    std::memcpy(&v, b.data() + 8 * elements, sizeof v);
    return v > 0 && std::isfinite(v) ? Status::Ok() : DataLossError("second moment " + std::to_string(v));
  }));
  for (auto* v : {&alone, &io, &together}) std::sort(v->begin(), v->end());
  const double u = alone[alone.size() / 2], t = io[io.size() / 2], both = together[together.size() / 2];
  const double traffic = 2.0 * groups * group_bytes;
  std::printf("step (%s): update alone %.3f s, I/O alone %.3f s, together %.3f s "
              "(serial sum %.3f s); %.1f%% of the I/O-alone rate\n",
              std::string(choice.engine->name()).c_str(), u, t, both, u + t, 100.0 * t / both);
  Report((std::string("offloaded AdamW step (") + std::string(choice.engine->name()) + ")").c_str(),
         traffic / both / 1e9);
}

// STREAM's triad a = b + s c over arrays of `n` doubles, 24 bytes per element (STREAM's count).
void Triad(size_t n, int iters) {
  std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
  const double s = 3.0;
  auto triad = [&] {
    double* pa = a.data();
    const double* pb = b.data();
    const double* pc = c.data();
    for (size_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
  };
  Report("memory: STREAM triad, 1 thread", MedianGbPerSecond(iters, 24.0 * n, triad));
  if (a[n / 2] != 7.0) Die("triad computed " + std::to_string(a[n / 2]));
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  uint64_t mib = 1024, record_mib = 32, request_mib = 32;
  int buffers = 4, iters = 3;
  size_t triad_mib = 256;
  AioConfig aio;
  CLI::App app{"swap_bench: sequential rates of a directory's disk, plain and through the swap ring", "swap_bench"};
  app.add_option("--dir", dir, "directory on the disk to measure (a scratch file is made and removed)")->required();
  app.add_option("--mib", mib, "MiB per pass")->check(CLI::PositiveNumber);
  app.add_option("--record_mib", record_mib, "MiB per sub-group (the ring's record)")->check(CLI::PositiveNumber);
  app.add_option("--request_mib", request_mib, "MiB per plain O_DIRECT request")->check(CLI::PositiveNumber);
  app.add_option("--buffers", buffers, "the ring's buffer_count")->check(CLI::PositiveNumber);
  app.add_option("--block_size", aio.block_size, "aio.block_size in bytes");
  app.add_option("--queue_depth", aio.queue_depth, "aio.queue_depth");
  app.add_flag("--single_submit", aio.single_submit, "aio.single_submit");
  app.add_flag("!--no_overlap_events", aio.overlap_events, "aio.overlap_events false");
  app.add_option("--iters", iters, "timed runs per figure (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--triad_mib", triad_mib, "MiB per triad array")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  Check(ValidateAioConfig(aio, "--block_size/--queue_depth"));
  const uint64_t total = mib << 20, record = record_mib << 20;
  if (total % record != 0 || total % (request_mib << 20) != 0) Die("--mib must be a multiple of --record_mib and --request_mib");
  Check(CheckSwapDirectory(dir, 2 * total, "--dir"));
  std::printf("swap_bench: %s, %llu MiB per pass, %llu MiB sub-groups, %d buffers, block_size %llu, queue_depth %d%s%s\n",
              dir.c_str(), static_cast<unsigned long long>(mib), static_cast<unsigned long long>(record_mib), buffers,
              static_cast<unsigned long long>(aio.block_size), aio.queue_depth, aio.single_submit ? ", single_submit" : "",
              aio.overlap_events ? "" : ", no overlap_events");
  PlainDirect(dir, total, request_mib << 20, iters);
  Ring(dir, total, record, buffers, aio, IoBackend::kUring, iters);
  Ring(dir, total, record, buffers, aio, IoBackend::kSync, iters);
  OffloadedStep(dir, total, record, buffers, aio, IoBackend::kUring, iters);
  OffloadedStep(dir, total, record, buffers, aio, IoBackend::kSync, iters);
  Triad((triad_mib << 20) / sizeof(double), iters);
  return 0;
}
