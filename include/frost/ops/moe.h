// Mixture-of-experts grouped matmul and its backward.
//   Each routed row r (R rows in all) belongs to the expert e whose range holds it:
//   first_token_offset[e] <= r < first_token_offset[e + 1] (the last expert ends at R).
//   Routed result  Y[r, :] = X_r[:] * Weight[e, :, :]  with X_r the routed input row of r.
// Modes (the routing of rows in and out):
// - NONE:    tokens are already grouped by expert: X_r = Token[0, r], Output[0, r] = Y[r].
// - GATHER:  X_r = Token[0, token_index[r]] (Token holds the S unrouted tokens), Output[0, r] = Y[r].
// - SCATTER: X_r = Token[0, r], Output[0, token_index[r] * top_k + token_ks[r]] = Y[r]: results go
//            back to token-major order, one slot per (token, choice) pair.
// Shapes: Token [1, R, K] (NONE/SCATTER) or [1, S, K] (GATHER); Weight [E, K, N];
// first_token_offset [E, 1, 1] INT32 or INT64, non-decreasing, in [0, R]; token_index and token_ks
// [1, R, 1] INT32 or INT64; Output [1, R, N]. Rows before first_token_offset[0], and in SCATTER
// output slots that no routed row targets, are written as zero. Accumulation is FP32 (FP64 in the
// reference's fp64 mode).
#pragma once

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class MoeGroupedMatmulMode_t { NONE, GATHER, SCATTER };

enum class MoeGroupedMatmulInput { TOKEN, WEIGHT, FIRST_TOKEN_OFFSET, TOKEN_INDEX, TOKEN_KS };
enum class MoeGroupedMatmulOutput { OUTPUT };

class Moe_grouped_matmul_attributes
    : public Attributes<Moe_grouped_matmul_attributes, MoeGroupedMatmulInput, MoeGroupedMatmulOutput> {
 public:
  MoeGroupedMatmulMode_t mode = MoeGroupedMatmulMode_t::NONE;
  // Choices per token; read in SCATTER mode only (R = S * top_k there).
  int32_t top_k = 1;

  Moe_grouped_matmul_attributes& set_mode(MoeGroupedMatmulMode_t v) { mode = v; return *this; }
  Moe_grouped_matmul_attributes& set_top_k(int32_t v) { top_k = v; return *this; }
};

// Gradients of moe_grouped_matmul for the same routing: given dOutput (shaped as Output),
//   dToken (shaped as Token) and dWeight [E, K, N]. In GATHER mode a token routed to several
//   experts sums their contributions; tokens routed nowhere (and NONE/SCATTER rows outside every
//   expert) get zero gradient.
enum class MoeGroupedMatmulBackwardInput { DOUTPUT, TOKEN, WEIGHT, FIRST_TOKEN_OFFSET, TOKEN_INDEX, TOKEN_KS };
enum class MoeGroupedMatmulBackwardOutput { DTOKEN, DWEIGHT };

class Moe_grouped_matmul_backward_attributes
    : public Attributes<Moe_grouped_matmul_backward_attributes, MoeGroupedMatmulBackwardInput,
                        MoeGroupedMatmulBackwardOutput> {
 public:
  MoeGroupedMatmulMode_t mode = MoeGroupedMatmulMode_t::NONE;
  int32_t top_k = 1;

  Moe_grouped_matmul_backward_attributes& set_mode(MoeGroupedMatmulMode_t v) { mode = v; return *this; }
  Moe_grouped_matmul_backward_attributes& set_top_k(int32_t v) { top_k = v; return *this; }
};

}  // namespace frost::graph
