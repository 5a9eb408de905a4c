// Validation, inference and JSON of the normalizations with a forward phase and per-sample statistics:
// INSTANCE_NORM, ADA_LAYER_NORM, GROUP_NORM and their backward passes.
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

const OpRegistrar kInstancenorm = registrar<InstancenormNode>();
const OpRegistrar kInstancenormBackward = registrar<InstancenormBackwardNode>();
const OpRegistrar kAdaLayernorm = registrar<AdaLayernormNode>();
const OpRegistrar kAdaLayernormBackward = registrar<AdaLayernormBackwardNode>();
const OpRegistrar kGroupnorm = registrar<GroupnormNode>();
const OpRegistrar kGroupnormBackward = registrar<GroupnormBackwardNode>();

// [N, C, 1, ..., 1]: one statistic per (n, c).
std::vector<int64_t> instance_stats_dims(const std::vector<int64_t>& x_dims) {
  std::vector<int64_t> d = channel_dims(x_dims);
  d[0] = x_dims[0];
  return d;
}

// [N, groups, 1, ..., 1]: one statistic per (n, group).
std::vector<int64_t> group_stats_dims(const std::vector<int64_t>& x_dims, int64_t groups) {
  std::vector<int64_t> d = instance_stats_dims(x_dims);
  d[1] = groups;
  return d;
}

// X's dims with 1 on every axis after the first where scale spans X (extent not 1): those are normalized.
std::vector<int64_t> ada_stats_dims(const std::vector<int64_t>& x_dims, const std::vector<int64_t>& scale_dims) {
  std::vector<int64_t> d = x_dims;
  for (size_t k = 1; k < d.size(); ++k)
    if (scale_dims[k] != 1) d[k] = 1;
  return d;
}

error_t check_group_count(const Node& n, const char* attr, int64_t groups, int64_t channels) {
  if (groups > 0 && channels % groups == 0) return {};
  return attr_error(n, attr, std::to_string(groups),
                    "must be positive and divide the channel count " + std::to_string(channels),
                    groups == 0 ? error_code_t::ATTRIBUTE_NOT_SET : error_code_t::INVALID_VALUE);
}

// Which statistics and affine shapes an op uses; filled from X (and SCALE, for AdaLN).
struct Layout {
  std::vector<int64_t> stats;  // the statistics' dims
  bool per_channel_affine;     // scale and bias [1, C, 1, ...]; otherwise anything that broadcasts to X
  bool stats_user_choice;      // the user may choose other statistics dims (AdaLN, as LayerNorm)
};

template <class NodeT>
error_t check_affine(const NodeT& node, const Layout& layout, const char* port, const TensorPtr& t) {
  const auto& x_dims = node.in(ExIn::X)->get_dim();
  if (layout.per_channel_affine) return check_dims(node, port, t, channel_dims(x_dims));
  return check_broadcasts_to_x(node, port, t->get_dim(), x_dims);
}

// The statistics dims of `stats`: the layout's, or with stats_user_choice the ones the user set.
template <class NodeT>
error_t resolve_layout_stats(const NodeT& node, const Layout& layout,
                             const std::vector<std::pair<const char*, TensorPtr>>& stats, std::vector<int64_t>& dims) {
  const auto& x_dims = node.in(ExIn::X)->get_dim();
  bool any_set = false;
  for (const auto& [port, t] : stats) any_set = any_set || (t && !t->get_dim().empty());
  if (layout.stats_user_choice && any_set) return resolve_stats_dims(node, x_dims, stats, dims);
  dims = layout.stats;
  for (const auto& [port, t] : stats)
    if (t && !t->get_dim().empty()) FROST_CHECK(check_dims(node, port, t, dims));
  return {};
}

template <class NodeT>
error_t validate_forward(NodeT& node, const Layout& layout) {
  const NormFwdPhase_t phase = node.attr.forward_phase;
  if (phase != NormFwdPhase_t::INFERENCE && phase != NormFwdPhase_t::TRAINING)
    return attr_error(node, "forward_phase", to_string(phase), "set INFERENCE or TRAINING",
                      error_code_t::ATTRIBUTE_NOT_SET);
  const TensorPtr x = node.in(ExIn::X), bias = node.in(ExIn::BIAS);
  FROST_CHECK(check_affine(node, layout, "SCALE", node.in(ExIn::SCALE)));
  if (bias) FROST_CHECK(check_affine(node, layout, "BIAS", bias));
  FROST_CHECK(check_one_element(node, "EPSILON", node.in(ExIn::EPSILON)));
  const bool training = phase == NormFwdPhase_t::TRAINING;
  std::vector<std::pair<const char*, TensorPtr>> stats;
  for (const auto& [port, e] : {std::pair{"MEAN", ExOut::MEAN}, std::pair{"INV_VARIANCE", ExOut::INV_VARIANCE}}) {
    const TensorPtr t = node.out(e);
    if (training && !t)
      return attr_error(node, port, "null", "TRAINING outputs the statistics", error_code_t::ATTRIBUTE_NOT_SET);
    if (!training && t) return attr_error(node, port, describe(t), "INFERENCE outputs no statistics");
    if (t) stats.emplace_back(port, t);
  }
  std::vector<int64_t> stats_dims;
  FROST_CHECK(resolve_layout_stats(node, layout, stats, stats_dims));
  FROST_CHECK(infer_output(node, "Y", *node.out(ExOut::Y), x->get_dim(), x->get_stride()));
  for (const auto& [port, t] : stats)
    FROST_CHECK(infer_output(node, port, *t, stats_dims, x->get_stride(), DataType_t::FLOAT));
  return {};
}

