#include "ops/sdpa_backward/sdpa_backward_node.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"
#include "ops/sdpa/sdpa_common_checks.h"

namespace frost::detail {

using graph::AttentionImplementation_t;
using In = graph::SdpaBackwardInput;
using Out = graph::SdpaBackwardOutput;

namespace {

// Q, K, V, O, dO and the gradients hold real values in one of the plain floating types.
std::string type_name(DataType_t dt) { return std::string(to_string(dt)); }

std::string dims_of(std::initializer_list<int64_t> d) { return dims_string(std::vector<int64_t>(d)); }

// Fills an output's dims (and strides in the order of `like`) when unset and checks them when set.
// Its type defaults to the graph's io (or intermediate) type, else to `fallback`.
error_t infer_output(const Node& node, const std::string& port, graph::Tensor_attributes& t,
                     const std::vector<int64_t>& dims, const std::vector<int64_t>& like_strides, DataType_t fallback,
                     const GraphContext& ctx) {
  if (t.get_dim().empty()) t.set_dim(dims);
  if (t.get_dim() != dims)
    return attr_error(node, port + ".dim", dims_string(t.get_dim()), "the operands give " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (t.get_stride().empty()) t.set_stride(strides_like(dims, like_strides));
  const DataType_t context_type = t.get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
  if (t.get_data_type() == DataType_t::NOT_SET && context_type == DataType_t::NOT_SET) t.set_data_type(fallback);
  const DataType_t type = t.get_data_type() == DataType_t::NOT_SET ? context_type : t.get_data_type();
  if (!is_attention_type(type))
    return attr_error(node, port + ".data_type", type_name(type), "must be FLOAT, HALF, BFLOAT16 or DOUBLE");
  return {};
}

}  // namespace

error_t SdpaBackwardNode::validate_operands() const {
  const std::pair<const char*, TensorPtr> dense[5] = {
      {"Q", in(In::Q)}, {"K", in(In::K)}, {"V", in(In::V)}, {"O", in(In::O)}, {"DO", in(In::DO)}};
  for (const auto& [port, t] : dense) {
    if (!t) return attr_error(*this, port, "null", "Q, K, V, O and DO are required", error_code_t::ATTRIBUTE_NOT_SET);
    if (t->get_dim().size() != 4)
      return attr_error(*this, std::string(port) + ".dim", dims_string(t->get_dim()), "must have rank 4 [b, h, s, d]");
    if (!is_attention_type(t->get_data_type()))
      return attr_error(*this, std::string(port) + ".data_type", type_name(t->get_data_type()),
                        "must be FLOAT, HALF, BFLOAT16 or DOUBLE");
  }
  const auto& q = in(In::Q)->get_dim();
  const auto& k = in(In::K)->get_dim();
  const auto& v = in(In::V)->get_dim();
  if (k[0] != q[0]) return attr_error(*this, "K.dim", dims_string(k), "batch must equal Q's " + std::to_string(q[0]));
  if (v[0] != q[0]) return attr_error(*this, "V.dim", dims_string(v), "batch must equal Q's " + std::to_string(q[0]));
  if (q[1] % k[1] != 0)
    return attr_error(*this, "K.dim", dims_string(k), "heads must divide Q's " + std::to_string(q[1]) + " heads");
  if (q[1] % v[1] != 0)
    return attr_error(*this, "V.dim", dims_string(v), "heads must divide Q's " + std::to_string(q[1]) + " heads");
  if (k[3] != q[3])
    return attr_error(*this, "K.dim", dims_string(k), "head dim must equal Q's " + std::to_string(q[3]));
  if (v[2] != k[2])
    return attr_error(*this, "V.dim", dims_string(v), "sequence length must equal K's " + std::to_string(k[2]));
  const std::vector<int64_t> o_dims{q[0], q[1], q[2], v[3]};
  for (const auto& [port, t] : {dense[3], dense[4]})
    if (t->get_dim() != o_dims)
      return attr_error(*this, std::string(port) + ".dim", dims_string(t->get_dim()),
                        "Q and V give " + dims_string(o_dims));
  const TensorPtr stats = in(In::STATS);
  if (!stats)
    return attr_error(*this, "STATS", "null", "the forward's STATS are required", error_code_t::ATTRIBUTE_NOT_SET);
  if (stats->get_dim() != std::vector<int64_t>{q[0], q[1], q[2], 1} || stats->get_data_type() != DataType_t::FLOAT)
    return attr_error(*this, "STATS", describe(stats), "must be FLOAT " + dims_of({q[0], q[1], q[2], 1}));
  return {};
}

error_t SdpaBackwardNode::validate_optional_inputs() const {
  const auto& q = in(In::Q)->get_dim();
  const int64_t b = q[0], h = q[1], s_q = q[2], s_kv = in(In::K)->get_dim()[2];
  FROST_CHECK(check_attn_scale(*this, in(In::ATTN_SCALE), attr.attn_scale_value));
  FROST_CHECK(check_attn_bias(*this, in(In::BIAS), b, h, s_q, s_kv));
  if (const TensorPtr sink = in(In::SINK_TOKEN)) {
    if (sink->get_dim() != std::vector<int64_t>{1, h, 1, 1} || sink->get_data_type() != DataType_t::FLOAT)
      return attr_error(*this, "SINK_TOKEN", describe(sink), "must be FLOAT " + dims_of({1, h, 1, 1}));
  }
  if (attr.left_bound && *attr.left_bound < 0)
    return attr_error(*this, "diagonal_band_left_bound", std::to_string(*attr.left_bound), "must be non-negative");
  if (attr.right_bound && *attr.right_bound < 0)
    return attr_error(*this, "diagonal_band_right_bound", std::to_string(*attr.right_bound), "must be non-negative");
  return {};
}

error_t SdpaBackwardNode::validate_training_inputs() const {
  const auto& q = in(In::Q)->get_dim();
  const int64_t b = q[0], h = q[1], s_q = q[2], s_kv = in(In::K)->get_dim()[2];
  FROST_CHECK(check_attn_lengths(*this, attr.padding_mask, b,
                                 {"SEQ_LEN_Q", in(In::SEQ_LEN_Q), "CU_SEQ_LEN_Q", in(In::CU_SEQ_LEN_Q)},
                                 {"SEQ_LEN_KV", in(In::SEQ_LEN_KV), "CU_SEQ_LEN_KV", in(In::CU_SEQ_LEN_KV)}));
  const std::pair<const char*, In> packable[6] = {{"Q", In::Q}, {"K", In::K},   {"V", In::V},
                                                  {"O", In::O}, {"DO", In::DO}, {"STATS", In::STATS}};
  for (const auto& [port, e] : packable)
    FROST_CHECK(check_attn_ragged_offset(*this, port, in(e), b, attr.padding_mask));
  FROST_CHECK(check_attn_max_totals(*this, attr.max_total_seq_len_q, attr.max_total_seq_len_kv));
  FROST_CHECK(check_attn_block_mask(*this, in(In::BLOCK_MASK), attr.block_mask_tile_q, attr.block_mask_tile_kv, b, h,
                                    s_q, s_kv));
  AttentionDropout dropout;
  dropout.probability = attr.dropout_probability;
  dropout.seed = in(In::DROPOUT_SEED), dropout.offset = in(In::DROPOUT_OFFSET);
  dropout.mask = in(In::DROPOUT_MASK), dropout.scale = in(In::DROPOUT_SCALE),
  dropout.scale_inv = in(In::DROPOUT_SCALE_INV);
  return check_attn_dropout(*this, dropout, b, h, s_q, s_kv);
}

error_t SdpaBackwardNode::infer_outputs(const GraphContext& ctx) {
  const std::tuple<const char*, Out, In> like[3] = {
      {"DQ", Out::DQ, In::Q}, {"DK", Out::DK, In::K}, {"DV", Out::DV, In::V}};
  for (const auto& [port, grad, operand] : like) {
    const TensorPtr src = in(operand);
    FROST_CHECK(infer_output(*this, port, *out(grad), src->get_dim(), src->get_stride(), src->get_data_type(), ctx));
    FROST_CHECK(check_attn_ragged_offset(*this, port, out(grad), src->get_dim()[0], attr.padding_mask));
  }
  const TensorPtr bias = in(In::BIAS), dbias = out(Out::DBIAS);
  if (dbias && !bias) return attr_error(*this, "DBIAS", describe(dbias), "a dBias output needs a BIAS input");
  if (dbias)
    FROST_CHECK(infer_output(*this, "DBIAS", *dbias, bias->get_dim(), bias->get_stride(), bias->get_data_type(), ctx));

  const TensorPtr sink = in(In::SINK_TOKEN), dsink = out(Out::DSINK_TOKEN);
  if (!dsink) return {};
  if (!sink) return attr_error(*this, "DSINK_TOKEN", describe(dsink), "a dSink output needs a SINK_TOKEN input");
  if (dsink->get_dim().empty()) dsink->set_dim(sink->get_dim());
  if (dsink->get_dim() != sink->get_dim())
    return attr_error(*this, "DSINK_TOKEN.dim", dims_string(dsink->get_dim()),
                      "SINK_TOKEN gives " + dims_string(sink->get_dim()), error_code_t::SHAPE_DEDUCTION_FAILED);
  if (dsink->get_data_type() == DataType_t::NOT_SET) dsink->set_data_type(DataType_t::FLOAT);
  if (dsink->get_data_type() != DataType_t::FLOAT)
    return attr_error(*this, "DSINK_TOKEN.data_type", type_name(dsink->get_data_type()), "the sink gradient is FLOAT");
  return {};
}

error_t SdpaBackwardNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"DQ", "DK", "DV"}));
  FROST_CHECK(validate_operands());
  FROST_CHECK(validate_optional_inputs());
  FROST_CHECK(validate_training_inputs());
  return infer_outputs(ctx);
}

