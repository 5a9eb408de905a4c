// Validation, inference and JSON of the batchnorm ops: BATCHNORM, BATCHNORM_INFERENCE,
// BATCHNORM_BACKWARD and the split pieces GENSTATS, BN_FINALIZE, DBN_WEIGHT.
#include "common/dtype_convert.h"
#include "graph/json_util.h"
#include "ops/norm/norm_shape.h"
#include "ops/norm_extra/norm_extra_nodes.h"
#include "ops/norm_extra/norm_extra_shape.h"

namespace frost::detail {
namespace {

template <class NodeT>
OpRegistrar registrar() {
  return OpRegistrar(std::string(NodeT::kTag), [] { return std::make_unique<NodeT>(); });
}

const OpRegistrar kBatchnorm = registrar<BatchnormNode>();
const OpRegistrar kBatchnormInference = registrar<BatchnormInferenceNode>();
const OpRegistrar kBatchnormBackward = registrar<BatchnormBackwardNode>();
const OpRegistrar kGenstats = registrar<GenstatsNode>();
const OpRegistrar kBnFinalize = registrar<BnFinalizeNode>();
const OpRegistrar kDbnWeight = registrar<DbnWeightNode>();

// Each named per-channel input has dims [1, C, 1, ..., 1].
template <class NodeT>
error_t check_per_channel(const NodeT& node, const std::vector<int64_t>& ch,
                          std::initializer_list<std::pair<const char*, ExIn>> ports) {
  for (const auto& [port, e] : ports) FROST_CHECK(check_dims(node, port, node.in(e), ch));
  return {};
}

// Fills per-channel outputs: dims `ch`, strides ordered like `like`, FP32 unless the user chose.
template <class NodeT>
error_t infer_per_channel(NodeT& node, const std::vector<int64_t>& ch, const std::vector<int64_t>& like,
                          std::initializer_list<std::pair<const char*, ExOut>> ports) {
  for (const auto& [port, e] : ports)
    if (const TensorPtr t = node.out(e)) FROST_CHECK(infer_output(node, port, *t, ch, like, DataType_t::FLOAT));
  return {};
}

// The three running-statistics inputs and the two outputs, all or none; the inputs are per channel.
template <class NodeT>
error_t check_running_stats(const NodeT& node, const std::vector<int64_t>& ch, bool& present) {
  FROST_CHECK(check_running_stats_complete(node,
                                           {{"PREV_RUNNING_MEAN", node.in(ExIn::PREV_RUNNING_MEAN)},
                                            {"PREV_RUNNING_VAR", node.in(ExIn::PREV_RUNNING_VAR)},
                                            {"MOMENTUM", node.in(ExIn::MOMENTUM)},
                                            {"NEXT_RUNNING_MEAN", node.out(ExOut::NEXT_RUNNING_MEAN)},
                                            {"NEXT_RUNNING_VAR", node.out(ExOut::NEXT_RUNNING_VAR)}},
                                           present));
  if (!present) return {};
  FROST_CHECK(check_one_element(node, "MOMENTUM", node.in(ExIn::MOMENTUM)));
  return check_per_channel(
      node, ch, {{"PREV_RUNNING_MEAN", ExIn::PREV_RUNNING_MEAN}, {"PREV_RUNNING_VAR", ExIn::PREV_RUNNING_VAR}});
}

// DY has X's dims; both are floating-point [N, C, ...].
template <class NodeT>
error_t check_dy_and_x(const NodeT& node) {
  const TensorPtr x = node.in(ExIn::X), dy = node.in(ExIn::DY);
  FROST_CHECK(check_nc_input(node, x));
  FROST_CHECK(require_floating(node, "DY", dy));
  return check_dims(node, "DY", dy, x->get_dim());
}

}  // namespace

error_t BatchnormNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"X", "SCALE", "BIAS", "EPSILON", "Y", "MEAN", "INV_VARIANCE"}));
  const TensorPtr x = in(ExIn::X);
  FROST_CHECK(check_nc_input(*this, x));
  const std::vector<int64_t> ch = channel_dims(x->get_dim());
  FROST_CHECK(check_per_channel(*this, ch, {{"SCALE", ExIn::SCALE}, {"BIAS", ExIn::BIAS}}));
  FROST_CHECK(check_one_element(*this, "EPSILON", in(ExIn::EPSILON)));
  bool running = false;
  FROST_CHECK(check_running_stats(*this, ch, running));
  // The unbiased variance of the running update divides by M - 1.
  const int64_t per_channel = x->get_volume() / x->get_dim()[1];
  if (running && per_channel < 2)
    return attr_error(*this, "X.dim", dims_string(x->get_dim()),
                      "the running variance needs at least 2 values per channel (N * spatial)");
  FROST_CHECK(infer_output(*this, "Y", *out(ExOut::Y), x->get_dim(), x->get_stride()));
  return infer_per_channel(*this, ch, x->get_stride(),
                           {{"MEAN", ExOut::MEAN},
                            {"INV_VARIANCE", ExOut::INV_VARIANCE},
                            {"NEXT_RUNNING_MEAN", ExOut::NEXT_RUNNING_MEAN},
                            {"NEXT_RUNNING_VAR", ExOut::NEXT_RUNNING_VAR}});
}

error_t BatchnormInferenceNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"X", "MEAN", "INV_VARIANCE", "SCALE", "BIAS", "Y"}));
  const TensorPtr x = in(ExIn::X);
  FROST_CHECK(check_nc_input(*this, x));
  FROST_CHECK(check_per_channel(
      *this, channel_dims(x->get_dim()),
      {{"MEAN", ExIn::MEAN}, {"INV_VARIANCE", ExIn::INV_VARIANCE}, {"SCALE", ExIn::SCALE}, {"BIAS", ExIn::BIAS}}));
  return infer_output(*this, "Y", *out(ExOut::Y), x->get_dim(), x->get_stride());
}

