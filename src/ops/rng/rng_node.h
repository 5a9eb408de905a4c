// Node of the RNG op (Philox-based random generation).
#pragma once

#include <array>

#include "frost/ops/rng.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::Rng_attributes> {
  using I = graph::RngInput;
  using O = graph::RngOutput;
  static constexpr std::array<std::pair<I, const char*>, 2> inputs{{{I::SEED, "SEED"}, {I::OFFSET, "OFFSET"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::Y, "Y"}}};
};

class RngNode final : public AttrNode<graph::Rng_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "RNG";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

}  // namespace frost::detail
