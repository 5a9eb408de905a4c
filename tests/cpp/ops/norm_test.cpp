#include <cmath>
#include <memory>
#include <tuple>

#include "graph/shape_util.h"
#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;
using Phase = NormFwdPhase_t;

// ---- Independent naive formulas, in double, on row-major values ----

size_t volume(const Dims& d) {
  int64_t v = 1;
  for (int64_t e : d) v *= e;
  return static_cast<size_t>(v);
}

// Row-major index into `d` of the element that X's element n (X of dims `xd`) broadcasts from.
size_t bcast_index(size_t n, const Dims& xd, const Dims& d) {
  size_t idx = 0, mul = 1;
  for (size_t k = xd.size(); k-- > 0;) {
    const size_t i = n % static_cast<size_t>(xd[k]);
    n /= static_cast<size_t>(xd[k]);
    if (d[k] != 1) idx += i * mul;
    mul *= static_cast<size_t>(d[k]);
  }
  return idx;
}

struct Operands {
  bool centered = false;  // LayerNorm; RMSNorm otherwise
  Dims xd, sd, scd, bd;   // X, statistics, scale, bias (bd empty: no bias)
  std::vector<double> x, scale, bias, dy;
  double eps = 1e-5;
};

struct Forward {
  std::vector<double> y, mean, inv;
};

// The statistics come from the definition: mean over the group, biased variance (or mean square).
Forward naive_forward(const Operands& o) {
  const size_t n_x = volume(o.xd);
  const double size = static_cast<double>(n_x / volume(o.sd));
  Forward f{std::vector<double>(n_x), std::vector<double>(volume(o.sd), 0.0), std::vector<double>(volume(o.sd), 0.0)};
  for (size_t n = 0; n < n_x; ++n)
    if (o.centered) f.mean[bcast_index(n, o.xd, o.sd)] += o.x[n] / size;
  for (size_t n = 0; n < n_x; ++n) {
    const size_t k = bcast_index(n, o.xd, o.sd);
    f.inv[k] += std::pow(o.x[n] - f.mean[k], 2) / size;
  }
  for (double& v : f.inv) v = 1.0 / std::sqrt(v + o.eps);
  for (size_t n = 0; n < n_x; ++n) {
    const size_t k = bcast_index(n, o.xd, o.sd);
    f.y[n] = (o.x[n] - f.mean[k]) * f.inv[k] * o.scale[bcast_index(n, o.xd, o.scd)];
    if (!o.bd.empty()) f.y[n] += o.bias[bcast_index(n, o.xd, o.bd)];
  }
  return f;
}

struct Backward {
  std::vector<double> dx, dscale, dbias;
};

// Gradients of sum(dy * y) through the explicit Jacobian of xhat within each group:
// d xhat_i / d x_j = inv * (delta_ij - [centered] / N - xhat_i * xhat_j / N), with the saved statistics.
Backward naive_backward(const Operands& o, const std::vector<double>& mean, const std::vector<double>& inv) {
  const size_t n_x = volume(o.xd);
  const double size = static_cast<double>(n_x / volume(o.sd));
  Backward b{std::vector<double>(n_x, 0.0), std::vector<double>(volume(o.scd), 0.0),
             std::vector<double>(volume(o.scd), 0.0)};
  std::vector<double> xhat(n_x), g(n_x);
  std::vector<size_t> group(n_x);
  for (size_t i = 0; i < n_x; ++i) {
    group[i] = bcast_index(i, o.xd, o.sd);
    xhat[i] = (o.x[i] - (o.centered ? mean[group[i]] : 0.0)) * inv[group[i]];
    const size_t s = bcast_index(i, o.xd, o.scd);
    g[i] = o.dy[i] * o.scale[s];
    b.dscale[s] += o.dy[i] * xhat[i];
    b.dbias[s] += o.dy[i];
  }
  for (size_t j = 0; j < n_x; ++j)
    for (size_t i = 0; i < n_x; ++i) {
      if (group[i] != group[j]) continue;
      const double jac = (i == j ? 1.0 : 0.0) - (o.centered ? 1.0 / size : 0.0) - xhat[i] * xhat[j] / size;
      b.dx[j] += g[i] * jac * inv[group[j]];
    }
  return b;
}