template <class NodeT>
error_t validate_backward(NodeT& node, const Layout& layout) {
  const TensorPtr x = node.in(ExIn::X), dy = node.in(ExIn::DY), scale = node.in(ExIn::SCALE);
  FROST_CHECK(require_floating(node, "DY", dy));
  FROST_CHECK(check_dims(node, "DY", dy, x->get_dim()));
  FROST_CHECK(check_affine(node, layout, "SCALE", scale));
  std::vector<int64_t> stats_dims;
  FROST_CHECK(resolve_layout_stats(
      node, layout, {{"MEAN", node.in(ExIn::MEAN)}, {"INV_VARIANCE", node.in(ExIn::INV_VARIANCE)}}, stats_dims));
  FROST_CHECK(infer_output(node, "DX", *node.out(ExOut::DX), x->get_dim(), x->get_stride()));
  FROST_CHECK(infer_output(node, "DSCALE", *node.out(ExOut::DSCALE), scale->get_dim(), scale->get_stride()));
  return infer_output(node, "DBIAS", *node.out(ExOut::DBIAS), scale->get_dim(), scale->get_stride());
}

}  // namespace

error_t InstancenormNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"X", "SCALE", "EPSILON", "Y"}));
  FROST_CHECK(check_nc_input(*this, in(ExIn::X)));
  return validate_forward(*this, {instance_stats_dims(in(ExIn::X)->get_dim()), true, false});
}

error_t InstancenormBackwardNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"DY", "X", "SCALE", "MEAN", "INV_VARIANCE", "DX", "DSCALE", "DBIAS"}));
  FROST_CHECK(check_nc_input(*this, in(ExIn::X)));
  return validate_backward(*this, {instance_stats_dims(in(ExIn::X)->get_dim()), true, false});
}

error_t AdaLayernormNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"X", "SCALE", "EPSILON", "Y"}));
  const TensorPtr x = in(ExIn::X), scale = in(ExIn::SCALE);
  FROST_CHECK(check_nc_input(*this, x));
  FROST_CHECK(check_broadcasts_to_x(*this, "SCALE", scale->get_dim(), x->get_dim()));
  return validate_forward(*this, {ada_stats_dims(x->get_dim(), scale->get_dim()), false, true});
}

error_t AdaLayernormBackwardNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"DY", "X", "SCALE", "MEAN", "INV_VARIANCE", "DX", "DSCALE", "DBIAS"}));
  const TensorPtr x = in(ExIn::X), scale = in(ExIn::SCALE);
  FROST_CHECK(check_nc_input(*this, x));
  FROST_CHECK(check_broadcasts_to_x(*this, "SCALE", scale->get_dim(), x->get_dim()));
  return validate_backward(*this, {ada_stats_dims(x->get_dim(), scale->get_dim()), false, true});
}

error_t GroupnormNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"X", "SCALE", "EPSILON", "Y"}));
  const TensorPtr x = in(ExIn::X);
  FROST_CHECK(check_nc_input(*this, x));
  FROST_CHECK(check_group_count(*this, "group_count", attr.group_count, x->get_dim()[1]));
  return validate_forward(*this, {group_stats_dims(x->get_dim(), attr.group_count), true, false});
}

error_t GroupnormBackwardNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"DY", "X", "SCALE", "MEAN", "INV_VARIANCE", "DX", "DSCALE", "DBIAS"}));
  const TensorPtr x = in(ExIn::X), mean = in(ExIn::MEAN);
  FROST_CHECK(check_nc_input(*this, x));
  // The saved statistics [N, groups, 1, ...] carry the group count.
  const auto& mean_dims = mean->get_dim();
  if (mean_dims.size() != x->get_dim().size())
    return attr_error(*this, "MEAN.dim", dims_string(mean_dims), "the saved statistics are [N, groups, 1, ..., 1]",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  const int64_t groups = mean_dims[1];
  FROST_CHECK(check_group_count(*this, "MEAN.dim[1]", groups, x->get_dim()[1]));
  return validate_backward(*this, {group_stats_dims(x->get_dim(), groups), true, false});
}

void InstancenormNode::attributes_to_json(json& j) const { j["forward_phase"] = to_string(attr.forward_phase); }
error_t InstancenormNode::attributes_from_json(const json& j) {
  return read_enum(j, "forward_phase", attr.forward_phase);
}
void AdaLayernormNode::attributes_to_json(json& j) const { j["forward_phase"] = to_string(attr.forward_phase); }
error_t AdaLayernormNode::attributes_from_json(const json& j) {
  return read_enum(j, "forward_phase", attr.forward_phase);
}
void GroupnormNode::attributes_to_json(json& j) const {
  j["forward_phase"] = to_string(attr.forward_phase);
  j["group_count"] = attr.group_count;
}
error_t GroupnormNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_enum(j, "forward_phase", attr.forward_phase));
  return read_int(j, "group_count", attr.group_count, true);
}
void InstancenormBackwardNode::attributes_to_json(json&) const {}
error_t InstancenormBackwardNode::attributes_from_json(const json&) { return {}; }
void AdaLayernormBackwardNode::attributes_to_json(json&) const {}
error_t AdaLayernormBackwardNode::attributes_from_json(const json&) { return {}; }
void GroupnormBackwardNode::attributes_to_json(json&) const {}
error_t GroupnormBackwardNode::attributes_from_json(const json&) { return {}; }

}  // namespace frost::detail
