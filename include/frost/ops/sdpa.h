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
// A row whose keys are all masked gives O = 0 and Stats = -inf, never NaN; with a sink it gives
// O = 0 and Stats = the sink logit. Stats is natural-log logsumexp, base 2 with stats_use_log2.
#pragma once

#include <optional>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class SdpaInput { Q, K, V, ATTN_SCALE, BIAS, SEQ_LEN_Q, SEQ_LEN_KV, SINK_TOKEN };
enum class SdpaOutput { O, STATS };

enum class AttentionImplementation_t { AUTO, COMPOSITE, UNIFIED };

class SDPA_attributes : public Attributes<SDPA_attributes, SdpaInput, SdpaOutput> {
 public:
  bool generate_stats = false;
  std::optional<float> attn_scale_value;
  bool alibi_mask = false;
  bool padding_mask = false;
  bool stats_use_log2 = false;
  DiagonalAlignment_t diagonal_alignment = DiagonalAlignment_t::TOP_LEFT;
  // Key j is visible from query i when  i' - left_bound < j <= i' + right_bound  where i' is i
  // shifted by the diagonal alignment (i' = i + s_kv - s_q for BOTTOM_RIGHT, with the per-batch
  // seq_len_kv and seq_len_q in place of s_kv and s_q under the padding mask). An absent bound is
  // unbounded; bounds are non-negative.
  std::optional<int64_t> left_bound;
  std::optional<int64_t> right_bound;
  AttentionImplementation_t implementation = AttentionImplementation_t::AUTO;

  SDPA_attributes& set_generate_stats(bool v) { generate_stats = v; return *this; }
  SDPA_attributes& set_is_inference(bool v) { generate_stats = !v; return *this; }
  SDPA_attributes& set_attn_scale(float v) { attn_scale_value = v; return *this; }
  SDPA_attributes& set_attn_scale(TensorPtr t) { inputs[SdpaInput::ATTN_SCALE] = std::move(t); return *this; }
  SDPA_attributes& set_bias(TensorPtr t) { inputs[SdpaInput::BIAS] = std::move(t); return *this; }
  SDPA_attributes& set_alibi_mask(bool v) { alibi_mask = v; return *this; }
  SDPA_attributes& set_padding_mask(bool v) { padding_mask = v; return *this; }
  SDPA_attributes& set_seq_len_q(TensorPtr t) { inputs[SdpaInput::SEQ_LEN_Q] = std::move(t); return *this; }
  SDPA_attributes& set_seq_len_kv(TensorPtr t) { inputs[SdpaInput::SEQ_LEN_KV] = std::move(t); return *this; }
  SDPA_attributes& set_sink_token(TensorPtr t) { inputs[SdpaInput::SINK_TOKEN] = std::move(t); return *this; }
  SDPA_attributes& set_stats_use_log2(bool v) { stats_use_log2 = v; return *this; }
  SDPA_attributes& set_diagonal_alignment(DiagonalAlignment_t v) { diagonal_alignment = v; return *this; }
  SDPA_attributes& set_diagonal_band_left_bound(int64_t v) { left_bound = v; return *this; }
  SDPA_attributes& set_diagonal_band_right_bound(int64_t v) { right_bound = v; return *this; }
  SDPA_attributes& set_causal_mask(bool v) {
    if (v) { diagonal_alignment = DiagonalAlignment_t::TOP_LEFT; right_bound = 0; } else { right_bound.reset(); }
    return *this;
  }
  SDPA_attributes& set_causal_mask_bottom_right(bool v) {
    if (v) { diagonal_alignment = DiagonalAlignment_t::BOTTOM_RIGHT; right_bound = 0; } else { right_bound.reset(); }
    return *this;
  }
  // A window of w keys ending at the (aligned) diagonal: causal with left bound w.
  SDPA_attributes& set_sliding_window_length(int64_t w) { left_bound = w; right_bound = 0; return *this; }
  SDPA_attributes& set_implementation(AttentionImplementation_t v) { implementation = v; return *this; }
};

}  // namespace frost::graph
