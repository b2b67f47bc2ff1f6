#include "runtime/ops/cuda/matmul.h"

#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/ops/cuda/cuda_status.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// The largest alignment cuBLASLt asks about (its preferences default to it).
constexpr uint32_t kMaxAlignmentBytes = 256;

// The cuBLAS type of a floating-point DType (Matmul refuses the others first).
cudaDataType_t CudaType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return CUDA_R_32F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kInt64:
    case DType::kUInt8:
      break;
  }
  return CUDA_R_32F;
}

// The alignment every matrix of a strided batch keeps: the largest power of two (up to 256) that
// divides the base address and, for batches, the stride in bytes, and the leading dimension in
// bytes (rows start there). Telling cuBLASLt less than the truth only costs speed; more would let
// it pick a kernel that faults or returns garbage.
uint32_t AlignmentOf(const void* p, long ld, long stride, int batch, size_t elem) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | kMaxAlignmentBytes;
  bits |= static_cast<uint64_t>(ld) * elem;
  if (batch > 1) bits |= static_cast<uint64_t>(stride) * elem;
  return static_cast<uint32_t>(bits & (~bits + 1));  // lowest set bit
}

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { (void)cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { (void)cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { (void)cublasLtMatmulPreferenceDestroy(p); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

// A column-major rows x cols matrix with leading dimension ld, repeated `batch` times `stride` apart.
Status MakeLayout(Layout& out, cudaDataType_t type, int rows, int cols, long ld, int batch, long stride,
                  std::string_view op) {
  cublasLtMatrixLayout_t raw = nullptr;
  DSLAUNCH_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatrixLayoutCreate(&raw, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld), op,
      "cublasLtMatrixLayoutCreate"));
  out.reset(raw);
  if (batch > 1) {
    const int32_t count = batch;
    const int64_t offset = stride;
    DSLAUNCH_RETURN_IF_ERROR(CublasStatus(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                                           &count, sizeof(count)),
                                          op, "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
    DSLAUNCH_RETURN_IF_ERROR(CublasStatus(
        cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof(offset)),
        op, "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)"));
  }
  return Status::Ok();
}

std::string Shape(const MatmulArgs& a) {
  return "m=" + std::to_string(a.m) + " n=" + std::to_string(a.n) + " k=" + std::to_string(a.k) +
         " batch=" + std::to_string(a.batch) + " trans=" + (a.trans_a ? "T" : "N") + (a.trans_b ? "T" : "N") +
         " lda=" + std::to_string(a.lda) + " ldb=" + std::to_string(a.ldb) + " ldd=" + std::to_string(a.ldd);
}

}  // namespace

Status Matmul(const CublasLtContext& ctx, const MatmulArgs& args, cudaStream_t stream, std::string_view op) {
  const std::string where = std::string(op) + " (" + Shape(args) + ")";
  if (args.m < 0 || args.n < 0 || args.k < 0 || args.batch < 0) return InvalidArgumentError(where + ": negative size");
  DSLAUNCH_RETURN_IF_ERROR(
      CheckDType(where + ": element type", args.dtype, {DType::kFloat32, DType::kBFloat16, DType::kFloat16}));
  if (args.m == 0 || args.n == 0 || args.batch == 0) return Status::Ok();
  if (args.k == 0) {
    // An empty sum adds nothing; scaling D by another beta is not something the ops need.
    if (args.beta == 1.0f) return Status::Ok();
    return InvalidArgumentError(where + ": k = 0 with beta != 1");
  }
  const cudaDataType_t type = CudaType(args.dtype);
  const size_t elem = DTypeSize(args.dtype);

  cublasLtMatmulDesc_t raw_desc = nullptr;
  DSLAUNCH_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), where,
                   "cublasLtMatmulDescCreate"));
  MatmulDesc desc(raw_desc);
  const int32_t trans_a = args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t trans_b = args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  DSLAUNCH_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulDescSetAttribute(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)), where,
      "cublasLtMatmulDescSetAttribute(TRANSA)"));
  DSLAUNCH_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulDescSetAttribute(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)), where,
      "cublasLtMatmulDescSetAttribute(TRANSB)"));

  // Stored shapes: A is m x k (k x m when transposed), B is k x n (n x k when transposed).
  Layout a_layout, b_layout, d_layout;
  DSLAUNCH_RETURN_IF_ERROR(MakeLayout(a_layout, type, args.trans_a ? args.k : args.m, args.trans_a ? args.m : args.k,
                                      args.lda, args.batch, args.stride_a, where));
  DSLAUNCH_RETURN_IF_ERROR(MakeLayout(b_layout, type, args.trans_b ? args.n : args.k, args.trans_b ? args.k : args.n,
                                      args.ldb, args.batch, args.stride_b, where));
  DSLAUNCH_RETURN_IF_ERROR(MakeLayout(d_layout, type, args.m, args.n, args.ldd, args.batch, args.stride_d, where));

  cublasLtMatmulPreference_t raw_pref = nullptr;
  DSLAUNCH_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatmulPreferenceCreate(&raw_pref), where, "cublasLtMatmulPreferenceCreate"));
  Preference pref(raw_pref);
  const uint64_t workspace = ctx.workspace_bytes();
  const uint32_t align_a = AlignmentOf(args.a, args.lda, args.stride_a, args.batch, elem);
  const uint32_t align_b = AlignmentOf(args.b, args.ldb, args.stride_b, args.batch, elem);
  const uint32_t align_d = AlignmentOf(args.d, args.ldd, args.stride_d, args.batch, elem);
  const struct {
    cublasLtMatmulPreferenceAttributes_t attr;
    const void* value;
    size_t size;
    const char* name;
  } prefs[] = {
      {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace), "MAX_WORKSPACE_BYTES"},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a), "MIN_ALIGNMENT_A_BYTES"},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b), "MIN_ALIGNMENT_B_BYTES"},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d), "MIN_ALIGNMENT_C_BYTES"},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d), "MIN_ALIGNMENT_D_BYTES"},
  };
  for (const auto& p : prefs) {
    DSLAUNCH_RETURN_IF_ERROR(CublasStatus(cublasLtMatmulPreferenceSetAttribute(raw_pref, p.attr, p.value, p.size),
                                          where, std::string("cublasLtMatmulPreferenceSetAttribute(") + p.name + ")"));
  }

  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  DSLAUNCH_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulAlgoGetHeuristic(ctx.handle(), raw_desc, a_layout.get(), b_layout.get(), d_layout.get(),
                                     d_layout.get(), raw_pref, 1, &heuristic, &found),
      where, "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) {
    return InternalError(where + ": cublasLtMatmulAlgoGetHeuristic: no algorithm for this shape, type and alignment");
  }
  return CublasStatus(cublasLtMatmul(ctx.handle(), raw_desc, &args.alpha, args.a, a_layout.get(), args.b,
                                     b_layout.get(), &args.beta, args.d, d_layout.get(), args.d, d_layout.get(),
                                     &heuristic.algo, ctx.workspace(), ctx.workspace_bytes(), stream),
                      where, "cublasLtMatmul");
}

}  // namespace dslaunch::runtime::ops::cuda
