// Nodes of the linear attention family: GDN, KDA and their backward passes. One class template
// serves the four ops; DeltaRuleOp<Attr> says which one.
#pragma once

#include <string_view>

#include "frost/ops/linear_attention.h"
#include "graph/attr_node.h"

namespace frost::detail {

using LinIn = graph::LinearAttentionInput;
using LinOut = graph::LinearAttentionOutput;

template <class Attr>
struct DeltaRuleOp;
template <>
struct DeltaRuleOp<graph::Gdn_attributes> {
  static constexpr std::string_view kTag = "GDN";
  static constexpr bool kPerKeyDecay = false, kBackward = false;
};
template <>
struct DeltaRuleOp<graph::Kda_attributes> {
  static constexpr std::string_view kTag = "KDA";
  static constexpr bool kPerKeyDecay = true, kBackward = false;
};
template <>
struct DeltaRuleOp<graph::Gdn_backward_attributes> {
  static constexpr std::string_view kTag = "GDN_BACKWARD";
  static constexpr bool kPerKeyDecay = false, kBackward = true;
};
template <>
struct DeltaRuleOp<graph::Kda_backward_attributes> {
  static constexpr std::string_view kTag = "KDA_BACKWARD";
  static constexpr bool kPerKeyDecay = true, kBackward = true;
};

// Every op lists every port; the forward leaves the backward ports empty and the reverse.
struct DeltaRulePortNames {
  static constexpr std::array<std::pair<LinIn, const char*>, 10> inputs{{{LinIn::Q, "Q"},
                                                                         {LinIn::K, "K"},
                                                                         {LinIn::V, "V"},
                                                                         {LinIn::G, "G"},
                                                                         {LinIn::BETA, "BETA"},
                                                                         {LinIn::INITIAL_STATE, "INITIAL_STATE"},
                                                                         {LinIn::CU_SEQLENS, "CU_SEQLENS"},
                                                                         {LinIn::STATE_INDICES, "STATE_INDICES"},
                                                                         {LinIn::DO, "DO"},
                                                                         {LinIn::D_FINAL_STATE, "D_FINAL_STATE"}}};
  static constexpr std::array<std::pair<LinOut, const char*>, 8> outputs{
      {{LinOut::O, "O"},
       {LinOut::FINAL_STATE, "FINAL_STATE"},
       {LinOut::DQ, "DQ"},
       {LinOut::DK, "DK"},
       {LinOut::DV, "DV"},
       {LinOut::DG, "DG"},
       {LinOut::DBETA, "DBETA"},
       {LinOut::D_INITIAL_STATE, "D_INITIAL_STATE"}}};
};
template <>
struct PortNames<graph::Gdn_attributes> : DeltaRulePortNames {};
template <>
struct PortNames<graph::Kda_attributes> : DeltaRulePortNames {};
template <>
struct PortNames<graph::Gdn_backward_attributes> : DeltaRulePortNames {};
template <>
struct PortNames<graph::Kda_backward_attributes> : DeltaRulePortNames {};

template <class Attr>
class DeltaRuleNode final : public AttrNode<Attr> {
 public:
  using AttrNode<Attr>::AttrNode;
  static constexpr std::string_view kTag = DeltaRuleOp<Attr>::kTag;
  static constexpr bool kPerKeyDecay = DeltaRuleOp<Attr>::kPerKeyDecay;
  static constexpr bool kBackward = DeltaRuleOp<Attr>::kBackward;
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;

 private:
  error_t validate_inputs(int64_t& sequences) const;
  error_t infer_outputs(const GraphContext&, int64_t sequences);
};

using GdnNode = DeltaRuleNode<graph::Gdn_attributes>;
using KdaNode = DeltaRuleNode<graph::Kda_attributes>;
using GdnBackwardNode = DeltaRuleNode<graph::Gdn_backward_attributes>;
using KdaBackwardNode = DeltaRuleNode<graph::Kda_backward_attributes>;

// Defined in linear_attention_node.cpp (validation, JSON) and linear_attention_reference.cpp.
extern template class DeltaRuleNode<graph::Gdn_attributes>;
extern template class DeltaRuleNode<graph::Kda_attributes>;
extern template class DeltaRuleNode<graph::Gdn_backward_attributes>;
extern template class DeltaRuleNode<graph::Kda_backward_attributes>;

}  // namespace frost::detail
