#pragma once

#include "frost/ops/pointwise.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::Pointwise_attributes> {
  using I = graph::PointwiseInput;
  using O = graph::PointwiseOutput;
  static constexpr std::array<std::pair<I, const char*>, 3> inputs{{{I::IN_0, "IN_0"}, {I::IN_1, "IN_1"}, {I::IN_2, "IN_2"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::OUT_0, "OUT_0"}}};
};

class PointwiseNode final : public AttrNode<graph::Pointwise_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "POINTWISE";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

// Inputs a mode takes: 1, 2 or 3.
int pointwise_arity(PointwiseMode_t mode);

}  // namespace frost::detail
