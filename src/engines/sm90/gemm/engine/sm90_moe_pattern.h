// Recognizes the moe_grouped_matmul graphs the sm90 GEMM engine serves: one MOE_GROUPED_MATMUL node
// with BFLOAT16 TOKEN, WEIGHT and OUTPUT, TOKEN and OUTPUT rows contiguous, any mode.
#pragma once

#include <string>

#include "engines/sm90/gemm/sm90_gemm.h"
#include "graph/graph_state.h"
#include "ops/moe/moe_node.h"
#include "plan/plan.h"

namespace frost::detail {

struct MoePattern {
  const MoeGroupedMatmulNode* node = nullptr;
  MoeOperands ops;
  TensorPtr output;
  sm90::MoeParams params;  // extents, strides, types, mode; pointers are placeholders
};

// Empty when the graph matches, else the reason it does not (naming the node and attribute).
std::string match_moe_pattern(const GraphState& g, MoePattern& out);

// The pattern's parameters with the pack's pointers.
sm90::MoeParams bind_moe_pointers(const MoePattern& pat, const VariantPack& pack);

}  // namespace frost::detail