// Central differences of L = sum(dy * y) against each element of `v` (x, scale or bias).
std::vector<double> finite_difference(Operands o, std::vector<double> Operands::*v) {
  const double h = 1e-5;
  auto loss = [&] {
    const auto y = naive_forward(o).y;
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += o.dy[i] * y[i];
    return l;
  };
  std::vector<double> grad((o.*v).size());
  for (size_t i = 0; i < grad.size(); ++i) {
    const double keep = (o.*v)[i];
    (o.*v)[i] = keep + h;
    const double up = loss();
    (o.*v)[i] = keep - h;
    const double down = loss();
    (o.*v)[i] = keep;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

// Rounding of one store in the type, relative (fp32 also absorbs fp32 accumulation over ~1000 terms).
double rel_tol(DT t) {
  return t == DT::HALF ? 2e-3 : t == DT::BFLOAT16 ? 1.6e-2 : 2e-5;
}

// ---- Shapes ----

struct Case {
  const char* label;
  Dims x, x_stride, stats, scale, bias;  // empty stride: packed; empty stats: default (every axis but the first)
};

const Case kCases[] = {
    {"x17x111x1x1", {17, 111, 1, 1}, {}, {}, {1, 111, 1, 1}, {1, 111, 1, 1}},
    {"x1x1000", {1, 1000}, {}, {}, {1, 1000}, {1, 1000}},
    // Axis 2 outermost in memory, scale over two axes, bias over one.
    {"x3x5x7_transposed", {3, 5, 7}, {1, 3, 15}, {}, {1, 5, 7}, {1, 5, 1}},
    // Rows padded to 8 and 64 elements; only the last axis is normalized.
    {"x4x6x5_padded_lastaxis", {4, 6, 5}, {64, 8, 1}, {4, 6, 1}, {1, 1, 5}, {1, 1, 5}},
};

Operands random_operands(const Case& c, bool centered, std::mt19937_64& rng) {
  Operands o;
  o.centered = centered;
  o.xd = c.x;
  o.sd = c.stats.empty() ? Dims(c.x.size(), 1) : c.stats;
  if (c.stats.empty()) o.sd[0] = c.x[0];
  o.scd = c.scale;
  o.bd = c.bias;
  auto fill = [&](const Dims& d, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> v(volume(d));
    for (double& e : v) e = u(rng);
    return v;
  };
  o.x = fill(c.x, -1.0, 2.0);  // a non-zero mean, so centering matters
  o.scale = fill(c.scale, 0.5, 1.5);
  o.bias = fill(c.bias, -0.5, 0.5);
  o.dy = fill(c.x, -1.0, 1.0);
  return o;
}

// Writes values into a host buffer and reads back what the type stored.
void put(HostTensor& h, std::vector<double>& v) {
  for (int64_t n = 0; n < h.volume(); ++n) h.set(n, v[static_cast<size_t>(n)]);
  v = h.values();
}

using Param = std::tuple<bool, DT, int>;
std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [centered, dt, c] = info.param;
  return std::string(centered ? "layernorm_" : "rmsnorm_") + std::string(to_string(dt)) + "_" + kCases[c].label;
}

// ---- Forward ----

class NormForward : public ::testing::TestWithParam<Param> {};

TEST_P(NormForward, TrainingMatchesNaive) {
  const auto [centered, dt, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(1000 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt) * 7 + centered);
  Operands o = random_operands(c, centered, rng);
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", c.x, dt, c.x_stride);
  auto scale = input(g, "scale", c.scale, dt);
  auto bias = input(g, "bias", c.bias, dt);
  auto eps = g.tensor(static_cast<float>(o.eps));
  TensorPtr y, mean, inv;
  if (centered) {
    const auto out =
        g.layernorm(x, scale, bias, graph::Layernorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps));
    y = out[0], mean = out[1], inv = out[2];
    mean->set_output(true);
  } else {
    const auto out = g.rmsnorm(
        x, scale, graph::Rmsnorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps).set_bias(bias));
    y = out[0], inv = out[1];
  }
  y->set_output(true);
  inv->set_output(true);
  if (!c.stats.empty()) inv->set_dim(c.stats);  // the mean follows it
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(y->get_dim(), c.x);
  EXPECT_EQ(y->get_stride(), c.x_stride.empty() ? x->get_stride() : detail::strides_like(c.x, c.x_stride));
  EXPECT_EQ(inv->get_dim(), o.sd);
  EXPECT_EQ(inv->get_data_type(), DT::FLOAT);
  EXPECT_TRUE(!mean || mean->get_dim() == o.sd) << "the mean follows inv_variance";
  HostTensor xb(x), sb(scale), bb(bias), yb(y), ib(inv);
  put(xb, o.x);
  put(sb, o.scale);
  put(bb, o.bias);
  yb.poison();
  ib.poison();
  std::vector<HostTensor*> bufs{&xb, &sb, &bb, &yb, &ib};
  std::unique_ptr<HostTensor> mb;
  if (mean) {
    mb = std::make_unique<HostTensor>(mean);
    mb->poison();
    bufs.push_back(mb.get());
  }
  e = build_and_run(g, bufs);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Forward want = naive_forward(o);
  EXPECT_CLOSE(yb.values(), want.y, rel_tol(dt) * std::max(1.0, max_abs(want.y)));
  EXPECT_CLOSE(ib.values(), want.inv, rel_tol(DT::FLOAT) * max_abs(want.inv));
  if (mb) EXPECT_CLOSE(mb->values(), want.mean, rel_tol(DT::FLOAT) * std::max(1.0, max_abs(want.mean)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormForward,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF),
                                            ::testing::Range(0, 4)),
                         param_name);

