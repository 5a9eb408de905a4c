// A naive scaled dot-product attention backward in double, the independent oracle for the
// reference engine: it recomputes each row's softmax from Q, K, V (never reading O or Stats) and
// applies the softmax Jacobian, dL/ds_n = sum_m dL/dP_m * P_m (delta_mn - P_n), over the row's
// visible keys plus the sink logit. Arrays are dense row-major in logical [b, h, s, d] order. The
// problem's block mask hides keys and its dropout factors F scale each probability in O, so that
// dL/dP_j = F_j * (dO . v_j) and dV_j gains P_j * F_j * dO.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/sdpa_naive.h"

namespace frost::test {

struct SdpaGradients {
  std::vector<double> dq, dk, dv;  // dims of Q, K, V
  std::vector<double> dbias;       // dims of the bias; empty without one
  std::vector<double> dsink;       // [1, h_q, 1, 1]; empty without a sink
};

inline SdpaGradients sdpa_backward_naive(const SdpaProblem& p, const std::vector<double>& q,
                                         const std::vector<double>& k, const std::vector<double>& v,
                                         const std::vector<double>& d_o, const std::vector<double>& bias = {},
                                         const std::vector<double>& sink = {}) {
  const bool padding = !p.seq_len_q.empty();
  const std::vector<double> slopes = p.alibi ? naive_alibi_slopes(p.h_q) : std::vector<double>();
  SdpaGradients g;
  g.dq.assign(q.size(), 0.0), g.dk.assign(k.size(), 0.0), g.dv.assign(v.size(), 0.0);
  g.dbias.assign(bias.size(), 0.0), g.dsink.assign(sink.size(), 0.0);
  auto at = [](int64_t i0, int64_t i1, int64_t i2, int64_t i3, int64_t n1, int64_t n2, int64_t n3) {
    return static_cast<size_t>(((i0 * n1 + i1) * n2 + i2) * n3 + i3);
  };
  for (int64_t b = 0; b < p.b; ++b) {
    const int64_t rows = padding ? p.seq_len_q[static_cast<size_t>(b)] : p.s_q;
    const int64_t keys = padding ? p.seq_len_kv[static_cast<size_t>(b)] : p.s_kv;
    for (int64_t h = 0; h < p.h_q; ++h) {
      const int64_t kh = h * p.h_k / p.h_q, vh = h * p.h_v / p.h_q;
      const int64_t bb = p.bias_dim.empty() || p.bias_dim[0] == 1 ? 0 : b;
      const int64_t bh = p.bias_dim.empty() || p.bias_dim[1] == 1 ? 0 : h;
      const int64_t bias_heads = p.bias_dim.empty() ? 1 : p.bias_dim[1];
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t diagonal = p.bottom_right ? i + keys - rows : i;
        std::vector<int64_t> key_of;
        std::vector<double> logit;
        for (int64_t j = 0; j < keys; ++j) {
          if (p.left_bound && j <= diagonal - *p.left_bound) continue;
          if (p.right_bound && j > diagonal + *p.right_bound) continue;
          if (!p.block_mask_dim.empty()) {
            const int64_t mb = p.block_mask_dim[0] == 1 ? 0 : b, mh = p.block_mask_dim[1] == 1 ? 0 : h;
            if (p.block_mask[at(mb, mh, i / p.tile_q, j / p.tile_kv, p.block_mask_dim[1], p.block_mask_dim[2],
                                p.block_mask_dim[3])] == 0)
              continue;
          }
          double s = 0;
          for (int64_t d = 0; d < p.d_qk; ++d)
            s += q[at(b, h, i, d, p.h_q, p.s_q, p.d_qk)] * k[at(b, kh, j, d, p.h_k, p.s_kv, p.d_qk)];
          s *= p.attn_scale;
          if (!bias.empty()) s += bias[at(bb, bh, i, j, bias_heads, p.s_q, p.s_kv)];
          if (p.alibi) s += slopes[static_cast<size_t>(h)] * static_cast<double>(j - diagonal);
          key_of.push_back(j);
          logit.push_back(s);
        }
        if (key_of.empty()) continue;  // O = 0 whatever the operands: no gradient (also with a sink)
        // Softmax over the visible logits and the sink; the sink's probability carries no value row.
        double m = p.sink ? sink[static_cast<size_t>(h)] : logit[0];
        for (double s : logit) m = std::max(m, s);
        double z = p.sink ? std::exp(sink[static_cast<size_t>(h)] - m) : 0.0;
        for (double s : logit) z += std::exp(s - m);
        const double p_sink = p.sink ? std::exp(sink[static_cast<size_t>(h)] - m) / z : 0.0;
        const size_t n_keys = key_of.size();
        std::vector<double> prob(n_keys), d_prob(n_keys), factor(n_keys, 1.0);
        for (size_t n = 0; n < n_keys; ++n) {
          prob[n] = std::exp(logit[n] - m) / z;
          if (!p.drop_factor.empty()) factor[n] = p.drop_factor[at(b, h, i, key_of[n], p.h_q, p.s_q, p.s_kv)];
          for (int64_t d = 0; d < p.d_v; ++d)
            d_prob[n] += d_o[at(b, h, i, d, p.h_q, p.s_q, p.d_v)] * v[at(b, vh, key_of[n], d, p.h_v, p.s_kv, p.d_v)];
          d_prob[n] *= factor[n];
        }
        for (size_t n = 0; n < n_keys; ++n) {
          double d_logit = 0;
          for (size_t mm = 0; mm < n_keys; ++mm) d_logit += d_prob[mm] * prob[mm] * ((mm == n ? 1.0 : 0.0) - prob[n]);
          const int64_t j = key_of[n];
          for (int64_t d = 0; d < p.d_qk; ++d) {
            g.dq[at(b, h, i, d, p.h_q, p.s_q, p.d_qk)] +=
                p.attn_scale * d_logit * k[at(b, kh, j, d, p.h_k, p.s_kv, p.d_qk)];
            g.dk[at(b, kh, j, d, p.h_k, p.s_kv, p.d_qk)] +=
                p.attn_scale * d_logit * q[at(b, h, i, d, p.h_q, p.s_q, p.d_qk)];
          }
          for (int64_t d = 0; d < p.d_v; ++d)
            g.dv[at(b, vh, j, d, p.h_v, p.s_kv, p.d_v)] +=
                prob[n] * factor[n] * d_o[at(b, h, i, d, p.h_q, p.s_q, p.d_v)];
          if (!bias.empty()) g.dbias[at(bb, bh, i, j, bias_heads, p.s_q, p.s_kv)] += d_logit;
        }
        if (p.sink)
          for (size_t mm = 0; mm < n_keys; ++mm) g.dsink[static_cast<size_t>(h)] -= d_prob[mm] * prob[mm] * p_sink;
      }
    }
  }
  return g;
}

}  // namespace frost::test