void SdpaBackwardNode::attributes_to_json(json& j) const {
  write_opt(j, "attn_scale_value", attr.attn_scale_value);
  j["alibi_mask"] = attr.alibi_mask;
  j["padding_mask"] = attr.padding_mask;
  j["stats_use_log2"] = attr.stats_use_log2;
  j["deterministic_algorithm"] = attr.deterministic_algorithm;
  j["diagonal_alignment"] = to_string(attr.diagonal_alignment);
  write_opt(j, "left_bound", attr.left_bound);
  write_opt(j, "right_bound", attr.right_bound);
  j["implementation"] = to_string(attr.implementation);
  write_opt(j, "max_total_seq_len_q", attr.max_total_seq_len_q);
  write_opt(j, "max_total_seq_len_kv", attr.max_total_seq_len_kv);
  write_opt(j, "dropout_probability", attr.dropout_probability);
  j["block_mask_tile_q"] = attr.block_mask_tile_q;
  j["block_mask_tile_kv"] = attr.block_mask_tile_kv;
}

error_t SdpaBackwardNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_opt_float(j, "attn_scale_value", attr.attn_scale_value));
  FROST_CHECK(read_bool(j, "alibi_mask", attr.alibi_mask));
  FROST_CHECK(read_bool(j, "padding_mask", attr.padding_mask));
  FROST_CHECK(read_bool(j, "stats_use_log2", attr.stats_use_log2));
  FROST_CHECK(read_bool(j, "deterministic_algorithm", attr.deterministic_algorithm));
  FROST_CHECK(read_enum(j, "diagonal_alignment", attr.diagonal_alignment));
  FROST_CHECK(read_opt_int(j, "left_bound", attr.left_bound));
  FROST_CHECK(read_opt_int(j, "right_bound", attr.right_bound));
  FROST_CHECK(read_enum(j, "implementation", attr.implementation));
  FROST_CHECK(read_opt_int(j, "max_total_seq_len_q", attr.max_total_seq_len_q));
  FROST_CHECK(read_opt_int(j, "max_total_seq_len_kv", attr.max_total_seq_len_kv));
  FROST_CHECK(read_opt_float(j, "dropout_probability", attr.dropout_probability));
  FROST_CHECK(read_int(j, "block_mask_tile_q", attr.block_mask_tile_q));
  FROST_CHECK(read_int(j, "block_mask_tile_kv", attr.block_mask_tile_kv));
  return {};
}

