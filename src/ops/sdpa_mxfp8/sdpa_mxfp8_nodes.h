// Nodes of the MXFP8 attention (frost/ops/sdpa_mxfp8.h): SDPA_MXFP8 and SDPA_MXFP8_BACKWARD. They keep
// the FP8 attention's attributes classes and bind the block-scaled subset of their ports.
#pragma once

#include "frost/ops/sdpa_mxfp8.h"
#include "graph/attr_node.h"

namespace frost::detail {

struct MxForwardPorts {
  using I = graph::SdpaFp8Input;
  using O = graph::SdpaFp8Output;
  static constexpr std::array<std::pair<I, const char*>, 9> inputs{{{I::Q, "Q"},
                                                                    {I::K, "K"},
                                                                    {I::V, "V"},
                                                                    {I::DESCALE_Q, "DESCALE_Q"},
                                                                    {I::DESCALE_K, "DESCALE_K"},
                                                                    {I::DESCALE_V, "DESCALE_V"},
                                                                    {I::ATTN_SCALE, "ATTN_SCALE"},
                                                                    {I::SEQ_LEN_Q, "SEQ_LEN_Q"},
                                                                    {I::SEQ_LEN_KV, "SEQ_LEN_KV"}}};
  static constexpr std::array<std::pair<O, const char*>, 3> outputs{
      {{O::O, "O"}, {O::STATS, "STATS"}, {O::AMAX_O, "AMAX_O"}}};
};

struct MxBackwardPorts {
  using I = graph::SdpaFp8BackwardInput;
  using O = graph::SdpaFp8BackwardOutput;
  static constexpr std::array<std::pair<I, const char*>, 20> inputs{{{I::Q, "Q"},
                                                                     {I::Q_T, "Q_T"},
                                                                     {I::K, "K"},
                                                                     {I::K_T, "K_T"},
                                                                     {I::V, "V"},
                                                                     {I::O, "O"},
                                                                     {I::DO_F16, "DO_F16"},
                                                                     {I::DO, "DO"},
                                                                     {I::DO_T, "DO_T"},
                                                                     {I::STATS, "STATS"},
                                                                     {I::DESCALE_Q, "DESCALE_Q"},
                                                                     {I::DESCALE_Q_T, "DESCALE_Q_T"},
                                                                     {I::DESCALE_K, "DESCALE_K"},
                                                                     {I::DESCALE_K_T, "DESCALE_K_T"},
                                                                     {I::DESCALE_V, "DESCALE_V"},
                                                                     {I::DESCALE_DO, "DESCALE_DO"},
                                                                     {I::DESCALE_DO_T, "DESCALE_DO_T"},
                                                                     {I::ATTN_SCALE, "ATTN_SCALE"},
                                                                     {I::SEQ_LEN_Q, "SEQ_LEN_Q"},
                                                                     {I::SEQ_LEN_KV, "SEQ_LEN_KV"}}};
  static constexpr std::array<std::pair<O, const char*>, 6> outputs{{{O::DQ, "DQ"},
                                                                     {O::DK, "DK"},
                                                                     {O::DV, "DV"},
                                                                     {O::AMAX_DQ, "AMAX_DQ"},
                                                                     {O::AMAX_DK, "AMAX_DK"},
                                                                     {O::AMAX_DV, "AMAX_DV"}}};
};

class SdpaMxfp8Node final : public AttrNode<graph::SDPA_fp8_attributes, MxForwardPorts> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "SDPA_MXFP8";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

class SdpaMxfp8BackwardNode final : public AttrNode<graph::SDPA_fp8_backward_attributes, MxBackwardPorts> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "SDPA_MXFP8_BACKWARD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

// MXFP8 blocks hold 32 elements.
constexpr int64_t kMxBlock = 32;

// A block-scale tensor: FP8_E8M0, rank 4, [b, heads, >= rows, >= cols] (the extents past them are padding).
error_t check_mx_scale(const Node& node, const char* port, const TensorPtr& t, int64_t batch, int64_t heads,
                       int64_t rows, int64_t cols);

}  // namespace frost::detail
