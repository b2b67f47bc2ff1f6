#include "runtime/engine/step_gradient.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "common/check.h"
#include "runtime/engine/storage_type.h"

namespace dslaunch::runtime {
namespace {

// Adds the squares to `sum` one by one, in order (the order fixes the bits of the result).
void AddSquares(std::span<const float> values, double& sum) {
  for (float x : values) sum += static_cast<double>(x) * x;
}

double SumOfSquaresOf(std::span<float> values) {
  double sum = 0.0;
  AddSquares(values, sum);
  return sum;
}

// Converted a block at a time (the bulk conversion is vectorised), summed in the same order.
template <class S>
double SumOfSquaresOf(std::span<const S> values) {
  constexpr size_t kBlock = 4096;
  float block[kBlock];
  double sum = 0.0;
  for (size_t at = 0; at < values.size(); at += kBlock) {
    const size_t n = std::min(kBlock, values.size() - at);
    ToFloat(values.subspan(at, n), std::span<float>(block, n));
    AddSquares(std::span<const float>(block, n), sum);
  }
  return sum;
}

}  // namespace

StepGradient StepGradient::Owning(std::vector<float> values) {
  StepGradient g;
  g.owned_ = std::move(values);
  g.values_ = std::span<float>(g.owned_);
  return g;
}

template <class Values>
StepGradient StepGradient::Of(Values values) {
  StepGradient g;
  g.values_ = values;
  return g;
}

StepGradient StepGradient::View(std::span<float> values) { return Of(values); }
StepGradient StepGradient::Converting(std::span<const Half> values) { return Of(values); }
StepGradient StepGradient::Converting(std::span<const BFloat16> values) { return Of(values); }

size_t StepGradient::size() const {
  return std::visit([](auto values) { return values.size(); }, values_);
}

double StepGradient::SumOfSquares() const {
  return std::visit([](auto values) { return SumOfSquaresOf(values); }, values_);
}

double StepGradient::SumOfSquares(std::span<const ShardRange> skip) const {
  if (skip.empty()) return SumOfSquares();
  return std::visit(
      [&](auto values) {
        double sum = 0.0;
        size_t at = 0;
        auto add = [&](size_t to) {
          to = std::min(to, values.size());
          if (to > at) sum += SumOfSquaresOf(values.subspan(at, to - at));
        };
        for (const ShardRange& range : skip) {
          add(range.begin);
          at = std::max(at, std::min(range.end, values.size()));
        }
        add(values.size());
        return sum;
      },
      values_);
}

std::span<float> StepGradient::Range(size_t begin, size_t count, ScratchBuffers& scratch) {
  DSLAUNCH_CHECK(begin <= size() && count <= size() - begin)
      << "range [" << begin << ", " << begin + count << ") of " << size();
  if (const auto* fp32 = std::get_if<std::span<float>>(&values_)) return fp32->subspan(begin, count);
  if (staging_.size() < count) {
    scratch.Give(std::move(staging_));
    staging_ = scratch.Take(count);
  }
  const std::span<float> out(staging_.data(), count);
  std::visit(
      [&](auto values) {
        if constexpr (!std::is_same_v<decltype(values), std::span<float>>) ToFloat(values.subspan(begin, count), out);
      },
      values_);
  return out;
}

void StepGradient::Release(ScratchBuffers& scratch) {
  scratch.GiveForReuse(std::move(owned_));  // the next step takes the same size
  scratch.Give(std::move(staging_));
  values_ = std::span<float>();
}

}  // namespace dslaunch::runtime
