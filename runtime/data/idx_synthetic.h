// Synthetic digits: a stand-in for MNIST/FashionMNIST where they cannot be downloaded, so the mlp
// configuration trains end to end on any machine (docs/data.md, "Synthetic digits").
//
// Each image is 28x28 uint8 (0 background, 255 ink), class c in 0-9 drawn as the seven-segment
// figure of the digit c, varied per sample: scale, aspect, slant, per-vertex jitter, stroke width
// and ink level, a shift of up to 3 pixels each way, soft (anti-aliased) stroke edges, a dim stray
// stroke in half the images and background noise. Pairs of classes differ by one segment (8 and 0,
// 8 and 9, 5 and 6, ...), and the stray stroke can mimic a missing one, so an MLP learns the set
// well but not perfectly, and a linear model clearly less well.
#pragma once

#include <cstdint>

#include "runtime/data/idx_data.h"

namespace dslaunch::runtime {

inline constexpr int kSyntheticDigitSide = 28;
inline constexpr int kSyntheticDigitClasses = 10;

// n images (n >= 0) with labels[i] = i % 10: every class has n / 10 or n / 10 + 1 samples.
// A pure function of (i, seed) per sample: the same seed gives the same images on every platform,
// and a larger n extends a smaller one (its first images are the same). Use different seeds for
// training and validation sets.
IdxDataset MakeSyntheticDigits(int n, uint64_t seed);

}  // namespace dslaunch::runtime
