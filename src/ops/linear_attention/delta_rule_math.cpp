#include "ops/linear_attention/delta_rule_math.h"

#include <algorithm>
#include <cmath>

namespace frost::detail {
namespace {

size_t at(int64_t row, int64_t cols, int64_t col) { return static_cast<size_t>(row * cols + col); }

// S' = diag(exp(g_t)) S in place.
template <class T>
void decay_state(const DeltaRuleProblem<T>& p, int64_t t, std::vector<T>& s) {
  for (int64_t i = 0; i < p.key_dim; ++i) {
    const T factor = std::exp(p.decay_log(t, i));
    for (int64_t j = 0; j < p.value_dim; ++j) s[at(i, p.value_dim, j)] *= factor;
  }
}

// u = beta_t (v_t - S'^T k_t), for the decayed state S'.
template <class T>
std::vector<T> delta_update(const DeltaRuleProblem<T>& p, int64_t t, const std::vector<T>& s) {
  std::vector<T> u(static_cast<size_t>(p.value_dim));
  for (int64_t j = 0; j < p.value_dim; ++j) {
    T predicted = 0;
    for (int64_t i = 0; i < p.key_dim; ++i) predicted += s[at(i, p.value_dim, j)] * p.k[at(t, p.key_dim, i)];
    u[static_cast<size_t>(j)] = p.beta[static_cast<size_t>(t)] * (p.v[at(t, p.value_dim, j)] - predicted);
  }
  return u;
}

}  // namespace

template <class T>
std::vector<T> delta_rule_recurrent(DeltaRuleProblem<T>& p) {
  const int64_t kd = p.key_dim, vd = p.value_dim;
  std::vector<T> o(static_cast<size_t>(p.len * vd));
  std::vector<T>& s = p.state;
  for (int64_t t = 0; t < p.len; ++t) {
    decay_state(p, t, s);
    const std::vector<T> u = delta_update(p, t, s);
    for (int64_t i = 0; i < kd; ++i)
      for (int64_t j = 0; j < vd; ++j) s[at(i, vd, j)] += p.k[at(t, kd, i)] * u[static_cast<size_t>(j)];
    for (int64_t j = 0; j < vd; ++j) {
      T acc = 0;
      for (int64_t i = 0; i < kd; ++i) acc += s[at(i, vd, j)] * p.q[at(t, kd, i)];
      o[at(t, vd, j)] = p.scale * acc;
    }
  }
  return o;
}

// Within a chunk of L tokens starting at t0, with G_i = g_{t0} + ... + g_{t0+i} per channel and
// S the state entering the chunk, the recurrence unrolls to
//   U = (I + A)^-1 diag(beta) (V - (K Gamma) S),  A[i][j] = beta_i sum_d k_i[d] k_j[d] exp(G_i[d] - G_j[d]), j < i
//   O = scale ((Q Gamma) S + P U),                 P[i][j] = sum_d q_i[d] k_j[d] exp(G_i[d] - G_j[d]), j <= i
//   S_next = diag(exp(G_L)) S + sum_j diag(exp(G_L - G_j)) k_j U_j^T
// (Gamma = diag(exp(G_i)) on row i). U = u - w S with u = (I + A)^-1 diag(beta) V and
// w = (I + A)^-1 diag(beta) K Gamma: FLA's WY form.
template <class T>
std::vector<T> delta_rule_chunked(DeltaRuleProblem<T>& p, int64_t chunk) {
  const int64_t kd = p.key_dim, vd = p.value_dim;
  std::vector<T> o(static_cast<size_t>(p.len * vd));
  std::vector<T>& s = p.state;
  for (int64_t t0 = 0; t0 < p.len; t0 += chunk) {
    const int64_t n = std::min(chunk, p.len - t0);
    std::vector<T> cum(static_cast<size_t>(n * kd));  // G_i[d]
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0; d < kd; ++d) cum[at(i, kd, d)] = (i ? cum[at(i - 1, kd, d)] : T(0)) + p.decay_log(t0 + i, d);
    auto gated_dot = [&](const std::vector<T>& a, int64_t i, int64_t j) {  // sum_d a_i[d] k_j[d] exp(G_i - G_j)
      T acc = 0;
      for (int64_t d = 0; d < kd; ++d)
        acc += a[at(t0 + i, kd, d)] * p.k[at(t0 + j, kd, d)] * std::exp(cum[at(i, kd, d)] - cum[at(j, kd, d)]);
      return acc;
    };
    // inv = (I + A)^-1, unit lower triangular, by forward substitution: row i of (I + A) inv = I.
    std::vector<T> inv(static_cast<size_t>(n * n), T(0));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<T> a_row(static_cast<size_t>(i));
      for (int64_t m = 0; m < i; ++m)
        a_row[static_cast<size_t>(m)] = p.beta[static_cast<size_t>(t0 + i)] * gated_dot(p.k, i, m);
      for (int64_t j = 0; j <= i; ++j) {
        T acc = i == j ? T(1) : T(0);
        for (int64_t m = j; m < i; ++m) acc -= a_row[static_cast<size_t>(m)] * inv[at(m, n, j)];
        inv[at(i, n, j)] = acc;
      }
    }
    // u = inv diag(beta) V and w = inv diag(beta) K Gamma, then U = u - w S.
    std::vector<T> big_u(static_cast<size_t>(n * vd)), w(static_cast<size_t>(n * kd));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        const T coef = inv[at(i, n, j)] * p.beta[static_cast<size_t>(t0 + j)];
        for (int64_t c = 0; c < vd; ++c) big_u[at(i, vd, c)] += coef * p.v[at(t0 + j, vd, c)];
        for (int64_t d = 0; d < kd; ++d) w[at(i, kd, d)] += coef * p.k[at(t0 + j, kd, d)] * std::exp(cum[at(j, kd, d)]);
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < vd; ++c)
        for (int64_t d = 0; d < kd; ++d) big_u[at(i, vd, c)] -= w[at(i, kd, d)] * s[at(d, vd, c)];
    // O = scale ((Q Gamma) S + P U), with S still the state entering the chunk.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < vd; ++c) {
        T acc = 0;
        for (int64_t d = 0; d < kd; ++d) acc += p.q[at(t0 + i, kd, d)] * std::exp(cum[at(i, kd, d)]) * s[at(d, vd, c)];
        for (int64_t j = 0; j <= i; ++j) acc += gated_dot(p.q, i, j) * big_u[at(j, vd, c)];
        o[at(t0 + i, vd, c)] = p.scale * acc;
      }
    // S_next = diag(exp(G_L)) S + sum_j diag(exp(G_L - G_j)) k_j U_j^T.
    for (int64_t d = 0; d < kd; ++d) {
      const T total = cum[at(n - 1, kd, d)];
      for (int64_t c = 0; c < vd; ++c) {
        T acc = std::exp(total) * s[at(d, vd, c)];
        for (int64_t j = 0; j < n; ++j)
          acc += std::exp(total - cum[at(j, kd, d)]) * p.k[at(t0 + j, kd, d)] * big_u[at(j, vd, c)];
        s[at(d, vd, c)] = acc;
      }
    }
  }
  return o;
}