error_t BatchnormBackwardNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"DY", "X", "SCALE", "MEAN", "INV_VARIANCE", "DX", "DSCALE", "DBIAS"}));
  FROST_CHECK(check_dy_and_x(*this));
  const TensorPtr x = in(ExIn::X);
  const std::vector<int64_t> ch = channel_dims(x->get_dim());
  FROST_CHECK(check_per_channel(*this, ch,
                                {{"SCALE", ExIn::SCALE}, {"MEAN", ExIn::MEAN}, {"INV_VARIANCE", ExIn::INV_VARIANCE}}));
  FROST_CHECK(infer_output(*this, "DX", *out(ExOut::DX), x->get_dim(), x->get_stride()));
  FROST_CHECK(infer_output(*this, "DSCALE", *out(ExOut::DSCALE), ch, in(ExIn::SCALE)->get_stride()));
  return infer_output(*this, "DBIAS", *out(ExOut::DBIAS), ch, in(ExIn::SCALE)->get_stride());
}

error_t GenstatsNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"X", "SUM", "SQ_SUM"}));
  const TensorPtr x = in(ExIn::X);
  FROST_CHECK(check_nc_input(*this, x));
  return infer_per_channel(*this, channel_dims(x->get_dim()), x->get_stride(),
                           {{"SUM", ExOut::SUM}, {"SQ_SUM", ExOut::SQ_SUM}});
}

error_t BnFinalizeNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"SUM", "SQ_SUM", "SCALE", "BIAS", "EPSILON", "ACCUM_COUNT", "EQ_SCALE", "EQ_BIAS",
                                    "MEAN", "INV_VARIANCE"}));
  const TensorPtr sum = in(ExIn::SUM);
  const std::vector<int64_t>& ch = sum->get_dim();
  // The sums fix the channel count; they must have the per-channel shape [1, C, 1, ..., 1].
  std::vector<int64_t> per_channel_shape = ch;
  if (ch.size() >= 2) per_channel_shape = channel_dims(ch);
  if (ch.size() < 2 || per_channel_shape != ch)
    return attr_error(*this, "SUM.dim", dims_string(ch), "the sums are per channel: [1, C, 1, ..., 1]",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (!is_floating(sum->get_data_type()))
    return attr_error(*this, "SUM.data_type", to_string(sum->get_data_type()), "the sums are floating-point");
  FROST_CHECK(check_per_channel(*this, ch, {{"SQ_SUM", ExIn::SQ_SUM}, {"SCALE", ExIn::SCALE}, {"BIAS", ExIn::BIAS}}));
  FROST_CHECK(check_one_element(*this, "EPSILON", in(ExIn::EPSILON)));
  FROST_CHECK(check_one_element(*this, "ACCUM_COUNT", in(ExIn::ACCUM_COUNT)));
  bool running = false;
  FROST_CHECK(check_running_stats(*this, ch, running));
  return infer_per_channel(*this, ch, sum->get_stride(),
                           {{"EQ_SCALE", ExOut::EQ_SCALE},
                            {"EQ_BIAS", ExOut::EQ_BIAS},
                            {"MEAN", ExOut::MEAN},
                            {"INV_VARIANCE", ExOut::INV_VARIANCE},
                            {"NEXT_RUNNING_MEAN", ExOut::NEXT_RUNNING_MEAN},
                            {"NEXT_RUNNING_VAR", ExOut::NEXT_RUNNING_VAR}});
}

error_t DbnWeightNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(
      *this, {"DY", "X", "SCALE", "MEAN", "INV_VARIANCE", "DSCALE", "DBIAS", "EQ_SCALE_DY", "EQ_SCALE_X", "EQ_BIAS"}));
  FROST_CHECK(check_dy_and_x(*this));
  const TensorPtr x = in(ExIn::X);
  const std::vector<int64_t> ch = channel_dims(x->get_dim());
  FROST_CHECK(check_per_channel(*this, ch,
                                {{"SCALE", ExIn::SCALE}, {"MEAN", ExIn::MEAN}, {"INV_VARIANCE", ExIn::INV_VARIANCE}}));
  return infer_per_channel(*this, ch, x->get_stride(),
                           {{"DSCALE", ExOut::DSCALE},
                            {"DBIAS", ExOut::DBIAS},
                            {"EQ_SCALE_DY", ExOut::EQ_SCALE_DY},
                            {"EQ_SCALE_X", ExOut::EQ_SCALE_X},
                            {"EQ_BIAS", ExOut::EQ_BIAS}});
}

// No attributes beyond the ports: numerics come in through tensors (epsilon, momentum, counts).
void BatchnormNode::attributes_to_json(json&) const {}
error_t BatchnormNode::attributes_from_json(const json&) { return {}; }
void BatchnormInferenceNode::attributes_to_json(json&) const {}
error_t BatchnormInferenceNode::attributes_from_json(const json&) { return {}; }
void BatchnormBackwardNode::attributes_to_json(json&) const {}
error_t BatchnormBackwardNode::attributes_from_json(const json&) { return {}; }
void GenstatsNode::attributes_to_json(json&) const {}
error_t GenstatsNode::attributes_from_json(const json&) { return {}; }
void BnFinalizeNode::attributes_to_json(json&) const {}
error_t BnFinalizeNode::attributes_from_json(const json&) { return {}; }
void DbnWeightNode::attributes_to_json(json&) const {}
error_t DbnWeightNode::attributes_from_json(const json&) { return {}; }

}  // namespace frost::detail
