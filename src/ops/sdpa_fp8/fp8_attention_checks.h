// Declaration checks the FP8 and MXFP8 attention ops share: the shapes of Q, K, V, the mask inputs, and
// the inference of an output that follows an operand.
#pragma once

#include <optional>
#include <vector>

#include "graph/node.h"

namespace frost::detail {

// Q [b, h_q, s_q, d_qk], K [b, h_k, s_kv, d_qk], V [b, h_v, s_kv, d_v] with h_k and h_v dividing h_q, each
// required, of rank 4 and of a type `type_ok` accepts (`types` names them in the error).
error_t check_attention_operands(const Node& node, const TensorPtr& q, const TensorPtr& k, const TensorPtr& v,
                                 bool (*type_ok)(DataType_t), const char* types);

// A required tensor of exactly `dims` whose type `type_ok` accepts.
error_t check_operand(const Node& node, const char* port, const TensorPtr& t, const std::vector<int64_t>& dims,
                      bool (*type_ok)(DataType_t), const char* types);

// The padding mask's lengths (INT32 [b, 1, 1, 1], both present exactly when the mask is on) and the band
// bounds (non-negative).
error_t check_attention_mask(const Node& node, bool padding_mask, const TensorPtr& seq_len_q,
                             const TensorPtr& seq_len_kv, int64_t batch, const std::optional<int64_t>& left_bound,
                             const std::optional<int64_t>& right_bound);

// Fills an output's dims (and strides ordered like `like_strides`) where unset and checks them where set.
// Its type: the declared one, else the graph's io (intermediate, when virtual) type, else `fallback`; it
// must pass `type_ok`.
error_t infer_output_like(const Node& node, const char* port, const TensorPtr& t, const std::vector<int64_t>& dims,
                          const std::vector<int64_t>& like_strides, DataType_t fallback, const GraphContext& ctx,
                          bool (*type_ok)(DataType_t), const char* types);

// The softmax statistics output: present exactly when generate_stats, FLOAT [b, h_q, s_q, 1].
error_t infer_stats_output(const Node& node, bool generate_stats, const TensorPtr& stats,
                           const std::vector<int64_t>& q_dims);

// FP8, HALF, BFLOAT16 or FLOAT: the types an attention output (O, dQ, dK, dV) may be stored in.
bool is_fp8_attention_output_type(DataType_t t);

}  // namespace frost::detail
