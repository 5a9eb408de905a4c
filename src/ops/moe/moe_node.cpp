#include "ops/moe/moe_node.h"

#include <cstdint>

#include "common/dtype_convert.h"
#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"

namespace frost::detail {

using graph::MoeGroupedMatmulBackwardInput;
using graph::MoeGroupedMatmulBackwardOutput;
using graph::MoeGroupedMatmulInput;
using graph::MoeGroupedMatmulOutput;

namespace {

// Fills an output's unset dims (checking set ones), packed strides and data type: the graph's io or
// intermediate type, or `fallback` when the graph declares neither.
error_t infer_moe_output(const Node& node, const char* port, const TensorPtr& t, const std::vector<int64_t>& dims,
                         DataType_t fallback, const GraphContext& ctx) {
  if (t->get_dim().empty()) t->set_dim(dims);
  if (t->get_dim() != dims)
    return attr_error(node, std::string(port) + ".dim", dims_string(t->get_dim()), "expected " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (t->get_stride().empty()) t->set_stride(packed_strides(dims));
  const DataType_t context_type = t->get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
  if (t->get_data_type() == DataType_t::NOT_SET && context_type == DataType_t::NOT_SET) t->set_data_type(fallback);
  return {};
}

template <class Attr>
void moe_attributes_to_json(const Attr& attr, json& j) {
  j["mode"] = moe_mode_name(attr.mode);
  j["top_k"] = attr.top_k;
}

template <class Attr>
error_t moe_attributes_from_json(Attr& attr, const json& j) {
  FROST_CHECK(read_moe_mode(j, attr.mode));
  int64_t top_k = attr.top_k;
  FROST_CHECK(read_int(j, "top_k", top_k));
  if (top_k < 1 || top_k > INT32_MAX) return json_format_error("top_k", "must be in [1, 2^31)");
  attr.top_k = static_cast<int32_t>(top_k);
  return {};
}

}  // namespace

MoeOperands MoeGroupedMatmulNode::operands() const {
  using I = MoeGroupedMatmulInput;
  return {attr.mode,          attr.top_k,     in(I::TOKEN), in(I::WEIGHT), in(I::FIRST_TOKEN_OFFSET),
          in(I::TOKEN_INDEX), in(I::TOKEN_KS)};
}

MoeOperands MoeGroupedMatmulBackwardNode::operands() const {
  using I = MoeGroupedMatmulBackwardInput;
  return {attr.mode,          attr.top_k,     in(I::TOKEN), in(I::WEIGHT), in(I::FIRST_TOKEN_OFFSET),
          in(I::TOKEN_INDEX), in(I::TOKEN_KS)};
}

error_t MoeGroupedMatmulNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"OUTPUT"}));
  MoeExtents ext;
  const MoeOperands ops = operands();
  FROST_CHECK(validate_moe_operands(*this, ops, ext));
  return infer_moe_output(*this, "OUTPUT", out(MoeGroupedMatmulOutput::OUTPUT), {1, ext.rows, ext.n},
                          ops.token->get_data_type(), ctx);
}

error_t MoeGroupedMatmulBackwardNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"DTOKEN", "DWEIGHT"}));
  MoeExtents ext;
  const MoeOperands ops = operands();
  FROST_CHECK(validate_moe_operands(*this, ops, ext));
  const TensorPtr dout = in(MoeGroupedMatmulBackwardInput::DOUTPUT);
  if (!dout) return attr_error(*this, "DOUTPUT", "null", "this port is required", error_code_t::ATTRIBUTE_NOT_SET);
  const std::vector<int64_t> dout_dims{1, ext.rows, ext.n};
  if (dout->get_dim() != dout_dims)
    return attr_error(*this, "DOUTPUT.dim", dims_string(dout->get_dim()),
                      "must be the forward OUTPUT's " + dims_string(dout_dims), error_code_t::SHAPE_DEDUCTION_FAILED);
  if (!is_floating(dout->get_data_type()) || dout->get_data_type() == DataType_t::FP4_E2M1)
    return attr_error(*this, "DOUTPUT.data_type", to_string(dout->get_data_type()), "must be a floating type");
  FROST_CHECK(infer_moe_output(*this, "DTOKEN", out(MoeGroupedMatmulBackwardOutput::DTOKEN), ops.token->get_dim(),
                               ops.token->get_data_type(), ctx));
  return infer_moe_output(*this, "DWEIGHT", out(MoeGroupedMatmulBackwardOutput::DWEIGHT), ops.weight->get_dim(),
                          ops.weight->get_data_type(), ctx);
}

