// A matmul on per-tensor scaled operands (FP8 training recipes), with the amax of its result:
//   C'     = (A @ B) * descale_a * descale_b      batched and broadcast as matmul (frost/ops/matmul.h)
//   amax_C = max |C'|                             before scale_c, FLOAT [1, 1, 1, 1]
//   C      = C' * scale_c, stored in C's type (FP8 types saturate to their largest finite value)
// A and B take matmul's operand types (FP8_E4M3, FP8_E5M2, HALF, BFLOAT16, FLOAT, DOUBLE); descale_a,
// descale_b and scale_c are FLOAT scalars [1, 1, 1, 1] (or [1]). C is FP8, HALF, BFLOAT16 or FLOAT; unset,
// it takes the graph's io (or intermediate) type, else A's type. Elements outside an overridden M x N
// hold the padding value, which goes through the descales and scale_c as every element of C' does.
// Rank-4 operands with equal head extents h may give a C of h / g heads: C' then sums each group of g
// consecutive heads before the descales (the grouped-query reduction of cuDNN Frontend's matmul_fp8).
#pragma once

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class MatmulFp8Input { A, B, DESCALE_A, DESCALE_B, SCALE_C, M_OVERRIDE, N_OVERRIDE, K_OVERRIDE };
enum class MatmulFp8Output { C, AMAX_C };

class Matmul_fp8_attributes : public Attributes<Matmul_fp8_attributes, MatmulFp8Input, MatmulFp8Output> {
 public:
  double padding_value = 0.0;

  Matmul_fp8_attributes& set_padding(double v) { padding_value = v; return *this; }
  double get_padding() const { return padding_value; }
  Matmul_fp8_attributes& set_m_override(TensorPtr t) {
    inputs[MatmulFp8Input::M_OVERRIDE] = std::move(t);
    return *this;
  }
  Matmul_fp8_attributes& set_n_override(TensorPtr t) {
    inputs[MatmulFp8Input::N_OVERRIDE] = std::move(t);
    return *this;
  }
  Matmul_fp8_attributes& set_k_override(TensorPtr t) {
    inputs[MatmulFp8Input::K_OVERRIDE] = std::move(t);
    return *this;
  }
};

}  // namespace frost::graph
