// The row passes of the linear layer that linear.cc and fused.cc share: the product alone, a bias
// added to a row, a row added to column sums. Internal to runtime/ops/cpu (ops.h is the interface).
#pragma once

namespace dslaunch::runtime::ops {

// out[N][out_dim] = in[N][in_dim] * weight[out_dim][in_dim]^T (sgemm, beta 0).
void LinearMatmul(float* out, const float* in, const float* weight, int n, int in_dim, int out_dim);
// row[cols] += bias[cols].
void AddBiasRow(float* row, const float* bias, int cols);
// sums[cols] += row[cols].
void AddRow(float* sums, const float* row, int cols);

}  // namespace dslaunch::runtime::ops
