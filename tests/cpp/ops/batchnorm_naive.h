// Naive per-channel batchnorm formulas in double, shared by the batchnorm tests, and their shapes.
#pragma once

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "test_util.h"

namespace frost::test::bn {

using DT = DataType_t;
using Dims = std::vector<int64_t>;
using Values = std::vector<double>;

// ---- Independent naive formulas: X [N, C, spatial...] in row-major order ----

struct BnData {
  Dims xd;
  Values x, dy, scale, bias, prev_mean, prev_var;  // per-channel vectors hold C values
  double eps = 1e-5, momentum = 0.1;
  size_t channels() const { return static_cast<size_t>(xd[1]); }
  size_t spatial() const {
    size_t s = 1;
    for (size_t k = 2; k < xd.size(); ++k) s *= static_cast<size_t>(xd[k]);
    return s;
  }
  size_t channel_of(size_t n) const { return n / spatial() % channels(); }
  double per_channel_count() const { return static_cast<double>(x.size() / channels()); }
};

struct BnForward {
  Values y, mean, var, inv, next_mean, next_var;
};

inline BnForward naive_forward(const BnData& d) {
  const size_t C = d.channels();
  const double M = d.per_channel_count();
  BnForward f{Values(d.x.size()), Values(C, 0.0), Values(C, 0.0), Values(C), Values(C), Values(C)};
  for (size_t n = 0; n < d.x.size(); ++n) f.mean[d.channel_of(n)] += d.x[n] / M;
  for (size_t n = 0; n < d.x.size(); ++n) f.var[d.channel_of(n)] += std::pow(d.x[n] - f.mean[d.channel_of(n)], 2) / M;
  for (size_t c = 0; c < C; ++c) {
    f.inv[c] = 1.0 / std::sqrt(f.var[c] + d.eps);
    f.next_mean[c] = (1 - d.momentum) * d.prev_mean[c] + d.momentum * f.mean[c];
    f.next_var[c] = (1 - d.momentum) * d.prev_var[c] + d.momentum * f.var[c] * M / (M - 1);  // unbiased
  }
  for (size_t n = 0; n < d.x.size(); ++n) {
    const size_t c = d.channel_of(n);
    f.y[n] = (d.x[n] - f.mean[c]) * f.inv[c] * d.scale[c] + d.bias[c];
  }
  return f;
}

struct BnBackward {
  Values dx, dscale, dbias;
};

// The textbook batchnorm gradient on given statistics:
// dx = scale * inv / M * (M * dy - sum(dy) - xhat * sum(dy * xhat)).
inline BnBackward naive_backward(const BnData& d, const Values& mean, const Values& inv) {
  const size_t C = d.channels();
  const double M = d.per_channel_count();
  BnBackward b{Values(d.x.size()), Values(C, 0.0), Values(C, 0.0)};
  for (size_t n = 0; n < d.x.size(); ++n) {
    const size_t c = d.channel_of(n);
    b.dscale[c] += d.dy[n] * (d.x[n] - mean[c]) * inv[c];
    b.dbias[c] += d.dy[n];
  }
  for (size_t n = 0; n < d.x.size(); ++n) {
    const size_t c = d.channel_of(n);
    const double xhat = (d.x[n] - mean[c]) * inv[c];
    b.dx[n] = d.scale[c] * inv[c] / M * (M * d.dy[n] - b.dbias[c] - xhat * b.dscale[c]);
  }
  return b;
}

// Central differences of L = sum(dy * y) against each element of `v`.
inline Values finite_difference(BnData d, Values BnData::*v) {
  const double h = 1e-5;
  auto loss = [&] {
    const Values y = naive_forward(d).y;
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += d.dy[i] * y[i];
    return l;
  };
  Values grad((d.*v).size());
  for (size_t i = 0; i < grad.size(); ++i) {
    const double keep = (d.*v)[i];
    (d.*v)[i] = keep + h;
    const double up = loss();
    (d.*v)[i] = keep - h;
    const double down = loss();
    (d.*v)[i] = keep;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

inline double max_abs(const Values& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

// Relative rounding of one store in the type (fp32 also absorbs fp32 accumulation).
inline double rel_tol(DT t) { return t == DT::HALF ? 2e-3 : t == DT::BFLOAT16 ? 1.6e-2 : 2e-5; }
inline double tol(DT t, const Values& want) { return rel_tol(t) * std::max(1.0, max_abs(want)); }

// ---- Shapes ----

struct Case {
  const char* label;
  Dims x, x_stride;  // empty stride: packed NCHW
};

const Case kCases[] = {
    {"n2c3h5w7", {2, 3, 5, 7}, {}}, {"n2c3h5w7_nhwc", {2, 3, 5, 7}, {105, 1, 21, 3}}, {"n17c1h1w1", {17, 1, 1, 1}, {}},
    {"n3c111", {3, 111}, {}},       {"n1c4l17_padded", {1, 4, 17}, {128, 32, 1}},
};

inline BnData random_data(const Dims& xd, std::mt19937_64& rng) {
  BnData d;
  d.xd = xd;
  auto fill = [&](size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    Values v(n);
    for (double& e : v) e = u(rng);
    return v;
  };
  size_t volume = 1;
  for (int64_t e : xd) volume *= static_cast<size_t>(e);
  d.x = fill(volume, -1.0, 2.0);  // a non-zero mean, so centering matters
  d.dy = fill(volume, -1.0, 1.0);
  d.scale = fill(d.channels(), 0.5, 1.5);
  d.bias = fill(d.channels(), -0.5, 0.5);
  d.prev_mean = fill(d.channels(), -0.5, 0.5);
  d.prev_var = fill(d.channels(), 0.5, 2.0);
  return d;
}

// Writes values into a host buffer and reads back what the type stored.
inline void put(HostTensor& h, Values& v) {
  for (int64_t n = 0; n < h.volume(); ++n) h.set(n, v[static_cast<size_t>(n)]);
  v = h.values();
}

inline Dims channel_dims(const Dims& xd) {
  Dims d(xd.size(), 1);
  d[1] = xd[1];
  return d;
}

// Output buffers, poisoned, appended to the pack.
inline std::vector<std::unique_ptr<HostTensor>> poisoned(const std::vector<TensorPtr>& ts,
                                                         std::vector<HostTensor*>& pack) {
  std::vector<std::unique_ptr<HostTensor>> r;
  for (const auto& t : ts) {
    r.push_back(std::make_unique<HostTensor>(t));
    r.back()->poison();
    pack.push_back(r.back().get());
  }
  return r;
}

}  // namespace frost::test::bn
