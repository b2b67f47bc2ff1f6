#include "runtime/train/kernel_choice.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/env_names.h"
#include "common/spawn.h"
#include "common/text.h"

namespace dslaunch::runtime {

using ops::KernelRate;
using ops::ProductShape;

namespace {

// One pass over the probe's products is about this many operations.
constexpr double kProbePassFlops = 1e9;
constexpr int kMinProbeRows = 64;
// The fewest rows of a wide model's probe, below kMinProbeRows when one pass would take too long.
constexpr int kMinWideRows = 16;
constexpr int kMinProbeWidth = 128;
// The widest a probe's products get: a GPT width of 2048 (its MLP weight 8192 x 2048, 64 MiB) and
// mlp layers of 4096. Kernel rates stop changing long before; a probe must not need the model's
// memory.
constexpr int kMaxProbeGptWidth = 2048;
constexpr int kMaxProbeLayerWidth = 4096;

// Every core type CandidateCoreTypes can give, whatever the CPU.
std::vector<std::string> KnownCoreTypes() {
  ops::CpuFeatures all;
  all.avx = all.avx2 = all.fma = all.avx512f = all.avx512bw = all.avx512dq = all.avx512vl = true;
  return ops::CandidateCoreTypes(all);
}

}  // namespace

std::vector<ProductShape> ProbeProducts(const TrainConfig& config) {
  const int64_t micro = std::max<int64_t>(config.batch.micro_batch_per_gpu, 1);
  if (const auto* gpt = std::get_if<GptConfig>(&config.model)) {
    const int c = std::clamp(gpt->n_embd, kMinProbeWidth, kMaxProbeGptWidth);
    const int64_t rows = micro * std::max(config.data.seq_len, 1);
    // A block's products total 2 x 3 x 12 c^2 operations per row.
    const auto cap = static_cast<int64_t>(kProbePassFlops / (72.0 * c * c));
    const int n = static_cast<int>(std::min(std::max<int64_t>(rows, kMinProbeRows), std::max<int64_t>(cap, kMinWideRows)));
    return ops::GptBlockProducts(n, c);
  }
  const auto& mlp = std::get<MlpConfig>(config.model);
  std::vector<ProductShape> all;
  const int n = static_cast<int>(std::clamp<int64_t>(micro, kMinProbeRows, kMaxProbeLayerWidth));
  for (size_t i = 0; i + 1 < mlp.widths.size(); ++i) {
    const int in = std::min(mlp.widths[i], kMaxProbeLayerWidth), out = std::min(mlp.widths[i + 1], kMaxProbeLayerWidth);
    for (const ProductShape& s : ops::LinearLayerProducts(n, in, out)) all.push_back(s);
  }
  return all;
}

Result<KernelRequest> ParseKernelRequest(const std::map<std::string, std::string>& env) {
  KernelRequest request;
  auto user = env.find(kOpenBlasCoreTypeEnv);
  auto applied = env.find(kSgemmAppliedEnv);
  const bool user_set = user != env.end() && (applied == env.end() || applied->second != user->second);
  auto asked = env.find(kSgemmKernelEnv);
  const std::string value = asked == env.end() || asked->second.empty() ? "auto" : asked->second;
  if (user_set) {
    // The user's own OPENBLAS_CORETYPE wins over dslaunch's choice, whatever DSLAUNCH_SGEMM_KERNEL says.
    request.mode = KernelRequest::Mode::kDefault;
    request.source = std::string(kOpenBlasCoreTypeEnv) + "=" + user->second + " set by the user";
    return request;
  }
  if (value == "auto") {
    request.source = "timed on this node";
    return request;
  }
  if (value == "default") {
    request.mode = KernelRequest::Mode::kDefault;
    request.source = std::string(kSgemmKernelEnv) + "=default";
    return request;
  }
  const std::vector<std::string> known = KnownCoreTypes();
  if (std::find(known.begin(), known.end(), value) == known.end()) {
    return InvalidArgumentError(std::string(kSgemmKernelEnv) + "='" + value + "': expected auto, default or one of " +
                                JoinText(known, ", "));
  }
  request.mode = KernelRequest::Mode::kForced;
  request.core_type = value;
  request.source = std::string(kSgemmKernelEnv) + "=" + value;
  return request;
}

std::vector<std::string> CoreTypesToTime(const KernelRequest& request, const ops::CpuFeatures& cpu) {
  switch (request.mode) {
    case KernelRequest::Mode::kAuto: return ops::CandidateCoreTypes(cpu);
    case KernelRequest::Mode::kDefault: return {};
    case KernelRequest::Mode::kForced: return {request.core_type};
  }
  return {};
}

Result<ops::KernelChoice> DecideKernel(const KernelRequest& request, const std::vector<KernelRate>& rates) {
  if (request.mode == KernelRequest::Mode::kAuto) return ops::ChooseKernel(rates);
  if (rates.empty()) return InternalError("DecideKernel: no rates");
  const KernelRate& use = request.mode == KernelRequest::Mode::kForced && rates.size() > 1 ? rates[1] : rates[0];
  if (!use.exact || !use.error.empty()) {
    return FailedPreconditionError("the OpenBLAS kernels " + request.source + " asks for do not compute the known " +
                                   "product exactly, so training would compute wrong products: " +
                                   ops::FormatKernelRate(use));
  }
  ops::KernelChoice choice;
  choice.core_type = use.core_type;
  choice.kernel = use.kernel;
  choice.gflops = use.gflops;
  choice.default_kernel = rates[0].kernel;
  choice.default_gflops = rates[0].gflops;
  choice.measured = rates;
  return choice;
}

namespace {

// The environment of a probe: this process's, with OPENBLAS_CORETYPE set to `core_type` (left as
// it is for "").
std::vector<std::string> ProbeEnvironment(const std::map<std::string, std::string>& env, const std::string& core_type) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) {
    if (!core_type.empty() && name == kOpenBlasCoreTypeEnv) continue;
    entries.push_back(name + "=" + value);
  }
  if (!core_type.empty()) entries.push_back(std::string(kOpenBlasCoreTypeEnv) + "=" + core_type);
  return entries;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A probe prints one line of a hundred bytes or so.
constexpr size_t kMaxProbeOutputBytes = 4096;

// Runs one probe and reads its line; a failure is a rate with `error` set.
KernelRate RunProbe(const std::string& self_exe, const std::vector<ProductShape>& products,
                    const std::map<std::string, std::string>& env, const std::string& core_type) {
  KernelRate failed;
  failed.core_type = core_type;
  auto fail = [&](std::string why) {
    failed.error = std::move(why);
    return failed;
  };
  SpawnOptions probe;
  probe.argv = {self_exe, "sgemm-probe"};
  for (const ProductShape& s : products) probe.argv.push_back(ops::FormatProductShape(s));
  probe.env = ProbeEnvironment(env, core_type);
  probe.exec_error_prefix = "dslaunch-worker: ";
  auto run = RunAndReadOutput(probe, kProbeTimeout, kMaxProbeOutputBytes, /*with_stderr=*/false);
  if (!run.ok()) return fail("cannot run " + self_exe + ": " + run.status().message());
  if (run->timed_out) return fail("no answer within " + std::to_string(kProbeTimeout.count()) + " s");
  if (run->signal != 0) return fail("killed by signal " + std::to_string(run->signal));
  if (run->exit_code != 0) return fail("exit " + std::to_string(run->exit_code));
  std::string out = std::move(run->output);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  auto rate = ops::ParseKernelRate(out);
  if (!rate.ok()) return fail(rate.status().message());
  rate->core_type = core_type;
  return *rate;
}

// OpenBLAS's own kernels first, then each core type.
std::vector<KernelRate> TimeKernels(const std::string& self_exe, const std::vector<ProductShape>& products,
                                    const std::map<std::string, std::string>& env,
                                    const std::vector<std::string>& core_types) {
  std::vector<KernelRate> rates = {RunProbe(self_exe, products, env, "")};
  for (const std::string& core : core_types) rates.push_back(RunProbe(self_exe, products, env, core));
  return rates;
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  std::string host = name;
  std::replace(host.begin(), host.end(), '/', '_');
  return host;
}

Result<std::vector<KernelRate>> ReadRates(const std::string& path) {
  std::ifstream in(path);
  std::vector<KernelRate> rates;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto rate = ops::ParseKernelRate(line);
    if (!rate.ok()) return rate.status().WithContext(path);
    rates.push_back(std::move(*rate));
  }
  return rates;
}

