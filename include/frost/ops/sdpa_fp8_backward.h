// Scaled dot-product attention backward on FP8 operands with per-tensor scaling: the gradients of
// sdpa_fp8 (frost/ops/sdpa_fp8.h), with the quantization points of cuDNN Frontend's sdpa_fp8_backward.
// Q, K, V, O, dO hold codes; each real value is code * descale (O may also be HALF, BFLOAT16 or FLOAT).
//   P    = exp(S - Stats), S = attn_scale * Q K^T masked as in the forward    (real Q, K)
//   D    = rowsum(dO * O)                     dP = dO V^T                     (real dO, O, V)
//   dS   = attn_scale * P * (dP - D);          amax_dP = max |dS|
//   P8   = fp8(P * scale_s) in Q's type;       dS8 = fp8(dS * scale_dP) in dO's type
//   dV'  = (P8^T dO_code) * descale_s * descale_dO     amax_dV = max |dV'|;  dV = dV' * scale_dV
//   dQ'  = (dS8 K_code) * descale_dP * descale_k       amax_dQ = max |dQ'|;  dQ = dQ' * scale_dQ
//   dK'  = (dS8^T Q_code) * descale_dP * descale_q     amax_dK = max |dK'|;  dK = dK' * scale_dK
// fp8(x) rounds to nearest even and saturates; FP8 outputs saturate too. GQA/MQA: dK' and dV' sum the
// query heads of each group before their amax. Rows that are padding or see no key contribute nothing.
//
// The same attributes serve the MXFP8 backward (sdpa_mxfp8_backward, frost/ops/sdpa_mxfp8.h), which binds
// the block-scaled ports (Q_T, K_T, DO_T, DO_F16 and their descales) instead of the per-tensor ones.
#pragma once

#include <optional>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class SdpaFp8BackwardInput {
  Q, Q_T, K, K_T, V, O, DO, DO_T, DO_F16, STATS, ATTN_SCALE, SEQ_LEN_Q, SEQ_LEN_KV,
  DESCALE_Q, DESCALE_K, DESCALE_V, DESCALE_O, DESCALE_DO, DESCALE_DO_T, DESCALE_K_T, DESCALE_Q_T, DESCALE_S,
  DESCALE_DP, SCALE_DQ, SCALE_DK, SCALE_DV, SCALE_S, SCALE_DP
};
enum class SdpaFp8BackwardOutput { DQ, DK, DV, AMAX_DQ, AMAX_DK, AMAX_DV, AMAX_DP };

class SDPA_fp8_backward_attributes
    : public Attributes<SDPA_fp8_backward_attributes, SdpaFp8BackwardInput, SdpaFp8BackwardOutput> {
 public:
  std::optional<float> attn_scale_value;
  bool padding_mask = false;
  // The reference is deterministic whatever this says; it is kept for GPU engines and for parity.
  bool deterministic_algorithm = false;
  DiagonalAlignment_t diagonal_alignment = DiagonalAlignment_t::TOP_LEFT;
  // The visible band, as in SDPA_attributes: i' - left_bound < j <= i' + right_bound.
  std::optional<int64_t> left_bound;
  std::optional<int64_t> right_bound;

  SDPA_fp8_backward_attributes& set_attn_scale(float v) { attn_scale_value = v; return *this; }
  SDPA_fp8_backward_attributes& set_attn_scale(TensorPtr t) {
    inputs[SdpaFp8BackwardInput::ATTN_SCALE] = std::move(t);
    return *this;
  }
  SDPA_fp8_backward_attributes& set_padding_mask(bool v) { padding_mask = v; return *this; }
  SDPA_fp8_backward_attributes& set_seq_len_q(TensorPtr t) {
    inputs[SdpaFp8BackwardInput::SEQ_LEN_Q] = std::move(t);
    return *this;
  }
  SDPA_fp8_backward_attributes& set_seq_len_kv(TensorPtr t) {
    inputs[SdpaFp8BackwardInput::SEQ_LEN_KV] = std::move(t);
    return *this;
  }
  SDPA_fp8_backward_attributes& set_deterministic_algorithm(bool v) { deterministic_algorithm = v; return *this; }
  SDPA_fp8_backward_attributes& set_diagonal_alignment(DiagonalAlignment_t v) { diagonal_alignment = v; return *this; }
  SDPA_fp8_backward_attributes& set_diagonal_band_left_bound(int64_t v) { left_bound = v; return *this; }
  SDPA_fp8_backward_attributes& set_diagonal_band_right_bound(int64_t v) { right_bound = v; return *this; }
  SDPA_fp8_backward_attributes& set_causal_mask(bool v) {
    if (v) { diagonal_alignment = DiagonalAlignment_t::TOP_LEFT; right_bound = 0; } else { right_bound.reset(); }
    return *this;
  }
  SDPA_fp8_backward_attributes& set_causal_mask_bottom_right(bool v) {
    if (v) { diagonal_alignment = DiagonalAlignment_t::BOTTOM_RIGHT; right_bound = 0; } else { right_bound.reset(); }
    return *this;
  }
  SDPA_fp8_backward_attributes& set_sliding_window_length(int64_t w) { left_bound = w; right_bound = 0; return *this; }
};

}  // namespace frost::graph
