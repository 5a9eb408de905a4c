// Hopper (sm_90a) scaled-dot-product-attention forward: framework-free interface.
//
// O = softmax(scale * Q K^T + mask) V, LSE = log(sum(exp(scale * Q K^T + mask))) per query row.
// Q [b, h_q, s_q, d_qk], K [b, h_kv, s_kv, d_qk], V [b, h_kv, s_kv, d_v], O [b, h_q, s_q, d_v] addressed through
// element strides (the last dimension is contiguous), so BSHD and BHSD layouts are both served.
// GQA/MQA: h_kv divides h_q; query head hq reads kv head hq / (h_q / h_kv).
// Causal top-left masks key j > query i; bottom-right masks j > i + (s_kv - s_q).
// A row whose keys are all masked gives O = 0 and LSE = -inf.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace frost::sm90 {

enum class AttnDtype { BF16, FP16 };

struct SdpaFwdParams {
  AttnDtype dtype;
  const void *q, *k, *v;
  void* o;
  float* lse;  // may be null
  int64_t b, h_q, h_kv, s_q, s_kv, d_qk, d_v;
  int64_t q_stride_b, q_stride_h, q_stride_s;  // element strides; last dim contiguous (stride 1)
  int64_t k_stride_b, k_stride_h, k_stride_s, v_stride_b, v_stride_h, v_stride_s, o_stride_b, o_stride_h, o_stride_s;
  int64_t lse_stride_b, lse_stride_h;  // lse element [b][h][s] = lse[b*lse_stride_b + h*lse_stride_h + s]
  float scale;
  bool causal;
  bool causal_bottom_right;  // top-left or bottom-right diagonal alignment
  bool lse_log2;             // write LSE in base 2 instead of natural log
};

// Performance knobs; 0 means "kernel default". They never change numerics.
struct SdpaFwdConfig {
  int tile_m, tile_n, stages;
};

// Returns nullptr when supported, else a static string naming the attribute it cannot serve (e.g. "d_qk=96").
const char* sdpa_fwd_unsupported_reason(const SdpaFwdParams&, const SdpaFwdConfig&);

// Enqueues the kernel on `stream`. No allocation, no host synchronization; capturable in a CUDA graph.
cudaError_t sdpa_fwd(const SdpaFwdParams&, const SdpaFwdConfig&, cudaStream_t stream);

}  // namespace frost::sm90