TEST(NormForwardInference, NoStatisticsAndNoBias) {
  for (bool centered : {false, true}) {
    std::mt19937_64 rng(7 + centered);
    const Case& c = kCases[2];
    Operands o = random_operands(c, centered, rng);
    o.bd.clear();
    graph::Graph g;
    g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
    auto x = input(g, "x", c.x, DT::FLOAT, c.x_stride);
    auto scale = input(g, "scale", c.scale);
    auto eps = g.tensor(static_cast<float>(o.eps));
    TensorPtr y;
    if (centered) {
      auto out = g.layernorm(x, scale, nullptr,
                             graph::Layernorm_attributes().set_forward_phase(Phase::INFERENCE).set_epsilon(eps));
      EXPECT_EQ(out[1], nullptr);
      EXPECT_EQ(out[2], nullptr);
      y = out[0];
    } else {
      auto out = g.rmsnorm(x, scale, graph::Rmsnorm_attributes().set_forward_phase(Phase::INFERENCE).set_epsilon(eps));
      EXPECT_EQ(out[1], nullptr);
      y = out[0];
    }
    y->set_output(true);
    ASSERT_TRUE(g.validate().is_good());
    HostTensor xb(x), sb(scale), yb(y);
    put(xb, o.x);
    put(sb, o.scale);
    yb.poison();
    auto e = build_and_run(g, {&xb, &sb, &yb});
    ASSERT_TRUE(e.is_good()) << e.get_message();
    EXPECT_CLOSE(yb.values(), naive_forward(o).y, 1e-5);
  }
}

// ---- Backward against the naive Jacobian ----

class NormBackward : public ::testing::TestWithParam<Param> {};

