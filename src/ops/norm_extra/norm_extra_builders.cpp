// Graph:: builders of the batch/instance/group/adaptive normalization family.
#include "ops/common/builder_util.h"
#include "ops/norm_extra/norm_extra_nodes.h"

namespace frost::detail {
namespace {

// Creates the output tensor of `port` on the attributes and returns it.
template <class Attr>
TensorPtr add_output(GraphState& g, Attr& a, ExOut port, std::string_view port_name) {
  return a.outputs[port] = make_output(g, a.name, port_name);
}

// Builds a phased forward (instance, adaptive layer, group norm): [Y, mean, inv_variance].
template <class NodeT, class Attr>
std::array<TensorPtr, 3> phased_forward(GraphState& g, TensorPtr x, TensorPtr scale, TensorPtr bias, Attr a) {
  default_name(g, a, NodeT::kTag);
  a.inputs[ExIn::X] = std::move(x);
  a.inputs[ExIn::SCALE] = std::move(scale);
  a.inputs[ExIn::BIAS] = std::move(bias);
  const TensorPtr y = add_output(g, a, ExOut::Y, "Y");
  TensorPtr mean, inv_variance;
  if (a.forward_phase == NormFwdPhase_t::TRAINING) {
    mean = add_output(g, a, ExOut::MEAN, "MEAN");
    inv_variance = add_output(g, a, ExOut::INV_VARIANCE, "INV_VARIANCE");
  }
  add_node(g, std::make_unique<NodeT>(std::move(a)));
  return {y, mean, inv_variance};
}

// Builds a backward on saved statistics (set on the attributes): [dX, dScale, dBias].
template <class NodeT, class Attr>
std::array<TensorPtr, 3> saved_stats_backward(GraphState& g, TensorPtr dy, TensorPtr x, TensorPtr scale, Attr a) {
  default_name(g, a, NodeT::kTag);
  a.inputs[ExIn::DY] = std::move(dy);
  a.inputs[ExIn::X] = std::move(x);
  a.inputs[ExIn::SCALE] = std::move(scale);
  const TensorPtr dx = add_output(g, a, ExOut::DX, "DX");
  const TensorPtr dscale = add_output(g, a, ExOut::DSCALE, "DSCALE");
  const TensorPtr dbias = add_output(g, a, ExOut::DBIAS, "DBIAS");
  add_node(g, std::make_unique<NodeT>(std::move(a)));
  return {dx, dscale, dbias};
}

// Running-statistics outputs exist when the previous running statistics were set.
template <class Attr>
std::array<TensorPtr, 2> running_outputs(GraphState& g, Attr& a) {
  if (!a.inputs.count(ExIn::PREV_RUNNING_MEAN) || !a.inputs.at(ExIn::PREV_RUNNING_MEAN)) return {};
  return {add_output(g, a, ExOut::NEXT_RUNNING_MEAN, "NEXT_RUNNING_MEAN"),
          add_output(g, a, ExOut::NEXT_RUNNING_VAR, "NEXT_RUNNING_VAR")};
}

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

using detail::ExIn;
using detail::ExOut;

std::array<TensorPtr, 5> Graph::batchnorm(TensorPtr x, TensorPtr scale, TensorPtr bias, Batchnorm_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::BatchnormNode::kTag);
  a.inputs[ExIn::X] = std::move(x);
  a.inputs[ExIn::SCALE] = std::move(scale);
  a.inputs[ExIn::BIAS] = std::move(bias);
  const TensorPtr y = detail::add_output(g, a, ExOut::Y, "Y");
  const TensorPtr mean = detail::add_output(g, a, ExOut::MEAN, "MEAN");
  const TensorPtr inv_variance = detail::add_output(g, a, ExOut::INV_VARIANCE, "INV_VARIANCE");
  const auto [next_mean, next_var] = detail::running_outputs(g, a);
  detail::add_node(g, std::make_unique<detail::BatchnormNode>(std::move(a)));
  return {y, mean, inv_variance, next_mean, next_var};
}

TensorPtr Graph::batchnorm_inference(TensorPtr x, TensorPtr mean, TensorPtr inv_variance, TensorPtr scale,
                                     TensorPtr bias, Batchnorm_inference_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::BatchnormInferenceNode::kTag);
  a.inputs[ExIn::X] = std::move(x);
  a.inputs[ExIn::MEAN] = std::move(mean);
  a.inputs[ExIn::INV_VARIANCE] = std::move(inv_variance);
  a.inputs[ExIn::SCALE] = std::move(scale);
  a.inputs[ExIn::BIAS] = std::move(bias);
  const TensorPtr y = detail::add_output(g, a, ExOut::Y, "Y");
  detail::add_node(g, std::make_unique<detail::BatchnormInferenceNode>(std::move(a)));
  return y;
}

std::array<TensorPtr, 3> Graph::batchnorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                                   Batchnorm_backward_attributes a) {
  return detail::saved_stats_backward<detail::BatchnormBackwardNode>(state(), std::move(dy), std::move(x),
                                                                     std::move(scale), std::move(a));
}

