#pragma once

#include "frost/ops/conv.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::Conv_fprop_attributes> {
  using I = graph::ConvFpropInput;
  using O = graph::ConvFpropOutput;
  static constexpr std::array<std::pair<I, const char*>, 2> inputs{{{I::X, "X"}, {I::W, "W"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::Y, "Y"}}};
};

template <>
struct PortNames<graph::Conv_dgrad_attributes> {
  using I = graph::ConvDgradInput;
  using O = graph::ConvDgradOutput;
  static constexpr std::array<std::pair<I, const char*>, 2> inputs{{{I::DY, "DY"}, {I::W, "W"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::DX, "DX"}}};
};

template <>
struct PortNames<graph::Conv_wgrad_attributes> {
  using I = graph::ConvWgradInput;
  using O = graph::ConvWgradOutput;
  static constexpr std::array<std::pair<I, const char*>, 2> inputs{{{I::DY, "DY"}, {I::X, "X"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::DW, "DW"}}};
};

// Y = conv(X, W). See include/frost/ops/conv.h for the shape rules.
class ConvFpropNode final : public AttrNode<graph::Conv_fprop_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "CONV_FPROP";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

// DX = conv's adjoint in X applied to DY; DX's dims come from the user.
class ConvDgradNode final : public AttrNode<graph::Conv_dgrad_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "CONV_DGRAD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

// DW = conv's adjoint in W, from X and DY; DW's dims come from the user.
class ConvWgradNode final : public AttrNode<graph::Conv_wgrad_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "CONV_WGRAD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

}  // namespace frost::detail
