#include "ops/pointwise/pointwise_node.h"

#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/broadcast.h"
#include "ops/common/builder_util.h"

namespace frost::detail {

using graph::PointwiseInput;
using graph::PointwiseOutput;
using M = PointwiseMode_t;

int pointwise_arity(PointwiseMode_t m) {
  switch (m) {
    case M::ADD: case M::SUB: case M::MUL: case M::DIV: case M::ADD_SQUARE: case M::MAX: case M::MIN: case M::MOD:
    case M::POW: case M::LOGICAL_AND: case M::LOGICAL_OR: case M::CMP_EQ: case M::CMP_NEQ: case M::CMP_GT:
    case M::CMP_GE: case M::CMP_LT: case M::CMP_LE: case M::RELU_BWD: case M::TANH_BWD: case M::SIGMOID_BWD:
    case M::ELU_BWD: case M::GELU_BWD: case M::GELU_APPROX_TANH_BWD: case M::SOFTPLUS_BWD: case M::SWISH_BWD:
      return 2;
    case M::BINARY_SELECT:
      return 3;
    default:
      return 1;
  }
}

error_t PointwiseNode::infer_and_validate(const GraphContext&) {
  const M mode = attr.mode;
  FROST_CHECK(require_ports(*this, {"OUT_0"}));
  if (mode == M::NOT_SET) return attr_error(*this, "mode", "NOT_SET", "set a pointwise mode", error_code_t::ATTRIBUTE_NOT_SET);
  const int arity = pointwise_arity(mode);
  const TensorPtr ins[3] = {in(PointwiseInput::IN_0), in(PointwiseInput::IN_1), in(PointwiseInput::IN_2)};
  for (int i = 0; i < 3; ++i) {
    const std::string port = "IN_" + std::to_string(i);
    if (i < arity && !ins[i])
      return attr_error(*this, port, "null", "mode " + std::string(to_string(mode)) + " takes " + std::to_string(arity) +
                                                 " inputs", error_code_t::ATTRIBUTE_NOT_SET);
    if (i >= arity && ins[i])
      return attr_error(*this, port, describe(ins[i]), "mode " + std::string(to_string(mode)) + " takes only " +
                                                           std::to_string(arity) + " inputs");
  }
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < arity; ++i) shapes.push_back(ins[i]->get_dim());
  auto dims = broadcast_dims(shapes);
  if (!dims) {
    std::string v;
    for (const auto& s : shapes) v += (v.empty() ? "" : " and ") + dims_string(s);
    return attr_error(*this, "inputs", v, "shapes do not broadcast (extents must match or be 1)", error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  if (mode == M::GEN_INDEX) {
    if (!attr.axis) return attr_error(*this, "axis", "unset", "GEN_INDEX needs an axis", error_code_t::ATTRIBUTE_NOT_SET);
    if (*attr.axis < 0 || *attr.axis >= static_cast<int64_t>(dims->size()))
      return attr_error(*this, "axis", std::to_string(*attr.axis), "must name a dim of " + dims_string(*dims));
  }
  if (attr.softplus_beta && *attr.softplus_beta == 0.0f)
    return attr_error(*this, "softplus_beta", "0", "must be non-zero");
  auto& y = *out(PointwiseOutput::OUT_0);
  if (y.get_dim().empty()) {
    y.set_dim(*dims);
  } else if (y.get_dim() != *dims) {
    return attr_error(*this, "OUT_0.dim", dims_string(y.get_dim()), "the inputs broadcast to " + dims_string(*dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  if (y.get_stride().empty()) {
    // Follow the layout of the first input that has the output's full shape.
    for (int i = 0; i < arity; ++i)
      if (ins[i]->get_dim() == *dims) {
        y.set_stride(strides_like(*dims, ins[i]->get_stride()));
        break;
      }
  }
  return {};
}

void PointwiseNode::attributes_to_json(json& j) const {
  j["mode"] = to_string(attr.mode);
  write_opt(j, "axis", attr.axis);
  write_opt(j, "relu_lower_clip", attr.relu_lower_clip);
  write_opt(j, "relu_upper_clip", attr.relu_upper_clip);
  write_opt(j, "relu_lower_clip_slope", attr.relu_lower_clip_slope);
  write_opt(j, "swish_beta", attr.swish_beta);
  write_opt(j, "elu_alpha", attr.elu_alpha);
  write_opt(j, "softplus_beta", attr.softplus_beta);
}

error_t PointwiseNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_enum(j, "mode", attr.mode, true));
  FROST_CHECK(read_opt_int(j, "axis", attr.axis));
  FROST_CHECK(read_opt_float(j, "relu_lower_clip", attr.relu_lower_clip));
  FROST_CHECK(read_opt_float(j, "relu_upper_clip", attr.relu_upper_clip));
  FROST_CHECK(read_opt_float(j, "relu_lower_clip_slope", attr.relu_lower_clip_slope));
  FROST_CHECK(read_opt_float(j, "swish_beta", attr.swish_beta));
  FROST_CHECK(read_opt_float(j, "elu_alpha", attr.elu_alpha));
  FROST_CHECK(read_opt_float(j, "softplus_beta", attr.softplus_beta));
  return {};
}

namespace {

const OpRegistrar kRegister(std::string(PointwiseNode::kTag), [] { return std::make_unique<PointwiseNode>(); });

TensorPtr build(GraphState& g, std::initializer_list<TensorPtr> ins, graph::Pointwise_attributes a) {
  default_name(g, a, PointwiseNode::kTag);
  const PointwiseInput ports[3] = {PointwiseInput::IN_0, PointwiseInput::IN_1, PointwiseInput::IN_2};
  int i = 0;
  for (const TensorPtr& t : ins) {
    if (!t)
      g.note_error({error_code_t::ATTRIBUTE_NOT_SET, "node '" + a.name + "' (POINTWISE): input IN_" + std::to_string(i) + " is null"});
    a.inputs[ports[i++]] = t;
  }
  auto y = make_output(g, a.name, "OUT_0");
  a.outputs[PointwiseOutput::OUT_0] = y;
  add_node(g, std::make_unique<PointwiseNode>(std::move(a)));
  return y;
}

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::pointwise(TensorPtr a, Pointwise_attributes attr) { return detail::build(state(), {a}, std::move(attr)); }
TensorPtr Graph::pointwise(TensorPtr a, TensorPtr b, Pointwise_attributes attr) {
  return detail::build(state(), {a, b}, std::move(attr));
}
TensorPtr Graph::pointwise(TensorPtr a, TensorPtr b, TensorPtr c, Pointwise_attributes attr) {
  return detail::build(state(), {a, b, c}, std::move(attr));
}

}  // namespace frost::graph
