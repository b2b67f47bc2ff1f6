// The product of the linear layer without its bias, shared by linear.cc and the fused forms that
// finish its rows themselves (fused.cc). Internal to runtime/ops/cpu (ops.h is the interface).
#pragma once

namespace dslaunch::runtime::ops {

// out[N][out_dim] = in[N][in_dim] * weight[out_dim][in_dim]^T (sgemm, beta 0).
void LinearMatmul(float* out, const float* in, const float* weight, int n, int in_dim, int out_dim);

}  // namespace dslaunch::runtime::ops
