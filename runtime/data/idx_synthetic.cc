#include "runtime/data/idx_synthetic.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/check.h"
#include "runtime/core/random.h"

namespace dslaunch::runtime {
namespace {

// Seven-segment figures. Vertices of the digit box: 0 top-left, 1 top-right, 2 middle-left,
// 3 middle-right, 4 bottom-left, 5 bottom-right.
enum Vertex { kTopLeft, kTopRight, kMidLeft, kMidRight, kBottomLeft, kBottomRight, kVertices };
struct Segment {
  Vertex from, to;
};
// a (top), b (top right), c (bottom right), d (bottom), e (bottom left), f (top left), g (middle).
constexpr std::array<Segment, 7> kSegments = {{{kTopLeft, kTopRight},
                                               {kTopRight, kMidRight},
                                               {kMidRight, kBottomRight},
                                               {kBottomLeft, kBottomRight},
                                               {kMidLeft, kBottomLeft},
                                               {kTopLeft, kMidLeft},
                                               {kMidLeft, kMidRight}}};
// Bit s set: segment s (a = bit 0 ... g = bit 6) is drawn for the digit.
constexpr std::array<uint8_t, kSyntheticDigitClasses> kDigitSegments = {
    0b0111111,  // 0: a b c d e f
    0b0000110,  // 1: b c
    0b1011011,  // 2: a b d e g
    0b1001111,  // 3: a b c d g
    0b1100110,  // 4: b c f g
    0b1101101,  // 5: a c d f g
    0b1111101,  // 6: a c d e f g
    0b0000111,  // 7: a b c
    0b1111111,  // 8: all
    0b1101111,  // 9: a b c d f g
};

// Ranges of the per-sample variations, in pixels of the 28x28 image unless stated.
constexpr float kHeightMin = 15.0f, kHeightMax = 20.0f;   // digit height
constexpr float kAspectMin = 0.45f, kAspectMax = 0.65f;   // width / height
constexpr float kSlantMax = 0.25f;                        // x shift per pixel of height
constexpr float kJitter = 0.08f;                          // vertex jitter, fraction of the height
constexpr float kShiftMax = 3.0f;                         // centre offset each way
constexpr float kHalfWidthMin = 0.8f, kHalfWidthMax = 1.8f;  // stroke half-width
constexpr float kInkMin = 0.6f, kInkMax = 1.0f;           // stroke intensity, 1 = 255
constexpr float kStrayProbability = 0.5f;                 // a stray stroke is added
constexpr float kStrayLengthMin = 3.0f, kStrayLengthMax = 7.0f;
constexpr float kStrayInkMin = 0.25f, kStrayInkMax = 0.55f;
constexpr float kNoise = 0.08f;                           // uniform background noise amplitude

// Uniform in [lo, hi), platform-independent (24 bits, exact in a float).
float Uniform(uint64_t& state, float lo, float hi) {
  return lo + (hi - lo) * UniformFloat(state);
}

struct Point {
  float x, y;
};

// Draws a soft stroke from p to q: intensity ink inside half_width of the segment, falling off
// linearly over one pixel beyond it (anti-aliasing), max-combined with what is on the canvas.
void DrawStroke(float* canvas, Point p, Point q, float half_width, float ink) {
  const float reach = half_width + 1.0f;
  const int x0 = std::max(0, static_cast<int>(std::floor(std::min(p.x, q.x) - reach)));
  const int x1 = std::min(kSyntheticDigitSide - 1, static_cast<int>(std::ceil(std::max(p.x, q.x) + reach)));
  const int y0 = std::max(0, static_cast<int>(std::floor(std::min(p.y, q.y) - reach)));
  const int y1 = std::min(kSyntheticDigitSide - 1, static_cast<int>(std::ceil(std::max(p.y, q.y) + reach)));
  const float dx = q.x - p.x, dy = q.y - p.y;
  const float len2 = dx * dx + dy * dy;
  for (int y = y0; y <= y1; ++y) {
    for (int x = x0; x <= x1; ++x) {
      // Pixel centres are at integer + 0.5.
      const float px = x + 0.5f - p.x, py = y + 0.5f - p.y;
      const float t = len2 > 0.0f ? std::clamp((px * dx + py * dy) / len2, 0.0f, 1.0f) : 0.0f;
      const float ex = px - t * dx, ey = py - t * dy;
      const float d = std::sqrt(ex * ex + ey * ey);
      const float v = ink * std::clamp(half_width + 0.5f - d, 0.0f, 1.0f);
      float& c = canvas[y * kSyntheticDigitSide + x];
      c = std::max(c, v);
    }
  }
}

void DrawDigit(uint8_t* out, int digit, uint64_t& state) {
  constexpr int kPixels = kSyntheticDigitSide * kSyntheticDigitSide;
  std::array<float, kPixels> canvas{};
  const float height = Uniform(state, kHeightMin, kHeightMax);
  const float width = height * Uniform(state, kAspectMin, kAspectMax);
  const float slant = Uniform(state, -kSlantMax, kSlantMax);
  const float cx = kSyntheticDigitSide / 2.0f + Uniform(state, -kShiftMax, kShiftMax);
  const float cy = kSyntheticDigitSide / 2.0f + Uniform(state, -kShiftMax, kShiftMax);
  const float half_width = Uniform(state, kHalfWidthMin, kHalfWidthMax);
  const float ink = Uniform(state, kInkMin, kInkMax);
  // The box's vertices relative to its centre (x in widths, y in heights, y down), jittered, then
  // slanted: the top leans right for a positive slant, as handwriting does.
  const Point box[kVertices] = {{-0.5f, -0.5f}, {0.5f, -0.5f}, {-0.5f, 0.0f},
                                {0.5f, 0.0f},   {-0.5f, 0.5f}, {0.5f, 0.5f}};
  Point v[kVertices];
  for (int k = 0; k < kVertices; ++k) {
    const float y = box[k].y * height + Uniform(state, -kJitter, kJitter) * height;
    const float x = box[k].x * width + Uniform(state, -kJitter, kJitter) * height - slant * y;
    v[k] = {cx + x, cy + y};
  }
  for (size_t s = 0; s < kSegments.size(); ++s) {
    if (kDigitSegments[digit] & (1u << s)) {
      DrawStroke(canvas.data(), v[kSegments[s].from], v[kSegments[s].to], half_width, ink);
    }
  }
  // Always drawn from the stream, so every sample uses the same number of draws per branch.
  const float stray_roll = Uniform(state, 0.0f, 1.0f);
  const Point stray_start = {Uniform(state, 4.0f, 24.0f), Uniform(state, 4.0f, 24.0f)};
  // A direction without sin/cos (libm's may differ in the last bit between platforms; sqrt is exact).
  const Point stray_dir = {Uniform(state, -1.0f, 1.0f), Uniform(state, -1.0f, 1.0f)};
  const float stray_length = Uniform(state, kStrayLengthMin, kStrayLengthMax);
  const float stray_ink = Uniform(state, kStrayInkMin, kStrayInkMax);
  if (stray_roll < kStrayProbability) {
    const float norm = std::max(1e-3f, std::sqrt(stray_dir.x * stray_dir.x + stray_dir.y * stray_dir.y));
    const Point stray_end = {stray_start.x + stray_length * stray_dir.x / norm,
                             stray_start.y + stray_length * stray_dir.y / norm};
    DrawStroke(canvas.data(), stray_start, stray_end, kHalfWidthMin, stray_ink);
  }
  for (int k = 0; k < kPixels; ++k) {
    const float value = canvas[k] + Uniform(state, 0.0f, kNoise);
    out[k] = static_cast<uint8_t>(std::lround(255.0f * std::clamp(value, 0.0f, 1.0f)));
  }
}

}  // namespace

IdxDataset MakeSyntheticDigits(int n, uint64_t seed) {
  DSLAUNCH_CHECK(n >= 0) << "n " << n;
  constexpr int kPixels = kSyntheticDigitSide * kSyntheticDigitSide;
  IdxDataset data;
  data.images.n = n;
  data.images.rows = kSyntheticDigitSide;
  data.images.cols = kSyntheticDigitSide;
  data.images.pixels.resize(static_cast<size_t>(n) * kPixels);
  data.labels.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    // Each sample's own stream, from the seed and its index alone.
    uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (static_cast<uint64_t>(i) + 1));
    SplitMix64(state);
    const int digit = i % kSyntheticDigitClasses;
    data.labels[i] = static_cast<uint8_t>(digit);
    DrawDigit(data.images.pixels.data() + static_cast<size_t>(i) * kPixels, digit, state);
  }
  return data;
}

}  // namespace dslaunch::runtime
