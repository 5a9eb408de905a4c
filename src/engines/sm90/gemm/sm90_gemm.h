// Hopper (sm_90a) GEMM engines: dense, FP8, grouped (MoE, and the moe_grouped_matmul op on it) and fused SwiGLU.
//
// Framework-free: pointers, extents, strides (in elements) and a stream. Nothing here knows of
// graphs, Python or torch. Every entry point is asynchronous, allocates no device memory, never
// synchronizes the host and is safe inside CUDA graph capture; scratch comes from `workspace`.
//
// A configuration the kernels cannot serve is declined by *_unsupported_reason with a message
// naming the attribute and value; the launch functions return cudaErrorNotSupported for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include <cuda_runtime_api.h>

namespace frost::sm90 {

enum class GemmDtype { BF16, FP16, FP32, E4M3, E5M2 };
enum class GemmAct { NONE, RELU, GELU, GELU_TANH, SILU, SIGMOID };

// D[b][m][n] = cvt( scale_d * clamp( act( alpha*descale_a*descale_b * sum_k A[b][m][k]*B[b][k][n]
//                                          + bias[n] + beta * C[b][m][n] ), clamp_min, clamp_max ) )
// amax (optional) receives max |.| of the value before scale_d over the whole output (FP32).
//
// Layouts by strides: A needs a_stride_k == 1 (row-major) or a_stride_m == 1 (column-major);
// B needs b_stride_n == 1 (row-major [k][n]) or b_stride_k == 1 (column-major, i.e. W[n][k]).
// FP8 inputs need both K-contiguous (the Hopper FP8 tensor-core path reads K-major tiles only).
// D and C are row-major (d_stride_n == 1). A batch stride of 0 broadcasts that operand.
// TMA rules: 16-byte aligned pointers, non-unit strides and contiguous extents (k of a K-major
// operand, m or n of the others, n of D) in whole 16-byte units; anything else is declined.
// bias has d_type, except for FP8 outputs where it is BF16. C has d_type and D's strides.
struct GemmParams {
  GemmDtype a_type = GemmDtype::BF16, b_type = GemmDtype::BF16, d_type = GemmDtype::BF16;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  int64_t a_stride_batch = 0, a_stride_m = 0, a_stride_k = 0;
  int64_t b_stride_batch = 0, b_stride_k = 0, b_stride_n = 0;
  int64_t d_stride_batch = 0, d_stride_m = 0, d_stride_n = 0;
  float alpha = 1;
  const void* bias = nullptr;
  const void* c = nullptr;
  float beta = 0;
  GemmAct act = GemmAct::NONE;
  const float* descale_a = nullptr;  // device scalars (FP8): multiply the accumulator
  const float* descale_b = nullptr;
  const float* scale_d = nullptr;    // device scalar: multiplies the output after amax is taken
  float* amax = nullptr;             // device scalar, written (not accumulated into) by the launch
  float clamp_min = -std::numeric_limits<float>::infinity();
  float clamp_max = std::numeric_limits<float>::infinity();
  // FP8 only: accumulate in the tensor core's native (reduced-precision) accumulator for the whole
  // K loop instead of promoting to FP32 every few k-blocks. Faster, less accurate: numerics, so
  // it is a parameter and never a knob.
  bool fp8_fast_accum = false;
};

// Knobs: performance only. 0 = kernel default. Values that no instantiated kernel has are declined.
// stream_k (kernels on the stream-K scheduler): 0 = CUTLASS's heuristic (split the tail wave's k-loops over
// all CTAs only when that wave is less than half full), 1 = always split the last waves; split_k 1 = never.
struct GemmConfig {
  int tile_m = 0, tile_n = 0, tile_k = 0, stages = 0, cluster_m = 0, cluster_n = 0, swizzle = 0, split_k = 0;
  int stream_k = 0;
};

const char* gemm_unsupported_reason(const GemmParams&, const GemmConfig&);
size_t gemm_workspace_size(const GemmParams&, const GemmConfig&);

// The cooperative 128x256 kernel with stream-K tails (tile_n 256, stream_k 1) serves this GEMM and, by the
// shape, beats the ping-pong default: m, n >= 4096 and long k-loops (k >= 8192), where the 128x256 tiles leave
// a tail wave that splitting by k fills (m16384 n4096 k14336: +2 %; at 8192^3 equal; shorter k loses).
bool stream_k_pays(const GemmParams&);
cudaError_t gemm(const GemmParams&, const GemmConfig&, void* workspace, cudaStream_t);

// Grouped GEMM for mixture-of-experts, tokens contiguous by expert:
//   for g in [0, groups): rows r in [offsets[g], offsets[g+1]) of A and D:
//   D[r][:] = cvt( alpha * A[r][:] @ B[g] ), B[g] = b + g*b_stride_group, a [k][n] matrix by strides.
// offsets: int32 [groups+1] in device memory, never read on the host; offsets[0] = 0,
// non-decreasing, offsets[groups] <= max_tokens. Rows past offsets[groups] are left untouched.
// A: [max_tokens][k] row-major with leading stride a_stride_m; D: [max_tokens][n], d_stride_m.
struct GroupedGemmParams {
  GemmDtype a_type = GemmDtype::BF16, b_type = GemmDtype::BF16, d_type = GemmDtype::BF16;
  int64_t groups = 0, max_tokens = 0, n = 0, k = 0;
  const int32_t* offsets = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  int64_t a_stride_m = 0;
  int64_t b_stride_group = 0, b_stride_k = 0, b_stride_n = 0;
  int64_t d_stride_m = 0;
  float alpha = 1;
  const float* descale_a = nullptr;  // FP8 only: device scalars
  const float* descale_b = nullptr;
};

const char* grouped_gemm_unsupported_reason(const GroupedGemmParams&, const GemmConfig&);
size_t grouped_gemm_workspace_size(const GroupedGemmParams&, const GemmConfig&);
cudaError_t grouped_gemm(const GroupedGemmParams&, const GemmConfig&, void* workspace, cudaStream_t);

// moe_grouped_matmul as frost/ops/moe.h defines it, on the grouped GEMM above, with every routing
// value read on the device. R = rows routed rows, E = experts:
//   Y[r] = descale_token * descale_weight * (X_r @ W[e]), accumulated in FP32, written as out_dtype;
//   expert e owns rows [first_token_offset[e], first_token_offset[e + 1]) (the last one ends at R);
//   NONE: Output[r] = Token[r] @ W[e]; GATHER: Output[r] = Token[token_index[r]] @ W[e];
//   SCATTER: Output[token_index[r] * top_k + token_ks[r]] = Token[r] @ W[e].
// Rows before first_token_offset[0] (and, in SCATTER, slots no row targets) are written as zero.
// Device values out of range are clamped (offsets into [0, R], gathered rows into [0, token_rows))
// or skipped (scatter slots outside [0, R)), so no value reads or writes outside the buffers.
// Token [rows or token_rows][k] and Output [rows][n] are row-major with the given row strides;
// W is [E][k][n] by strides, as the grouped GEMM takes B.
// Types: BF16 Token and W with BF16 Output, or E4M3 Token and W (W K-major, w_stride_k == 1) with
// BF16 Output and optional per-tensor descales (device FP32 scalars; null reads as 1).
enum class MoeMode { NONE, GATHER, SCATTER };
enum class IndexType { INT32, INT64 };
struct MoeParams {
  MoeMode mode = MoeMode::NONE;
  GemmDtype dtype = GemmDtype::BF16;      // of Token and W
  GemmDtype out_dtype = GemmDtype::BF16;  // of Output
  int64_t rows = 0, token_rows = 0, experts = 0, k = 0, n = 0, top_k = 1;
  const void* token = nullptr;
  int64_t token_stride_row = 0;
  const void* weight = nullptr;
  int64_t w_stride_expert = 0, w_stride_k = 0, w_stride_n = 0;
  void* output = nullptr;
  int64_t out_stride_row = 0;
  const void* first_token_offset = nullptr;  // [E]
  IndexType offset_type = IndexType::INT32;
  const void* token_index = nullptr;  // [R], GATHER and SCATTER
  IndexType index_type = IndexType::INT32;
  const void* token_ks = nullptr;  // [R], SCATTER
  IndexType ks_type = IndexType::INT32;
  const float* descale_token = nullptr;
  const float* descale_weight = nullptr;
};

const char* moe_unsupported_reason(const MoeParams&, const GemmConfig&);
size_t moe_workspace_size(const MoeParams&, const GemmConfig&);
cudaError_t moe_grouped_matmul(const MoeParams&, const GemmConfig&, void* workspace, cudaStream_t);

// Fused SwiGLU (gate/up projection of a gated MLP) in one GEMM:
//   H[m][j] = cvt( silu(alpha * (A @ W)[m][gate(j)]) * (alpha * (A @ W)[m][up(j)]) ),  j in [0, f)
// W is [k][2f] by strides with gate and up columns interleaved in blocks of kSwigluInterleave:
//   W column 2*kSwigluInterleave*q + r       is gate column kSwigluInterleave*q + r   (r < kSwigluInterleave)
//   W column 2*kSwigluInterleave*q + I + r   is up   column kSwigluInterleave*q + r
// so one output tile needs one GEMM tile. f must be a multiple of kSwigluInterleave.
inline constexpr int kSwigluInterleave = 8;
struct SwigluParams {
  GemmDtype a_type = GemmDtype::BF16, b_type = GemmDtype::BF16, d_type = GemmDtype::BF16;
  int64_t m = 0, f = 0, k = 0;
  const void* a = nullptr;  // [m][k]
  const void* w = nullptr;  // [k][2f] interleaved, strides below
  void* h = nullptr;        // [m][f]
  int64_t a_stride_m = 0, a_stride_k = 0, w_stride_k = 0, w_stride_n = 0, h_stride_m = 0;
  float alpha = 1;
};

const char* swiglu_unsupported_reason(const SwigluParams&, const GemmConfig&);
size_t swiglu_workspace_size(const SwigluParams&, const GemmConfig&);
cudaError_t swiglu(const SwigluParams&, const GemmConfig&, void* workspace, cudaStream_t);

// Gate and up weights held apart ([k][f] each, by strides) copied into the interleaved layout the fused
// SwiGLU GEMM reads, so a caller with separate weights can still use it: 2*k*f elements move once
// (read + write, ~0.1 ms for k 4096, f 14336 bf16 on an H200). Both N-contiguous gives W [k][2f]
// N-major (w_stride_k = 2f, w_stride_n = 1); both K-contiguous gives W^T [2f][k] (w_stride_k = 1,
// w_stride_n = k). 16-bit types only; rows and bases on 16-byte boundaries.
struct SwigluPackParams {
  GemmDtype type = GemmDtype::BF16;
  int64_t k = 0, f = 0;
  const void* gate = nullptr;
  const void* up = nullptr;
  int64_t gate_stride_k = 0, gate_stride_n = 0, up_stride_k = 0, up_stride_n = 0;
  void* dst = nullptr;  // 2*k*f elements
};

const char* swiglu_pack_unsupported_reason(const SwigluPackParams&);
// True when the packed result is K-major (both weights K-contiguous); meaningful once the reason is null.
bool swiglu_pack_k_major(const SwigluPackParams&);
cudaError_t swiglu_pack_weights(const SwigluPackParams&, cudaStream_t);

}  // namespace frost::sm90
