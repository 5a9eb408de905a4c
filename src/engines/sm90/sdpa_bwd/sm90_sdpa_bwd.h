// Hopper (sm_90a) scaled-dot-product-attention backward: framework-free interface.
//
// With the forward's logits S = scale * Q K^T (masked entries -inf) and P = exp(S - LSE), where LSE is the saved
// Stats (natural log, or base 2 with stats_log2):
//   D = rowsum(dO * O)   dP = dO V^T   dS = P * (dP - D)
//   dQ = scale dS K      dK = scale dS^T Q      dV = P^T dO      dSink[h] = -sum_rows exp(sink[h] - LSE) * D
// Q [b, h_q, s_q, d], K and V [b, h_kv, s_kv, d], O and dO [b, h_q, s_q, d], Stats [b, h_q, s_q] (FP32), gradients
// shaped like their operands; every tensor is addressed through element strides (last dimension contiguous), so
// BSHD and BHSD layouts, and token- or head-major Stats, are all served. GQA/MQA: h_kv divides h_q; dK and dV sum
// the query heads of each group in FP32 before they are rounded once.
// Visible keys: key j is visible to query i when i + off - left < j <= i + off + right (each bound optional) and
// j < len_kv, where off = len_kv - len_q for the bottom-right alignment and 0 for top-left; len_q and len_kv are the
// per-batch lengths of the padding mask (seq_len, else the cu_seq_len differences; the full extents without it).
// Rows i >= len_q and rows whose Stats are -inf get zero gradient; in packed (THD) gradients the rows past a
// batch's length belong to other sequences or gaps and are left untouched.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace frost::sm90 {

enum class BwdDtype { BF16, FP16 };

// Where batch b's rows start in one tensor. DENSE: at b * stride_b. Packed (THD) tensors: at element offset ptr[b]
// (ragged offsets, INT32 or INT64, whole tokens: multiples of the tensor's s stride), or at token cu_seq_len[b]
// (INT32, the side's cumulative lengths). The values are read on the device.
enum class BwdRowKind : int { DENSE = 0, OFFSETS_I32 = 1, OFFSETS_I64 = 2, CU_TOKENS = 3 };
struct BwdRowStarts {
  BwdRowKind kind;
  const void* ptr;
};

struct SdpaBwdParams {
  BwdDtype dtype;
  const void *q, *k, *v, *o, *d_o;
  const float* stats;
  void *dq, *dk, *dv;
  const float* sink;                            // [h_q] logits of the attention sink, or null
  float* dsink;                                 // gradient of the sink (FP32), null when not wanted
  const int32_t *seq_len_q, *seq_len_kv;        // per-batch lengths (padding mask), or null
  const int32_t *cu_seq_len_q, *cu_seq_len_kv;  // [b + 1] cumulative lengths, the lengths where seq_len is null
  BwdRowStarts q_rows, k_rows, v_rows, o_rows, do_rows, dq_rows, dk_rows, dv_rows, stats_rows;
  int64_t tokens_q, tokens_kv;  // rows a packed Q-side (K-side) tensor holds: max_total_seq_len, else b * s
  int64_t b, h_q, h_kv, s_q, s_kv, d_qk, d_v;
  // Element strides (batch, head, sequence) of each [b, h, s, d] tensor.
  int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3], do_stride[3];
  int64_t dq_stride[3], dk_stride[3], dv_stride[3];
  int64_t stats_stride[3];
  int64_t sink_stride, dsink_stride, seq_len_q_stride, seq_len_kv_stride;
  float scale;
  bool stats_log2;
  bool has_left, has_right;
  int64_t left, right;  // band bounds, >= 0
  bool bottom_right;
  bool deterministic;  // bitwise reproducible: dQ partial sums are added in a fixed order
};

// Performance knobs; 0 means "kernel default". They never change numerics.
struct SdpaBwdConfig {
  int tile_m, tile_n;
  int warp_spec;  // split-d kernels (d_qk 192, 256): 1 the warpgroups split the queries of S^T and dP^T, 2 one
                  // warpgroup computes S^T and P^T, the other dP^T and dS^T; 0 for d64 / d128
};

// Returns nullptr when supported, else a static string naming the attribute it cannot serve (e.g. "d_qk=96").
const char* sdpa_bwd_unsupported_reason(const SdpaBwdParams&, const SdpaBwdConfig&);

// Bytes of caller-provided device workspace execute needs (FP32 dQ accumulator, softmax statistics, D, and the
// ordering counters of the deterministic mode): linear in b * h_q * s_q.
int64_t sdpa_bwd_workspace_size(const SdpaBwdParams&, const SdpaBwdConfig&);

// Enqueues the kernels on `stream`. No allocation, no host synchronization; capturable in a CUDA graph.
cudaError_t sdpa_bwd(const SdpaBwdParams&, const SdpaBwdConfig&, void* workspace, cudaStream_t stream);

}  // namespace frost::sm90
