// Recognizes the graphs the sm90 GEMM engine serves: one MATMUL, optionally followed by a chain
//   C -> [ADD bias [.., 1, N]] -> [ADD residual (C's dims)] -> [activation]
// where every link but the last is virtual FLOAT and read only by the next link. The chain maps onto
// the kernel's epilogue D = act(acc + bias + residual), computed in FP32 without rounding between
// links, which equals the reference exactly when the links are FLOAT.
#pragma once

#include <string>

#include "engines/sm90/gemm/sm90_gemm.h"
#include "graph/graph_state.h"
#include "ops/matmul/matmul_node.h"

namespace frost::detail {

struct GemmPattern {
  const MatmulNode* matmul = nullptr;
  TensorPtr bias, residual, output;  // output: the tensor the kernel writes
  sm90::GemmAct act = sm90::GemmAct::NONE;
  sm90::GemmParams params;  // extents, strides, dtypes, epilogue; pointers are placeholders
};

// Empty when the graph matches, else the reason it does not (naming the node and attribute).
std::string match_gemm_pattern(const GraphState& g, GemmPattern& out);

}  // namespace frost::detail