namespace {

const OpRegistrar kRegister(std::string(SdpaBackwardNode::kTag), [] { return std::make_unique<SdpaBackwardNode>(); });

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 3> Graph::sdpa_backward(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr o, TensorPtr dO,
                                              TensorPtr stats, SDPA_backward_attributes attr) {
  using detail::SdpaBackwardNode;
  auto& g = state();
  detail::default_name(g, attr, SdpaBackwardNode::kTag);
  detail::require_inputs(g, attr.name, SdpaBackwardNode::kTag,
                         {{"Q", &q}, {"K", &k}, {"V", &v}, {"O", &o}, {"DO", &dO}, {"STATS", &stats}});
  attr.inputs[SdpaBackwardInput::Q] = std::move(q);
  attr.inputs[SdpaBackwardInput::K] = std::move(k);
  attr.inputs[SdpaBackwardInput::V] = std::move(v);
  attr.inputs[SdpaBackwardInput::O] = std::move(o);
  attr.inputs[SdpaBackwardInput::DO] = std::move(dO);
  attr.inputs[SdpaBackwardInput::STATS] = std::move(stats);
  const TensorPtr dq = attr.outputs[SdpaBackwardOutput::DQ] = detail::make_output(g, attr.name, "DQ");
  const TensorPtr dk = attr.outputs[SdpaBackwardOutput::DK] = detail::make_output(g, attr.name, "DK");
  const TensorPtr dv = attr.outputs[SdpaBackwardOutput::DV] = detail::make_output(g, attr.name, "DV");
  detail::add_node(g, std::make_unique<SdpaBackwardNode>(std::move(attr)));
  return {dq, dk, dv};
}

}  // namespace frost::graph
