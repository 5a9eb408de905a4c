#pragma once

#include "frost/ops/sdpa_fp8_backward.h"
#include "graph/attr_node.h"

namespace frost::detail {

// The per-tensor FP8 backward binds these ports of SDPA_fp8_backward_attributes (the MXFP8 backward
// binds others: ops/sdpa_mxfp8/sdpa_mxfp8_nodes.h).
template <>
struct PortNames<graph::SDPA_fp8_backward_attributes> {
  using I = graph::SdpaFp8BackwardInput;
  using O = graph::SdpaFp8BackwardOutput;
  static constexpr std::array<std::pair<I, const char*>, 21> inputs{{{I::Q, "Q"},
                                                                     {I::K, "K"},
                                                                     {I::V, "V"},
                                                                     {I::O, "O"},
                                                                     {I::DO, "DO"},
                                                                     {I::STATS, "STATS"},
                                                                     {I::DESCALE_Q, "DESCALE_Q"},
                                                                     {I::DESCALE_K, "DESCALE_K"},
                                                                     {I::DESCALE_V, "DESCALE_V"},
                                                                     {I::DESCALE_O, "DESCALE_O"},
                                                                     {I::DESCALE_DO, "DESCALE_DO"},
                                                                     {I::DESCALE_S, "DESCALE_S"},
                                                                     {I::DESCALE_DP, "DESCALE_DP"},
                                                                     {I::SCALE_S, "SCALE_S"},
                                                                     {I::SCALE_DQ, "SCALE_DQ"},
                                                                     {I::SCALE_DK, "SCALE_DK"},
                                                                     {I::SCALE_DV, "SCALE_DV"},
                                                                     {I::SCALE_DP, "SCALE_DP"},
                                                                     {I::ATTN_SCALE, "ATTN_SCALE"},
                                                                     {I::SEQ_LEN_Q, "SEQ_LEN_Q"},
                                                                     {I::SEQ_LEN_KV, "SEQ_LEN_KV"}}};
  static constexpr std::array<std::pair<O, const char*>, 7> outputs{{{O::DQ, "DQ"},
                                                                     {O::DK, "DK"},
                                                                     {O::DV, "DV"},
                                                                     {O::AMAX_DQ, "AMAX_DQ"},
                                                                     {O::AMAX_DK, "AMAX_DK"},
                                                                     {O::AMAX_DV, "AMAX_DV"},
                                                                     {O::AMAX_DP, "AMAX_DP"}}};
};

class SdpaFp8BackwardNode final : public AttrNode<graph::SDPA_fp8_backward_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "SDPA_FP8_BACKWARD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

// The attributes' JSON fields, shared with the MXFP8 backward.
void fp8_backward_attributes_to_json(const graph::SDPA_fp8_backward_attributes& a, json& j);
error_t fp8_backward_attributes_from_json(graph::SDPA_fp8_backward_attributes& a, const json& j);

}  // namespace frost::detail
