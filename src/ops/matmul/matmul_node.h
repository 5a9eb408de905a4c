#pragma once

#include "engines/reference/ref_exec.h"
#include "frost/ops/matmul.h"
#include "graph/attr_node.h"

namespace frost::detail {

// The tensors of a matmul, shared by MATMUL and MATMUL_FP8 (overrides may be null).
struct MatmulTensors {
  TensorPtr a, b, m_override, n_override, k_override;
};

// Checks A and B (rank >= 2, a matmul operand type, equal K, batch dims that broadcast) and the
// override tensors, and gives C's dims: the broadcast batch dims, then M and N.
error_t matmul_shape(const Node& node, const MatmulTensors& t, std::vector<int64_t>& c_dims);

// c (dims of C) = A @ B over each batch's effective M x N x K (the overrides), `padding` elsewhere.
// Accumulates in T. Every override value is checked before c is written.
template <class T>
error_t matmul_reference(const Node& node, const RefExec& ex, const MatmulTensors& t, T padding, Array<T>& c);

template <>
struct PortNames<graph::Matmul_attributes> {
  using I = graph::MatmulInput;
  using O = graph::MatmulOutput;
  static constexpr std::array<std::pair<I, const char*>, 5> inputs{{{I::A, "A"},
                                                                    {I::B, "B"},
                                                                    {I::M_OVERRIDE, "M_OVERRIDE"},
                                                                    {I::N_OVERRIDE, "N_OVERRIDE"},
                                                                    {I::K_OVERRIDE, "K_OVERRIDE"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::C, "C"}}};
};

// C[..., m, n] = sum_k A[..., m, k] * B[..., k, n] with right-aligned, broadcast batch dims. Optional
// per-batch override tensors shrink the effective M, N and K; C outside the effective M x N holds
// the padding value.
class MatmulNode final : public AttrNode<graph::Matmul_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "MATMUL";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
  MatmulTensors operands() const;
};

}  // namespace frost::detail
