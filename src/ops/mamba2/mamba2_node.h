// The node of Mamba-2's scan (MAMBA2, frost/ops/mamba2.h): validation, JSON and the CPU reference.
#pragma once

#include <string_view>

#include "frost/ops/mamba2.h"
#include "graph/attr_node.h"

namespace frost::detail {

using MambaIn = graph::Mamba2Input;
using MambaOut = graph::Mamba2Output;

template <>
struct PortNames<graph::Mamba2_attributes> {
  static constexpr std::array<std::pair<MambaIn, const char*>, 10> inputs{{{MambaIn::X, "X"},
                                                                           {MambaIn::DT, "DT"},
                                                                           {MambaIn::A, "A"},
                                                                           {MambaIn::B, "B"},
                                                                           {MambaIn::C, "C"},
                                                                           {MambaIn::D, "D"},
                                                                           {MambaIn::Z, "Z"},
                                                                           {MambaIn::DT_BIAS, "DT_BIAS"},
                                                                           {MambaIn::INITIAL_STATE, "INITIAL_STATE"},
                                                                           {MambaIn::CU_SEQLENS, "CU_SEQLENS"}}};
  static constexpr std::array<std::pair<MambaOut, const char*>, 2> outputs{
      {{MambaOut::Y, "Y"}, {MambaOut::FINAL_STATE, "FINAL_STATE"}}};
};

class Mamba2Node final : public AttrNode<graph::Mamba2_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "MAMBA2";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;  // mamba2_reference.cpp

 private:
  error_t validate_inputs(int64_t& sequences) const;
};

}  // namespace frost::detail
