// A fixed sequence of every collective with deterministic, integer-valued inputs, run by each rank
// of a communicator; the outputs of one implementation are checked against a direct reference
// (thread fake) or against another implementation (Gloo vs the thread fake). Integer-valued
// floats make sums exact in any order, so results compare bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/comm/communicator.h"

namespace dslaunch::runtime::testing {

// Uneven block sizes for `world` ranks, with a zero block when world >= 3.
inline std::vector<size_t> UnevenCounts(int world) {
  static const size_t kCounts[] = {5, 3, 0, 7};
  std::vector<size_t> counts;
  for (int r = 0; r < world; ++r) counts.push_back(world == 1 ? 6 : kCounts[r % 4] + (r == 1));
  return counts;
}

// Input element i of rank r: small integers, different per rank, some negative (for max).
inline float ScriptInput(int rank, size_t i) {
  return static_cast<float>((static_cast<int>(i) * (rank + 3)) % 11 - 5 + rank);
}

// Integer element i of rank r: beyond float's 24-bit mantissa, so a detour through fp32 would show;
// negative for odd ranks.
inline int64_t ScriptInt(int rank, size_t i) {
  const int64_t magnitude = (int64_t{rank + 1} << 40) + static_cast<int64_t>(i) * 3 + 1;
  return rank % 2 == 0 ? magnitude : -magnitude;
}
// Byte element i of rank r.
inline uint8_t ScriptByte(int rank, size_t i) { return static_cast<uint8_t>(37 * rank + 11 * i + 200); }

struct ScriptOutputs {
  std::vector<std::vector<float>> results;  // one per step, in order
  std::vector<std::vector<int64_t>> ints;   // the integer and byte steps, in order
};

inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

// Runs: AllReduce (each op), ReduceScatter (each op), AllGather, AllGather in place, 16-bit
// AllGather, Broadcast from every root, int64 and byte AllGather, int64 Broadcast, Barrier. Stops at the first error.
inline Status RunCollectiveScript(Communicator& comm, ScriptOutputs& out) {
  const int world = comm.world_size();
  const int rank = comm.rank();
  const std::vector<size_t> counts = UnevenCounts(world);
  const std::vector<size_t> offsets = BlockOffsets(counts);
  const size_t total = offsets.back();
  std::vector<float> input(total);
  for (size_t i = 0; i < total; ++i) input[i] = ScriptInput(rank, i);

  for (ReduceOp op : kAllOps) {
    std::vector<float> data = input;
    DSLAUNCH_RETURN_IF_ERROR(comm.AllReduce(data, op));
    out.results.push_back(data);
  }
  for (ReduceOp op : kAllOps) {
    std::vector<float> block(counts[rank], -1.0f);
    DSLAUNCH_RETURN_IF_ERROR(comm.ReduceScatter(input, block, counts, op));
    out.results.push_back(block);
  }
  std::vector<float> mine(input.begin() + offsets[rank], input.begin() + offsets[rank + 1]);
  std::vector<float> gathered(total, -1.0f);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(mine, gathered, counts));
  out.results.push_back(gathered);
  std::vector<float> in_place(total, -1.0f);
  std::copy(mine.begin(), mine.end(), in_place.begin() + offsets[rank]);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(
      std::span<const float>(in_place).subspan(offsets[rank], counts[rank]), in_place, counts));
  out.results.push_back(in_place);

  std::vector<uint16_t> mine16(counts[rank]);
  for (size_t i = 0; i < mine16.size(); ++i) mine16[i] = static_cast<uint16_t>(1000 * rank + i);
  std::vector<uint16_t> gathered16(total, 0xffff);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(View(std::span<const uint16_t>(mine16), DType::kBFloat16),
                                          View(std::span<uint16_t>(gathered16), DType::kBFloat16),
                                          counts));
  out.results.emplace_back(gathered16.begin(), gathered16.end());

  for (int root = 0; root < world; ++root) {
    std::vector<float> data = input;
    DSLAUNCH_RETURN_IF_ERROR(comm.Broadcast(data, root));
    out.results.push_back(data);
  }

  std::vector<int64_t> mine64(counts[rank]);
  for (size_t i = 0; i < mine64.size(); ++i) mine64[i] = ScriptInt(rank, i);
  std::vector<int64_t> gathered64(total, -1);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const int64_t>(mine64), std::span<int64_t>(gathered64), counts));
  out.ints.push_back(gathered64);
  std::vector<uint8_t> mine8(counts[rank]);
  for (size_t i = 0; i < mine8.size(); ++i) mine8[i] = ScriptByte(rank, i);
  std::vector<uint8_t> gathered8(total, 0);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const uint8_t>(mine8), std::span<uint8_t>(gathered8), counts));
  out.ints.emplace_back(gathered8.begin(), gathered8.end());
  std::vector<int64_t> broadcast64(total);
  for (size_t i = 0; i < total; ++i) broadcast64[i] = ScriptInt(rank, i);
  DSLAUNCH_RETURN_IF_ERROR(comm.Broadcast(std::span<int64_t>(broadcast64), world - 1));
  out.ints.push_back(broadcast64);
  DSLAUNCH_RETURN_IF_ERROR(comm.Barrier());
  return Status::Ok();
}

// What rank `rank` of `world` must get from RunCollectiveScript, computed directly.
inline ScriptOutputs ExpectedScript(int world, int rank) {
  const std::vector<size_t> counts = UnevenCounts(world);
  const std::vector<size_t> offsets = BlockOffsets(counts);
  const size_t total = offsets.back();
  auto reduce = [&](ReduceOp op, size_t i) {
    float acc = ScriptInput(0, i);
    for (int r = 1; r < world; ++r) {
      acc = op == ReduceOp::kMax ? std::max(acc, ScriptInput(r, i)) : acc + ScriptInput(r, i);
    }
    return op == ReduceOp::kAvg ? acc * (1.0f / world) : acc;
  };
  ScriptOutputs out;
  for (ReduceOp op : kAllOps) {
    std::vector<float> v(total);
    for (size_t i = 0; i < total; ++i) v[i] = reduce(op, i);
    out.results.push_back(v);
  }
  for (ReduceOp op : kAllOps) {
    std::vector<float> v;
    for (size_t i = offsets[rank]; i < offsets[rank + 1]; ++i) v.push_back(reduce(op, i));
    out.results.push_back(v);
  }
  std::vector<float> gathered(total);
  for (int r = 0; r < world; ++r) {
    for (size_t i = offsets[r]; i < offsets[r + 1]; ++i) gathered[i] = ScriptInput(r, i);
  }
  out.results.push_back(gathered);
  out.results.push_back(gathered);
  std::vector<float> gathered16(total);
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < counts[r]; ++i)
      gathered16[offsets[r] + i] = static_cast<uint16_t>(1000 * r + i);
  }
  out.results.push_back(gathered16);
  for (int root = 0; root < world; ++root) {
    std::vector<float> v(total);
    for (size_t i = 0; i < total; ++i) v[i] = ScriptInput(root, i);
    out.results.push_back(v);
  }
  std::vector<int64_t> gathered64(total), gathered8(total), broadcast64(total);
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < counts[r]; ++i) {
      gathered64[offsets[r] + i] = ScriptInt(r, i);
      gathered8[offsets[r] + i] = ScriptByte(r, i);
    }
  }
  for (size_t i = 0; i < total; ++i) broadcast64[i] = ScriptInt(world - 1, i);
  out.ints = {gathered64, gathered8, broadcast64};
  return out;
}

}  // namespace dslaunch::runtime::testing
