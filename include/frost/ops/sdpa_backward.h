// Scaled dot-product attention backward: the gradients of the forward in frost/ops/sdpa.h.
//   With the forward's logits S (scale, bias, ALiBi, masks as there) and P = exp(S - LSE), where LSE is
//   the given Stats (natural log, or base 2 with stats_use_log2):
//     D = rowsum(dO * O)      dP = dO V^T      dS = P * (dP - D)
//     dQ = attn_scale dS K    dK = attn_scale dS^T Q    dV = P^T dO
//     dBias = dS, summed over the bias's broadcast (extent-1) batch and head dims
//     dSink[h] = -sum over rows of the head of exp(sink[h] - LSE) * D
// Inputs Q [b, h_q, s_q, d_qk], K [b, h_k, s_kv, d_qk], V [b, h_v, s_kv, d_v], O and dO [b, h_q, s_q, d_v],
// Stats [b, h_q, s_q, 1] FP32, as the forward saved them. Outputs dQ, dK, dV take the dims of Q, K, V
// and their stride order. Under GQA/MQA dK and dV sum the query heads of each group (in FP32, or FP64
// in the fp64 mode). Padding rows and rows whose keys are all masked (Stats = -inf) contribute zero
// gradient, never NaN. dBias (dims of the bias) and dSink (FLOAT [1, h_q, 1, 1]) are outputs that the
// caller declares and binds with set_dbias / set_dsink_token, as in cuDNN Frontend.
//
// Every training feature of the forward is accepted with the forward's rules (frost/ops/sdpa.h):
// - variable lengths: padding_mask with seq_len_q/kv or cu_seq_len_q/kv (mixed between the sides);
//   ragged offsets on Q, K, V, O, dO, Stats, dQ, dK and dV (each tensor chooses: ragged, packed by
//   cu_seq_len, or dense); max_total_seq_len_q/kv. Rows of a packed dQ, dK or dV at s >= the batch's
//   length are not written; a dense gradient gets zeros there.
// - block_mask with its tile sizes: masked keys get no gradient.
// - dropout: with (probability, seed, offset) the backward regenerates the forward's Philox mask
//   element by element; with (mask, scale[, scale_inv]) it reads the given mask. Where F_ij is the
//   factor P_ij took in O:  dV = (P * F)^T dO,  dP = (dO V^T) * F,  and D = rowsum(dO * O) as before.
//   scale_inv, accepted for cuDNN Frontend's signature, must be 1 / scale (checked at execution).
// Paged K/V caches are an inference feature: the backward has no page tables.
#pragma once

#include <optional>

#include "frost/ops/attention_masking.h"
#include "frost/ops/sdpa.h"

namespace frost::graph {

enum class SdpaBackwardInput {
  Q,
  K,
  V,
  O,
  DO,
  STATS,
  ATTN_SCALE,
  BIAS,
  SEQ_LEN_Q,
  SEQ_LEN_KV,
  SINK_TOKEN,
  CU_SEQ_LEN_Q,
  CU_SEQ_LEN_KV,
  BLOCK_MASK,
  DROPOUT_SEED,
  DROPOUT_OFFSET,
  DROPOUT_MASK,
  DROPOUT_SCALE,
  DROPOUT_SCALE_INV
};
enum class SdpaBackwardOutput { DQ, DK, DV, DBIAS, DSINK_TOKEN };

class SDPA_backward_attributes
    : public AttentionMaskingAttributes<SDPA_backward_attributes, SdpaBackwardInput, SdpaBackwardOutput> {
 public:
  // The reference engine is deterministic whatever this says; GPU engines that reduce dK/dV or dBias
  // across thread blocks must then use an order fixed run to run.
  bool deterministic_algorithm = false;

  SDPA_backward_attributes& set_dbias(TensorPtr t) { outputs[SdpaBackwardOutput::DBIAS] = std::move(t); return *this; }
  SDPA_backward_attributes& set_dsink_token(TensorPtr t) {
    outputs[SdpaBackwardOutput::DSINK_TOKEN] = std::move(t);
    return *this;
  }
  SDPA_backward_attributes& set_deterministic_algorithm(bool v) { deterministic_algorithm = v; return *this; }
  using AttentionMaskingAttributes::set_dropout;
  SDPA_backward_attributes& set_dropout(TensorPtr mask, TensorPtr scale, TensorPtr scale_inv = nullptr) {
    port(SdpaBackwardInput::DROPOUT_MASK, std::move(mask));
    port(SdpaBackwardInput::DROPOUT_SCALE, std::move(scale));
    return port(SdpaBackwardInput::DROPOUT_SCALE_INV, std::move(scale_inv));
  }
};

}  // namespace frost::graph
