#include "ops/sdpa_backward/sdpa_backward_node.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "graph/json_util.h"
#include "ops/sdpa/sdpa_common_checks.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"

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
    if (t->get_ragged_offset())
      return attr_error(*this, std::string(port) + ".ragged_offset", describe(t->get_ragged_offset()),
                        "ragged (THD) layouts are not supported by sdpa_backward; use dense [b, h, s, d] tensors");
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
  const std::pair<const char*, TensorPtr> lens[2] = {{"SEQ_LEN_Q", in(In::SEQ_LEN_Q)},
                                                     {"SEQ_LEN_KV", in(In::SEQ_LEN_KV)}};
  for (const auto& [port, t] : lens) {
    if (attr.padding_mask && !t)
      return attr_error(*this, port, "null", "padding_mask needs both SEQ_LEN_Q and SEQ_LEN_KV",
                        error_code_t::ATTRIBUTE_NOT_SET);
    if (!t) continue;
    if (!attr.padding_mask)
      return attr_error(*this, port, describe(t), "sequence lengths are read only with padding_mask on");
    if (t->get_dim() != std::vector<int64_t>{b, 1, 1, 1} || t->get_data_type() != DataType_t::INT32)
      return attr_error(*this, port, describe(t), "must be INT32 " + dims_of({b, 1, 1, 1}));
  }
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

error_t SdpaBackwardNode::infer_outputs(const GraphContext& ctx) {
  const std::tuple<const char*, Out, In> like[3] = {
      {"DQ", Out::DQ, In::Q}, {"DK", Out::DK, In::K}, {"DV", Out::DV, In::V}};
  for (const auto& [port, grad, operand] : like) {
    const TensorPtr src = in(operand);
    FROST_CHECK(infer_output(*this, port, *out(grad), src->get_dim(), src->get_stride(), src->get_data_type(), ctx));
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
