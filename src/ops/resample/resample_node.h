// Nodes of the RESAMPLE op (average and max pooling) and its backward.
#pragma once

#include <array>

#include "frost/ops/resample.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::Resample_attributes> {
  using I = graph::ResampleInput;
  using O = graph::ResampleOutput;
  static constexpr std::array<std::pair<I, const char*>, 1> inputs{{{I::X, "X"}}};
  static constexpr std::array<std::pair<O, const char*>, 2> outputs{{{O::Y, "Y"}, {O::INDEX, "INDEX"}}};
};

template <>
struct PortNames<graph::Resample_backward_attributes> {
  using I = graph::ResampleBackwardInput;
  using O = graph::ResampleBackwardOutput;
  static constexpr std::array<std::pair<I, const char*>, 3> inputs{{{I::DY, "DY"}, {I::X, "X"}, {I::INDEX, "INDEX"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::DX, "DX"}}};
};

class ResampleNode final : public AttrNode<graph::Resample_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "RESAMPLE";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;

  bool outputs_index() const { return attr.resampling_mode == ResampleMode_t::MAXPOOL && !attr.is_inference; }
};

class ResampleBackwardNode final : public AttrNode<graph::Resample_backward_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "RESAMPLE_BACKWARD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

}  // namespace frost::detail
