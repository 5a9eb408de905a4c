#include "ops/reduction/reduction_node.h"

#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"

namespace frost::detail {

using graph::UnaryInput;
using graph::UnaryOutput;

error_t ReductionNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"Y"}));
  if (attr.mode == ReductionMode_t::NOT_SET)
    return attr_error(*this, "mode", "NOT_SET", "set a reduction mode", error_code_t::ATTRIBUTE_NOT_SET);
  const TensorPtr x = in(UnaryInput::X);
  if (!x) return attr_error(*this, "X", "null", "reduction needs an input", error_code_t::ATTRIBUTE_NOT_SET);
  auto& y = *out(UnaryOutput::Y);
  const auto& xd = x->get_dim();
  const auto& yd = y.get_dim();
  // Which dims to reduce is the user's choice, told through Y's dims: nothing to infer.
  if (yd.empty())
    return attr_error(*this, "Y.dim", "unset", "set Y's dims (extent 1 on each reduced dim, X's extent elsewhere)",
                      error_code_t::ATTRIBUTE_NOT_SET);
  if (yd.size() != xd.size())
    return attr_error(*this, "Y.dim", dims_string(yd), "must have the rank of X " + dims_string(xd),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  for (size_t i = 0; i < xd.size(); ++i)
    if (yd[i] != 1 && yd[i] != xd[i])
      return attr_error(*this, "Y.dim", dims_string(yd),
                        "dim " + std::to_string(i) + " must be 1 (reduced) or X's extent " + std::to_string(xd[i]),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
  if (y.get_stride().empty()) y.set_stride(strides_like(yd, x->get_stride()));
  return {};
}

void ReductionNode::attributes_to_json(json& j) const {
  j["mode"] = to_string(attr.mode);
  j["is_deterministic"] = attr.is_deterministic;
}

error_t ReductionNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_enum(j, "mode", attr.mode, true));
  return read_bool(j, "is_deterministic", attr.is_deterministic);
}

namespace {
const OpRegistrar kRegister(std::string(ReductionNode::kTag), [] { return std::make_unique<ReductionNode>(); });
}  // namespace

}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::reduction(TensorPtr x, Reduction_attributes attr) {
  auto& g = state();
  detail::default_name(g, attr, detail::ReductionNode::kTag);
  detail::require_inputs(g, attr.name, detail::ReductionNode::kTag, {{"X", &x}});
  attr.inputs[UnaryInput::X] = std::move(x);
  auto y = detail::make_output(g, attr.name, "Y");
  attr.outputs[UnaryOutput::Y] = y;
  detail::add_node(g, std::make_unique<detail::ReductionNode>(std::move(attr)));
  return y;
}

}  // namespace frost::graph