Status WriteRates(const std::string& path, const std::vector<KernelRate>& rates) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    for (const KernelRate& r : rates) out << ops::FormatKernelRate(r) << "\n";
    out.flush();
    if (!out) return InternalError("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return InternalError("cannot rename " + temporary + " to " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

// Whether `rates` are for OpenBLAS's own kernels and then `core_types`, in that order.
bool RatesAreFor(const std::vector<KernelRate>& rates, const std::vector<std::string>& core_types) {
  if (rates.size() != core_types.size() + 1 || !rates[0].core_type.empty()) return false;
  for (size_t i = 0; i < core_types.size(); ++i) {
    if (rates[i + 1].core_type != core_types[i]) return false;
  }
  return true;
}

// The node's rates: read from `path`, or timed and written there, under an exclusive lock so that
// the node's workers time once between them and none reads a half-written file. A file for other
// kernels (a job id used again with another DSLAUNCH_SGEMM_KERNEL) is timed again and replaced.
Result<std::vector<KernelRate>> NodeRates(const std::string& path, const std::string& self_exe,
                                          const std::vector<ProductShape>& products,
                                          const std::map<std::string, std::string>& env,
                                          const std::vector<std::string>& core_types) {
  const std::string lock_path = path + ".lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return InternalError("cannot open " + lock_path + ": " + std::strerror(errno));
  while (::flock(lock, LOCK_EX) != 0) {
    if (errno != EINTR) {
      const std::string why = std::strerror(errno);
      ::close(lock);
      return InternalError("cannot lock " + lock_path + ": " + why);
    }
  }
  Result<std::vector<KernelRate>> rates = std::vector<KernelRate>();
  if (::access(path.c_str(), F_OK) == 0) rates = ReadRates(path);
  if (!rates.ok() || !RatesAreFor(*rates, core_types)) {
    rates = TimeKernels(self_exe, products, env, core_types);
    if (Status written = WriteRates(path, *rates); !written.ok()) rates = written;
  }
  ::close(lock);  // releases the lock
  return rates;
}

}  // namespace

