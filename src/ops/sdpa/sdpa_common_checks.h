// Checks the attention forward and backward share: operand types, the scale tensor and the bias.
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

}  // namespace frost::detail
