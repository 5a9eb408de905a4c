// Recognizes the SwiGLU graphs the sm90 GEMM engine serves with its fused SwiGLU GEMM:
//   MLP:     one SWIGLU_MLP node: the fused gate/up GEMM writes the intermediate into the workspace,
//            then the dense GEMM (stock-epilogue fast path) projects it down into Y;
//   GATE_UP: the four-node graph matmul(X, W_gate) -> SWISH -> MUL <- matmul(X, W_up) (same X), whose
//            MUL output (non-virtual) is the fused GEMM's output; every other link is virtual FLOAT,
//            so the reference keeps FP32 between them, as the kernel does in registers.
// The fused GEMM reads gate and up interleaved in blocks of 8 columns. A W_GATE_UP input already is;
// separate gate and up weights are copied into that layout in the workspace at every execute
// (sm90::swiglu_pack_weights: one read and one write of the two weights, ~0.1 ms for H 4096,
// F 14336 bf16), which keeps execute free of allocation and of any state kept between calls.
#pragma once

#include <cstdint>
#include <string>

#include "engines/sm90/gemm/sm90_gemm.h"
#include "graph/graph_state.h"
#include "plan/plan.h"

namespace frost::detail {

struct SwigluPattern {
  bool mlp = false;  // SWIGLU_MLP (else the four-node GATE_UP graph)
  TensorPtr x, gate, up, gate_up, down, output;
  bool pack = false;               // separate gate and up: packed into the workspace at execute
  sm90::SwigluPackParams packing;  // when pack
  sm90::SwigluParams swiglu;       // the fused gate/up GEMM
  sm90::GemmParams down_gemm;      // MLP only
  sm90::GemmConfig down_config;    // its own kernel choice; the raster swizzle carries over
  // Workspace: [packed weights][intermediate (MLP)][fused GEMM's][down GEMM's], each 256-byte aligned.
  int64_t packed_offset = 0, mid_offset = 0, swiglu_offset = 0, down_offset = 0, workspace = 0;
};

// True when the graph has the shape of one of the two SwiGLU forms (a SWIGLU_MLP node, or two MATMULs
// feeding a SWISH and a MUL), so that the engine reports this matcher's reasons for it.
bool is_swiglu_graph(const GraphState& g);

// Empty when the graph matches and the kernels accept it under `config`, else the reason (naming the
// node and attribute). Fills `out`, the workspace layout included.
std::string match_swiglu_pattern(const GraphState& g, const sm90::GemmConfig& config, SwigluPattern& out);

// Binds the pack's pointers and the workspace, then launches: pack (if any), fused GEMM, down GEMM (MLP).
error_t run_swiglu(const SwigluPattern& pat, const sm90::GemmConfig& config, const VariantPack& pack, void* workspace,
                   cudaStream_t stream);

}  // namespace frost::detail
