#include "runtime/train/progress_bar.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dslaunch::runtime {
namespace {

constexpr int kBarWidth = 20;

std::string Rate(double v) {
  char buf[32];
  if (v >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.1fM", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof(buf), "%.1fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  }
  return buf;
}

std::string Duration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", s / 3600, s / 60 % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%lds", s);
  }
  return buf;
}

}  // namespace

std::string FormatProgressBar(int64_t step, int64_t total, double loss, double per_second, const std::string& unit,
                              double seconds) {
  total = std::max<int64_t>(total, 1);
  step = std::clamp<int64_t>(step, 0, total);
  const int filled = static_cast<int>(step * kBarWidth / total);
  std::string bar = "[" + std::string(static_cast<size_t>(filled), '#') +
                    std::string(static_cast<size_t>(kBarWidth - filled), '-') + "] ";
  const int digits = static_cast<int>(std::to_string(total).size());
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%*lld/%lld | loss %.4f | ", digits, static_cast<long long>(step),
                static_cast<long long>(total), loss);
  const double left = step > 0 ? seconds / static_cast<double>(step) * static_cast<double>(total - step) : 0.0;
  return bar + buf + Rate(per_second) + " " + unit + "/s | " + (step == total ? "done" : Duration(left) + " left");
}

}  // namespace dslaunch::runtime
