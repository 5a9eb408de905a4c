#pragma once

#include "frost/ops/sdpa_fp8.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::SDPA_fp8_attributes> {
  using I = graph::SdpaFp8Input;
  using O = graph::SdpaFp8Output;
  static constexpr std::array<std::pair<I, const char*>, 12> inputs{{{I::Q, "Q"},
                                                                     {I::K, "K"},
                                                                     {I::V, "V"},
                                                                     {I::DESCALE_Q, "DESCALE_Q"},
                                                                     {I::DESCALE_K, "DESCALE_K"},
                                                                     {I::DESCALE_V, "DESCALE_V"},
                                                                     {I::DESCALE_S, "DESCALE_S"},
                                                                     {I::SCALE_S, "SCALE_S"},
                                                                     {I::SCALE_O, "SCALE_O"},
                                                                     {I::ATTN_SCALE, "ATTN_SCALE"},
                                                                     {I::SEQ_LEN_Q, "SEQ_LEN_Q"},
                                                                     {I::SEQ_LEN_KV, "SEQ_LEN_KV"}}};
  static constexpr std::array<std::pair<O, const char*>, 4> outputs{
      {{O::O, "O"}, {O::STATS, "STATS"}, {O::AMAX_S, "AMAX_S"}, {O::AMAX_O, "AMAX_O"}}};
};

class SdpaFp8Node final : public AttrNode<graph::SDPA_fp8_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "SDPA_FP8";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;

 private:
  error_t validate_qkv() const;
  error_t validate_scalars_and_masks() const;
  error_t infer_outputs(const GraphContext&);
};

// The attributes' JSON fields, shared with the MXFP8 forward.
void fp8_attributes_to_json(const graph::SDPA_fp8_attributes& a, json& j);
error_t fp8_attributes_from_json(graph::SDPA_fp8_attributes& a, const json& j);

}  // namespace frost::detail
