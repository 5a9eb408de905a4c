// The math of the attention backward, shared by sdpa_backward and the FP8 and MXFP8 attention
// backwards. On real values (the FP8 ops dequantize first), for each (batch, query head):
//   P = exp(S - LSE) with S = scale * Q K^T (+ bias, + ALiBi), zero outside the visible keys
//   F = the forward's dropout factors (1 without dropout)
//   D = rowsum(dO * O)      dP = dO V^T      dS = scale * P * (dP * F - D)
//   dV = (P * F)^T dO       dQ = dS K        dK = dS^T Q
//   dBias = P * (dP * F - D), summed over the bias's broadcast dims;  dSink[h] -= exp(sink[h] - LSE) * D
// A recipe sees each head's P and dS as whole s_q x s_kv matrices before the three products and may
// replace what they read: the FP8 recipe quantizes P and dS with per-tensor scales, the MXFP8 recipe
// quantizes dS in 32-element blocks along either axis, which a row-at-a-time loop could not do.
// GQA/MQA: dK and dV sum the query heads of each group. Every sum runs in one fixed order.
#pragma once

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa/sdpa_masks.h"
#include "ops/sdpa/sdpa_operands.h"

namespace frost::detail {

template <class T>
struct AttentionBackwardOperands {
  AttentionExtents ext;
  // Real values, read through their addressing (dense or packed); K and V may have fewer heads.
  const Operand<T>* q = nullptr;
  const Operand<T>* k = nullptr;
  const Operand<T>* v = nullptr;
  const Operand<T>* o = nullptr;
  const Operand<T>* d_o = nullptr;
  const Operand<T>* stats = nullptr;  // [b, h_q, s_q, 1]: the forward's log-sum-exp
  // Other copies of an operand for one product, where a recipe quantizes it along another axis
  // (null: the operands above).
  const Operand<T>* q_for_dk = nullptr;       // in dK = dS^T Q
  const Operand<T>* k_for_dq = nullptr;       // in dQ = dS K
  const Operand<T>* d_o_for_dv = nullptr;     // in dV = P^T dO
  const Operand<T>* d_o_for_delta = nullptr;  // in D = rowsum(dO * O)
  T scale = 1;
  T stats_to_natural = 1;                             // ln 2 when Stats hold base-2 logarithms
  const Array<T>* bias = nullptr;                     // [b or 1, h_q or 1, s_q, s_kv]
  const std::vector<double>* alibi_slopes = nullptr;  // one per query head
  const Array<T>* sink = nullptr;                     // [1, h_q, 1, 1]
  AttentionMask mask;
  BlockMask block;           // none by default
  DropoutFactor<T> dropout;  // none by default
  std::vector<int64_t> len_q, len_kv;  // valid lengths per batch (the full extents without padding)
};

// Dense gradients: dq [b, h_q, s_q, d_qk], dk [b, h_k, s_kv, d_qk], dv [b, h_v, s_kv, d_v], dbias as
// the bias, dsink [1, h_q, 1, 1]. Rows past the valid lengths are zero.
template <class T>
struct AttentionGradients {
  Array<T> dq, dk, dv, dbias, dsink;
};

// One head's matrices, s_q x s_kv row-major. They start as P * dropout (p_dv) and dS (ds_dq, ds_dk),
// zero outside the visible keys; a recipe may rewrite them (and must keep zeros zero).
template <class T>
struct HeadGradientInputs {
  int64_t s_q = 0, s_kv = 0;
  std::vector<T> p_dv, ds_dq, ds_dk;
};

template <class T, class Recipe>
AttentionGradients<T> attention_backward(const AttentionBackwardOperands<T>& op, Recipe&& recipe) {
  const Operand<T>&q = *op.q, &k = *op.k, &v = *op.v, &o = *op.o, &d_o = *op.d_o, &stats = *op.stats;
  const Operand<T>& q_dk = op.q_for_dk ? *op.q_for_dk : q;
  const Operand<T>& k_dq = op.k_for_dq ? *op.k_for_dq : k;
  const Operand<T>& d_o_dv = op.d_o_for_dv ? *op.d_o_for_dv : d_o;
  const Operand<T>& d_o_delta = op.d_o_for_delta ? *op.d_o_for_delta : d_o;
  const auto [batch, h_q, h_k, h_v, s_q, s_kv, d_qk, d_v] = op.ext;
  const int64_t bias_b = op.bias ? op.bias->dim[0] : 1, bias_h = op.bias ? op.bias->dim[1] : 1;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();

  AttentionGradients<T> g{Array<T>({batch, h_q, s_q, d_qk}), Array<T>({batch, h_k, s_kv, d_qk}),
                          Array<T>({batch, h_v, s_kv, d_v}),
                          Array<T>(op.bias ? op.bias->dim : std::vector<int64_t>{}), Array<T>({1, h_q, 1, 1})};
  HeadGradientInputs<T> m;
  m.s_q = s_q, m.s_kv = s_kv;
  std::vector<std::pair<int64_t, int64_t>> visible(static_cast<size_t>(s_q));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len_q = op.len_q[static_cast<size_t>(b)], len_kv = op.len_kv[static_cast<size_t>(b)];
    for (int64_t h = 0; h < h_q; ++h) {
      const int64_t kh = h / (h_q / h_k), vh = h / (h_q / h_v);
      const int64_t bias_head = ((bias_b == 1 ? 0 : b) * bias_h + (bias_h == 1 ? 0 : h)) * s_q * s_kv;
      m.p_dv.assign(static_cast<size_t>(s_q * s_kv), T(0));
      m.ds_dq.assign(m.p_dv.size(), T(0));
      for (int64_t i = 0; i < s_q; ++i) {
        visible[static_cast<size_t>(i)] = {0, 0};
        if (i >= len_q) continue;  // padding rows have no gradient
        const T lse = stats.at(b, h, i, 0) * op.stats_to_natural;
        // Rows with an empty softmax have no gradient. The saved Stats decide emptiness, so a row
        // they mark -inf never turns into exp(+inf) * 0 = NaN.
        if (lse == kNegInf) continue;
        const auto [first, last] = op.mask.visible_keys(i, len_q, len_kv);
        if (first >= last) continue;
        visible[static_cast<size_t>(i)] = {first, last};
        const int64_t diag = op.mask.diagonal(i, len_q, len_kv);
        T delta = 0;  // sum_j P_ij dP_ij: the sink carries no value row
        for (int64_t d = 0; d < d_v; ++d) delta += d_o_delta.at(b, h, i, d) * o.at(b, h, i, d);
        T* p_row = &m.p_dv[static_cast<size_t>(i * s_kv)];
        T* ds_row = &m.ds_dq[static_cast<size_t>(i * s_kv)];
        for (int64_t j = first; j < last; ++j) {
          if (!op.block.visible(b, h, i, j)) continue;
          T dot = 0;
          for (int64_t d = 0; d < d_qk; ++d) dot += q.at(b, h, i, d) * k.at(b, kh, j, d);
          T s = op.scale * dot;
          if (op.bias) s += (*op.bias)[bias_head + i * s_kv + j];
          if (op.alibi_slopes)
            s += static_cast<T>((*op.alibi_slopes)[static_cast<size_t>(h)] * static_cast<double>(j - diag));
          const T p = std::exp(s - lse);
          const T factor = op.dropout.at(b, h, i, j);
          T dp = 0;
          for (int64_t d = 0; d < d_v; ++d) dp += d_o.at(b, h, i, d) * v.at(b, vh, j, d);
          // O used P * factor: dV sees it, and dP reaches S only through the kept entries.
          const T ds = p * (dp * factor - delta);
          if (op.bias) g.dbias[bias_head + i * s_kv + j] += ds;
          p_row[j] = p * factor;
          ds_row[j] = op.scale * ds;
        }
        if (op.sink) g.dsink[h] -= std::exp((*op.sink)[h] - lse) * delta;
      }
      m.ds_dk = m.ds_dq;
      recipe(m);
      for (int64_t i = 0; i < s_q; ++i) {
        T* dq_row = &g.dq[((b * h_q + h) * s_q + i) * d_qk];
        const auto [first, last] = visible[static_cast<size_t>(i)];
        for (int64_t j = first; j < last; ++j) {
          const size_t ij = static_cast<size_t>(i * s_kv + j);
          T* dk_row = &g.dk[((b * h_k + kh) * s_kv + j) * d_qk];
          for (int64_t d = 0; d < d_qk; ++d) {
            dq_row[d] += m.ds_dq[ij] * k_dq.at(b, kh, j, d);
            dk_row[d] += m.ds_dk[ij] * q_dk.at(b, h, i, d);
          }
          T* dv_row = &g.dv[((b * h_v + vh) * s_kv + j) * d_v];
          for (int64_t d = 0; d < d_v; ++d) dv_row[d] += m.p_dv[ij] * d_o_dv.at(b, h, i, d);
        }
      }
    }
  }
  return g;
}

}  // namespace frost::detail