std::array<TensorPtr, 3> Graph::instancenorm(TensorPtr x, TensorPtr scale, TensorPtr bias, Instancenorm_attributes a) {
  return detail::phased_forward<detail::InstancenormNode>(state(), std::move(x), std::move(scale), std::move(bias),
                                                          std::move(a));
}

std::array<TensorPtr, 3> Graph::instancenorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                                      Instancenorm_backward_attributes a) {
  return detail::saved_stats_backward<detail::InstancenormBackwardNode>(state(), std::move(dy), std::move(x),
                                                                        std::move(scale), std::move(a));
}

std::array<TensorPtr, 3> Graph::adalayernorm(TensorPtr x, TensorPtr scale, TensorPtr bias, AdaLayernorm_attributes a) {
  return detail::phased_forward<detail::AdaLayernormNode>(state(), std::move(x), std::move(scale), std::move(bias),
                                                          std::move(a));
}

std::array<TensorPtr, 3> Graph::adalayernorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                                      AdaLayernorm_backward_attributes a) {
  return detail::saved_stats_backward<detail::AdaLayernormBackwardNode>(state(), std::move(dy), std::move(x),
                                                                        std::move(scale), std::move(a));
}

std::array<TensorPtr, 3> Graph::groupnorm(TensorPtr x, TensorPtr scale, TensorPtr bias, Groupnorm_attributes a) {
  return detail::phased_forward<detail::GroupnormNode>(state(), std::move(x), std::move(scale), std::move(bias),
                                                       std::move(a));
}

std::array<TensorPtr, 3> Graph::groupnorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                                   Groupnorm_backward_attributes a) {
  return detail::saved_stats_backward<detail::GroupnormBackwardNode>(state(), std::move(dy), std::move(x),
                                                                     std::move(scale), std::move(a));
}

std::array<TensorPtr, 2> Graph::genstats(TensorPtr x, Genstats_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::GenstatsNode::kTag);
  a.inputs[ExIn::X] = std::move(x);
  const TensorPtr sum = detail::add_output(g, a, ExOut::SUM, "SUM");
  const TensorPtr sq_sum = detail::add_output(g, a, ExOut::SQ_SUM, "SQ_SUM");
  detail::add_node(g, std::make_unique<detail::GenstatsNode>(std::move(a)));
  return {sum, sq_sum};
}

std::array<TensorPtr, 6> Graph::bn_finalize(TensorPtr sum, TensorPtr sq_sum, TensorPtr scale, TensorPtr bias,
                                            TensorPtr epsilon, TensorPtr accum_count, BN_finalize_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::BnFinalizeNode::kTag);
  a.inputs[ExIn::SUM] = std::move(sum);
  a.inputs[ExIn::SQ_SUM] = std::move(sq_sum);
  a.inputs[ExIn::SCALE] = std::move(scale);
  a.inputs[ExIn::BIAS] = std::move(bias);
  a.inputs[ExIn::EPSILON] = std::move(epsilon);
  a.inputs[ExIn::ACCUM_COUNT] = std::move(accum_count);
  const TensorPtr eq_scale = detail::add_output(g, a, ExOut::EQ_SCALE, "EQ_SCALE");
  const TensorPtr eq_bias = detail::add_output(g, a, ExOut::EQ_BIAS, "EQ_BIAS");
  const TensorPtr mean = detail::add_output(g, a, ExOut::MEAN, "MEAN");
  const TensorPtr inv_variance = detail::add_output(g, a, ExOut::INV_VARIANCE, "INV_VARIANCE");
  const auto [next_mean, next_var] = detail::running_outputs(g, a);
  detail::add_node(g, std::make_unique<detail::BnFinalizeNode>(std::move(a)));
  return {eq_scale, eq_bias, mean, inv_variance, next_mean, next_var};
}

std::array<TensorPtr, 5> Graph::dbn_weight(TensorPtr dy, TensorPtr x, TensorPtr mean, TensorPtr inv_variance,
                                           TensorPtr scale, DBN_weight_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::DbnWeightNode::kTag);
  a.inputs[ExIn::DY] = std::move(dy);
  a.inputs[ExIn::X] = std::move(x);
  a.inputs[ExIn::MEAN] = std::move(mean);
  a.inputs[ExIn::INV_VARIANCE] = std::move(inv_variance);
  a.inputs[ExIn::SCALE] = std::move(scale);
  const TensorPtr dscale = detail::add_output(g, a, ExOut::DSCALE, "DSCALE");
  const TensorPtr dbias = detail::add_output(g, a, ExOut::DBIAS, "DBIAS");
  const TensorPtr eq_scale_dy = detail::add_output(g, a, ExOut::EQ_SCALE_DY, "EQ_SCALE_DY");
  const TensorPtr eq_scale_x = detail::add_output(g, a, ExOut::EQ_SCALE_X, "EQ_SCALE_X");
  const TensorPtr eq_bias = detail::add_output(g, a, ExOut::EQ_BIAS, "EQ_BIAS");
  detail::add_node(g, std::make_unique<detail::DbnWeightNode>(std::move(a)));
  return {dscale, dbias, eq_scale_dy, eq_scale_x, eq_bias};
}

}  // namespace frost::graph
