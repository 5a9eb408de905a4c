// Checks the attention forward and backward share: operand types, the scale tensor, the bias, the
// variable-length inputs (lengths, ragged offsets, max_total bounds), the block mask and dropout.
#pragma once

#include <optional>
#include <string>

#include "graph/node.h"

namespace frost::detail {

// Q, K, V, O, dO and bias hold real values in one of the plain floating types.
bool is_attention_type(DataType_t dt);
std::string float_string(float v);

// ATTN_SCALE: a FLOAT scalar of dims [1] or [1, 1, 1, 1], never together with a float attribute.
error_t check_attn_scale(const Node& n, const TensorPtr& scale, const std::optional<float>& attn_scale_value);
// BIAS: [b or 1, h or 1, s_q, s_kv] in an attention type.
error_t check_attn_bias(const Node& n, const TensorPtr& bias, int64_t b, int64_t h, int64_t s_q, int64_t s_kv);

// The length inputs of one side (Q, or K/V): SEQ_LEN_* INT32 [b, 1, 1, 1] or CU_SEQ_LEN_* INT32
// [b + 1] or [b + 1, 1, 1, 1], at most one of them, read only with padding_mask on, which needs one
// per side.
struct AttentionSideLengths {
  const char* seq_port;
  TensorPtr seq;
  const char* cu_port;
  TensorPtr cu;
};
error_t check_attn_lengths(const Node& n, bool padding_mask, int64_t b, const AttentionSideLengths& q,
                           const AttentionSideLengths& kv);

// The ragged offset of `t`, when it has one: INT32/INT64 [b + 1, 1, 1, 1] on a tensor with a buffer,
// with padding_mask on.
error_t check_attn_ragged_offset(const Node& n, const char* port, const TensorPtr& t, int64_t b, bool padding_mask);
// max_total_seq_len_q / kv: positive when set.
error_t check_attn_max_totals(const Node& n, const std::optional<int64_t>& q, const std::optional<int64_t>& kv);

// BLOCK_MASK: UINT8 or BOOLEAN [b or 1, h or 1, ceil(s_q / tile_q), ceil(s_kv / tile_kv)], positive tiles.
error_t check_attn_block_mask(const Node& n, const TensorPtr& mask, int64_t tile_q, int64_t tile_kv, int64_t b,
                              int64_t h, int64_t s_q, int64_t s_kv);

// Dropout: a probability in [0, 1) with one-element INT32/INT64 seed and offset, or a mask
// [b or 1, h or 1, s_q, s_kv] with a FLOAT scalar scale (and, in the backward, an optional
// FLOAT scalar scale_inv); not both.
struct AttentionDropout {
  std::optional<float> probability;
  TensorPtr seed, offset, mask, scale, scale_inv;
};
error_t check_attn_dropout(const Node& n, const AttentionDropout& d, int64_t b, int64_t h, int64_t s_q, int64_t s_kv);

}  // namespace frost::detail
