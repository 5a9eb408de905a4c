// The nodes of Mamba-2's scan (frost/ops/mamba2.h): MAMBA2 and MAMBA2_BACKWARD, one class template; validation,
// JSON and the CPU reference.
#pragma once

#include <string_view>

#include "frost/ops/mamba2.h"
#include "graph/attr_node.h"

namespace frost::detail {

using MambaIn = graph::Mamba2Input;
using MambaOut = graph::Mamba2Output;

// Both ops list every port; the forward leaves the backward ports empty and the reverse.
struct Mamba2PortNames {
  static constexpr std::array<std::pair<MambaIn, const char*>, 12> inputs{{{MambaIn::X, "X"},
                                                                           {MambaIn::DT, "DT"},
                                                                           {MambaIn::A, "A"},
                                                                           {MambaIn::B, "B"},
                                                                           {MambaIn::C, "C"},
                                                                           {MambaIn::D, "D"},
                                                                           {MambaIn::Z, "Z"},
                                                                           {MambaIn::DT_BIAS, "DT_BIAS"},
                                                                           {MambaIn::INITIAL_STATE, "INITIAL_STATE"},
                                                                           {MambaIn::CU_SEQLENS, "CU_SEQLENS"},
                                                                           {MambaIn::DY, "DY"},
                                                                           {MambaIn::D_FINAL_STATE, "D_FINAL_STATE"}}};
  static constexpr std::array<std::pair<MambaOut, const char*>, 11> outputs{
      {{MambaOut::Y, "Y"},
       {MambaOut::FINAL_STATE, "FINAL_STATE"},
       {MambaOut::DX, "DX"},
       {MambaOut::DDT, "DDT"},
       {MambaOut::DA, "DA"},
       {MambaOut::DB, "DB"},
       {MambaOut::DC, "DC"},
       {MambaOut::DD, "DD"},
       {MambaOut::DZ, "DZ"},
       {MambaOut::DDT_BIAS, "DDT_BIAS"},
       {MambaOut::D_INITIAL_STATE, "D_INITIAL_STATE"}}};
};
template <>
struct PortNames<graph::Mamba2_attributes> : Mamba2PortNames {};
template <>
struct PortNames<graph::Mamba2_backward_attributes> : Mamba2PortNames {};

template <class Attr>
class Mamba2Node final : public AttrNode<Attr> {
 public:
  using AttrNode<Attr>::AttrNode;
  static constexpr bool kBackward = std::is_same_v<Attr, graph::Mamba2_backward_attributes>;
  static constexpr std::string_view kTag = kBackward ? "MAMBA2_BACKWARD" : "MAMBA2";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;  // mamba2_reference.cpp

 private:
  error_t validate_inputs(int64_t& sequences) const;
  error_t infer_outputs(const GraphContext&, int64_t sequences);
};

using Mamba2ForwardNode = Mamba2Node<graph::Mamba2_attributes>;
using Mamba2BackwardNode = Mamba2Node<graph::Mamba2_backward_attributes>;

extern template class Mamba2Node<graph::Mamba2_attributes>;
extern template class Mamba2Node<graph::Mamba2_backward_attributes>;

}  // namespace frost::detail
