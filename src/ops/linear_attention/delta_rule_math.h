// The delta rule on one sequence of one value head, in dense row-major arrays: the sequential
// recurrence (the definition), a chunked form (the WY/UT representation fast kernels use, kept to
// check that algebra), and the backward pass through the recurrence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace frost::detail {

// q, k [len, key_dim] (already L2-normalized when the op asks for it); v [len, value_dim];
// g [len, decay_width] log-space decay (decay_width 1: GDN's scalar, key_dim: KDA's per channel);
// beta [len]; state [key_dim, value_dim], the state before the first token.
template <class T>
struct DeltaRuleProblem {
  int64_t len = 0, key_dim = 0, value_dim = 0, decay_width = 1;
  T scale = T(1);
  std::vector<T> q, k, v, g, beta, state;

  T decay_log(int64_t t, int64_t channel) const {
    return g[static_cast<size_t>(t * decay_width + (decay_width == 1 ? 0 : channel))];
  }
};

// Token by token: S' = diag(exp(g_t)) S, u = beta_t (v_t - S'^T k_t), S = S' + k_t u^T,
// o_t = scale S^T q_t. Returns o [len, value_dim]; p.state becomes the final state.
template <class T>
std::vector<T> delta_rule_recurrent(DeltaRuleProblem<T>& p);

// The same result by chunks of `chunk` tokens: per chunk, the UT transform (I + A)^-1 with
// A = strictly lower(diag(beta) (K Gamma)(K / Gamma)^T) turns the chain of rank-one updates into
// two matrix products, then the state passes to the next chunk in one step.
template <class T>
std::vector<T> delta_rule_chunked(DeltaRuleProblem<T>& p, int64_t chunk = 64);

template <class T>
struct DeltaRuleGrads {
  std::vector<T> dq, dk, dv, dg, dbeta, dstate;  // shaped as q, k, v, g, beta, state
};

// Gradients of sum(d_o * o) + sum(d_final * final_state) through the recurrence, walking time
// backwards over the stored decayed states. d_final may be empty (zero). p is not changed.
template <class T>
DeltaRuleGrads<T> delta_rule_backward(const DeltaRuleProblem<T>& p, const std::vector<T>& d_o,
                                      const std::vector<T>& d_final);

}  // namespace frost::detail
