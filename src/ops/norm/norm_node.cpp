#include "ops/norm/norm_node.h"

#include "graph/json_util.h"
#include "ops/norm/norm_shape.h"

namespace frost::detail {
namespace {

template <class Port>
using PortList = std::vector<std::pair<const char*, Port>>;

// Shared by RMSNORM and LAYERNORM; `stats_ports` are the outputs TRAINING writes.
template <class NodeT>
error_t validate_forward(NodeT& node, const PortList<NormOut>& stats_ports) {
  const NormFwdPhase_t phase = node.attr.forward_phase;
  if (phase != NormFwdPhase_t::INFERENCE && phase != NormFwdPhase_t::TRAINING)
    return attr_error(node, "forward_phase", to_string(phase), "set INFERENCE or TRAINING",
                      error_code_t::ATTRIBUTE_NOT_SET);
  const TensorPtr x = node.in(NormIn::X), scale = node.in(NormIn::SCALE), bias = node.in(NormIn::BIAS);
  const TensorPtr epsilon = node.in(NormIn::EPSILON), y = node.out(NormOut::Y);
  FROST_CHECK(require_input(node, "X", x));
  FROST_CHECK(require_input(node, "EPSILON", epsilon));
  FROST_CHECK(require_input(node, "Y", y));
  FROST_CHECK(require_floating(node, "X", x));
  const auto& x_dims = x->get_dim();
  if (scale) FROST_CHECK(check_broadcasts_to_x(node, "SCALE", scale->get_dim(), x_dims));
  if (bias) FROST_CHECK(check_broadcasts_to_x(node, "BIAS", bias->get_dim(), x_dims));
  FROST_CHECK(check_epsilon(node, epsilon));
  const bool training = phase == NormFwdPhase_t::TRAINING;
  std::vector<std::pair<const char*, TensorPtr>> stats;
  for (const auto& [port, e] : stats_ports) {
    const TensorPtr t = node.out(e);
    if (training && !t)
      return attr_error(node, port, "null", "TRAINING outputs the statistics", error_code_t::ATTRIBUTE_NOT_SET);
    if (!training && t) return attr_error(node, port, describe(t), "INFERENCE outputs no statistics");
    if (t) stats.emplace_back(port, t);
  }
  std::vector<int64_t> stats_dims;
  FROST_CHECK(resolve_stats_dims(node, x_dims, stats, stats_dims));
  FROST_CHECK(infer_output(node, "Y", *y, x_dims, x->get_stride()));
  for (const auto& [port, t] : stats)
    FROST_CHECK(infer_output(node, port, *t, stats_dims, x->get_stride(), DataType_t::FLOAT));
  return {};
}

// Shared by RMSNORM_BACKWARD and LAYERNORM_BACKWARD; `stats_ports` are the saved statistics.
template <class NodeT>
error_t validate_backward(NodeT& node, const PortList<NormIn>& stats_ports, bool outputs_dbias) {
  const TensorPtr dy = node.in(NormIn::DY), x = node.in(NormIn::X), scale = node.in(NormIn::SCALE);
  const TensorPtr dx = node.out(NormOut::DX), dscale = node.out(NormOut::DSCALE), dbias = node.out(NormOut::DBIAS);
  FROST_CHECK(require_input(node, "DY", dy));
  FROST_CHECK(require_input(node, "X", x));
  FROST_CHECK(require_input(node, "SCALE", scale));
  FROST_CHECK(require_input(node, "DX", dx));
  FROST_CHECK(require_input(node, "DSCALE", dscale));
  if (outputs_dbias) FROST_CHECK(require_input(node, "DBIAS", dbias));
  if (!outputs_dbias && dbias)
    return attr_error(node, "DBIAS", describe(dbias), "has_dbias_output(true) is needed to output dbias");
  FROST_CHECK(require_floating(node, "DY", dy));
  FROST_CHECK(require_floating(node, "X", x));
  const auto& x_dims = x->get_dim();
  if (dy->get_dim() != x_dims)
    return attr_error(node, "DY.dim", dims_string(dy->get_dim()), "must equal X's dims " + dims_string(x_dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  FROST_CHECK(check_broadcasts_to_x(node, "SCALE", scale->get_dim(), x_dims));
  std::vector<std::pair<const char*, TensorPtr>> stats;
  for (const auto& [port, e] : stats_ports) {
    FROST_CHECK(require_input(node, port, node.in(e)));
    stats.emplace_back(port, node.in(e));
  }
  std::vector<int64_t> stats_dims;
  FROST_CHECK(resolve_stats_dims(node, x_dims, stats, stats_dims));
  FROST_CHECK(infer_output(node, "DX", *dx, x_dims, x->get_stride()));
  FROST_CHECK(infer_output(node, "DSCALE", *dscale, scale->get_dim(), scale->get_stride()));
  if (dbias) FROST_CHECK(infer_output(node, "DBIAS", *dbias, scale->get_dim(), scale->get_stride()));
  return {};
}

const OpRegistrar kRmsnorm(std::string(RmsnormNode::kTag), [] { return std::make_unique<RmsnormNode>(); });
const OpRegistrar kLayernorm(std::string(LayernormNode::kTag), [] { return std::make_unique<LayernormNode>(); });
const OpRegistrar kRmsnormBackward(std::string(RmsnormBackwardNode::kTag),
                                   [] { return std::make_unique<RmsnormBackwardNode>(); });
const OpRegistrar kLayernormBackward(std::string(LayernormBackwardNode::kTag),
                                     [] { return std::make_unique<LayernormBackwardNode>(); });

}  // namespace

error_t RmsnormNode::infer_and_validate(const GraphContext&) {
  return validate_forward(*this, {{"INV_VARIANCE", NormOut::INV_VARIANCE}});
}

error_t LayernormNode::infer_and_validate(const GraphContext&) {
  return validate_forward(*this, {{"MEAN", NormOut::MEAN}, {"INV_VARIANCE", NormOut::INV_VARIANCE}});
}

error_t RmsnormBackwardNode::infer_and_validate(const GraphContext&) {
  return validate_backward(*this, {{"INV_VARIANCE", NormIn::INV_VARIANCE}}, attr.has_dbias);
}

error_t LayernormBackwardNode::infer_and_validate(const GraphContext&) {
  // Epsilon is optional and unused here (the saved inv_variance includes it), but must be a scalar.
  if (const TensorPtr epsilon = in(NormIn::EPSILON)) FROST_CHECK(check_epsilon(*this, epsilon));
  return validate_backward(*this, {{"MEAN", NormIn::MEAN}, {"INV_VARIANCE", NormIn::INV_VARIANCE}}, true);
}

void RmsnormNode::attributes_to_json(json& j) const { j["forward_phase"] = to_string(attr.forward_phase); }
error_t RmsnormNode::attributes_from_json(const json& j) { return read_enum(j, "forward_phase", attr.forward_phase); }

void LayernormNode::attributes_to_json(json& j) const { j["forward_phase"] = to_string(attr.forward_phase); }
error_t LayernormNode::attributes_from_json(const json& j) { return read_enum(j, "forward_phase", attr.forward_phase); }

void RmsnormBackwardNode::attributes_to_json(json& j) const { j["has_dbias"] = attr.has_dbias; }
error_t RmsnormBackwardNode::attributes_from_json(const json& j) { return read_bool(j, "has_dbias", attr.has_dbias); }

void LayernormBackwardNode::attributes_to_json(json&) const {}
error_t LayernormBackwardNode::attributes_from_json(const json&) { return {}; }

}  // namespace frost::detail
