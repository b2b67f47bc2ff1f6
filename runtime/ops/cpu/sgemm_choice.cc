#include "runtime/ops/cpu/sgemm_choice.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "common/text.h"

namespace dslaunch::runtime::ops {

CpuFeatures ReadCpuFeatures() {
  __builtin_cpu_init();
  CpuFeatures cpu;
  cpu.avx = __builtin_cpu_supports("avx");
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.fma = __builtin_cpu_supports("fma");
  cpu.avx512f = __builtin_cpu_supports("avx512f");
  cpu.avx512bw = __builtin_cpu_supports("avx512bw");
  cpu.avx512dq = __builtin_cpu_supports("avx512dq");
  cpu.avx512vl = __builtin_cpu_supports("avx512vl");
  return cpu;
}

std::vector<std::string> CandidateCoreTypes(const CpuFeatures& cpu) {
  std::vector<std::string> cores;
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl) cores.push_back("SkylakeX");
  if (cpu.avx2 && cpu.fma) cores.push_back("Haswell");
  if (cpu.avx) cores.push_back("Sandybridge");
  return cores;
}

int ProductShape::m() const { return product == LinearProduct::kWeightGrad ? out : n; }
int ProductShape::cols() const { return product == LinearProduct::kForward ? out : in; }
int ProductShape::k() const {
  switch (product) {
    case LinearProduct::kForward: return in;
    case LinearProduct::kInputGrad: return out;
    case LinearProduct::kWeightGrad: return n;
  }
  return 0;
}
double ProductShape::flops() const { return 2.0 * m() * cols() * k(); }

std::vector<ProductShape> LinearLayerProducts(int n, int in, int out) {
  return {{LinearProduct::kForward, n, in, out},
          {LinearProduct::kInputGrad, n, in, out},
          {LinearProduct::kWeightGrad, n, in, out}};
}

std::vector<ProductShape> GptBlockProducts(int n, int c) {
  std::vector<ProductShape> all;
  for (auto [in, out] : {std::pair{c, 3 * c}, {c, c}, {c, 4 * c}, {4 * c, c}}) {
    for (const ProductShape& s : LinearLayerProducts(n, in, out)) all.push_back(s);
  }
  return all;
}

namespace {

constexpr char kProductLetters[] = {'F', 'I', 'W'};

bool ParseInt(std::string_view text, int* value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

bool ParseDouble(std::string_view text, double* value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string Rate(double gflops) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", gflops);
  return text;
}

}  // namespace

std::string FormatProductShape(const ProductShape& s) {
  return std::string(1, kProductLetters[static_cast<int>(s.product)]) + ":" + std::to_string(s.n) + ":" +
         std::to_string(s.in) + ":" + std::to_string(s.out);
}

Result<ProductShape> ParseProductShape(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError("product shape '" + std::string(text) +
                                "': expected F|I|W:N:IN:OUT with sizes 1.." + std::to_string(kMaxProbeSize));
  };
  const std::vector<std::string> parts = SplitText(text, ':');
  if (parts.size() != 4 || parts[0].size() != 1) return bad();
  const auto* letter = std::find(std::begin(kProductLetters), std::end(kProductLetters), parts[0][0]);
  if (letter == std::end(kProductLetters)) return bad();
  ProductShape s;
  s.product = static_cast<LinearProduct>(letter - std::begin(kProductLetters));
  for (auto [part, value] : {std::pair{&parts[1], &s.n}, {&parts[2], &s.in}, {&parts[3], &s.out}}) {
    if (!ParseInt(*part, value) || *value < 1 || *value > kMaxProbeSize) return bad();
  }
  return s;
}

int KernelLevel(std::string_view kernel) {
  static const std::pair<std::string_view, int> kLevels[] = {
      {"SkylakeX", 3}, {"Cooperlake", 3}, {"SapphireRapids", 3}, {"Haswell", 2}, {"Zen", 2},
      {"Sandybridge", 1}, {"Bulldozer", 1}, {"Piledriver", 1}, {"Steamroller", 1}, {"Excavator", 1},
      {"Katmai", 0}, {"Coppermine", 0}, {"Northwood", 0}, {"Prescott", 0}, {"Banias", 0}, {"Atom", 0},
      {"Core2", 0}, {"Penryn", 0}, {"Dunnington", 0}, {"Nehalem", 0}, {"Athlon", 0}, {"Opteron", 0},
      {"Opteron_SSE3", 0}, {"Barcelona", 0}, {"Nano", 0}, {"Bobcat", 0}};
  for (const auto& [name, level] : kLevels) {
    if (name == kernel) return level;
  }
  return -1;
}

