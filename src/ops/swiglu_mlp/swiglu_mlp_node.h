// SWIGLU_MLP node (see frost/ops/swiglu_mlp.h for the semantics).
#pragma once

#include <array>

#include "frost/ops/swiglu_mlp.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::Swiglu_mlp_attributes> {
  using I = graph::SwigluMlpInput;
  using O = graph::SwigluMlpOutput;
  static constexpr std::array<std::pair<I, const char*>, 5> inputs{
      {{I::X, "X"}, {I::W_GATE, "W_GATE"}, {I::W_UP, "W_UP"}, {I::W_GATE_UP, "W_GATE_UP"}, {I::W_DOWN, "W_DOWN"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::Y, "Y"}}};
};

// Gate/up interleave block of W_GATE_UP (columns).
inline constexpr int64_t kSwigluMlpBlock = 8;

// Extents fixed by the declaration: T tokens, H model width, F hidden width.
struct SwigluMlpExtents {
  int64_t t = 0, h = 0, f = 0;
};

class SwigluMlpNode final : public AttrNode<graph::Swiglu_mlp_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "SWIGLU_MLP";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override {}
  error_t attributes_from_json(const json&) override { return {}; }
  error_t run_reference(RefExec&) const override;
  // Checks the inputs (ranks, extents, types, which weight form is bound) and derives the extents.
  error_t validate_inputs(SwigluMlpExtents& ext) const;
  bool interleaved() const { return in(graph::SwigluMlpInput::W_GATE_UP) != nullptr; }
};

}  // namespace frost::detail
