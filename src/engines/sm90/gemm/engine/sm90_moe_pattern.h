// Recognizes the moe_grouped_matmul graphs the sm90 GEMM engine serves, any mode, TOKEN and OUTPUT rows
// contiguous:
//   BF16: one MOE_GROUPED_MATMUL node with BFLOAT16 TOKEN, WEIGHT and OUTPUT;
//   FP8:  FP8_E4M3 TOKEN and WEIGHT (WEIGHT K-major), then up to two pointwise MULs by FLOAT [1, 1, 1]
//         device tensors (the per-tensor descales, cuDNN's FP8 graph idiom), ending in a BFLOAT16 graph
//         output; the links between are virtual FLOAT. The descales become the grouped GEMM's alpha:
//         Y = cvt(acc * descale_token * descale_weight), one FP32 product instead of the reference's two
//         roundings of FP32 products (relative differences of order 1e-7).
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
  TensorPtr output;                    // the tensor the kernel writes (the end of the descale chain)
  TensorPtr descale_token, descale_weight;  // FP8 only, either may be null
  sm90::MoeParams params;  // extents, strides, types, mode; pointers are placeholders
};

// Empty when the graph matches, else the reason it does not (naming the node and attribute).
std::string match_moe_pattern(const GraphState& g, MoePattern& out);

// The pattern's parameters with the pack's pointers.
sm90::MoeParams bind_moe_pointers(const MoePattern& pat, const VariantPack& pack);

}  // namespace frost::detail