Result<KernelChoice> ChooseKernel(const std::vector<KernelRate>& measured) {
  if (measured.empty() || !measured[0].core_type.empty()) {
    return InternalError("ChooseKernel: the first rate must be OpenBLAS's own choice");
  }
  const KernelRate& own = measured[0];
  const bool own_usable = own.exact && own.error.empty();
  const KernelRate* widest = nullptr;
  for (size_t i = 1; i < measured.size() && widest == nullptr; ++i) {
    if (measured[i].exact && measured[i].error.empty()) widest = &measured[i];
  }
  KernelChoice choice;
  choice.measured = measured;
  choice.default_kernel = own.kernel;
  choice.default_gflops = own.gflops;
  const int own_level = KernelLevel(own.kernel);
  const bool wider = widest != nullptr && own_level >= 0 && KernelLevel(widest->kernel) > own_level &&
                     widest->gflops >= kMinRateOfOwn * own.gflops;
  if (widest != nullptr && (!own_usable || wider)) {
    choice.core_type = widest->core_type;
    choice.kernel = widest->kernel;
    choice.gflops = widest->gflops;
    return choice;
  }
  if (!own_usable) {
    std::vector<std::string> lines;
    for (const KernelRate& r : measured) lines.push_back(FormatKernelRate(r));
    return FailedPreconditionError(
        "no OpenBLAS kernel computed the known product exactly, so training would compute wrong products: " +
        JoinText(lines, "; ") + " (reinstall libopenblas0, or set OPENBLAS_CORETYPE to a kernel that works)");
  }
  choice.kernel = own.kernel;
  choice.gflops = own.gflops;
  return choice;
}

std::string FormatKernelRate(const KernelRate& rate) {
  std::string line = "core_type=" + rate.core_type + " kernel=" + rate.kernel + " gflops=" + Rate(rate.gflops) +
                     " exact=" + (rate.exact ? "1" : "0");
  if (!rate.error.empty()) line += " error=" + rate.error;
  return line;
}

Result<KernelRate> ParseKernelRate(std::string_view line) {
  KernelRate rate;
  bool has_kernel = false, has_gflops = false, has_exact = false;
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("sgemm probe line '" + std::string(line) + "': " + std::string(why));
  };
  if (size_t e = line.find(" error="); e != std::string_view::npos) {
    rate.error = std::string(line.substr(e + 7));
    line = line.substr(0, e);
  }
  for (const std::string& field : SplitText(line, ' ')) {
    if (field.empty()) continue;
    const size_t eq = field.find('=');
    if (eq == std::string::npos) return bad("'" + field + "' is not NAME=VALUE");
    const std::string_view name = std::string_view(field).substr(0, eq), value = std::string_view(field).substr(eq + 1);
    if (name == "core_type") {
      rate.core_type = value;
    } else if (name == "kernel") {
      rate.kernel = value, has_kernel = !value.empty();
    } else if (name == "gflops") {
      if (!ParseDouble(value, &rate.gflops) || rate.gflops < 0) return bad("gflops is not a rate");
      has_gflops = true;
    } else if (name == "exact") {
      if (value != "0" && value != "1") return bad("exact is not 0 or 1");
      rate.exact = value == "1", has_exact = true;
    } else {
      return bad("unknown field '" + std::string(name) + "'");
    }
  }
  if (!has_kernel || !has_gflops || !has_exact) return bad("kernel=, gflops= and exact= are required");
  return rate;
}

std::string KernelChoiceLine(const KernelChoice& choice, std::string_view source) {
  std::string line = "sgemm: OpenBLAS " + choice.kernel + " kernels";
  const bool switched = !choice.core_type.empty();
  if (!switched) line += " (OpenBLAS's own choice)";
  line += ", " + Rate(choice.gflops) + " GFLOP/s on this model's products";
  if (switched) line += ", chosen over OpenBLAS's own " + choice.default_kernel + " (" + Rate(choice.default_gflops) + " GFLOP/s)";
  std::vector<std::string> others;
  for (size_t i = 1; i < choice.measured.size(); ++i) {
    const KernelRate& r = choice.measured[i];
    if (r.core_type == choice.core_type) continue;
    if (!r.error.empty()) {
      others.push_back(r.core_type + " failed");
    } else {
      others.push_back(r.core_type + " " + Rate(r.gflops) + (r.exact ? "" : " (inexact)"));
    }
  }
  if (!others.empty()) line += "; also measured: " + JoinText(others, ", ");
  if (!source.empty()) line += " (" + std::string(source) + ")";
  return line;
}

}  // namespace dslaunch::runtime::ops
