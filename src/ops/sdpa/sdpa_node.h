#pragma once

#include <vector>

#include "frost/ops/sdpa.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::SDPA_attributes> {
  using I = graph::SdpaInput;
  using O = graph::SdpaOutput;
  static constexpr std::array<std::pair<I, const char*>, 17> inputs{{{I::Q, "Q"},
                                                                     {I::K, "K"},
                                                                     {I::V, "V"},
                                                                     {I::ATTN_SCALE, "ATTN_SCALE"},
                                                                     {I::BIAS, "BIAS"},
                                                                     {I::SEQ_LEN_Q, "SEQ_LEN_Q"},
                                                                     {I::SEQ_LEN_KV, "SEQ_LEN_KV"},
                                                                     {I::SINK_TOKEN, "SINK_TOKEN"},
                                                                     {I::CU_SEQ_LEN_Q, "CU_SEQ_LEN_Q"},
                                                                     {I::CU_SEQ_LEN_KV, "CU_SEQ_LEN_KV"},
                                                                     {I::PAGE_TABLE_K, "PAGE_TABLE_K"},
                                                                     {I::PAGE_TABLE_V, "PAGE_TABLE_V"},
                                                                     {I::BLOCK_MASK, "BLOCK_MASK"},
                                                                     {I::DROPOUT_SEED, "DROPOUT_SEED"},
                                                                     {I::DROPOUT_OFFSET, "DROPOUT_OFFSET"},
                                                                     {I::DROPOUT_MASK, "DROPOUT_MASK"},
                                                                     {I::DROPOUT_SCALE, "DROPOUT_SCALE"}}};
  static constexpr std::array<std::pair<O, const char*>, 2> outputs{{{O::O, "O"}, {O::STATS, "STATS"}}};
};

class SdpaNode final : public AttrNode<graph::SDPA_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "SDPA";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;

 private:
  error_t validate_qkv() const;
  error_t validate_optional_inputs() const;
  // Ragged offsets, cumulative lengths, page tables, block mask and dropout (sdpa_validate_ext.cpp).
  error_t validate_layout_inputs() const;
  error_t validate_mask_inputs() const;
  error_t validate_output_layout() const;
  error_t infer_outputs(const GraphContext&);
};

// The logical key count: K's sequence extent, or the paged cache's logical length.
int64_t sdpa_logical_s_kv(const graph::SDPA_attributes& attr);

// ALiBi slope of each of `heads` heads (see frost/ops/sdpa.h for the formula).
std::vector<double> alibi_slopes(int64_t heads);

}  // namespace frost::detail
