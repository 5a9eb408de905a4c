// Scaled dot-product attention forward.
//   S = attn_scale * Q K^T (+ bias) (+ ALiBi), masked (causal / band / padding), P = softmax(S) with an
//   optional sink logit per head in the denominator, O = P V, Stats = logsumexp of each row (FP32).
// Q [b, h_q, s_q, d_qk], K [b, h_k, s_kv, d_qk], V [b, h_v, s_kv, d_v], O [b, h_q, s_q, d_v],
// Stats [b, h_q, s_q, 1]. Any strides (BSHD and BHSD are stride choices). GQA/MQA when h_k | h_q
// and h_v | h_q: query head hq reads K head hq / (h_q / h_k) and V head hq / (h_q / h_v).
//
// Inputs and their semantics:
// - attn_scale: a float attribute or a FLOAT tensor of one element ([1] pass-by-value scalar or
//   [1, 1, 1, 1]); omitted means 1.0. Applied to Q K^T before bias and ALiBi are added.
// - bias: [b or 1, h_q or 1, s_q, s_kv], broadcast over extent-1 batch and head.
// - alibi_mask: adds slope_h * (j - i') to the logits (i' as in the band below). For H = h_q heads a
//   power of two, slope_h = 2^(-8 (h + 1) / H). Otherwise, with n the largest power of two below H,
//   heads h < n take 2^(-8 (h + 1) / n) and the remaining heads take the odd-numbered slopes of the
//   2n-head sequence, 2^(-4 (2 (h - n) + 1) / n) (the ALiBi paper's interleaved extension).
// - padding_mask with seq_len_q / seq_len_kv (INT32 [b, 1, 1, 1], values in [0, s_q] / [0, s_kv]):
//   keys j >= seq_len_kv[b] are masked; query rows i >= seq_len_q[b] are padding: O = 0 and
//   Stats = -inf there (also when a sink is present: a padding row has no softmax at all).
// - sink_token: FLOAT [1, h_q, 1, 1]; per head an extra logit in each row's softmax denominator
//   that carries no value row. Stats includes it.
// - cu_seq_len_q / cu_seq_len_kv (INT32 [b + 1] or [b + 1, 1, 1, 1], padding_mask on): cumulative
//   token counts; batch b holds cu[b + 1] - cu[b] tokens, and a Q/O/Stats (or K/V) tensor without a
//   ragged offset is read as packed: batch b's row s sits at token cu[b] + s (its batch stride is
//   unused). Either seq_len or cu_seq_len per side, mixed freely between Q and KV.
// - ragged offsets (Tensor_attributes::set_ragged_offset on Q, K, V, O or Stats; INT32/INT64
//   [b + 1, 1, 1, 1], element units, padding_mask on): element (b, h, s, d) sits at
//   offset[b] + h * stride[1] + s * stride[2] + d * stride[3]. Rows of O and Stats at s >= the batch's
//   length are not written in a ragged or packed output. max_total_seq_len_q / kv bound the tokens of
//   the packed buffers (each token holds the volume / (b * s) elements of one row); reads are checked
//   against that bound when it is set.
// - paged K/V: paged_attention_k_table / v_table (INT32 [b, 1, pages_per_seq, 1]) name the pages of
//   K/V, then declared as page pools [num_pages, h, page_size, d]; key j of batch b is row
//   j % page_size of page table[b, j / page_size]. The logical s_kv is paged_attention_max_seq_len_kv
//   (default pages_per_seq * page_size); padding_mask with SEQ_LEN_KV is required.
// - block_mask (UINT8 or BOOLEAN [b or 1, h_q or 1, ceil(s_q / tile_q), ceil(s_kv / tile_kv)], tile
//   sizes block_mask_tile_q/kv, default 128): key j is visible from query i only where the tile
//   (i / tile_q, j / tile_kv) is nonzero.
// - dropout applied to P after the softmax (Stats is unaffected): with (probability p, seed, offset),
//   element (b, h, i, j) draws u = philox_uniform(seed, offset, n) (src/ops/common/philox.h) at
//   n = ((b * h_q + h) * s_q + i) * s_kv + j over the declared (maximum or logical) s_q and s_kv and
//   the per-sequence positions i and j; it is kept when u >= p and kept values are scaled by
//   1 / (1 - p). With (mask, scale): mask [b or 1, h_q or 1, s_q, s_kv], kept where nonzero, kept
//   values scaled by the FLOAT scalar scale.
// A row whose keys are all masked gives O = 0 and Stats = -inf, never NaN; with a sink it gives
// O = 0 and Stats = the sink logit. Stats is natural-log logsumexp, base 2 with stats_use_log2.
#pragma once

#include <optional>

#include "frost/ops/attention_masking.h"

namespace frost::graph {

enum class SdpaInput {
  Q,
  K,
  V,
  ATTN_SCALE,
  BIAS,
  SEQ_LEN_Q,
  SEQ_LEN_KV,
  SINK_TOKEN,
  CU_SEQ_LEN_Q,
  CU_SEQ_LEN_KV,
  PAGE_TABLE_K,
  PAGE_TABLE_V,
  BLOCK_MASK,
  DROPOUT_SEED,
  DROPOUT_OFFSET,
  DROPOUT_MASK,
  DROPOUT_SCALE
};
enum class SdpaOutput { O, STATS };

class SDPA_attributes : public AttentionMaskingAttributes<SDPA_attributes, SdpaInput, SdpaOutput> {
 public:
  bool generate_stats = false;
  std::optional<int64_t> paged_attention_max_seq_len_kv;

  SDPA_attributes& set_generate_stats(bool v) { generate_stats = v; return *this; }
  SDPA_attributes& set_is_inference(bool v) { generate_stats = !v; return *this; }
  SDPA_attributes& set_paged_attention_k_table(TensorPtr t) { return port(SdpaInput::PAGE_TABLE_K, std::move(t)); }
  SDPA_attributes& set_paged_attention_v_table(TensorPtr t) { return port(SdpaInput::PAGE_TABLE_V, std::move(t)); }
  SDPA_attributes& set_paged_attention_max_seq_len_kv(int64_t v) { paged_attention_max_seq_len_kv = v; return *this; }
  using AttentionMaskingAttributes::set_dropout;
  SDPA_attributes& set_dropout(TensorPtr mask, TensorPtr scale) {
    port(SdpaInput::DROPOUT_MASK, std::move(mask));
    return port(SdpaInput::DROPOUT_SCALE, std::move(scale));
  }
};

}  // namespace frost::graph
