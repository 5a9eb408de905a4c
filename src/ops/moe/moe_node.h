// Nodes of the mixture-of-experts family (see frost/ops/moe.h for the semantics) and the routing
// they share: validation of the routing tensors at declaration and their values at run time.
#pragma once

#include <vector>

#include "frost/ops/moe.h"
#include "graph/attr_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::Moe_grouped_matmul_attributes> {
  using I = graph::MoeGroupedMatmulInput;
  using O = graph::MoeGroupedMatmulOutput;
  static constexpr std::array<std::pair<I, const char*>, 5> inputs{{{I::TOKEN, "TOKEN"},
                                                                    {I::WEIGHT, "WEIGHT"},
                                                                    {I::FIRST_TOKEN_OFFSET, "FIRST_TOKEN_OFFSET"},
                                                                    {I::TOKEN_INDEX, "TOKEN_INDEX"},
                                                                    {I::TOKEN_KS, "TOKEN_KS"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::OUTPUT, "OUTPUT"}}};
};

template <>
struct PortNames<graph::Moe_grouped_matmul_backward_attributes> {
  using I = graph::MoeGroupedMatmulBackwardInput;
  using O = graph::MoeGroupedMatmulBackwardOutput;
  static constexpr std::array<std::pair<I, const char*>, 6> inputs{{{I::DOUTPUT, "DOUTPUT"},
                                                                    {I::TOKEN, "TOKEN"},
                                                                    {I::WEIGHT, "WEIGHT"},
                                                                    {I::FIRST_TOKEN_OFFSET, "FIRST_TOKEN_OFFSET"},
                                                                    {I::TOKEN_INDEX, "TOKEN_INDEX"},
                                                                    {I::TOKEN_KS, "TOKEN_KS"}}};
  static constexpr std::array<std::pair<O, const char*>, 2> outputs{{{O::DTOKEN, "DTOKEN"}, {O::DWEIGHT, "DWEIGHT"}}};
};

// The routing tensors of one node, as both nodes bind them.
struct MoeOperands {
  graph::MoeGroupedMatmulMode_t mode;
  int32_t top_k;
  TensorPtr token, weight, first_token_offset, token_index, token_ks;
};

// Extents fixed by the declaration: R routed rows, S token rows of TOKEN, E experts, K and N.
struct MoeExtents {
  int64_t rows = 0, token_rows = 0, experts = 0, k = 0, n = 0;
};

// Checks the declared operands (ranks, extents, types, which ports each mode reads) and derives
// the extents.
error_t validate_moe_operands(const Node& node, const MoeOperands& ops, MoeExtents& ext);

// Per routed row r: its expert (-1 before the first expert's range), the TOKEN row it reads and
// the OUTPUT row it writes.
struct MoeRouting {
  std::vector<int64_t> expert, in_row, out_row;
};

class RefExec;
// Reads the routing values and checks them (offsets ordered and in range, indices in range, no two
// rows scattered to one slot) before anything is written.
error_t load_moe_routing(const Node& node, const RefExec& ex, const MoeOperands& ops, const MoeExtents& ext,
                         MoeRouting& routing);

const char* moe_mode_name(graph::MoeGroupedMatmulMode_t mode);
error_t read_moe_mode(const json& j, graph::MoeGroupedMatmulMode_t& mode);

class MoeGroupedMatmulNode final : public AttrNode<graph::Moe_grouped_matmul_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "MOE_GROUPED_MATMUL";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
  MoeOperands operands() const;
};

class MoeGroupedMatmulBackwardNode final : public AttrNode<graph::Moe_grouped_matmul_backward_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "MOE_GROUPED_MATMUL_BWD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
  MoeOperands operands() const;
};

}  // namespace frost::detail
