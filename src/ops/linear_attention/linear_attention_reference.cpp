// CPU reference of GDN, KDA and their backward passes: per sequence and value head, gather dense
// arrays, run the token-by-token recurrence of delta_rule_math.h in T, scatter the results.
#include <algorithm>
#include <cmath>

#include "engines/reference/ref_exec.h"
#include "ops/common/packed_sequences.h"
#include "ops/linear_attention/delta_rule_math.h"
#include "ops/linear_attention/linear_attention_node.h"

namespace frost::detail {
namespace {

constexpr double kL2NormEpsilon = 1e-6;

// x * rsqrt(sum(x^2) + 1e-6) over the last axis, in place.
template <class T>
void l2_normalize(Array<T>& x) {
  const int64_t width = x.dim.back();
  for (int64_t r = 0; r < x.size(); r += width) {
    T sum = 0;
    for (int64_t d = 0; d < width; ++d) sum += x[r + d] * x[r + d];
    const T inv = T(1) / std::sqrt(sum + static_cast<T>(kL2NormEpsilon));
    for (int64_t d = 0; d < width; ++d) x[r + d] *= inv;
  }
}

// Gradient through l2_normalize: dx = r (dy - y (y . dy)) with y the normalized x and r its factor.
template <class T>
void l2_normalize_backward(const Array<T>& x, Array<T>& grad) {
  const int64_t width = x.dim.back();
  for (int64_t r = 0; r < x.size(); r += width) {
    T sum = 0, dot = 0;
    for (int64_t d = 0; d < width; ++d) sum += x[r + d] * x[r + d];
    const T inv = T(1) / std::sqrt(sum + static_cast<T>(kL2NormEpsilon));
    for (int64_t d = 0; d < width; ++d) dot += x[r + d] * inv * grad[r + d];
    for (int64_t d = 0; d < width; ++d) grad[r + d] = inv * (grad[r + d] - x[r + d] * inv * dot);
  }
}

template <class T, class Attr>
error_t run_delta_rule(const DeltaRuleNode<Attr>& node, RefExec& ex) {
  constexpr bool kBackward = DeltaRuleNode<Attr>::kBackward;
  const auto& qd = node.in(LinIn::Q)->get_dim();
  const auto& vd = node.in(LinIn::V)->get_dim();
  const int64_t batch = qd[0], len = qd[1], heads = qd[2], key_dim = qd[3], value_heads = vd[2], value_dim = vd[3];
  const int64_t group = value_heads / heads, decay_width = DeltaRuleNode<Attr>::kPerKeyDecay ? key_dim : 1;
  const TensorPtr init_t = node.in(LinIn::INITIAL_STATE);
  std::vector<Sequence> seqs;
  FROST_CHECK(
      load_sequences(node, ex, node.in(LinIn::CU_SEQLENS), node.in(LinIn::STATE_INDICES), init_t, batch, len, seqs));
  const bool pooled = node.in(LinIn::STATE_INDICES) != nullptr;

  const Array<T> q_raw = ex.load<T>(node.in(LinIn::Q)), k_raw = ex.load<T>(node.in(LinIn::K));
  Array<T> q = q_raw, k = k_raw;
  if (node.attr.use_qk_l2norm_in_kernel) {
    l2_normalize(q);
    l2_normalize(k);
  }
  const Array<T> v = ex.load<T>(node.in(LinIn::V)), g = ex.load<T>(node.in(LinIn::G));
  const Array<T> beta = ex.load<T>(node.in(LinIn::BETA));
  const int64_t kv = key_dim * value_dim;
  const std::vector<int64_t> state_dims{init_t ? init_t->get_dim()[0] : static_cast<int64_t>(seqs.size()), value_heads,
                                        key_dim, value_dim};
  const Array<T> init = init_t ? ex.load<T>(init_t) : Array<T>(state_dims);
  const T scale = node.attr.scale ? static_cast<T>(*node.attr.scale) : T(1) / std::sqrt(static_cast<T>(key_dim));

  Array<T> o({batch, len, value_heads, value_dim}), final_state = pooled ? init : Array<T>(state_dims);
  Array<T> d_o, d_final, dq(q.dim), dk(k.dim), dv(v.dim), dg(g.dim), dbeta(beta.dim), d_init;
  if constexpr (kBackward) {
    d_o = ex.load<T>(node.in(LinIn::DO));
    const TensorPtr d_final_t = node.in(LinIn::D_FINAL_STATE);
    d_final = d_final_t ? ex.load<T>(d_final_t) : Array<T>(state_dims);
    // Pool rows no sequence touches pass straight from the initial to the final state.
    d_init = pooled ? d_final : Array<T>(state_dims);
  }
  for (const Sequence& s : seqs)
    for (int64_t hv = 0; hv < value_heads; ++hv) {
      const int64_t h = hv / group, state_at = (s.state_row * value_heads + hv) * kv;
      DeltaRuleProblem<T> p;
      p.len = s.len, p.key_dim = key_dim, p.value_dim = value_dim, p.decay_width = decay_width, p.scale = scale;
      for (int64_t t = s.first; t < s.first + s.len; ++t) {
        const int64_t qk_at = (t * heads + h) * key_dim, v_at = (t * value_heads + hv) * value_dim;
        p.q.insert(p.q.end(), &q[qk_at], &q[qk_at] + key_dim);
        p.k.insert(p.k.end(), &k[qk_at], &k[qk_at] + key_dim);
        p.v.insert(p.v.end(), &v[v_at], &v[v_at] + value_dim);
        p.g.insert(p.g.end(), &g[(t * value_heads + hv) * decay_width],
                   &g[(t * value_heads + hv) * decay_width] + decay_width);
        p.beta.push_back(beta[t * value_heads + hv]);
      }
      p.state.assign(&init[state_at], &init[state_at] + kv);
      if constexpr (!kBackward) {
        const std::vector<T> out = delta_rule_recurrent(p);
        for (int64_t t = 0; t < s.len; ++t)
          std::copy_n(&out[static_cast<size_t>(t * value_dim)], value_dim,
                      &o[((s.first + t) * value_heads + hv) * value_dim]);
        std::copy(p.state.begin(), p.state.end(), &final_state[state_at]);
      } else {
        std::vector<T> d_out;
        for (int64_t t = s.first; t < s.first + s.len; ++t)
          d_out.insert(d_out.end(), &d_o[(t * value_heads + hv) * value_dim],
                       &d_o[(t * value_heads + hv) * value_dim] + value_dim);
        const DeltaRuleGrads<T> r =
            delta_rule_backward(p, d_out, std::vector<T>(&d_final[state_at], &d_final[state_at] + kv));
        for (int64_t t = 0; t < s.len; ++t) {
          const int64_t token = s.first + t, qk_at = (token * heads + h) * key_dim;
          for (int64_t d = 0; d < key_dim; ++d) {
            dq[qk_at + d] += r.dq[static_cast<size_t>(t * key_dim + d)];  // value heads of a GVA group add up
            dk[qk_at + d] += r.dk[static_cast<size_t>(t * key_dim + d)];
          }
          std::copy_n(&r.dv[static_cast<size_t>(t * value_dim)], value_dim,
                      &dv[(token * value_heads + hv) * value_dim]);
          std::copy_n(&r.dg[static_cast<size_t>(t * decay_width)], decay_width,
                      &dg[(token * value_heads + hv) * decay_width]);
          dbeta[token * value_heads + hv] = r.dbeta[static_cast<size_t>(t)];
        }
        std::copy(r.dstate.begin(), r.dstate.end(), &d_init[state_at]);
      }
    }
  if constexpr (!kBackward) {
    ex.store(node.out(LinOut::O), o);
    if (const TensorPtr t = node.out(LinOut::FINAL_STATE)) ex.store(t, final_state);
  } else {
    if (node.attr.use_qk_l2norm_in_kernel) {
      l2_normalize_backward(q_raw, dq);
      l2_normalize_backward(k_raw, dk);
    }
    ex.store(node.out(LinOut::DQ), dq);
    ex.store(node.out(LinOut::DK), dk);
    ex.store(node.out(LinOut::DV), dv);
    ex.store(node.out(LinOut::DG), dg);
    ex.store(node.out(LinOut::DBETA), dbeta);
    if (const TensorPtr t = node.out(LinOut::D_INITIAL_STATE)) ex.store(t, d_init);
  }
  return {};
}

}  // namespace

template <class Attr>
error_t DeltaRuleNode<Attr>::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t { return run_delta_rule<decltype(zero)>(*this, ex); });
}

template error_t DeltaRuleNode<graph::Gdn_attributes>::run_reference(RefExec&) const;
template error_t DeltaRuleNode<graph::Kda_attributes>::run_reference(RefExec&) const;
template error_t DeltaRuleNode<graph::Gdn_backward_attributes>::run_reference(RefExec&) const;
template error_t DeltaRuleNode<graph::Kda_backward_attributes>::run_reference(RefExec&) const;

}  // namespace frost::detail
