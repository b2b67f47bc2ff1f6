// DType: the element type of a buffer whose type is known only at run time, for every runtime
// folder that passes untyped memory (the communicator's BufferView, the CUDA ops' void pointers,
// the safetensors and export code). One enum for the whole runtime, so a buffer's type is named the
// same way wherever it travels.
//
// kFloat16 and kBFloat16 are 16-bit storage (runtime/core/sixteen_bit_float.h: arithmetic is fp32);
// kInt64 and kUInt8 (bytes) are moved and stored, never reduced or computed on. Not every user takes
// every type: a user states its subset and refuses another with CheckDType, which names the caller
// and the type (the communicator's reductions: Communicator::CanReduce; the CUDA ops: fp32, bf16
// and fp16, runtime/ops/cuda/ops.h).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string_view>

#include "common/status.h"

namespace dslaunch::runtime {

enum class DType { kFloat32, kFloat16, kBFloat16, kInt64, kUInt8 };

// Bytes of one element: 4, 2, 2, 8, 1.
size_t DTypeSize(DType dtype);
// The name messages use: "fp32", "fp16", "bf16", "int64", "uint8".
std::string_view DTypeName(DType dtype);
// fp16 or bf16: 16-bit floating-point storage.
bool Is16BitFloat(DType dtype);

// OK when `dtype` is one of `supported`; otherwise kInvalidArgument
// "<where> <type> is not supported (supported: <types>)", `where` naming the caller and the role
// of the type: CheckDType("FloatTo16: output type", kFloat32, {kBFloat16, kFloat16}) gives
// "FloatTo16: output type fp32 is not supported (supported: bf16, fp16)".
Status CheckDType(std::string_view where, DType dtype, std::initializer_list<DType> supported);

}  // namespace dslaunch::runtime
