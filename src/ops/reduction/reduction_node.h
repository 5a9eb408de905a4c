#pragma once

#include "frost/ops/shape_ops.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::Reduction_attributes> {
  using I = graph::UnaryInput;
  using O = graph::UnaryOutput;
  static constexpr std::array<std::pair<I, const char*>, 1> inputs{{{I::X, "X"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::Y, "Y"}}};
};

// Y has X's rank and user-given dims; each dim where Y's extent is 1 and X's is not is reduced.
class ReductionNode final : public AttrNode<graph::Reduction_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "REDUCTION";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

}  // namespace frost::detail