TEST_P(NormBackward, MatchesNaiveJacobian) {
  const auto [centered, dt, ci] = GetParam();
  const Case& c = kCases[ci];
  const bool with_dbias = centered || ci % 2 == 0;
  std::mt19937_64 rng(2000 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt) * 7 + centered);
  Operands o = random_operands(c, centered, rng);
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", c.x, dt, c.x_stride);
  auto dy = input(g, "dy", c.x, dt, c.x_stride);
  auto scale = input(g, "scale", c.scale, dt);
  auto mean = centered ? input(g, "mean", o.sd) : nullptr;
  auto inv = input(g, "inv", o.sd);
  std::array<TensorPtr, 3> grads;
  if (centered) {
    grads = g.layernorm_backward(dy, x, scale,
                                 graph::Layernorm_backward_attributes().set_saved_mean_and_inv_variance(mean, inv));
  } else {
    grads = g.rmsnorm_backward(dy, x, scale, inv, graph::Rmsnorm_backward_attributes().has_dbias_output(with_dbias));
    EXPECT_EQ(grads[2] == nullptr, !with_dbias);
  }
  for (auto& t : grads)
    if (t) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(grads[0]->get_dim(), c.x);
  EXPECT_EQ(grads[1]->get_dim(), c.scale);
  HostTensor xb(x), dyb(dy), sb(scale), ib(inv);
  put(xb, o.x);
  put(dyb, o.dy);
  put(sb, o.scale);
  // Saved statistics of the stored x, as a forward pass would have written them (FP32).
  Forward fwd = naive_forward(o);
  put(ib, fwd.inv);
  std::vector<HostTensor*> bufs{&xb, &dyb, &sb, &ib};
  std::unique_ptr<HostTensor> mb;
  if (centered) {
    mb = std::make_unique<HostTensor>(mean);
    put(*mb, fwd.mean);
    bufs.push_back(mb.get());
  }
  std::vector<std::unique_ptr<HostTensor>> outs;
  for (auto& t : grads)
    if (t) {
      outs.push_back(std::make_unique<HostTensor>(t));
      outs.back()->poison();
      bufs.push_back(outs.back().get());
    }
  e = build_and_run(g, bufs);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Backward want = naive_backward(o, fwd.mean, fwd.inv);
  EXPECT_CLOSE(outs[0]->values(), want.dx, rel_tol(dt) * std::max(1.0, max_abs(want.dx)));
  EXPECT_CLOSE(outs[1]->values(), want.dscale, rel_tol(dt) * std::max(1.0, max_abs(want.dscale)));
  if (with_dbias) EXPECT_CLOSE(outs[2]->values(), want.dbias, rel_tol(dt) * std::max(1.0, max_abs(want.dbias)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormBackward,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF),
                                            ::testing::Range(0, 4)),
                         param_name);

// ---- fp64: forward and backward chained in one graph, against central differences ----