// Reverse-time pass. With dS the gradient reaching S_t from later tokens and the final state:
//   dS += scale q_t do_t^T;  dq_t = scale S_t do_t
//   du = dS^T k_t;  dk_t = dS u_t;  dv_t = beta_t du;  dbeta_t = du . (v_t - S'^T k_t)
//   dS' = dS - beta_t k_t du^T;  dk_t -= beta_t S' du
//   dg_t = sum over the channel's row(s) of dS' * S';  dS_{t-1} = diag(exp(g_t)) dS'
template <class T>
DeltaRuleGrads<T> delta_rule_backward(const DeltaRuleProblem<T>& p, const std::vector<T>& d_o,
                                      const std::vector<T>& d_final) {
  const int64_t kd = p.key_dim, vd = p.value_dim, kv = kd * vd;
  // Forward again, keeping each decayed state S' and each update u.
  std::vector<T> decayed(static_cast<size_t>(p.len * kv)), updates(static_cast<size_t>(p.len * vd));
  std::vector<T> s = p.state;
  for (int64_t t = 0; t < p.len; ++t) {
    decay_state(p, t, s);
    std::copy(s.begin(), s.end(), decayed.begin() + t * kv);
    const std::vector<T> u = delta_update(p, t, s);
    std::copy(u.begin(), u.end(), updates.begin() + t * vd);
    for (int64_t i = 0; i < kd; ++i)
      for (int64_t j = 0; j < vd; ++j) s[at(i, vd, j)] += p.k[at(t, kd, i)] * u[static_cast<size_t>(j)];
  }
  DeltaRuleGrads<T> r{std::vector<T>(p.q.size()), std::vector<T>(p.k.size()),    std::vector<T>(p.v.size()),
                      std::vector<T>(p.g.size()), std::vector<T>(p.beta.size()), {}};
  std::vector<T> ds = d_final.empty() ? std::vector<T>(static_cast<size_t>(kv), T(0)) : d_final;
  std::vector<T> du(static_cast<size_t>(vd));
  for (int64_t t = p.len - 1; t >= 0; --t) {
    const T* sp = &decayed[static_cast<size_t>(t * kv)];
    const T* u = &updates[static_cast<size_t>(t * vd)];
    const T* k = &p.k[at(t, kd, 0)];
    const T* d_out = &d_o[at(t, vd, 0)];
    const T beta = p.beta[static_cast<size_t>(t)];
    for (int64_t i = 0; i < kd; ++i) {
      T dq = 0;
      for (int64_t j = 0; j < vd; ++j) {
        dq += (sp[at(i, vd, j)] + k[i] * u[j]) * d_out[j];
        ds[at(i, vd, j)] += p.scale * p.q[at(t, kd, i)] * d_out[j];
      }
      r.dq[at(t, kd, i)] = p.scale * dq;
    }
    T dbeta = 0;
    for (int64_t j = 0; j < vd; ++j) {
      T acc = 0, predicted = 0;
      for (int64_t i = 0; i < kd; ++i) {
        acc += ds[at(i, vd, j)] * k[i];
        predicted += sp[at(i, vd, j)] * k[i];
      }
      du[static_cast<size_t>(j)] = acc;
      r.dv[at(t, vd, j)] = beta * acc;
      dbeta += acc * (p.v[at(t, vd, j)] - predicted);
    }
    r.dbeta[static_cast<size_t>(t)] = dbeta;
    for (int64_t i = 0; i < kd; ++i) {
      T dk = 0;
      for (int64_t j = 0; j < vd; ++j) {
        dk += ds[at(i, vd, j)] * u[j] - beta * sp[at(i, vd, j)] * du[static_cast<size_t>(j)];
        ds[at(i, vd, j)] -= beta * k[i] * du[static_cast<size_t>(j)];  // now dS'
      }
      r.dk[at(t, kd, i)] = dk;
    }
    for (int64_t i = 0; i < kd; ++i) {
      T dg_row = 0;
      const T factor = std::exp(p.decay_log(t, i));
      for (int64_t j = 0; j < vd; ++j) {
        dg_row += ds[at(i, vd, j)] * sp[at(i, vd, j)];
        ds[at(i, vd, j)] *= factor;
      }
      r.dg[at(t, p.decay_width, p.decay_width == 1 ? 0 : i)] += dg_row;
    }
  }
  r.dstate = std::move(ds);
  return r;
}

template std::vector<float> delta_rule_recurrent(DeltaRuleProblem<float>&);
template std::vector<double> delta_rule_recurrent(DeltaRuleProblem<double>&);
template std::vector<float> delta_rule_chunked(DeltaRuleProblem<float>&, int64_t);
template std::vector<double> delta_rule_chunked(DeltaRuleProblem<double>&, int64_t);
template DeltaRuleGrads<float> delta_rule_backward(const DeltaRuleProblem<float>&, const std::vector<float>&,
                                                   const std::vector<float>&);
template DeltaRuleGrads<double> delta_rule_backward(const DeltaRuleProblem<double>&, const std::vector<double>&,
                                                    const std::vector<double>&);

}  // namespace frost::detail
