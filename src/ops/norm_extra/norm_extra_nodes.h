// Nodes of the batch/instance/group/adaptive normalization family and the split batchnorm pieces.
#pragma once

#include "frost/ops/norm_extra.h"
#include "graph/attr_node.h"

namespace frost::detail {

using ExIn = graph::NormExtraInput;
using ExOut = graph::NormExtraOutput;

template <>
struct PortNames<graph::Batchnorm_attributes> {
  static constexpr std::array<std::pair<ExIn, const char*>, 7> inputs{{{ExIn::X, "X"},
                                                                       {ExIn::SCALE, "SCALE"},
                                                                       {ExIn::BIAS, "BIAS"},
                                                                       {ExIn::EPSILON, "EPSILON"},
                                                                       {ExIn::PREV_RUNNING_MEAN, "PREV_RUNNING_MEAN"},
                                                                       {ExIn::PREV_RUNNING_VAR, "PREV_RUNNING_VAR"},
                                                                       {ExIn::MOMENTUM, "MOMENTUM"}}};
  static constexpr std::array<std::pair<ExOut, const char*>, 5> outputs{
      {{ExOut::Y, "Y"},
       {ExOut::MEAN, "MEAN"},
       {ExOut::INV_VARIANCE, "INV_VARIANCE"},
       {ExOut::NEXT_RUNNING_MEAN, "NEXT_RUNNING_MEAN"},
       {ExOut::NEXT_RUNNING_VAR, "NEXT_RUNNING_VAR"}}};
};

template <>
struct PortNames<graph::Batchnorm_inference_attributes> {
  static constexpr std::array<std::pair<ExIn, const char*>, 5> inputs{{{ExIn::X, "X"},
                                                                       {ExIn::MEAN, "MEAN"},
                                                                       {ExIn::INV_VARIANCE, "INV_VARIANCE"},
                                                                       {ExIn::SCALE, "SCALE"},
                                                                       {ExIn::BIAS, "BIAS"}}};
  static constexpr std::array<std::pair<ExOut, const char*>, 1> outputs{{{ExOut::Y, "Y"}}};
};

// Ports shared by every backward of a normalization on saved statistics.
struct SavedStatsBackwardPorts {
  static constexpr std::array<std::pair<ExIn, const char*>, 5> inputs{{{ExIn::DY, "DY"},
                                                                       {ExIn::X, "X"},
                                                                       {ExIn::SCALE, "SCALE"},
                                                                       {ExIn::MEAN, "MEAN"},
                                                                       {ExIn::INV_VARIANCE, "INV_VARIANCE"}}};
  static constexpr std::array<std::pair<ExOut, const char*>, 3> outputs{
      {{ExOut::DX, "DX"}, {ExOut::DSCALE, "DSCALE"}, {ExOut::DBIAS, "DBIAS"}}};
};
template <>
struct PortNames<graph::Batchnorm_backward_attributes> : SavedStatsBackwardPorts {};
template <>
struct PortNames<graph::Instancenorm_backward_attributes> : SavedStatsBackwardPorts {};
template <>
struct PortNames<graph::AdaLayernorm_backward_attributes> : SavedStatsBackwardPorts {};
template <>
struct PortNames<graph::Groupnorm_backward_attributes> : SavedStatsBackwardPorts {};

// Ports shared by the phased forwards (instance, adaptive layer and group norm).
struct PhasedForwardPorts {
  static constexpr std::array<std::pair<ExIn, const char*>, 4> inputs{
      {{ExIn::X, "X"}, {ExIn::SCALE, "SCALE"}, {ExIn::BIAS, "BIAS"}, {ExIn::EPSILON, "EPSILON"}}};
  static constexpr std::array<std::pair<ExOut, const char*>, 3> outputs{
      {{ExOut::Y, "Y"}, {ExOut::MEAN, "MEAN"}, {ExOut::INV_VARIANCE, "INV_VARIANCE"}}};
};
template <>
struct PortNames<graph::Instancenorm_attributes> : PhasedForwardPorts {};
template <>
struct PortNames<graph::AdaLayernorm_attributes> : PhasedForwardPorts {};
template <>
struct PortNames<graph::Groupnorm_attributes> : PhasedForwardPorts {};

template <>
struct PortNames<graph::Genstats_attributes> {
  static constexpr std::array<std::pair<ExIn, const char*>, 1> inputs{{{ExIn::X, "X"}}};
  static constexpr std::array<std::pair<ExOut, const char*>, 2> outputs{
      {{ExOut::SUM, "SUM"}, {ExOut::SQ_SUM, "SQ_SUM"}}};
};

template <>
struct PortNames<graph::BN_finalize_attributes> {
  static constexpr std::array<std::pair<ExIn, const char*>, 9> inputs{{{ExIn::SUM, "SUM"},
                                                                       {ExIn::SQ_SUM, "SQ_SUM"},
                                                                       {ExIn::SCALE, "SCALE"},
                                                                       {ExIn::BIAS, "BIAS"},
                                                                       {ExIn::EPSILON, "EPSILON"},
                                                                       {ExIn::ACCUM_COUNT, "ACCUM_COUNT"},
                                                                       {ExIn::PREV_RUNNING_MEAN, "PREV_RUNNING_MEAN"},
                                                                       {ExIn::PREV_RUNNING_VAR, "PREV_RUNNING_VAR"},
                                                                       {ExIn::MOMENTUM, "MOMENTUM"}}};
  static constexpr std::array<std::pair<ExOut, const char*>, 6> outputs{
      {{ExOut::EQ_SCALE, "EQ_SCALE"},
       {ExOut::EQ_BIAS, "EQ_BIAS"},
       {ExOut::MEAN, "MEAN"},
       {ExOut::INV_VARIANCE, "INV_VARIANCE"},
       {ExOut::NEXT_RUNNING_MEAN, "NEXT_RUNNING_MEAN"},
       {ExOut::NEXT_RUNNING_VAR, "NEXT_RUNNING_VAR"}}};
};

template <>
struct PortNames<graph::DBN_weight_attributes> {
  static constexpr std::array<std::pair<ExIn, const char*>, 5> inputs{{{ExIn::DY, "DY"},
                                                                       {ExIn::X, "X"},
                                                                       {ExIn::SCALE, "SCALE"},
                                                                       {ExIn::MEAN, "MEAN"},
                                                                       {ExIn::INV_VARIANCE, "INV_VARIANCE"}}};
  static constexpr std::array<std::pair<ExOut, const char*>, 5> outputs{{{ExOut::DSCALE, "DSCALE"},
                                                                         {ExOut::DBIAS, "DBIAS"},
                                                                         {ExOut::EQ_SCALE_DY, "EQ_SCALE_DY"},
                                                                         {ExOut::EQ_SCALE_X, "EQ_SCALE_X"},
                                                                         {ExOut::EQ_BIAS, "EQ_BIAS"}}};
};

// One node class per op; they differ only in attributes and tag (the methods are defined per op).
#define FROST_NORM_EXTRA_NODE(Class, Attr, Tag)               \
  class Class final : public AttrNode<Attr> {                 \
   public:                                                    \
    using AttrNode::AttrNode;                                 \
    static constexpr std::string_view kTag = Tag;             \
    std::string_view tag() const override { return kTag; }    \
    error_t infer_and_validate(const GraphContext&) override; \
    void attributes_to_json(json&) const override;            \
    error_t attributes_from_json(const json&) override;       \
    error_t run_reference(RefExec&) const override;           \
  }

FROST_NORM_EXTRA_NODE(BatchnormNode, graph::Batchnorm_attributes, "BATCHNORM");
FROST_NORM_EXTRA_NODE(BatchnormInferenceNode, graph::Batchnorm_inference_attributes, "BATCHNORM_INFERENCE");
FROST_NORM_EXTRA_NODE(BatchnormBackwardNode, graph::Batchnorm_backward_attributes, "BATCHNORM_BACKWARD");
FROST_NORM_EXTRA_NODE(InstancenormNode, graph::Instancenorm_attributes, "INSTANCE_NORM");
FROST_NORM_EXTRA_NODE(InstancenormBackwardNode, graph::Instancenorm_backward_attributes, "INSTANCE_NORM_BACKWARD");
FROST_NORM_EXTRA_NODE(AdaLayernormNode, graph::AdaLayernorm_attributes, "ADA_LAYER_NORM");
FROST_NORM_EXTRA_NODE(AdaLayernormBackwardNode, graph::AdaLayernorm_backward_attributes, "ADA_LAYER_NORM_BACKWARD");
FROST_NORM_EXTRA_NODE(GroupnormNode, graph::Groupnorm_attributes, "GROUP_NORM");
FROST_NORM_EXTRA_NODE(GroupnormBackwardNode, graph::Groupnorm_backward_attributes, "GROUP_NORM_BACKWARD");
FROST_NORM_EXTRA_NODE(GenstatsNode, graph::Genstats_attributes, "GENSTATS");
FROST_NORM_EXTRA_NODE(BnFinalizeNode, graph::BN_finalize_attributes, "BN_FINALIZE");
FROST_NORM_EXTRA_NODE(DbnWeightNode, graph::DBN_weight_attributes, "DBN_WEIGHT");

#undef FROST_NORM_EXTRA_NODE

}  // namespace frost::detail
