// A host stand-in for what runtime/models/cuda/gpt.cc and runtime/engine/cuda/device_engine.cc
// call: the CUDA runtime's memory calls on host memory, and the ops of runtime/ops/cuda/ops.h as
// their CPU twins: the layer ops of runtime/ops/cpu/ (fp32 only; bf16 and fp16 return an error),
// the optimizer update, conversions, accumulation and the norm as the CPU engine computes them
// (runtime/engine/). Linked instead of libcudart and runtime_ops_cuda, it lets the unit tier run
// GptCuda's order of operations against GptModel, and the device engine against ZeroEngine, on a
// machine without a GPU (tests/runtime/models/cuda/gpt_cuda_host_test.cc,
// tests/runtime/engine/cuda/device_engine_host_test.cc). The kernels themselves are the gpu tier's.
//
// Fresh allocations are filled with 0xff bytes (NaN as floats), so a buffer read before it is
// written shows up in the loss or the gradients. Every op, copy and memset is work on its stream,
// run when the stream's order says (tests/fakes/host_streams.h).
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <span>
#include <vector>
#include <string>
#include <type_traits>

#include "runtime/core/sixteen_bit_float.h"
#include "runtime/engine/optimizer.h"
#include "runtime/engine/storage_type.h"
#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cuda/cublaslt_context.h"
#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/fakes/host_streams.h"

namespace dslaunch::runtime::testing {
namespace {

struct HostStream {
  bool communication = false;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0, done = 0;
};

std::atomic<HostStreamOrder> order{HostStreamOrder::kImmediate};
thread_local std::map<uintptr_t, HostStream> streams;
thread_local uintptr_t next_stream = 1;

HostStream& StreamOf(cudaStream_t stream) { return streams[reinterpret_cast<uintptr_t>(stream)]; }

// Runs `stream`'s work up to its `upto`-th item.
void RunUpTo(cudaStream_t stream, uint64_t upto) {
  HostStream& st = StreamOf(stream);
  while (st.done < upto) {
    std::function<void()> work = std::move(st.queue.front());
    st.queue.pop_front();
    ++st.done;
    work();
  }
}

bool RunsAtOnce(const HostStream& st, cudaStream_t stream) {
  switch (order.load()) {
    case HostStreamOrder::kImmediate: return true;
    case HostStreamOrder::kCommFirst: return stream == nullptr || st.communication;
    case HostStreamOrder::kComputeFirst: return stream == nullptr || !st.communication;
  }
  return true;
}

}  // namespace

void SetHostStreamOrder(HostStreamOrder o) { order.store(o); }

cudaStream_t NewHostStream(bool communication) {
  const uintptr_t id = next_stream++;
  streams[id].communication = communication;
  return reinterpret_cast<cudaStream_t>(id);
}

void RunOnHostStream(cudaStream_t stream, std::function<void()> work) {
  HostStream& st = StreamOf(stream);
  st.queue.push_back(std::move(work));
  ++st.enqueued;
  if (RunsAtOnce(st, stream)) RunUpTo(stream, st.enqueued);
}

void DrainHostStream(cudaStream_t stream) { RunUpTo(stream, StreamOf(stream).enqueued); }

void HostOrderAfter(cudaStream_t consumer, cudaStream_t producer) {
  const uint64_t upto = StreamOf(producer).enqueued;
  RunOnHostStream(consumer, [producer, upto] { RunUpTo(producer, upto); });
}

}  // namespace dslaunch::runtime::testing

using dslaunch::runtime::testing::DrainHostStream;
using dslaunch::runtime::testing::RunOnHostStream;

