#pragma once

#include <vector>

#include "frost/ops/sdpa.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::SDPA_attributes> {
  using I = graph::SdpaInput;
  using O = graph::SdpaOutput;
  static constexpr std::array<std::pair<I, const char*>, 8> inputs{{{I::Q, "Q"},
                                                                    {I::K, "K"},
                                                                    {I::V, "V"},
                                                                    {I::ATTN_SCALE, "ATTN_SCALE"},
                                                                    {I::BIAS, "BIAS"},
                                                                    {I::SEQ_LEN_Q, "SEQ_LEN_Q"},
                                                                    {I::SEQ_LEN_KV, "SEQ_LEN_KV"},
                                                                    {I::SINK_TOKEN, "SINK_TOKEN"}}};
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
  error_t infer_outputs(const GraphContext&);
};

// ALiBi slope of each of `heads` heads (see frost/ops/sdpa.h for the formula).
std::vector<double> alibi_slopes(int64_t heads);

}  // namespace frost::detail
