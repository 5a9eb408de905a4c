// Scaled dot-product attention forward on FP8 operands, with per-tensor scaling as FP8 training
// recipes use it. Q, K, V hold FP8_E4M3 or FP8_E5M2 codes; each real value is code * descale.
//   S    = attn_scale * descale_q * descale_k * (Q K^T), masked as in sdpa (causal / band / padding)
//   P    = softmax(S);                 amax_s = max |P| (before scaling)
//   P8   = round_to_fp8(P * scale_s)   (the type of V: P is requantized as the fused kernels do)
//   O'   = (P8 V) * descale_s * descale_v;   amax_o = max |O'| (before scaling)
//   O    = O' * scale_o, stored in O's type (FP8 by default: Q's type)
//   Stats = logsumexp of each row of S (FP32), as in sdpa.
// Shapes as sdpa: Q [b, h_q, s_q, d_qk], K [b, h_k, s_kv, d_qk], V [b, h_v, s_kv, d_v], O [b, h_q, s_q,
// d_v], Stats [b, h_q, s_q, 1]; every descale/scale tensor and both amax outputs are FLOAT [1, 1, 1, 1].
// Masked keys contribute P = 0; a row with no visible key gives O = 0 and Stats = -inf.
#pragma once

#include <optional>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class SdpaFp8Input {
  Q, K, V, DESCALE_Q, DESCALE_K, DESCALE_V, DESCALE_S, SCALE_S, SCALE_O, ATTN_SCALE, SEQ_LEN_Q, SEQ_LEN_KV
};
enum class SdpaFp8Output { O, STATS, AMAX_S, AMAX_O };

class SDPA_fp8_attributes : public Attributes<SDPA_fp8_attributes, SdpaFp8Input, SdpaFp8Output> {
 public:
  bool generate_stats = false;
  std::optional<float> attn_scale_value;
  bool padding_mask = false;
  DiagonalAlignment_t diagonal_alignment = DiagonalAlignment_t::TOP_LEFT;
  // Band bounds as in SDPA_attributes: key j is visible from query i when
  // i' - left_bound < j <= i' + right_bound, i' the aligned diagonal.
  std::optional<int64_t> left_bound;
  std::optional<int64_t> right_bound;

  SDPA_fp8_attributes& set_generate_stats(bool v) { generate_stats = v; return *this; }
  SDPA_fp8_attributes& set_is_inference(bool v) { generate_stats = !v; return *this; }
  SDPA_fp8_attributes& set_attn_scale(float v) { attn_scale_value = v; return *this; }
  SDPA_fp8_attributes& set_attn_scale(TensorPtr t) { inputs[SdpaFp8Input::ATTN_SCALE] = std::move(t); return *this; }
  SDPA_fp8_attributes& set_padding_mask(bool v) { padding_mask = v; return *this; }
  SDPA_fp8_attributes& set_seq_len_q(TensorPtr t) { inputs[SdpaFp8Input::SEQ_LEN_Q] = std::move(t); return *this; }
  SDPA_fp8_attributes& set_seq_len_kv(TensorPtr t) { inputs[SdpaFp8Input::SEQ_LEN_KV] = std::move(t); return *this; }
  SDPA_fp8_attributes& set_diagonal_alignment(DiagonalAlignment_t v) { diagonal_alignment = v; return *this; }
  SDPA_fp8_attributes& set_diagonal_band_left_bound(int64_t v) { left_bound = v; return *this; }
  SDPA_fp8_attributes& set_diagonal_band_right_bound(int64_t v) { right_bound = v; return *this; }
  SDPA_fp8_attributes& set_causal_mask(bool v) {
    if (v) { diagonal_alignment = DiagonalAlignment_t::TOP_LEFT; right_bound = 0; } else { right_bound.reset(); }
    return *this;
  }
  SDPA_fp8_attributes& set_causal_mask_bottom_right(bool v) {
    if (v) { diagonal_alignment = DiagonalAlignment_t::BOTTOM_RIGHT; right_bound = 0; } else { right_bound.reset(); }
    return *this;
  }
  SDPA_fp8_attributes& set_sliding_window_length(int64_t w) { left_bound = w; right_bound = 0; return *this; }
};

}  // namespace frost::graph