class NormGradientFp64 : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(NormGradientFp64, MatchesFiniteDifferences) {
  const auto [centered, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(3000 + static_cast<uint64_t>(ci) * 31 + centered);
  Operands o = random_operands(c, centered, rng);
  graph::Graph g;
  g.set_io_data_type(DT::DOUBLE).set_intermediate_data_type(DT::DOUBLE).set_compute_data_type(DT::DOUBLE);
  auto x = input(g, "x", c.x, DT::DOUBLE, c.x_stride);
  auto dy = input(g, "dy", c.x, DT::DOUBLE, c.x_stride);
  auto scale = input(g, "scale", c.scale, DT::DOUBLE);
  auto bias = input(g, "bias", c.bias, DT::DOUBLE);
  auto eps = g.tensor(o.eps);
  std::array<TensorPtr, 3> grads;
  TensorPtr y;
  if (centered) {
    auto [yy, mean, inv] =
        g.layernorm(x, scale, bias, graph::Layernorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps));
    if (!c.stats.empty()) mean->set_dim(c.stats);
    grads = g.layernorm_backward(dy, x, scale,
                                 graph::Layernorm_backward_attributes().set_saved_mean_and_inv_variance(mean, inv));
    y = yy;
  } else {
    auto [yy, inv] = g.rmsnorm(
        x, scale, graph::Rmsnorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps).set_bias(bias));
    if (!c.stats.empty()) inv->set_dim(c.stats);
    grads = g.rmsnorm_backward(dy, x, scale, inv, graph::Rmsnorm_backward_attributes().has_dbias_output(true));
    y = yy;
  }
  y->set_output(true);
  for (auto& t : grads) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  HostTensor xb(x), dyb(dy), sb(scale), bb(bias), yb(y), dxb(grads[0]), dsb(grads[1]), dbb(grads[2]);
  put(xb, o.x);
  put(dyb, o.dy);
  put(sb, o.scale);
  put(bb, o.bias);
  for (HostTensor* h : {&yb, &dxb, &dsb, &dbb}) h->poison();
  e = build_and_run(g, {&xb, &dyb, &sb, &bb, &yb, &dxb, &dsb, &dbb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Forward fwd = naive_forward(o);
  EXPECT_CLOSE(yb.values(), fwd.y, 1e-12);
  const std::vector<double> fd_x = finite_difference(o, &Operands::x);
  const std::vector<double> fd_scale = finite_difference(o, &Operands::scale);
  // dbias has scale's dims: differentiate against the bias spread over scale's dims (same forward).
  Operands spread = o;
  spread.bd = o.scd;
  spread.bias.assign(o.scale.size(), 0.0);
  for (size_t n = 0; n < volume(o.scd); ++n) spread.bias[n] = o.bias[bcast_index(n, o.scd, o.bd)];
  const std::vector<double> fd_bias = finite_difference(spread, &Operands::bias);
  ASSERT_EQ(fd_bias.size(), dbb.values().size());
  auto tol = [](const std::vector<double>& want) { return 1e-7 * std::max(1.0, max_abs(want)); };
  EXPECT_CLOSE(dxb.values(), fd_x, tol(fd_x));
  EXPECT_CLOSE(dsb.values(), fd_scale, tol(fd_scale));
  EXPECT_CLOSE(dbb.values(), fd_bias, tol(fd_bias));
  // The naive Jacobian agrees with the differences too, so it is a fair oracle for the other tests.
  const Backward analytic = naive_backward(o, fwd.mean, fwd.inv);
  EXPECT_CLOSE(analytic.dx, fd_x, tol(fd_x));
  EXPECT_CLOSE(analytic.dscale, fd_scale, tol(fd_scale));
  // And the check can fail: dropping the projection terms (dx = inv * dy * scale) is caught.
  std::vector<double> wrong(fd_x.size());
  for (size_t n = 0; n < wrong.size(); ++n)
    wrong[n] = fwd.inv[bcast_index(n, o.xd, o.sd)] * o.dy[n] * o.scale[bcast_index(n, o.xd, o.scd)];
  EXPECT_GT(compare(wrong, fd_x).max_abs, 100 * tol(fd_x));
}

INSTANTIATE_TEST_SUITE_P(SmallShapes, NormGradientFp64, ::testing::Combine(::testing::Bool(), ::testing::Values(2, 3)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "layernorm_" : "rmsnorm_") +
                                  kCases[std::get<1>(info.param)].label;
                         });

// ---- JSON ----

