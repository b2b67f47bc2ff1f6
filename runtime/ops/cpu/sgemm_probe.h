// The sgemm of this process, timed and checked: which OpenBLAS kernels it runs, how fast they are
// on given products, and whether they compute a known product exactly. Every figure is this
// process's own: OpenBLAS chooses its kernels once, when it loads (OPENBLAS_CORETYPE), so another
// kernel is measured in another process (runtime/train/kernel_choice.h).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/ops/cpu/sgemm_choice.h"

namespace dslaunch::runtime::ops {

// The kernels OpenBLAS runs in this process ("SkylakeX", "Prescott").
std::string OpenBlasKernelName();

// Runs `s` as LinearForward/LinearBackward do (C = the product, beta 0): x [n][in], w [out][in],
// y [n][out] are the operands named as in ops.h, c holds s.m() x s.cols() floats.
void RunProduct(const ProductShape& s, const float* x, const float* w, const float* y, float* c);

// GFLOP/s over `products`: the first run once untimed (the first call faults in pages and sizes
// OpenBLAS's buffers), then the list in order, again and again, until `budget` has passed after
// a product (at least one product is timed), counting the operations done over the time taken.
// Operands are random in [-1, 1]. Precondition: products is not empty.
double TimeProducts(const std::vector<ProductShape>& products, std::chrono::milliseconds budget);

// Computes one product of each transposition the runtime uses, with odd sizes (edge handling)
// and integer operands whose products and sums are exact in fp32, and compares every element with
// the exact answer: true when all equal. A kernel that fails this is wrong, not imprecise.
bool KnownProductsExact();

}  // namespace dslaunch::runtime::ops
