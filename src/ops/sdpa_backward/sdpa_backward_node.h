#pragma once

#include "frost/ops/sdpa_backward.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::SDPA_backward_attributes> {
  using I = graph::SdpaBackwardInput;
  using O = graph::SdpaBackwardOutput;
  static constexpr std::array<std::pair<I, const char*>, 19> inputs{{{I::Q, "Q"},
                                                                     {I::K, "K"},
                                                                     {I::V, "V"},
                                                                     {I::O, "O"},
                                                                     {I::DO, "DO"},
                                                                     {I::STATS, "STATS"},
                                                                     {I::ATTN_SCALE, "ATTN_SCALE"},
                                                                     {I::BIAS, "BIAS"},
                                                                     {I::SEQ_LEN_Q, "SEQ_LEN_Q"},
                                                                     {I::SEQ_LEN_KV, "SEQ_LEN_KV"},
                                                                     {I::SINK_TOKEN, "SINK_TOKEN"},
                                                                     {I::CU_SEQ_LEN_Q, "CU_SEQ_LEN_Q"},
                                                                     {I::CU_SEQ_LEN_KV, "CU_SEQ_LEN_KV"},
                                                                     {I::BLOCK_MASK, "BLOCK_MASK"},
                                                                     {I::DROPOUT_SEED, "DROPOUT_SEED"},
                                                                     {I::DROPOUT_OFFSET, "DROPOUT_OFFSET"},
                                                                     {I::DROPOUT_MASK, "DROPOUT_MASK"},
                                                                     {I::DROPOUT_SCALE, "DROPOUT_SCALE"},
                                                                     {I::DROPOUT_SCALE_INV, "DROPOUT_SCALE_INV"}}};
  static constexpr std::array<std::pair<O, const char*>, 5> outputs{
      {{O::DQ, "DQ"}, {O::DK, "DK"}, {O::DV, "DV"}, {O::DBIAS, "DBIAS"}, {O::DSINK_TOKEN, "DSINK_TOKEN"}}};
};

class SdpaBackwardNode final : public AttrNode<graph::SDPA_backward_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "SDPA_BACKWARD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;

 private:
  error_t validate_operands() const;
  error_t validate_optional_inputs() const;
  // Lengths, ragged offsets, max_total bounds, block mask and dropout: the forward's rules.
  error_t validate_training_inputs() const;
  error_t infer_outputs(const GraphContext&);
};

}  // namespace frost::detail