TEST(NormJson, RoundTripRunsBitwiseEqual) {
  // All four ops in one graph: both forwards in TRAINING, both backwards on their saved statistics.
  graph::Graph g;
  g.set_io_data_type(DT::BFLOAT16).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const std::vector<TensorPtr> ins = {
      input(g, "x", {3, 5, 7}, DT::BFLOAT16, {1, 3, 15}), input(g, "dy", {3, 5, 7}, DT::BFLOAT16),
      input(g, "scale", {1, 5, 7}, DT::BFLOAT16), input(g, "bias", {1, 5, 1}, DT::BFLOAT16)};
  const TensorPtr &x = ins[0], &dy = ins[1], &scale = ins[2], &bias = ins[3];
  auto eps = g.tensor(1e-5f);
  auto ln =
      g.layernorm(x, scale, bias, graph::Layernorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps));
  ln[1]->set_dim({3, 5, 1});
  auto ln_grads = g.layernorm_backward(
      dy, x, scale, graph::Layernorm_backward_attributes().set_saved_mean_and_inv_variance(ln[1], ln[2]));
  auto rms = g.rmsnorm(x, scale,
                       graph::Rmsnorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps).set_bias(bias));
  auto rms_grads =
      g.rmsnorm_backward(dy, x, scale, rms[1], graph::Rmsnorm_backward_attributes().has_dbias_output(true));
  const std::vector<TensorPtr> outputs = {ln[0],  ln[1],  ln[2],        ln_grads[0],  ln_grads[1], ln_grads[2],
                                          rms[0], rms[1], rms_grads[0], rms_grads[1], rms_grads[2]};
  for (auto& o : outputs) o->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  for (const char* needle : {"\"RMS_NORM\"", "\"LAYER_NORM\"", "\"RMS_NORM_BACKWARD\"", "\"LAYER_NORM_BACKWARD\"",
                             "\"forward_phase\"", "\"TRAINING\"", "\"has_dbias\"", "\"INV_VARIANCE\"", "\"DBIAS\""})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  std::mt19937_64 rng(11);
  std::vector<std::unique_ptr<HostTensor>> bufs;
  std::vector<HostTensor*> pack;
  for (const auto& t : ins) {
    bufs.push_back(std::make_unique<HostTensor>(t));
    bufs.back()->fill_random(rng, 0.5, 1.5);
  }
  for (const auto& t : outputs) bufs.push_back(std::make_unique<HostTensor>(t));
  for (auto& b : bufs) pack.push_back(b.get());
  for (size_t i = ins.size(); i < bufs.size(); ++i) bufs[i]->poison();
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::vector<std::vector<uint8_t>> first;
  for (size_t i = ins.size(); i < bufs.size(); ++i) {
    first.push_back(bufs[i]->bytes);
    bufs[i]->poison();
  }
  graph::Graph replay;
  e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  e = build_and_run(replay, pack);  // same uids, same buffers
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (size_t i = 0; i < outputs.size(); ++i)
    EXPECT_EQ(bufs[ins.size() + i]->bytes, first[i]) << outputs[i]->get_name();
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

// ---- Errors ----

void expect_error(graph::Graph& g, error_code_t code, std::initializer_list<const char*> needles) {
  const auto e = g.validate();
  EXPECT_EQ(e.get_code(), code) << e.get_message();
  for (const char* n : needles) EXPECT_NE(e.get_message().find(n), std::string::npos) << e.get_message();
}

// A graph with x [4, 6, 5] and a scale, and attributes named "rms0" / "ln0" with epsilon 1e-5.
struct Decl {
  graph::Graph g;
  TensorPtr x, scale;
  explicit Decl(Dims scale_dims = {1, 6, 5}) {
    g.set_io_data_type(DT::FLOAT);
    x = input(g, "x", {4, 6, 5});
    scale = input(g, "scale", std::move(scale_dims));
  }
  graph::Rmsnorm_attributes rms(Phase p) {
    return graph::Rmsnorm_attributes().set_name("rms0").set_forward_phase(p).set_epsilon(g.tensor(1e-5f));
  }
  graph::Layernorm_attributes ln(Phase p) {
    return graph::Layernorm_attributes().set_name("ln0").set_forward_phase(p).set_epsilon(g.tensor(1e-5f));
  }
};

TEST(NormErrors, MissingEpsilon) {
  Decl d;
  d.g.rmsnorm(d.x, d.scale, d.rms(Phase::INFERENCE).set_epsilon(nullptr));
  expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"rms0", "RMS_NORM", "'EPSILON'", "null"});
  Decl l;
  l.g.layernorm(l.x, l.scale, nullptr, l.ln(Phase::TRAINING).set_epsilon(nullptr));
  expect_error(l.g, error_code_t::ATTRIBUTE_NOT_SET, {"ln0", "LAYER_NORM", "'EPSILON'"});
}

TEST(NormErrors, EpsilonMustBeOneElement) {
  Decl d;
  d.g.rmsnorm(d.x, d.scale, d.rms(Phase::TRAINING).set_epsilon(input(d.g, "eps", {2})));
  expect_error(d.g, error_code_t::INVALID_VALUE, {"rms0", "'EPSILON.dim'", "[2]"});
}

