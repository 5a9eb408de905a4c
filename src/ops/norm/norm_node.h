// Nodes of the normalization family: RMSNORM, LAYERNORM and their backward passes.
#pragma once

#include "frost/ops/norm.h"
#include "graph/attr_node.h"

namespace frost::detail {

using NormIn = graph::NormInput;
using NormOut = graph::NormOutput;

template <>
struct PortNames<graph::Rmsnorm_attributes> {
  static constexpr std::array<std::pair<NormIn, const char*>, 4> inputs{
      {{NormIn::X, "X"}, {NormIn::SCALE, "SCALE"}, {NormIn::BIAS, "BIAS"}, {NormIn::EPSILON, "EPSILON"}}};
  static constexpr std::array<std::pair<NormOut, const char*>, 2> outputs{
      {{NormOut::Y, "Y"}, {NormOut::INV_VARIANCE, "INV_VARIANCE"}}};
};

template <>
struct PortNames<graph::Layernorm_attributes> {
  static constexpr std::array<std::pair<NormIn, const char*>, 4> inputs{
      {{NormIn::X, "X"}, {NormIn::SCALE, "SCALE"}, {NormIn::BIAS, "BIAS"}, {NormIn::EPSILON, "EPSILON"}}};
  static constexpr std::array<std::pair<NormOut, const char*>, 3> outputs{
      {{NormOut::Y, "Y"}, {NormOut::MEAN, "MEAN"}, {NormOut::INV_VARIANCE, "INV_VARIANCE"}}};
};

template <>
struct PortNames<graph::Rmsnorm_backward_attributes> {
  static constexpr std::array<std::pair<NormIn, const char*>, 4> inputs{
      {{NormIn::DY, "DY"}, {NormIn::X, "X"}, {NormIn::SCALE, "SCALE"}, {NormIn::INV_VARIANCE, "INV_VARIANCE"}}};
  static constexpr std::array<std::pair<NormOut, const char*>, 3> outputs{
      {{NormOut::DX, "DX"}, {NormOut::DSCALE, "DSCALE"}, {NormOut::DBIAS, "DBIAS"}}};
};

template <>
struct PortNames<graph::Layernorm_backward_attributes> {
  static constexpr std::array<std::pair<NormIn, const char*>, 6> inputs{{{NormIn::DY, "DY"},
                                                                         {NormIn::X, "X"},
                                                                         {NormIn::SCALE, "SCALE"},
                                                                         {NormIn::MEAN, "MEAN"},
                                                                         {NormIn::INV_VARIANCE, "INV_VARIANCE"},
                                                                         {NormIn::EPSILON, "EPSILON"}}};
  static constexpr std::array<std::pair<NormOut, const char*>, 3> outputs{
      {{NormOut::DX, "DX"}, {NormOut::DSCALE, "DSCALE"}, {NormOut::DBIAS, "DBIAS"}}};
};

class RmsnormNode final : public AttrNode<graph::Rmsnorm_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "RMS_NORM";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

class LayernormNode final : public AttrNode<graph::Layernorm_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "LAYER_NORM";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

class RmsnormBackwardNode final : public AttrNode<graph::Rmsnorm_backward_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "RMS_NORM_BACKWARD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

class LayernormBackwardNode final : public AttrNode<graph::Layernorm_backward_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "LAYER_NORM_BACKWARD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

}  // namespace frost::detail
