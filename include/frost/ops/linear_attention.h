// Linear attention with the (gated) delta rule, in flash-linear-attention's conventions:
// GDN (Gated DeltaNet, one log-space decay per token and value head) and KDA (Kimi Delta Attention,
// one log-space decay per token, value head and key channel), forward and backward.
//
// Shapes: q, k [B, T, H, K]; v [B, T, HV, V]; g [B, T, HV] (GDN) or [B, T, HV, K] (KDA); beta
// [B, T, HV] (already through the sigmoid); o [B, T, HV, V]. HV must be a multiple of H (GVA):
// value head hv reads q/k head hv / (HV / H). States are [N, HV, K, V] FP32, one per sequence; N is
// B, or the number of packed sequences when cu_seqlens ([N + 1], INT32 or INT64, B == 1) is set.
// With state_indices (INT32 [N]) the initial state is a pool [P, HV, K, V] and sequence n starts
// from row state_indices[n]; the final state is then the same pool with those rows replaced and
// every other row copied, so binding final_state to initial_state's buffer updates it in place.
//
// Per sequence and value head, with S the K x V state (S_0 the initial state, zero if none):
//   S'  = diag(exp(g_t)) S_{t-1}          (GDN: the scalar exp(g_t))
//   u_t = beta_t (v_t - S'^T k_t)
//   S_t = S' + k_t u_t^T
//   o_t = scale S_t^T q_t
// use_qk_l2norm_in_kernel first maps q and k per token and head to x * rsqrt(sum(x^2) + 1e-6).
// scale defaults to K^-0.5. JSON tags: GDN, GDN_BACKWARD, KDA, KDA_BACKWARD; ports are named as the
// enumerators below.
#pragma once

#include <optional>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class LinearAttentionInput { Q, K, V, G, BETA, INITIAL_STATE, CU_SEQLENS, STATE_INDICES, DO, D_FINAL_STATE };
enum class LinearAttentionOutput { O, FINAL_STATE, DQ, DK, DV, DG, DBETA, D_INITIAL_STATE };

// Attributes shared by the four ops.
template <class Derived>
class Delta_rule_attributes : public Attributes<Derived, LinearAttentionInput, LinearAttentionOutput> {
 public:
  std::optional<float> scale;  // unset: K^-0.5
  bool use_qk_l2norm_in_kernel = false;

  Derived& set_scale(float v) { scale = v; return this->self(); }
  Derived& set_use_qk_l2norm_in_kernel(bool v) { use_qk_l2norm_in_kernel = v; return this->self(); }
  Derived& set_initial_state(TensorPtr t) { return bind(LinearAttentionInput::INITIAL_STATE, std::move(t)); }
  Derived& set_cu_seqlens(TensorPtr t) { return bind(LinearAttentionInput::CU_SEQLENS, std::move(t)); }
  Derived& set_state_indices(TensorPtr t) { return bind(LinearAttentionInput::STATE_INDICES, std::move(t)); }

 protected:
  Derived& bind(LinearAttentionInput port, TensorPtr t) {
    this->inputs[port] = std::move(t);
    return this->self();
  }
};

// Forward: outputs O and, with output_final_state, FINAL_STATE (FP32 unless set otherwise).
template <class Derived>
class Delta_rule_forward_attributes : public Delta_rule_attributes<Derived> {
 public:
  bool output_final_state = false;
  Derived& set_output_final_state(bool v) { output_final_state = v; return this->self(); }
};

// Backward: from dO (and D_FINAL_STATE when set) to DQ, DK, DV, DG, DBETA and, when an initial
// state is given, D_INITIAL_STATE. The forward is recomputed from the inputs; no saved tensors.
template <class Derived>
class Delta_rule_backward_attributes : public Delta_rule_attributes<Derived> {
 public:
  Derived& set_d_final_state(TensorPtr t) { return this->bind(LinearAttentionInput::D_FINAL_STATE, std::move(t)); }
};

class Gdn_attributes : public Delta_rule_forward_attributes<Gdn_attributes> {};
class Kda_attributes : public Delta_rule_forward_attributes<Kda_attributes> {};
class Gdn_backward_attributes : public Delta_rule_backward_attributes<Gdn_backward_attributes> {};
class Kda_backward_attributes : public Delta_rule_backward_attributes<Kda_backward_attributes> {};

}  // namespace frost::graph