void MoeGroupedMatmulNode::attributes_to_json(json& j) const { moe_attributes_to_json(attr, j); }
error_t MoeGroupedMatmulNode::attributes_from_json(const json& j) { return moe_attributes_from_json(attr, j); }
void MoeGroupedMatmulBackwardNode::attributes_to_json(json& j) const { moe_attributes_to_json(attr, j); }
error_t MoeGroupedMatmulBackwardNode::attributes_from_json(const json& j) { return moe_attributes_from_json(attr, j); }

namespace {

const OpRegistrar kRegisterForward(std::string(MoeGroupedMatmulNode::kTag),
                                   [] { return std::make_unique<MoeGroupedMatmulNode>(); });
const OpRegistrar kRegisterBackward(std::string(MoeGroupedMatmulBackwardNode::kTag),
                                    [] { return std::make_unique<MoeGroupedMatmulBackwardNode>(); });

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::moe_grouped_matmul(TensorPtr token, TensorPtr weight, TensorPtr first_token_offset,
                                    TensorPtr token_index, TensorPtr token_ks, Moe_grouped_matmul_attributes attr) {
  using detail::MoeGroupedMatmulNode;
  using I = MoeGroupedMatmulInput;
  auto& g = state();
  detail::default_name(g, attr, MoeGroupedMatmulNode::kTag);
  detail::require_inputs(g, attr.name, MoeGroupedMatmulNode::kTag,
                         {{"TOKEN", &token}, {"WEIGHT", &weight}, {"FIRST_TOKEN_OFFSET", &first_token_offset}});
  attr.inputs[I::TOKEN] = std::move(token);
  attr.inputs[I::WEIGHT] = std::move(weight);
  attr.inputs[I::FIRST_TOKEN_OFFSET] = std::move(first_token_offset);
  if (token_index) attr.inputs[I::TOKEN_INDEX] = std::move(token_index);
  if (token_ks) attr.inputs[I::TOKEN_KS] = std::move(token_ks);
  TensorPtr output = detail::make_output(g, attr.name, "OUTPUT");
  attr.outputs[MoeGroupedMatmulOutput::OUTPUT] = output;
  detail::add_node(g, std::make_unique<MoeGroupedMatmulNode>(std::move(attr)));
  return output;
}

std::array<TensorPtr, 2> Graph::moe_grouped_matmul_backward(TensorPtr doutput, TensorPtr token, TensorPtr weight,
                                                            TensorPtr first_token_offset, TensorPtr token_index,
                                                            TensorPtr token_ks,
                                                            Moe_grouped_matmul_backward_attributes attr) {
  using detail::MoeGroupedMatmulBackwardNode;
  using I = MoeGroupedMatmulBackwardInput;
  auto& g = state();
  detail::default_name(g, attr, MoeGroupedMatmulBackwardNode::kTag);
  detail::require_inputs(
      g, attr.name, MoeGroupedMatmulBackwardNode::kTag,
      {{"DOUTPUT", &doutput}, {"TOKEN", &token}, {"WEIGHT", &weight}, {"FIRST_TOKEN_OFFSET", &first_token_offset}});
  attr.inputs[I::DOUTPUT] = std::move(doutput);
  attr.inputs[I::TOKEN] = std::move(token);
  attr.inputs[I::WEIGHT] = std::move(weight);
  attr.inputs[I::FIRST_TOKEN_OFFSET] = std::move(first_token_offset);
  if (token_index) attr.inputs[I::TOKEN_INDEX] = std::move(token_index);
  if (token_ks) attr.inputs[I::TOKEN_KS] = std::move(token_ks);
  TensorPtr dtoken = detail::make_output(g, attr.name, "DTOKEN");
  TensorPtr dweight = detail::make_output(g, attr.name, "DWEIGHT");
  attr.outputs[MoeGroupedMatmulBackwardOutput::DTOKEN] = dtoken;
  attr.outputs[MoeGroupedMatmulBackwardOutput::DWEIGHT] = dweight;
  detail::add_node(g, std::make_unique<MoeGroupedMatmulBackwardNode>(std::move(attr)));
  return {dtoken, dweight};
}

}  // namespace frost::graph
