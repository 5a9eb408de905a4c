// Hopper (sm_90a) RMSNorm and LayerNorm, forward and backward: framework-free interface.
//
// Every tensor is seen as `rows` rows of `cols` contiguous elements, row r starting at r * row_stride
// (element strides). The statistics are FP32, one value per row at r * stride.
//   forward:  y = (x - mean) * inv * scale + bias, inv = 1 / sqrt(mean((x - mean)^2) + epsilon);
//             RMSNorm takes mean = 0. A null scale means 1, a null bias 0.
//   backward: xhat = (x - mean) * inv, g = dy * scale,
//             dx = inv * (g - [sum(g) / cols] - xhat * sum(g * xhat) / cols)   ([..] for LayerNorm only),
//             dscale = sum over rows of dy * xhat, dbias = sum over rows of dy.
// The backward writes FP32 column partials of dscale and dbias per row group into the caller's workspace,
// then a second kernel sums them in a fixed order: the result is bitwise reproducible.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace frost::sm90 {

enum class NormDtype : int { BF16, FP16, FP32 };

struct NormFwdParams {
  bool centered;  // LayerNorm; RMSNorm when false
  NormDtype x_dtype, y_dtype, scale_dtype, bias_dtype;
  const void* x;
  void* y;
  const void* scale;  // [cols] or null
  const void* bias;   // [cols] or null
  float* mean;        // [rows] or null (LayerNorm TRAINING only)
  float* inv;         // [rows] or null (TRAINING only)
  int64_t rows, cols;
  int64_t x_row_stride, y_row_stride, mean_stride, inv_stride;
  float epsilon;
};

struct NormBwdParams {
  bool centered;
  NormDtype x_dtype;  // also dy's
  NormDtype dx_dtype, scale_dtype, dscale_dtype, dbias_dtype;
  const void *dy, *x, *scale;  // scale [cols] is required
  const float* mean;           // [rows]; LayerNorm only
  const float* inv;            // [rows]
  void* dx;
  void* dscale;  // [cols]
  void* dbias;   // [cols] or null
  int64_t rows, cols;
  int64_t dy_row_stride, x_row_stride, dx_row_stride, mean_stride, inv_stride;
};

// One way to launch: `vec` elements per load (16 bytes, or 1), `tpr` threads per row, `block` threads per
// CTA (block / tpr rows at a time), `chunks` vectors per thread held in registers, `grid` persistent CTAs.
// stream: rows too long for registers are read twice (once for the statistics, once for the output).
struct NormLaunch {
  int vec = 1, tpr = 0, block = 0, chunks = 0, grid = 0;
  bool stream = false;
  int64_t partial_rows = 0;  // backward: FP32 partial rows of dscale (and dbias) this launch writes
};

// A built problem: the vectorized launch (used when every pointer and row stride is aligned at execute) and
// the element-wise launch that serves any alignment.
struct NormKernelPlan {
  NormLaunch vectorized, scalar;
  bool has_vectorized = false;
  int64_t workspace_bytes = 0;
};

// Null when served, else the attribute out of reach. Scale and bias (when present) share one type: x's or FP32.
const char* norm_fwd_unsupported_reason(const NormFwdParams&);
const char* norm_bwd_unsupported_reason(const NormBwdParams&);

// Chooses the launches for a problem (pointers are not looked at). threads_per_row = 0 picks by heuristic.
// Queries the current device's occupancy: call at build time, never from execute.
cudaError_t norm_fwd_plan(const NormFwdParams&, int threads_per_row, NormKernelPlan& out);
cudaError_t norm_bwd_plan(const NormBwdParams&, int threads_per_row, NormKernelPlan& out);

// Enqueue on `stream`: no allocation, no host synchronization; capturable in a CUDA graph. The backward
// needs plan.workspace_bytes of workspace (256-byte aligned is best).
cudaError_t norm_fwd(const NormFwdParams&, const NormKernelPlan&, cudaStream_t stream);
cudaError_t norm_bwd(const NormBwdParams&, const NormKernelPlan&, void* workspace, cudaStream_t stream);

}  // namespace frost::sm90
