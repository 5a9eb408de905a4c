#pragma once

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class MatmulInput { A, B, M_OVERRIDE, N_OVERRIDE, K_OVERRIDE };
enum class MatmulOutput { C };

// C[..., m, n] = sum_k A[..., m, k] * B[..., k, n]; batch dims broadcast where one side has extent 1.
// Accumulation is FP32 (FP64 in the reference's fp64 mode) whatever the input types.
class Matmul_attributes : public Attributes<Matmul_attributes, MatmulInput, MatmulOutput> {
 public:
  double padding_value = 0.0;

  Matmul_attributes& set_padding(double v) { padding_value = v; return *this; }
  Matmul_attributes& set_m_override(TensorPtr t) { inputs[MatmulInput::M_OVERRIDE] = std::move(t); return *this; }
  Matmul_attributes& set_n_override(TensorPtr t) { inputs[MatmulInput::N_OVERRIDE] = std::move(t); return *this; }
  Matmul_attributes& set_k_override(TensorPtr t) { inputs[MatmulInput::K_OVERRIDE] = std::move(t); return *this; }
};

}  // namespace frost::graph