extern "C" {

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::malloc(bytes > 0 ? bytes : 1);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  std::memset(*p, 0xff, bytes);
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  RunOnHostStream(stream, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* to, const void* from, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  RunOnHostStream(stream, [=] { std::memmove(to, from, bytes); });
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  DrainHostStream(stream);
  return cudaSuccess;
}
const char* cudaGetErrorString(cudaError_t) { return "host stand-in CUDA error"; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = dslaunch::runtime::testing::NewHostStream(/*communication=*/false);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  DrainHostStream(stream);
  return cudaSuccess;
}
// The "device" has DSLAUNCH_STAND_IN_DEVICE_BYTES free (the memory check's tests), else 80 GiB.
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  const char* bytes = std::getenv("DSLAUNCH_STAND_IN_DEVICE_BYTES");
  *free = *total = bytes != nullptr ? std::strtoull(bytes, nullptr, 10) : size_t{80} << 30;
  return cudaSuccess;
}

}  // extern "C"

namespace dslaunch::runtime::ops::cuda {
namespace {

namespace cpu = dslaunch::runtime::ops;

// runtime/core's rounding to bf16 or fp16 (`dtype`, checked by the caller) into `out`.
void RoundTo16(std::span<const float> in, void* out, DType dtype) {
  if (dtype == DType::kBFloat16) {
    FromFloat(in, std::span<BFloat16>(static_cast<BFloat16*>(out), in.size()));
  } else {
    FromFloat(in, std::span<Half>(static_cast<Half*>(out), in.size()));
  }
}

// The CPU ops are fp32: the stand-in runs GptCuda<float> only.
template <typename T>
Status Fp32Only(const char* op) {
  if constexpr (std::is_same_v<T, float>) {
    return Status::Ok();
  } else {
    return InternalError(std::string(op) + ": the host stand-in of the CUDA ops runs fp32 only");
  }
}

}  // namespace

Status CudaStatus(cudaError_t err, std::string_view op, std::string_view what) {
  if (err == cudaSuccess) return Status::Ok();
  return InternalError(std::string(op) + ": " + std::string(what) + ": host stand-in error " + std::to_string(err));
}

Result<CublasLtContext> CublasLtContext::Create(size_t) { return CublasLtContext(); }
CublasLtContext::CublasLtContext(CublasLtContext&&) noexcept {}
CublasLtContext& CublasLtContext::operator=(CublasLtContext&&) noexcept { return *this; }
CublasLtContext::~CublasLtContext() = default;

long AttentionBackwardScratchElements(int t, int nh) { return static_cast<long>(nh) * t * t; }

template <typename T>
Status LinearForward(const CublasLtContext&, T* out, const T* in, const T* weight, const T* bias, int n, int in_dim,
                     int out_dim, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("LinearForward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::LinearForward(out, in, weight, bias, n, in_dim, out_dim); });
  return Status::Ok();
}
template <typename T>
Status LinearBackward(const CublasLtContext&, T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                      int n, int in_dim, int out_dim, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("LinearBackward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::LinearBackward(din, dweight, dbias, dout, in, weight, n, in_dim, out_dim); });
  return Status::Ok();
}
template <typename T>
Status LayerNormForward(T* out, float* mean, float* rstd, const T* in, const T* weight, const T* bias, int n, int c,
                        cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("LayerNormForward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::LayerNormForward(out, mean, rstd, in, weight, bias, n, c); });
  return Status::Ok();
}
template <typename T>
Status LayerNormBackward(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight, const float* mean,
                         const float* rstd, int n, int c, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("LayerNormBackward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::LayerNormBackward(din, dweight, dbias, dout, in, weight, mean, rstd, n, c); });
  return Status::Ok();
}
template <typename T>
Status GeluForward(T* out, const T* in, long count, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("GeluForward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::GeluForward(out, in, count); });
  return Status::Ok();
}
template <typename T>
Status GeluBackward(T* din, const T* dout, const T* in, long count, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("GeluBackward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::GeluBackward(din, dout, in, count); });
  return Status::Ok();
}
template <typename T>
Status EmbeddingForward(T* out, const int* tokens, const T* wte, const T* wpe, int b, int t, int c, int,
                        cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("EmbeddingForward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::EmbeddingForward(out, tokens, wte, wpe, b, t, c); });
  return Status::Ok();
}
template <typename T>
Status EmbeddingBackward(float* dwte, float* dwpe, const T* dout, const int* tokens, int b, int t, int c, int,
                         cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("EmbeddingBackward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::EmbeddingBackward(dwte, dwpe, dout, tokens, b, t, c); });
  return Status::Ok();
}
template <typename T>
Status AttentionForward(const CublasLtContext&, T* out, T* att, const T* qkv, int b, int t, int c, int nh,
                        cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("AttentionForward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::AttentionForward(out, att, qkv, b, t, c, nh); });
  return Status::Ok();
}
template <typename T>
Status AttentionBackward(const CublasLtContext&, T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att, int b,
                         int t, int c, int nh, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("AttentionBackward"));
  if constexpr (std::is_same_v<T, float>) {
    RunOnHostStream(stream, [=] {
      // The scratch is the kernel's own: poison it, so that nothing may count on its contents.
      std::memset(static_cast<void*>(scratch), 0xff, sizeof(T) * AttentionBackwardScratchElements(t, nh));
      cpu::AttentionBackward(dqkv, dout, qkv, att, b, t, c, nh);
    });
  }
  return Status::Ok();
}
template <typename T>
Status CrossEntropyForward(float* losses, T* probs, const T* logits, const int* targets, int n, int v, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("CrossEntropyForward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::CrossEntropyForward(losses, probs, logits, targets, n, v); });
  return Status::Ok();
}
template <typename T>
Status CrossEntropyBackward(T* dlogits, const T* probs, const int* targets, float dloss, int n, int v, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("CrossEntropyBackward"));
  if constexpr (std::is_same_v<T, float>) RunOnHostStream(stream, [=] { cpu::CrossEntropyBackward(dlogits, probs, targets, dloss, n, v); });
  return Status::Ok();
}
template <typename T>
Status ResidualAdd(T* acc, const T* x, long count, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(Fp32Only<T>("ResidualAdd"));
  if constexpr (std::is_same_v<T, float>) {
    RunOnHostStream(stream, [=] {
      for (long i = 0; i < count; ++i) acc[i] += x[i];
    });
  }
  return Status::Ok();
}
// The CPU engine's AddInto: one rounding to the storage type per element.
template <typename T>
Status AddFloat(T* acc, const float* x, long count, cudaStream_t stream) {
  RunOnHostStream(stream, [=] {
    const std::span<const float> in(x, static_cast<size_t>(count));
    if constexpr (std::is_same_v<T, float>) {
      AddInto<float>(in, std::span<float>(acc, in.size()));
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      AddInto<BFloat16>(in, std::span<BFloat16>(reinterpret_cast<BFloat16*>(acc), in.size()));
    } else {
      AddInto<Half>(in, std::span<Half>(reinterpret_cast<Half*>(acc), in.size()));
    }
  });
  return Status::Ok();
}

Status FloatTo16(void* out, DType out_dtype, const float* in, long count, cudaStream_t stream) {
  if (out_dtype != DType::kBFloat16 && out_dtype != DType::kFloat16) {
    return InvalidArgumentError("FloatTo16: output type " + std::string(DTypeName(out_dtype)) + " is not supported");
  }
  RunOnHostStream(stream, [=] { RoundTo16(std::span<const float>(in, static_cast<size_t>(count)), out, out_dtype); });
  return Status::Ok();
}

Status Float16To32(float* out, const void* in, DType in_dtype, long count, cudaStream_t stream) {
  if (in_dtype != DType::kBFloat16 && in_dtype != DType::kFloat16) {
    return InvalidArgumentError("Float16To32: input type " + std::string(DTypeName(in_dtype)) + " is not supported");
  }
  RunOnHostStream(stream, [=] {
    const std::span<float> to(out, static_cast<size_t>(count));
    if (in_dtype == DType::kBFloat16) {
      ToFloat(std::span<const BFloat16>(static_cast<const BFloat16*>(in), to.size()), to);
    } else {
      ToFloat(std::span<const Half>(static_cast<const Half*>(in), to.size()), to);
    }
  });
  return Status::Ok();
}

// StepGradient::SumOfSquares: element order, in double.
Status SumOfSquares(const float* x, long count, double* out, cudaStream_t stream) {
  RunOnHostStream(stream, [=] {
    double sum = 0.0;
    for (long i = 0; i < count; ++i) sum += static_cast<double>(x[i]) * x[i];
    *out = sum;
  });
  return Status::Ok();
}

// OptimizerUpdate on grads * grad_scale (ZeroEngine's order: the gradient scaled first), then the
// rounded copy.
Status AdamUpdate(const AdamParams& hyper, float* params, const float* grads, float* m, float* v, long n, bool decay,
                  void* param_copy, DType copy_dtype, cudaStream_t stream) {
  if (param_copy != nullptr && copy_dtype != DType::kFloat32 && copy_dtype != DType::kBFloat16 &&
      copy_dtype != DType::kFloat16) {
    return InvalidArgumentError("AdamUpdate: copy type " + std::string(DTypeName(copy_dtype)) + " is not supported");
  }
  RunOnHostStream(stream, [=] {
    const size_t count = static_cast<size_t>(n);
    std::vector<float> scaled(grads, grads + count);
    if (hyper.grad_scale != 1.0f) {
      for (float& g : scaled) g *= hyper.grad_scale;
    }
    OptimizerParams p;
    p.kind = hyper.decoupled ? OptimizerKind::kAdamW : OptimizerKind::kAdam;
    p.lr = hyper.lr;
    p.beta1 = hyper.beta1;
    p.beta2 = hyper.beta2;
    p.eps = hyper.eps;
    p.weight_decay = hyper.weight_decay;
    p.bias_correction = hyper.bias_correction;
    OptimizerUpdate(p, hyper.lr, hyper.step, std::span<float>(params, count), scaled, {{0, count, decay}},
                    std::span<float>(m, count), std::span<float>(v, count));
    if (param_copy == nullptr) return;
    if (copy_dtype == DType::kFloat32) {
      std::memcpy(param_copy, params, count * sizeof(float));
    } else {
      RoundTo16(std::span<const float>(params, count), param_copy, copy_dtype);
    }
  });
  return Status::Ok();
}

// GptCuda is instantiated for the three element types, so each op is needed for each.
#define DSLAUNCH_HOST_OPS(T)                                                                                      \
  template Status LinearForward<T>(const CublasLtContext&, T*, const T*, const T*, const T*, int, int, int,         \
                                   cudaStream_t);                                                                 \
  template Status LinearBackward<T>(const CublasLtContext&, T*, T*, T*, const T*, const T*, const T*, int, int, int, \
                                    cudaStream_t);                                                                \
  template Status LayerNormForward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, cudaStream_t);   \
  template Status LayerNormBackward<T>(T*, T*, T*, const T*, const T*, const T*, const float*, const float*, int,  \
                                       int, cudaStream_t);                                                        \
  template Status GeluForward<T>(T*, const T*, long, cudaStream_t);                                               \
  template Status GeluBackward<T>(T*, const T*, const T*, long, cudaStream_t);                                    \
  template Status EmbeddingForward<T>(T*, const int*, const T*, const T*, int, int, int, int, cudaStream_t);       \
  template Status EmbeddingBackward<T>(float*, float*, const T*, const int*, int, int, int, int, cudaStream_t);    \
  template Status AttentionForward<T>(const CublasLtContext&, T*, T*, const T*, int, int, int, int, cudaStream_t); \
  template Status AttentionBackward<T>(const CublasLtContext&, T*, T*, const T*, const T*, const T*, int, int, int, \
                                       int, cudaStream_t);                                                        \
  template Status CrossEntropyForward<T>(float*, T*, const T*, const int*, int, int, cudaStream_t);               \
  template Status CrossEntropyBackward<T>(T*, const T*, const int*, float, int, int, cudaStream_t);               \
  template Status ResidualAdd<T>(T*, const T*, long, cudaStream_t);                                               \
  template Status AddFloat<T>(T*, const float*, long, cudaStream_t);
DSLAUNCH_HOST_OPS(float)
DSLAUNCH_HOST_OPS(__nv_bfloat16)
DSLAUNCH_HOST_OPS(__half)
#undef DSLAUNCH_HOST_OPS

}  // namespace dslaunch::runtime::ops::cuda
