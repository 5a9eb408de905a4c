#include "ops/sdpa_fp8/fp8_attention_checks.h"

#include "graph/shape_util.h"
#include "ops/common/fp8_scaling.h"

namespace frost::detail {

bool is_fp8_attention_output_type(DataType_t t) {
  return is_fp8(t) || t == DataType_t::HALF || t == DataType_t::BFLOAT16 || t == DataType_t::FLOAT;
}

error_t check_attention_operands(const Node& node, const TensorPtr& q, const TensorPtr& k, const TensorPtr& v,
                                 bool (*type_ok)(DataType_t), const char* types) {
  const std::pair<const char*, TensorPtr> qkv[3] = {{"Q", q}, {"K", k}, {"V", v}};
  for (const auto& [port, t] : qkv) {
    if (!t) return attr_error(node, port, "null", "Q, K and V are required", error_code_t::ATTRIBUTE_NOT_SET);
    if (t->get_dim().size() != 4)
      return attr_error(node, std::string(port) + ".dim", dims_string(t->get_dim()), "must have rank 4 [b, h, s, d]");
    if (!type_ok(t->get_data_type()))
      return attr_error(node, std::string(port) + ".data_type", to_string(t->get_data_type()),
                        std::string("must be ") + types);
    if (t->get_ragged_offset())
      return attr_error(node, std::string(port) + ".ragged_offset", describe(t->get_ragged_offset()),
                        "ragged (THD) layouts are not supported by the FP8 attention ops");
  }
  const auto& qd = q->get_dim();
  const auto& kd = k->get_dim();
  const auto& vd = v->get_dim();
  if (kd[0] != qd[0] || vd[0] != qd[0])
    return attr_error(node, kd[0] != qd[0] ? "K.dim" : "V.dim", dims_string(kd[0] != qd[0] ? kd : vd),
                      "batch must equal Q's " + std::to_string(qd[0]));
  if (qd[1] % kd[1] != 0 || qd[1] % vd[1] != 0)
    return attr_error(node, qd[1] % kd[1] != 0 ? "K.dim" : "V.dim", dims_string(qd[1] % kd[1] != 0 ? kd : vd),
                      "heads must divide Q's " + std::to_string(qd[1]) + " heads");
  if (kd[3] != qd[3])
    return attr_error(node, "K.dim", dims_string(kd), "head dim must equal Q's " + std::to_string(qd[3]));
  if (vd[2] != kd[2])
    return attr_error(node, "V.dim", dims_string(vd), "sequence length must equal K's " + std::to_string(kd[2]));
  return {};
}

error_t check_operand(const Node& node, const char* port, const TensorPtr& t, const std::vector<int64_t>& dims,
                      bool (*type_ok)(DataType_t), const char* types) {
  if (!t) return attr_error(node, port, "null", "this operand is required", error_code_t::ATTRIBUTE_NOT_SET);
  if (t->get_dim() != dims)
    return attr_error(node, std::string(port) + ".dim", dims_string(t->get_dim()), "must be " + dims_string(dims));
  if (!type_ok(t->get_data_type()))
    return attr_error(node, std::string(port) + ".data_type", to_string(t->get_data_type()),
                      std::string("must be ") + types);
  if (t->get_ragged_offset())
    return attr_error(node, std::string(port) + ".ragged_offset", describe(t->get_ragged_offset()),
                      "ragged (THD) layouts are not supported by the FP8 attention ops");
  return {};
}

error_t check_attention_mask(const Node& node, bool padding_mask, const TensorPtr& seq_len_q,
                             const TensorPtr& seq_len_kv, int64_t batch, const std::optional<int64_t>& left_bound,
                             const std::optional<int64_t>& right_bound) {
  const std::pair<const char*, TensorPtr> lens[2] = {{"SEQ_LEN_Q", seq_len_q}, {"SEQ_LEN_KV", seq_len_kv}};
  for (const auto& [port, t] : lens) {
    if (padding_mask && !t)
      return attr_error(node, port, "null", "padding_mask needs both SEQ_LEN_Q and SEQ_LEN_KV",
                        error_code_t::ATTRIBUTE_NOT_SET);
    if (!t) continue;
    if (!padding_mask)
      return attr_error(node, port, describe(t), "sequence lengths are read only with padding_mask on");
    if (t->get_dim() != std::vector<int64_t>{batch, 1, 1, 1} || t->get_data_type() != DataType_t::INT32)
      return attr_error(node, port, describe(t), "must be INT32 [" + std::to_string(batch) + ", 1, 1, 1]");
  }
  if (left_bound && *left_bound < 0)
    return attr_error(node, "diagonal_band_left_bound", std::to_string(*left_bound), "must be non-negative");
  if (right_bound && *right_bound < 0)
    return attr_error(node, "diagonal_band_right_bound", std::to_string(*right_bound), "must be non-negative");
  return {};
}

error_t infer_output_like(const Node& node, const char* port, const TensorPtr& t, const std::vector<int64_t>& dims,
                          const std::vector<int64_t>& like_strides, DataType_t fallback, const GraphContext& ctx,
                          bool (*type_ok)(DataType_t), const char* types) {
  if (t->get_dim().empty()) t->set_dim(dims);
  if (t->get_dim() != dims)
    return attr_error(node, std::string(port) + ".dim", dims_string(t->get_dim()),
                      "the operands give " + dims_string(dims), error_code_t::SHAPE_DEDUCTION_FAILED);
  if (t->get_stride().empty()) t->set_stride(strides_like(dims, like_strides));
  const DataType_t context_type = t->get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
  if (t->get_data_type() == DataType_t::NOT_SET && context_type == DataType_t::NOT_SET) t->set_data_type(fallback);
  const DataType_t type = t->get_data_type() == DataType_t::NOT_SET ? context_type : t->get_data_type();
  if (!type_ok(type))
    return attr_error(node, std::string(port) + ".data_type", to_string(type), std::string("must be ") + types);
  return {};
}

error_t infer_stats_output(const Node& node, bool generate_stats, const TensorPtr& stats,
                           const std::vector<int64_t>& q_dims) {
  if (!generate_stats) {
    if (stats) return attr_error(node, "STATS", describe(stats), "is bound but generate_stats is off");
    return {};
  }
  if (!stats)
    return attr_error(node, "STATS", "null", "generate_stats needs a STATS output", error_code_t::ATTRIBUTE_NOT_SET);
  const std::vector<int64_t> dims{q_dims[0], q_dims[1], q_dims[2], 1};
  if (stats->get_dim().empty()) stats->set_dim(dims);
  if (stats->get_stride().empty()) stats->set_stride(packed_strides(dims));
  if (stats->get_data_type() == DataType_t::NOT_SET) stats->set_data_type(DataType_t::FLOAT);
  if (stats->get_dim() != dims || stats->get_data_type() != DataType_t::FLOAT)
    return attr_error(node, "STATS", describe(stats), "softmax statistics are FLOAT " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  return {};
}

}  // namespace frost::detail
