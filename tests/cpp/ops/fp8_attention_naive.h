// Naive FP64 formulas of the FP8 and MXFP8 attention backwards (frost/ops/sdpa_fp8_backward.h,
// frost/ops/sdpa_mxfp8.h), written from their definitions: for each (batch, query head) the whole
// s_q x s_kv matrices P = exp(S - Stats) and dS = attn_scale * P * (dP - D), the recipe's quantization of
// them, then the three products. Arrays are dense row-major [b, h, s, d] real (dequantized) values; the
// masks follow SdpaProblem as in sdpa_naive.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "common/dtype_convert.h"
#include "ops/sdpa_naive.h"

namespace frost::test {

struct Fp8BackwardInputs {
  std::vector<double> q, k, v, o, d_o, stats;
  // The copies the MXFP8 backward reads for one product (empty: the arrays above).
  std::vector<double> q_for_dk, k_for_dq, d_o_for_dv, d_o_for_delta;
};

struct Fp8Gradients {
  std::vector<double> dq, dk, dv;
};

// A quantization step applied to one head's s_q x s_kv matrix in place.
using MatrixQuantizer = std::function<void(std::vector<double>& m, int64_t s_q, int64_t s_kv)>;

inline void no_quantization(std::vector<double>&, int64_t, int64_t) {}

inline Fp8Gradients fp8_attention_backward_naive(const SdpaProblem& p, const Fp8BackwardInputs& x,
                                                 const MatrixQuantizer& quantize_p, const MatrixQuantizer& ds_for_dq,
                                                 const MatrixQuantizer& ds_for_dk) {
  const auto& q_dk = x.q_for_dk.empty() ? x.q : x.q_for_dk;
  const auto& k_dq = x.k_for_dq.empty() ? x.k : x.k_for_dq;
  const auto& d_o_dv = x.d_o_for_dv.empty() ? x.d_o : x.d_o_for_dv;
  const auto& d_o_delta = x.d_o_for_delta.empty() ? x.d_o : x.d_o_for_delta;
  auto at = [](int64_t i0, int64_t i1, int64_t i2, int64_t i3, int64_t n1, int64_t n2, int64_t n3) {
    return static_cast<size_t>(((i0 * n1 + i1) * n2 + i2) * n3 + i3);
  };
  Fp8Gradients g;
  g.dq.assign(x.q.size(), 0.0), g.dk.assign(x.k.size(), 0.0), g.dv.assign(x.v.size(), 0.0);
  const bool padding = !p.seq_len_q.empty();
  for (int64_t b = 0; b < p.b; ++b) {
    const int64_t rows = padding ? p.seq_len_q[static_cast<size_t>(b)] : p.s_q;
    const int64_t keys = padding ? p.seq_len_kv[static_cast<size_t>(b)] : p.s_kv;
    for (int64_t h = 0; h < p.h_q; ++h) {
      const int64_t kh = h * p.h_k / p.h_q, vh = h * p.h_v / p.h_q;
      std::vector<double> prob(static_cast<size_t>(p.s_q * p.s_kv), 0.0), ds(prob.size(), 0.0);
      for (int64_t i = 0; i < rows; ++i) {
        const double lse = x.stats[at(b, h, i, 0, p.h_q, p.s_q, 1)];
        if (lse == -std::numeric_limits<double>::infinity()) continue;
        double delta = 0;
        for (int64_t d = 0; d < p.d_v; ++d)
          delta += d_o_delta[at(b, h, i, d, p.h_q, p.s_q, p.d_v)] * x.o[at(b, h, i, d, p.h_q, p.s_q, p.d_v)];
        const int64_t diagonal = p.bottom_right ? i + keys - rows : i;
        for (int64_t j = 0; j < keys; ++j) {
          if (p.left_bound && j <= diagonal - *p.left_bound) continue;
          if (p.right_bound && j > diagonal + *p.right_bound) continue;
          double s = 0, dp = 0;
          for (int64_t d = 0; d < p.d_qk; ++d)
            s += x.q[at(b, h, i, d, p.h_q, p.s_q, p.d_qk)] * x.k[at(b, kh, j, d, p.h_k, p.s_kv, p.d_qk)];
          for (int64_t d = 0; d < p.d_v; ++d)
            dp += x.d_o[at(b, h, i, d, p.h_q, p.s_q, p.d_v)] * x.v[at(b, vh, j, d, p.h_v, p.s_kv, p.d_v)];
          const double pij = std::exp(p.attn_scale * s - lse);
          prob[static_cast<size_t>(i * p.s_kv + j)] = pij;
          ds[static_cast<size_t>(i * p.s_kv + j)] = p.attn_scale * pij * (dp - delta);
        }
      }
      std::vector<double> p_dv = prob, ds_q = ds, ds_k = ds;
      quantize_p(p_dv, p.s_q, p.s_kv);
      ds_for_dq(ds_q, p.s_q, p.s_kv);
      ds_for_dk(ds_k, p.s_q, p.s_kv);
      for (int64_t i = 0; i < p.s_q; ++i)
        for (int64_t j = 0; j < p.s_kv; ++j) {
          const size_t ij = static_cast<size_t>(i * p.s_kv + j);
          for (int64_t d = 0; d < p.d_qk; ++d) {
            g.dq[at(b, h, i, d, p.h_q, p.s_q, p.d_qk)] += ds_q[ij] * k_dq[at(b, kh, j, d, p.h_k, p.s_kv, p.d_qk)];
            g.dk[at(b, kh, j, d, p.h_k, p.s_kv, p.d_qk)] += ds_k[ij] * q_dk[at(b, h, i, d, p.h_q, p.s_q, p.d_qk)];
          }
          for (int64_t d = 0; d < p.d_v; ++d)
            g.dv[at(b, vh, j, d, p.h_v, p.s_kv, p.d_v)] += p_dv[ij] * d_o_dv[at(b, h, i, d, p.h_q, p.s_q, p.d_v)];
        }
    }
  }
  return g;
}

// Central differences of L = sum(dO * O(Q, K, V)), O the dense attention of sdpa_naive, with respect to
// every element of Q, K and V (real values).
inline Fp8Gradients central_differences(const SdpaProblem& p, const std::vector<double>& q,
                                        const std::vector<double>& k, const std::vector<double>& v,
                                        const std::vector<double>& d_o, double step = 1e-5) {
  auto loss = [&](const std::vector<double>& qq, const std::vector<double>& kk, const std::vector<double>& vv) {
    const SdpaNaiveResult r = sdpa_naive(p, qq, kk, vv);
    double l = 0;
    for (size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * d_o[i];
    return l;
  };
  Fp8Gradients g;
  auto differentiate = [&](std::vector<double> x, int which) {
    std::vector<double> grad(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double keep = x[i], h = step * std::max(1.0, std::fabs(keep));
      double l[2];
      for (int side = 0; side < 2; ++side) {
        x[i] = keep + (side == 0 ? h : -h);
        l[side] = loss(which == 0 ? x : q, which == 1 ? x : k, which == 2 ? x : v);
      }
      x[i] = keep;
      grad[i] = (l[0] - l[1]) / (2 * h);
    }
    return grad;
  };
  g.dq = differentiate(q, 0);
  g.dk = differentiate(k, 1);
  g.dv = differentiate(v, 2);
  return g;
}

// The OCP MX round trip of values x[0], x[stride], ... in blocks of 32 (the last may be shorter), as
// frost's block_scale_quantize defines it: scale 2^(floor(log2 amax) - emax), values rounded to the
// element type with saturation.
inline void mx_round_trip_naive(double* x, int64_t n, int64_t stride, DataType_t values) {
  const int emax = values == DataType_t::FP8_E4M3 ? 8 : 15;
  for (int64_t start = 0; start < n; start += 32) {
    const int64_t end = std::min(n, start + 32);
    double amax = 0;
    for (int64_t t = start; t < end; ++t) amax = std::max(amax, std::fabs(x[t * stride]));
    int binary_exponent = 0;
    std::frexp(amax, &binary_exponent);  // amax = m * 2^binary_exponent, m in [0.5, 1)
    const int e = amax > 0 ? binary_exponent - 1 - emax : -127;
    const double scale = std::ldexp(1.0, std::clamp(e, -127, 127));
    for (int64_t t = start; t < end; ++t)
      x[t * stride] = detail::round_to_saturated(values, x[t * stride] / scale) * scale;
  }
}

}  // namespace frost::test