TEST(NormErrors, BadScaleAndBiasShapes) {
  for (const Dims& bad : {Dims{1, 6, 4}, Dims{6, 5}, Dims{3, 6, 5}}) {
    Decl d(bad);
    d.g.layernorm(d.x, d.scale, nullptr, d.ln(Phase::TRAINING));
    expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"ln0", "'SCALE.dim'", detail::dims_string(bad).c_str()});
  }
  Decl d;
  d.g.rmsnorm(d.x, d.scale, d.rms(Phase::INFERENCE).set_bias(input(d.g, "bias", {1, 7, 5})));
  expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"rms0", "'BIAS.dim'", "[1, 7, 5]"});
}

TEST(NormErrors, PhaseNotSet) {
  Decl d;
  auto out = d.g.rmsnorm(d.x, d.scale, d.rms(Phase::NOT_SET));
  EXPECT_EQ(out[1], nullptr);
  expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"rms0", "'forward_phase'", "NOT_SET"});
  Decl l;
  l.g.layernorm(l.x, l.scale, nullptr, l.ln(Phase::NOT_SET));
  expect_error(l.g, error_code_t::ATTRIBUTE_NOT_SET, {"ln0", "'forward_phase'"});
}

TEST(NormErrors, StatisticsDimsThatDisagree) {
  {  // mean and inv_variance set to different axes
    Decl d;
    auto out = d.g.layernorm(d.x, d.scale, nullptr, d.ln(Phase::TRAINING));
    out[1]->set_dim({4, 1, 1});
    out[2]->set_dim({4, 6, 1});
    expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"ln0", "'INV_VARIANCE.dim'", "[4, 6, 1]", "[4, 1, 1]"});
  }
  {  // an extent that is neither X's nor 1
    Decl d;
    d.g.rmsnorm(d.x, d.scale, d.rms(Phase::TRAINING))[1]->set_dim({4, 3, 1});
    expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"rms0", "'INV_VARIANCE.dim'", "[4, 3, 1]"});
  }
  {  // saved statistics of a backward pass
    Decl d;
    auto attr = graph::Layernorm_backward_attributes().set_name("lnb").set_saved_mean_and_inv_variance(
        input(d.g, "mean", {4, 1, 1}), input(d.g, "inv", {1, 6, 1}));
    d.g.layernorm_backward(input(d.g, "dy", {4, 6, 5}), d.x, d.scale, attr);
    expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED,
                 {"lnb", "LAYER_NORM_BACKWARD", "'INV_VARIANCE.dim'", "[1, 6, 1]"});
  }
}

TEST(NormErrors, BackwardOperands) {
  const auto rmsb = graph::Rmsnorm_backward_attributes().set_name("rmsb");
  {
    Decl d;
    d.g.rmsnorm_backward(input(d.g, "dy", {4, 6, 4}), d.x, d.scale, input(d.g, "inv", {4, 1, 1}), rmsb);
    expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"rmsb", "'DY.dim'", "[4, 6, 4]"});
  }
  {
    Decl d;
    d.g.rmsnorm_backward(input(d.g, "dy", {4, 6, 5}), d.x, d.scale, nullptr, rmsb);
    expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"rmsb", "'INV_VARIANCE'", "null"});
  }
  {
    Decl d;
    d.g.layernorm_backward(input(d.g, "dy", {4, 6, 5}), d.x, d.scale,
                           graph::Layernorm_backward_attributes().set_name("lnb"));
    expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"lnb", "'MEAN'"});
  }
}

TEST(NormErrors, OutputDimsAndDataTypes) {
  {
    Decl d;
    d.g.rmsnorm(d.x, d.scale, d.rms(Phase::INFERENCE))[0]->set_dim({4, 6, 6});
    expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"rms0", "'Y.dim'", "[4, 6, 6]", "[4, 6, 5]"});
  }
  {
    Decl d;
    d.x->set_data_type(DT::INT32);
    d.g.rmsnorm(d.x, d.scale, d.rms(Phase::INFERENCE));
    expect_error(d.g, error_code_t::INVALID_VALUE, {"rms0", "'X.data_type'", "INT32"});
  }
}

}  // namespace
}  // namespace frost::test
