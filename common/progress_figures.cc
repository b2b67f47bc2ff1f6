#include "common/progress_figures.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace dslaunch {
namespace {

// How a figure's text is read and checked.
enum class Kind {
  kAny,          // a finite number (losses may be negative)
  kNonNegative,  // a finite number >= 0 (times, throughput)
  kCount,        // a non-negative integer (steps, bytes)
};

struct Figure {
  std::string_view name;
  Kind kind;
  int digits;  // significant digits written (doubles)
  std::optional<double> ProgressFigures::*real;
  std::optional<int64_t> ProgressFigures::*count;
};

// The one table of figures: names, kinds, order of writing.
constexpr Figure kFigures[] = {
    {"step_ms", Kind::kNonNegative, 6, &ProgressFigures::step_ms, nullptr},
    {"compute_ms", Kind::kNonNegative, 6, &ProgressFigures::compute_ms, nullptr},
    {"loss", Kind::kAny, 9, &ProgressFigures::loss, nullptr},
    {"tokens_per_s", Kind::kNonNegative, 6, &ProgressFigures::tokens_per_s, nullptr},
    {"val_loss", Kind::kAny, 9, &ProgressFigures::val_loss, nullptr},
    {"val_step", Kind::kCount, 0, nullptr, &ProgressFigures::val_step},
    {"ckpt_s", Kind::kNonNegative, 6, &ProgressFigures::ckpt_s, nullptr},
    {"ckpt_bytes", Kind::kCount, 0, nullptr, &ProgressFigures::ckpt_bytes},
    {"ckpt_step", Kind::kCount, 0, nullptr, &ProgressFigures::ckpt_step},
};

const Figure* Find(std::string_view name) {
  for (const Figure& f : kFigures) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// `text` fit for one line of an error message: bytes outside printable ASCII as '?'.
std::string Shown(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

}  // namespace

std::string ProgressFigureNames() {
  std::string out;
  for (const Figure& f : kFigures) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

Status SetProgressFigure(ProgressFigures& figures, std::string_view name, std::string_view value) {
  const Figure* f = Find(name);
  if (f == nullptr) {
    return InvalidArgumentError("unknown figure '" + Shown(name) + "' (known: timeout, " + ProgressFigureNames() + ")");
  }
  const std::string quoted = std::string(f->name) + " '" + Shown(value) + "'";
  const char* begin = value.data();
  const char* end = value.data() + value.size();
  if (f->kind == Kind::kCount) {
    if (figures.*(f->count)) return InvalidArgumentError(std::string(f->name) + " given twice");
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(begin, end, v);
    if (value.empty() || ec != std::errc() || ptr != end || v < 0 || value.front() == '-') {
      return InvalidArgumentError(quoted + " is not a non-negative integer");
    }
    figures.*(f->count) = v;
    return Status::Ok();
  }
  if (figures.*(f->real)) return InvalidArgumentError(std::string(f->name) + " given twice");
  double v = 0;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (value.empty() || ec != std::errc() || ptr != end || !std::isfinite(v)) {
    return InvalidArgumentError(quoted + " is not a finite number");
  }
  if (f->kind == Kind::kNonNegative && v < 0) return InvalidArgumentError(quoted + " is negative");
  figures.*(f->real) = v;
  return Status::Ok();
}

std::string FormatProgressFigures(const ProgressFigures& figures) {
  std::string out;
  char buf[64];
  for (const Figure& f : kFigures) {
    if (f.kind == Kind::kCount) {
      if (!(figures.*(f.count))) continue;
      std::snprintf(buf, sizeof(buf), " %.*s=%lld", static_cast<int>(f.name.size()), f.name.data(),
                    static_cast<long long>(*(figures.*(f.count))));
    } else {
      const std::optional<double>& v = figures.*(f.real);
      if (!v || !std::isfinite(*v)) continue;
      std::snprintf(buf, sizeof(buf), " %.*s=%.*g", static_cast<int>(f.name.size()), f.name.data(), f.digits, *v);
    }
    out += buf;
  }
  return out;
}

}  // namespace dslaunch
