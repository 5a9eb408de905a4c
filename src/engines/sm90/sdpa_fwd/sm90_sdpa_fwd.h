// Hopper (sm_90a) scaled-dot-product-attention forward: framework-free interface.
//
// O = softmax(scale * Q K^T + mask) V, LSE = log(sum(exp(scale * Q K^T + mask)) + exp(sink)) per query row.
// Q [b, h_q, s_q, d_qk], K [b, h_kv, s_kv, d_qk], V [b, h_kv, s_kv, d_v], O [b, h_q, s_q, d_v] addressed through
// element strides (the last dimension is contiguous), so BSHD and BHSD layouts are both served.
// GQA/MQA: h_kv divides h_q; query head hq reads kv head hq / (h_q / h_kv).
//
// Per batch, len_q rows and len_kv keys are valid (the padding mask's seq_len, the cu_seq_len differences, or
// s_q and s_kv). Row i's diagonal key is i' = i (top-left) or i + len_kv - len_q (bottom-right); it sees keys
// [i' - left_bound + 1, i' + right_bound] within [0, len_kv) (an absent bound is unbounded; causal is
// right_bound = 0). A row that sees no key gives O = 0 and LSE = -inf (LSE = sink with a sink); rows i >= len_q
// are padding: O = 0 and LSE = -inf in a dense output, untouched in a packed one.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace frost::sm90 {

enum class AttnDtype { BF16, FP16 };

// Where batch b's rows start in a tensor. DENSE: at b * stride_b. Packed (THD) tensors: at element offset
// ptr[b] (ragged offsets, INT32 or INT64, whole tokens: multiples of the tensor's s stride), or at token
// cu_seq_len[b] (INT32). The values are read on the device.
enum class RowStartKind { DENSE, OFFSETS_I32, OFFSETS_I64, CU_TOKENS };
struct RowStarts {
  RowStartKind kind;
  const void* ptr;
};

struct SdpaFwdParams {
  AttnDtype dtype;
  const void *q, *k, *v;
  void* o;
  float* lse;  // may be null
  int64_t b, h_q, h_kv, s_q, s_kv, d_qk, d_v;
  int64_t q_stride_b, q_stride_h, q_stride_s;  // element strides; last dim contiguous (stride 1)
  int64_t k_stride_b, k_stride_h, k_stride_s, v_stride_b, v_stride_h, v_stride_s, o_stride_b, o_stride_h, o_stride_s;
  int64_t lse_stride_b, lse_stride_h;  // lse element [b][h][s] = lse[b*lse_stride_b + h*lse_stride_h + s*lse_stride_s]
  float scale;
  bool causal;        // right_bound = 0
  bool bottom_right;  // diagonal alignment of the causal mask and the band bounds
  bool lse_log2;      // write LSE in base 2 instead of natural log
  // Everything below is optional: zero-initialized means absent.
  int64_t lse_stride_s;  // 0 means 1
  const float* scale_dev;  // device FP32 scalar used instead of `scale`; must be positive and finite (else O is NaN)
  const float* sink;       // [h_q] FP32 logits, one extra term exp(sink) in each row's softmax denominator
  bool has_left_bound, has_right_bound;
  int64_t left_bound, right_bound;  // >= 0
  const int32_t *seq_len_q, *seq_len_kv;        // [b] valid lengths (padding mask); values clamped to [0, s]
  const int32_t *cu_seq_len_q, *cu_seq_len_kv;  // [b + 1] cumulative lengths, used when seq_len is absent
  RowStarts q_rows, k_rows, v_rows, o_rows, lse_rows;
  int64_t tokens_q, tokens_kv;  // rows a packed Q/O (K/V) buffer holds: its max_total_seq_len or b * s
};

// Performance knobs; 0 means "kernel default". They never change the precision: they change the order in which
// FP32 partial results are added, so results differ between knobs in the last bits, never between runs.
struct SdpaFwdConfig {
  int tile_m, tile_n, stages;
  // 0 default (1 or 2 by the mask), 1 heads grouped to keep K/V in L2, 2 one global longest-tile-first order,
  // 3 as 1 with the last, partial wave's tiles split along their key blocks over all SMs and merged in FP32
  // through the workspace (plain problems without a right band bound or causal mask; PACK_GQA tiles too), 4 tiles
  // in policy 1's order (heads grouped within 8 MB of K/V) handed to the CTAs as they come free, through a counter
  // in the workspace (plain problems on single CTAs, without PACK_GQA).
  int sched_policy;
  // 1: the h_q / h_kv query heads of a K/V head share each tile (tile_m / group positions of every head), so K/V
  // are read once per group; pays when s_q is short of a tile (decode, short prefill). Dense problems without
  // padding, left band bound, sink or device scale only.
  int pack_gqa;
  // 2: CTAs in pairs (a thread-block cluster) on adjacent m-blocks of one head, each loading half of every K and V
  // block for both, so K/V cross L2 once per pair. Plain problems whose tiles all span the same keys (no causal
  // mask or right band bound, no PACK_GQA or SCHED_POLICY 3 or 4), d_qk >= 128, an even number of m-blocks. 0 or 1:
  // none.
  int tile_cga_m;
};

// True when the problem takes the plain kernel (dense, unpadded, no left band bound, no device scale, no sink),
// the only one that packs GQA groups.
bool sdpa_fwd_is_plain(const SdpaFwdParams&);

// Returns nullptr when supported, else a static string naming the attribute it cannot serve (e.g. "d_qk=96").
const char* sdpa_fwd_unsupported_reason(const SdpaFwdParams&, const SdpaFwdConfig&);

// Bytes of device workspace the launch needs (SCHED_POLICY 3 on a grid of the current device's SMs, 256 for the
// counter of SCHED_POLICY 4; else 0).
int64_t sdpa_fwd_workspace_size(const SdpaFwdParams&, const SdpaFwdConfig&);

// Share of the kernel time SCHED_POLICY 3 saves on the current device (0 where it cannot serve the problem or the
// tiles fill whole waves), counted in key blocks of the busiest SM.
double sdpa_fwd_tail_split_gain(const SdpaFwdParams&, const SdpaFwdConfig&);

// Enqueues the kernel on `stream` (with a memset of the workspace's flags or counter under SCHED_POLICY 3 or 4).
// `workspace`: 256-byte aligned, sdpa_fwd_workspace_size bytes, may be null when that is 0. No allocation, no host
// synchronization; capturable in a CUDA graph.
cudaError_t sdpa_fwd(const SdpaFwdParams&, const SdpaFwdConfig&, void* workspace, cudaStream_t stream);

}  // namespace frost::sm90
