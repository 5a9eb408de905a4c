#include "ops/swiglu_mlp/swiglu_mlp_node.h"

#include "common/dtype_convert.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"

namespace frost::detail {

using graph::SwigluMlpInput;
using graph::SwigluMlpOutput;

namespace {

bool is_value_type(DataType_t t) {
  return t == DataType_t::FLOAT || t == DataType_t::HALF || t == DataType_t::BFLOAT16;
}

// A rank-2 input of the expected dims and X's data type.
error_t check_matrix(const Node& n, const char* port, const TensorPtr& t, const std::vector<int64_t>& dims,
                     DataType_t dt) {
  if (t->get_dim() != dims)
    return attr_error(n, std::string(port) + ".dim", dims_string(t->get_dim()), "expected " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (t->get_stride().size() != dims.size())
    return attr_error(n, std::string(port) + ".stride", dims_string(t->get_stride()), "must have rank 2");
  if (t->get_data_type() != dt)
    return attr_error(n, std::string(port) + ".data_type", to_string(t->get_data_type()),
                      "must be X's " + std::string(to_string(dt)));
  return {};
}

const OpRegistrar kRegister(std::string(SwigluMlpNode::kTag), [] { return std::make_unique<SwigluMlpNode>(); });

}  // namespace

error_t SwigluMlpNode::validate_inputs(SwigluMlpExtents& ext) const {
  using I = SwigluMlpInput;
  const TensorPtr x = in(I::X), gate = in(I::W_GATE), up = in(I::W_UP), gate_up = in(I::W_GATE_UP),
                  down = in(I::W_DOWN);
  if (!x) return attr_error(*this, "X", "null", "this port is required", error_code_t::ATTRIBUTE_NOT_SET);
  if (!down) return attr_error(*this, "W_DOWN", "null", "this port is required", error_code_t::ATTRIBUTE_NOT_SET);
  const auto& xd = x->get_dim();
  if (xd.size() != 2 || xd[0] < 1 || xd[1] < 1)
    return attr_error(*this, "X.dim", dims_string(xd), "must be [T, H] with T, H >= 1",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (x->get_stride().size() != 2)
    return attr_error(*this, "X.stride", dims_string(x->get_stride()), "must have rank 2");
  const DataType_t dt = x->get_data_type();
  if (!is_value_type(dt)) return attr_error(*this, "X.data_type", to_string(dt), "must be FLOAT, HALF or BFLOAT16");
  ext.t = xd[0];
  ext.h = xd[1];
  if (gate_up) {
    if (gate || up)
      return attr_error(*this, gate ? "W_GATE" : "W_UP", describe(gate ? gate : up),
                        "W_GATE_UP already holds the gate and up weights; bind either W_GATE_UP or W_GATE and W_UP");
    const auto& gd = gate_up->get_dim();
    if (gd.size() != 2 || gd[0] != ext.h || gd[1] < 2 * kSwigluMlpBlock || gd[1] % (2 * kSwigluMlpBlock) != 0)
      return attr_error(*this, "W_GATE_UP.dim", dims_string(gd),
                        "must be [H = " + std::to_string(ext.h) +
                            ", 2F] with 2F a positive multiple of 16 (gate/up blocks of 8 columns)",
                        error_code_t::SHAPE_DEDUCTION_FAILED);
    ext.f = gd[1] / 2;
    FROST_CHECK(check_matrix(*this, "W_GATE_UP", gate_up, gd, dt));
  } else {
    if (!gate || !up)
      return attr_error(*this, gate ? "W_UP" : "W_GATE", "null", "bind W_GATE and W_UP, or W_GATE_UP",
                        error_code_t::ATTRIBUTE_NOT_SET);
    const auto& gd = gate->get_dim();
    if (gd.size() != 2 || gd[0] != ext.h || gd[1] < 1)
      return attr_error(*this, "W_GATE.dim", dims_string(gd), "must be [H = " + std::to_string(ext.h) + ", F]",
                        error_code_t::SHAPE_DEDUCTION_FAILED);
    ext.f = gd[1];
    FROST_CHECK(check_matrix(*this, "W_GATE", gate, gd, dt));
    FROST_CHECK(check_matrix(*this, "W_UP", up, gd, dt));
  }
  return check_matrix(*this, "W_DOWN", down, {ext.f, ext.h}, dt);
}

error_t SwigluMlpNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"Y"}));
  SwigluMlpExtents ext;
  FROST_CHECK(validate_inputs(ext));
  auto& y = *out(SwigluMlpOutput::Y);
  const std::vector<int64_t> dims{ext.t, ext.h};
  if (y.get_dim().empty()) y.set_dim(dims);
  if (y.get_dim() != dims)
    return attr_error(*this, "Y.dim", dims_string(y.get_dim()), "expected " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (y.get_stride().empty()) y.set_stride(packed_strides(dims));
  if (y.get_stride().size() != 2) return attr_error(*this, "Y.stride", dims_string(y.get_stride()), "must have rank 2");
  if (y.get_data_type() == DataType_t::NOT_SET) {
    const DataType_t context_type = y.get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
    y.set_data_type(context_type != DataType_t::NOT_SET ? context_type : in(SwigluMlpInput::X)->get_data_type());
  }
  if (!is_floating(y.get_data_type()))
    return attr_error(*this, "Y.data_type", to_string(y.get_data_type()), "must be a floating type");
  return {};
}

}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::swiglu_mlp(TensorPtr x, TensorPtr w_gate, TensorPtr w_up, TensorPtr w_down,
                            Swiglu_mlp_attributes attr) {
  using detail::SwigluMlpNode;
  auto& g = state();
  detail::default_name(g, attr, SwigluMlpNode::kTag);
  detail::require_inputs(g, attr.name, SwigluMlpNode::kTag,
                         {{"X", &x}, {"W_GATE", &w_gate}, {"W_UP", &w_up}, {"W_DOWN", &w_down}});
  attr.inputs[SwigluMlpInput::X] = std::move(x);
  attr.inputs[SwigluMlpInput::W_GATE] = std::move(w_gate);
  attr.inputs[SwigluMlpInput::W_UP] = std::move(w_up);
  attr.inputs[SwigluMlpInput::W_DOWN] = std::move(w_down);
  const TensorPtr y = attr.outputs[SwigluMlpOutput::Y] = detail::make_output(g, attr.name, "Y");
  detail::add_node(g, std::make_unique<SwigluMlpNode>(std::move(attr)));
  return y;
}

TensorPtr Graph::swiglu_mlp(TensorPtr x, TensorPtr w_gate_up, TensorPtr w_down, Swiglu_mlp_attributes attr) {
  using detail::SwigluMlpNode;
  auto& g = state();
  detail::default_name(g, attr, SwigluMlpNode::kTag);
  detail::require_inputs(g, attr.name, SwigluMlpNode::kTag,
                         {{"X", &x}, {"W_GATE_UP", &w_gate_up}, {"W_DOWN", &w_down}});
  attr.inputs[SwigluMlpInput::X] = std::move(x);
  attr.inputs[SwigluMlpInput::W_GATE_UP] = std::move(w_gate_up);
  attr.inputs[SwigluMlpInput::W_DOWN] = std::move(w_down);
  const TensorPtr y = attr.outputs[SwigluMlpOutput::Y] = detail::make_output(g, attr.name, "Y");
  detail::add_node(g, std::make_unique<SwigluMlpNode>(std::move(attr)));
  return y;
}

}  // namespace frost::graph
