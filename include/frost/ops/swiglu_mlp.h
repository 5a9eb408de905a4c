// Gated MLP forward with SwiGLU, the feed-forward block of Llama-style transformers (frost's own op:
// cuDNN Frontend has no MLP node). JSON tag SWIGLU_MLP; ports X, W_GATE, W_UP, W_GATE_UP, W_DOWN
// (inputs), Y (output).
//
//   Y = ( silu(X W_gate) * (X W_up) ) W_down,   silu(z) = z / (1 + exp(-z))
//
// Shapes: X [T, H]; W_GATE and W_UP [H, F]; W_DOWN [F, H]; Y [T, H]; any strides.
// Instead of W_GATE and W_UP, one W_GATE_UP [H, 2F] may hold both with gate and up columns interleaved
// in blocks of 8 (the layout the sm90 fused kernel reads, so no copy is made at execute):
//   column 16q + r of W_GATE_UP is gate column 8q + r, column 16q + 8 + r is up column 8q + r (r < 8).
// Data types: X and the weights FLOAT, HALF or BFLOAT16, all the same; Y floating (default: the graph's
// io type, else X's).
// Numerics: both projections accumulate in FP32; the intermediate silu(g) * u is formed in FP32 from the
// FP32 sums and rounded once to X's data type (BF16 for BF16 inputs), as an implementation that stores
// it between the two GEMMs does; the down projection accumulates in FP32 and rounds to Y's type.
#pragma once

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class SwigluMlpInput { X, W_GATE, W_UP, W_GATE_UP, W_DOWN };
enum class SwigluMlpOutput { Y };

class Swiglu_mlp_attributes : public Attributes<Swiglu_mlp_attributes, SwigluMlpInput, SwigluMlpOutput> {};

}  // namespace frost::graph
