// Graph:: builders of the normalization family.
#include "ops/common/builder_util.h"
#include "ops/norm/norm_node.h"

namespace frost::graph {

using detail::NormIn;
using detail::NormOut;

std::array<TensorPtr, 2> Graph::rmsnorm(TensorPtr x, TensorPtr scale, Rmsnorm_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::RmsnormNode::kTag);
  a.inputs[NormIn::X] = std::move(x);
  a.inputs[NormIn::SCALE] = std::move(scale);
  const TensorPtr y = a.outputs[NormOut::Y] = detail::make_output(g, a.name, "Y");
  TensorPtr inv_rms;
  if (a.forward_phase == NormFwdPhase_t::TRAINING)
    inv_rms = a.outputs[NormOut::INV_VARIANCE] = detail::make_output(g, a.name, "INV_VARIANCE");
  detail::add_node(g, std::make_unique<detail::RmsnormNode>(std::move(a)));
  return {y, inv_rms};
}

std::array<TensorPtr, 3> Graph::layernorm(TensorPtr x, TensorPtr scale, TensorPtr bias, Layernorm_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::LayernormNode::kTag);
  a.inputs[NormIn::X] = std::move(x);
  a.inputs[NormIn::SCALE] = std::move(scale);
  a.inputs[NormIn::BIAS] = std::move(bias);
  const TensorPtr y = a.outputs[NormOut::Y] = detail::make_output(g, a.name, "Y");
  TensorPtr mean, inv_variance;
  if (a.forward_phase == NormFwdPhase_t::TRAINING) {
    mean = a.outputs[NormOut::MEAN] = detail::make_output(g, a.name, "MEAN");
    inv_variance = a.outputs[NormOut::INV_VARIANCE] = detail::make_output(g, a.name, "INV_VARIANCE");
  }
  detail::add_node(g, std::make_unique<detail::LayernormNode>(std::move(a)));
  return {y, mean, inv_variance};
}

std::array<TensorPtr, 3> Graph::rmsnorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale, TensorPtr inv_rms,
                                                 Rmsnorm_backward_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::RmsnormBackwardNode::kTag);
  a.inputs[NormIn::DY] = std::move(dy);
  a.inputs[NormIn::X] = std::move(x);
  a.inputs[NormIn::SCALE] = std::move(scale);
  a.inputs[NormIn::INV_VARIANCE] = std::move(inv_rms);
  const TensorPtr dx = a.outputs[NormOut::DX] = detail::make_output(g, a.name, "DX");
  const TensorPtr dscale = a.outputs[NormOut::DSCALE] = detail::make_output(g, a.name, "DSCALE");
  TensorPtr dbias;
  if (a.has_dbias) dbias = a.outputs[NormOut::DBIAS] = detail::make_output(g, a.name, "DBIAS");
  detail::add_node(g, std::make_unique<detail::RmsnormBackwardNode>(std::move(a)));
  return {dx, dscale, dbias};
}

std::array<TensorPtr, 3> Graph::layernorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                                   Layernorm_backward_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::LayernormBackwardNode::kTag);
  a.inputs[NormIn::DY] = std::move(dy);
  a.inputs[NormIn::X] = std::move(x);
  a.inputs[NormIn::SCALE] = std::move(scale);
  const TensorPtr dx = a.outputs[NormOut::DX] = detail::make_output(g, a.name, "DX");
  const TensorPtr dscale = a.outputs[NormOut::DSCALE] = detail::make_output(g, a.name, "DSCALE");
  const TensorPtr dbias = a.outputs[NormOut::DBIAS] = detail::make_output(g, a.name, "DBIAS");
  detail::add_node(g, std::make_unique<detail::LayernormBackwardNode>(std::move(a)));
  return {dx, dscale, dbias};
}

}  // namespace frost::graph