Result<NodeKernel> ChooseNodeKernel(const std::map<std::string, std::string>& env, const TrainConfig& config,
                                    const std::string& self_exe) {
  DSLAUNCH_ASSIGN_OR_RETURN(KernelRequest request, ParseKernelRequest(env));
  const std::vector<std::string> core_types = CoreTypesToTime(request, ops::ReadCpuFeatures());
  const std::vector<ProductShape> products = ProbeProducts(config);
  // The probes see the environment the worker was started with: not the kernels a re-execution
  // of this process applied.
  std::map<std::string, std::string> probe_env = env;
  if (auto applied = env.find(kSgemmAppliedEnv); applied != env.end()) {
    if (auto core = env.find(kOpenBlasCoreTypeEnv); core != env.end() && core->second == applied->second) {
      probe_env.erase(kOpenBlasCoreTypeEnv);
    }
    probe_env.erase(kSgemmAppliedEnv);
  }
  std::vector<KernelRate> rates;
  auto dir = env.find(env::kJobDir);
  if (dir != env.end() && !dir->second.empty()) {
    const std::string path = dir->second + "/sgemm-kernels." + HostName();
    DSLAUNCH_ASSIGN_OR_RETURN(rates, NodeRates(path, self_exe, products, probe_env, core_types));
  } else {
    rates = TimeKernels(self_exe, products, probe_env, core_types);
  }
  DSLAUNCH_ASSIGN_OR_RETURN(ops::KernelChoice choice, DecideKernel(request, rates));
  return NodeKernel{choice, ops::KernelChoiceLine(choice, request.source)};
}

Status ApplyNodeKernel(const NodeKernel& kernel, const std::map<std::string, std::string>& env,
                       const std::vector<std::string>& argv) {
  const std::string& core = kernel.choice.core_type;
  if (core.empty()) return Status::Ok();
  if (auto applied = env.find(kSgemmAppliedEnv); applied != env.end() && applied->second == core) return Status::Ok();
  if (::setenv(kOpenBlasCoreTypeEnv, core.c_str(), 1) != 0 || ::setenv(kSgemmAppliedEnv, core.c_str(), 1) != 0) {
    return InternalError(std::string("cannot set ") + kOpenBlasCoreTypeEnv + ": " + std::strerror(errno));
  }
  std::vector<std::string> args = argv;
  std::vector<char*> cargs = CStrings(args);
  ::execv("/proc/self/exe", cargs.data());
  return InternalError(std::string("cannot re-execute the worker with ") + kOpenBlasCoreTypeEnv + "=" + core + ": " +
                       std::strerror(errno));
}

}  // namespace dslaunch::runtime
