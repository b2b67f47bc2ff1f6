#include "runtime/core/part_placement.h"

#include <algorithm>

#include "common/check.h"

namespace dslaunch::runtime {

uint64_t PartPlacement::numel() const {
  uint64_t n = 0;
  for (const WholePiece& p : pieces) n += p.numel();
  return n;
}

void AppendPiece(std::vector<WholePiece>& pieces, const WholePiece& piece) {
  if (piece.numel() == 0) return;
  WholePiece p = piece;
  if (p.count == 1) p.stride = 0;
  if (!pieces.empty()) {
    WholePiece& q = pieces.back();
    if (q.count == 1 && p.count == 1 && p.begin == q.begin + q.run) {
      q.run += p.run;
      return;
    }
    if (p.run == q.run) {
      // The stride the two would share: the last one's when it has more than one run, else the
      // new one's, else the distance between their starts.
      const uint64_t stride = q.count > 1 ? q.stride : p.count > 1 ? p.stride : p.begin - q.begin;
      const bool fits = p.begin > q.begin && stride >= q.run && (p.count == 1 || p.stride == stride) &&
                        p.begin == q.begin + q.count * stride;
      if (fits) {
        q.stride = stride;
        q.count += p.count;
        return;
      }
    }
  }
  pieces.push_back(p);
}

std::vector<WholePiece> PiecesOf(const std::vector<WholePiece>& pieces, ShardRange range) {
  std::vector<WholePiece> out;
  uint64_t offset = 0;  // the part element where the piece starts
  for (const WholePiece& p : pieces) {
    const uint64_t lo = std::max<uint64_t>(range.begin, offset), hi = std::min<uint64_t>(range.end, offset + p.numel());
    if (lo < hi) {
      const uint64_t x = lo - offset, y = hi - offset;  // within the piece
      uint64_t k0 = x / p.run;
      const uint64_t r0 = x % p.run, k1 = y / p.run, r1 = y % p.run;
      auto at = [&](uint64_t k) { return p.begin + k * p.stride; };
      if (k0 == k1) {
        AppendPiece(out, {at(k0) + r0, 0, y - x, 1});
      } else {
        if (r0 != 0) AppendPiece(out, {at(k0) + r0, 0, p.run - r0, 1}), ++k0;
        if (k1 > k0) AppendPiece(out, {at(k0), p.stride, p.run, k1 - k0});
        if (r1 != 0) AppendPiece(out, {at(k1), 0, r1, 1});
      }
    }
    offset += p.numel();
  }
  DSLAUNCH_CHECK(range.begin <= range.end && range.end <= offset)
      << "part range [" << range.begin << ", " << range.end << ") of " << offset << " elements";
  return out;
}

std::vector<ShardRange> Without(ShardRange range, const std::vector<ShardRange>& skip) {
  std::vector<ShardRange> out;
  size_t at = range.begin;
  for (const ShardRange& s : skip) {
    if (s.end <= at) continue;
    if (s.begin >= range.end) break;
    if (s.begin > at) out.push_back({at, s.begin});
    at = std::max(at, s.end);
  }
  if (at < range.end) out.push_back({at, range.end});
  return out;
}

}  // namespace dslaunch::runtime
