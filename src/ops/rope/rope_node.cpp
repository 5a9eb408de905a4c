#include "ops/rope/rope_node.h"

#include "common/dtype_convert.h"
#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"

namespace frost::detail {

namespace {

// Shared by ROPE (input X, output Y) and ROPE_BACKWARD (input DY, output DX).
template <class NodeT>
error_t validate_rope(NodeT& n, const char* in_port, RopeIn in_e, const char* out_port, RopeOut out_e) {
  FROST_CHECK(require_ports(n, {out_port, in_port, "COS", "SIN"}));
  const TensorPtr x = n.in(in_e), cos = n.in(RopeIn::COS), sin = n.in(RopeIn::SIN);
  const std::string xp(in_port);
  if (!is_floating(x->get_data_type()))
    return attr_error(n, xp + ".data_type", to_string(x->get_data_type()), "rope takes floating-point data");
  const auto& xd = x->get_dim();
  if (xd.size() != 4)
    return attr_error(n, xp + ".dim", dims_string(xd), "must be [b, h, s, d]", error_code_t::SHAPE_DEDUCTION_FAILED);
  const int64_t d = xd[3], s = xd[2];
  const int64_t r = n.attr.rotary_dim.value_or(d);
  if (r <= 0 || r > d || r % 2 != 0)
    return attr_error(n, "rotary_dim", std::to_string(r), "must be even and in [2, d = " + std::to_string(d) + "]");
  const std::vector<int64_t> table2 = {s, r / 2}, table4 = {1, 1, s, r / 2};
  for (const auto& [port, t] : {std::pair{"COS", cos}, std::pair{"SIN", sin}}) {
    if (t->get_dim() != table2 && t->get_dim() != table4)
      return attr_error(n, std::string(port) + ".dim", dims_string(t->get_dim()),
                        "expected " + dims_string(table2) + " or " + dims_string(table4),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
    if (!is_floating(t->get_data_type()))
      return attr_error(n, std::string(port) + ".data_type", to_string(t->get_data_type()), "must be floating point");
  }
  auto& y = *n.out(out_e);
  if (y.get_dim().empty()) {
    y.set_dim(xd);
  } else if (y.get_dim() != xd) {
    return attr_error(n, std::string(out_port) + ".dim", dims_string(y.get_dim()), "expected " + dims_string(xd),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  if (y.get_stride().empty()) y.set_stride(strides_like(xd, x->get_stride()));
  return {};
}

template <class A>
void rope_attributes_to_json(const A& a, json& j) {
  j["interleaved"] = a.interleaved;
  write_opt(j, "rotary_dim", a.rotary_dim);
}

template <class A>
error_t rope_attributes_from_json(A& a, const json& j) {
  FROST_CHECK(read_bool(j, "interleaved", a.interleaved));
  return read_opt_int(j, "rotary_dim", a.rotary_dim);
}

const OpRegistrar kRope(std::string(RopeNode::kTag), [] { return std::make_unique<RopeNode>(); });
const OpRegistrar kRopeBackward(std::string(RopeBackwardNode::kTag),
                                [] { return std::make_unique<RopeBackwardNode>(); });

}  // namespace

error_t RopeNode::infer_and_validate(const GraphContext&) {
  return validate_rope(*this, "X", RopeIn::X, "Y", RopeOut::Y);
}
error_t RopeBackwardNode::infer_and_validate(const GraphContext&) {
  return validate_rope(*this, "DY", RopeIn::DY, "DX", RopeOut::DX);
}

void RopeNode::attributes_to_json(json& j) const { rope_attributes_to_json(attr, j); }
error_t RopeNode::attributes_from_json(const json& j) { return rope_attributes_from_json(attr, j); }
void RopeBackwardNode::attributes_to_json(json& j) const { rope_attributes_to_json(attr, j); }
error_t RopeBackwardNode::attributes_from_json(const json& j) { return rope_attributes_from_json(attr, j); }

}  // namespace frost::detail

namespace frost::graph {

namespace {
template <class NodeT, class A>
TensorPtr build_rope(detail::GraphState& g, TensorPtr x, RopeInput in_port, const char* in_name, TensorPtr cos,
                     TensorPtr sin, A a, RopeOutput out_port, const char* out_name) {
  detail::default_name(g, a, NodeT::kTag);
  detail::require_inputs(g, a.name, NodeT::kTag, {{in_name, &x}, {"COS", &cos}, {"SIN", &sin}});
  a.inputs[in_port] = std::move(x);
  a.inputs[RopeInput::COS] = std::move(cos);
  a.inputs[RopeInput::SIN] = std::move(sin);
  const TensorPtr y = a.outputs[out_port] = detail::make_output(g, a.name, out_name);
  detail::add_node(g, std::make_unique<NodeT>(std::move(a)));
  return y;
}
}  // namespace

TensorPtr Graph::rope(TensorPtr x, TensorPtr cos, TensorPtr sin, Rope_attributes a) {
  return build_rope<detail::RopeNode>(state(), std::move(x), RopeInput::X, "X", std::move(cos), std::move(sin),
                                      std::move(a), RopeOutput::Y, "Y");
}

TensorPtr Graph::rope_backward(TensorPtr dy, TensorPtr cos, TensorPtr sin, Rope_backward_attributes a) {
  return build_rope<detail::RopeBackwardNode>(state(), std::move(dy), RopeInput::DY, "DY", std::move(cos),
                                              std::move(sin), std::move(a), RopeOutput::DX, "DX");
}

}  // namespace frost::graph
