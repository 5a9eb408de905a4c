// Instance norm, group norm and adaptive layer norm (forward and backward), and RMSNorm/LayerNorm
// without a scale, against naive formulas written here in double with explicit index arithmetic.
#include <cmath>
#include <memory>
#include <tuple>

#include "graph/shape_util.h"
#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;
using Values = std::vector<double>;
using Phase = NormFwdPhase_t;

enum class Kind { INSTANCE, GROUP, ADA };

struct Case {
  const char* label;
  Kind kind;
  Dims x, x_stride, affine;  // affine: the dims of scale and bias
  int64_t groups;            // GROUP only
};

// X is [N, C, spatial...] (instance, group) or [B, L, D] (ada); scale per channel or per (b, d).
const Case kCases[] = {
    {"instance_n2c3h5w7", Kind::INSTANCE, {2, 3, 5, 7}, {}, {1, 3, 1, 1}, 0},
    {"instance_n2c3h5w7_nhwc", Kind::INSTANCE, {2, 3, 5, 7}, {105, 1, 21, 3}, {1, 3, 1, 1}, 0},
    {"instance_n1c17l111", Kind::INSTANCE, {1, 17, 111}, {}, {1, 17, 1}, 0},
    {"group_n2c6l5_g3", Kind::GROUP, {2, 6, 5}, {}, {1, 6, 1}, 3},
    {"group_n3c4h3w3_nhwc_g2", Kind::GROUP, {3, 4, 3, 3}, {36, 1, 12, 4}, {1, 4, 1, 1}, 2},
    {"group_n2c17l3_g1", Kind::GROUP, {2, 17, 3}, {}, {1, 17, 1}, 1},
    {"ada_b2l5d8", Kind::ADA, {2, 5, 8}, {}, {2, 1, 8}, 0},
    {"ada_b3l17d16_transposed", Kind::ADA, {3, 17, 16}, {1, 3, 51}, {3, 1, 16}, 0},
};

size_t volume(const Dims& d) {
  size_t v = 1;
  for (int64_t e : d) v *= static_cast<size_t>(e);
  return v;
}

// Each element's statistics group and scale/bias element, from explicit index arithmetic.
struct Indexing {
  std::vector<size_t> group, affine;
  size_t groups = 0;
};

Indexing indexing(const Case& c) {
  const size_t n_x = volume(c.x), batch = static_cast<size_t>(c.x[0]), channels = static_cast<size_t>(c.x[1]);
  const size_t inner = n_x / batch / channels;  // spatial (instance, group) or D (ada)
  Indexing ix{std::vector<size_t>(n_x), std::vector<size_t>(n_x), 0};
  for (size_t n = 0; n < n_x; ++n) {
    const size_t b = n / (channels * inner), ch = n / inner % channels;
    if (c.kind == Kind::INSTANCE) {
      ix.group[n] = n / inner, ix.affine[n] = ch;
    } else if (c.kind == Kind::GROUP) {
      const size_t g = static_cast<size_t>(c.groups);
      ix.group[n] = b * g + ch / (channels / g), ix.affine[n] = ch;
    } else {  // ada: one row per (b, l); the scale is per (b, d)
      ix.group[n] = n / inner, ix.affine[n] = b * inner + n % inner;
    }
  }
  ix.groups = c.kind == Kind::INSTANCE ? batch * channels
              : c.kind == Kind::GROUP  ? batch * static_cast<size_t>(c.groups)
                                       : batch * channels;
  return ix;
}

Dims stats_dims(const Case& c) {
  if (c.kind == Kind::ADA) return {c.x[0], c.x[1], 1};
  Dims d(c.x.size(), 1);
  d[0] = c.x[0];
  d[1] = c.kind == Kind::GROUP ? c.groups : c.x[1];
  return d;
}

struct Data {
  Values x, dy, scale, bias;
  double eps = 1e-5;
};

struct Forward {
  Values y, mean, inv;
};

Forward naive_forward(const Data& d, const Indexing& ix) {
  Forward f{Values(d.x.size()), Values(ix.groups, 0.0), Values(ix.groups, 0.0)};
  std::vector<double> count(ix.groups, 0.0);
  for (size_t n = 0; n < d.x.size(); ++n) count[ix.group[n]] += 1;
  for (size_t n = 0; n < d.x.size(); ++n) f.mean[ix.group[n]] += d.x[n] / count[ix.group[n]];
  for (size_t n = 0; n < d.x.size(); ++n)
    f.inv[ix.group[n]] += std::pow(d.x[n] - f.mean[ix.group[n]], 2) / count[ix.group[n]];
  for (double& v : f.inv) v = 1.0 / std::sqrt(v + d.eps);
  for (size_t n = 0; n < d.x.size(); ++n) {
    const size_t k = ix.group[n], a = ix.affine[n];
    f.y[n] = (d.x[n] - f.mean[k]) * f.inv[k] * (d.scale.empty() ? 1.0 : d.scale[a]) + (d.bias.empty() ? 0 : d.bias[a]);
  }
  return f;
}

struct Backward {
  Values dx, dscale, dbias;
};

// dx_i = inv / M * (M * g_i - sum(g) - xhat_i * sum(g * xhat)) per group, g = dy * scale.
Backward naive_backward(const Data& d, const Indexing& ix, const Values& mean, const Values& inv) {
  Backward b{Values(d.x.size()), Values(d.scale.size(), 0.0), Values(d.scale.size(), 0.0)};
  Values sum_g(ix.groups, 0.0), sum_gx(ix.groups, 0.0), count(ix.groups, 0.0);
  for (size_t n = 0; n < d.x.size(); ++n) {
    const size_t k = ix.group[n], a = ix.affine[n];
    const double xhat = (d.x[n] - mean[k]) * inv[k], g = d.dy[n] * d.scale[a];
    sum_g[k] += g, sum_gx[k] += g * xhat, count[k] += 1;
    b.dscale[a] += d.dy[n] * xhat, b.dbias[a] += d.dy[n];
  }
  for (size_t n = 0; n < d.x.size(); ++n) {
    const size_t k = ix.group[n];
    const double xhat = (d.x[n] - mean[k]) * inv[k], g = d.dy[n] * d.scale[ix.affine[n]];
    b.dx[n] = inv[k] / count[k] * (count[k] * g - sum_g[k] - xhat * sum_gx[k]);
  }
  return b;
}

Values finite_difference(Data d, const Indexing& ix, Values Data::*v) {
  const double h = 1e-5;
  auto loss = [&] {
    const Values y = naive_forward(d, ix).y;
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

double max_abs(const Values& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

double tol(DT t, const Values& want) {
  const double rel = t == DT::HALF ? 2e-3 : t == DT::BFLOAT16 ? 1.6e-2 : 2e-5;
  return rel * std::max(1.0, max_abs(want));
}

Data random_data(const Case& c, std::mt19937_64& rng) {
  auto fill = [&](size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    Values v(n);
    for (double& e : v) e = u(rng);
    return v;
  };
  return {fill(volume(c.x), -1.0, 2.0), fill(volume(c.x), -1.0, 1.0), fill(volume(c.affine), 0.5, 1.5),
          fill(volume(c.affine), -0.5, 0.5)};
}

void put(HostTensor& h, Values& v) {
  for (int64_t n = 0; n < h.volume(); ++n) h.set(n, v[static_cast<size_t>(n)]);
  v = h.values();
}

std::vector<std::unique_ptr<HostTensor>> poisoned(const std::vector<TensorPtr>& ts, std::vector<HostTensor*>& pack) {
  std::vector<std::unique_ptr<HostTensor>> r;
  for (const auto& t : ts) {
    r.push_back(std::make_unique<HostTensor>(t));
    r.back()->poison();
    pack.push_back(r.back().get());
  }
  return r;
}

std::array<TensorPtr, 3> build_forward(graph::Graph& g, const Case& c, TensorPtr x, TensorPtr scale, TensorPtr bias,
                                       Phase phase, TensorPtr eps) {
  switch (c.kind) {
    case Kind::INSTANCE:
      return g.instancenorm(x, scale, bias, graph::Instancenorm_attributes().set_forward_phase(phase).set_epsilon(eps));
    case Kind::GROUP:
      return g.groupnorm(
          x, scale, bias,
          graph::Groupnorm_attributes().set_forward_phase(phase).set_epsilon(eps).set_group_count(c.groups));
    case Kind::ADA:
      break;
  }
  return g.adalayernorm(x, scale, bias, graph::AdaLayernorm_attributes().set_forward_phase(phase).set_epsilon(eps));
}

std::array<TensorPtr, 3> build_backward(graph::Graph& g, const Case& c, TensorPtr dy, TensorPtr x, TensorPtr scale,
                                        TensorPtr mean, TensorPtr inv) {
  switch (c.kind) {
    case Kind::INSTANCE:
      return g.instancenorm_backward(
          dy, x, scale, graph::Instancenorm_backward_attributes().set_saved_mean_and_inv_variance(mean, inv));
    case Kind::GROUP:
      return g.groupnorm_backward(dy, x, scale,
                                  graph::Groupnorm_backward_attributes().set_saved_mean_and_inv_variance(mean, inv));
    case Kind::ADA:
      break;
  }
  return g.adalayernorm_backward(dy, x, scale,
                                 graph::AdaLayernorm_backward_attributes().set_saved_mean_and_inv_variance(mean, inv));
}

// Scale and bias of AdaLN are activations (stored like X); the per-channel ones stay FP32.
DT affine_type(const Case& c, DT io) { return c.kind == Kind::ADA ? io : DT::FLOAT; }

using Param = std::tuple<DT, int>;
std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(to_string(std::get<0>(info.param))) + "_" + kCases[std::get<1>(info.param)].label;
}

// ---- Forward ----

class NormExtraForward : public ::testing::TestWithParam<Param> {};

TEST_P(NormExtraForward, TrainingMatchesNaive) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(100 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt));
  Data d = random_data(c, rng);
  const Indexing ix = indexing(c);
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", c.x, dt, c.x_stride);
  auto scale = input(g, "scale", c.affine, affine_type(c, dt)), bias = input(g, "bias", c.affine, affine_type(c, dt));
  auto out = build_forward(g, c, x, scale, bias, Phase::TRAINING, g.tensor(static_cast<float>(d.eps)));
  for (auto& t : out) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(out[0]->get_stride(), detail::strides_like(c.x, x->get_stride()));  // X's order, packed
  EXPECT_EQ(out[1]->get_dim(), stats_dims(c));
  EXPECT_EQ(out[2]->get_data_type(), DT::FLOAT);
  HostTensor xb(x), sb(scale), bb(bias);
  put(xb, d.x);
  put(sb, d.scale);
  put(bb, d.bias);
  std::vector<HostTensor*> pack{&xb, &sb, &bb};
  auto outs = poisoned({out.begin(), out.end()}, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Forward want = naive_forward(d, ix);
  EXPECT_CLOSE(outs[0]->values(), want.y, tol(dt, want.y));
  EXPECT_CLOSE(outs[1]->values(), want.mean, tol(DT::FLOAT, want.mean));
  EXPECT_CLOSE(outs[2]->values(), want.inv, tol(DT::FLOAT, want.inv));
}

TEST_P(NormExtraForward, InferenceWithoutBiasMatchesNaive) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(150 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt));
  Data d = random_data(c, rng);
  d.bias.clear();
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", c.x, dt, c.x_stride);
  auto scale = input(g, "scale", c.affine, affine_type(c, dt));
  auto out = build_forward(g, c, x, scale, nullptr, Phase::INFERENCE, g.tensor(static_cast<float>(d.eps)));
  EXPECT_EQ(out[1], nullptr);
  EXPECT_EQ(out[2], nullptr);
  out[0]->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor xb(x), sb(scale), yb(out[0]);
  put(xb, d.x);
  put(sb, d.scale);
  yb.poison();
  auto e = build_and_run(g, {&xb, &sb, &yb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Values want = naive_forward(d, indexing(c)).y;
  EXPECT_CLOSE(yb.values(), want, tol(dt, want));
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormExtraForward,
                         ::testing::Combine(::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF),
                                            ::testing::Range(0, 8)),
                         param_name);

// ---- Backward ----

class NormExtraBackward : public ::testing::TestWithParam<Param> {};

TEST_P(NormExtraBackward, MatchesNaive) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(200 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt));
  Data d = random_data(c, rng);
  const Indexing ix = indexing(c);
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", c.x, dt, c.x_stride), dy = input(g, "dy", c.x, dt, c.x_stride);
  auto scale = input(g, "scale", c.affine, affine_type(c, dt));
  auto mean = input(g, "mean", stats_dims(c)), inv = input(g, "inv", stats_dims(c));
  auto grads = build_backward(g, c, dy, x, scale, mean, inv);
  for (auto& t : grads) t->set_output(true);
  grads[1]->set_data_type(DT::FLOAT);
  grads[2]->set_data_type(DT::FLOAT);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(grads[0]->get_stride(), detail::strides_like(c.x, x->get_stride()));  // X's order, packed
  EXPECT_EQ(grads[1]->get_dim(), c.affine);
  HostTensor xb(x), dyb(dy), sb(scale), mb(mean), ib(inv);
  put(xb, d.x);
  put(dyb, d.dy);
  put(sb, d.scale);
  Forward fwd = naive_forward(d, ix);
  put(mb, fwd.mean);
  put(ib, fwd.inv);
  std::vector<HostTensor*> pack{&xb, &dyb, &sb, &mb, &ib};
  auto outs = poisoned({grads.begin(), grads.end()}, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Backward want = naive_backward(d, ix, fwd.mean, fwd.inv);
  EXPECT_CLOSE(outs[0]->values(), want.dx, tol(dt, want.dx));
  EXPECT_CLOSE(outs[1]->values(), want.dscale, 10 * tol(DT::FLOAT, want.dscale));
  EXPECT_CLOSE(outs[2]->values(), want.dbias, 10 * tol(DT::FLOAT, want.dbias));
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormExtraBackward,
                         ::testing::Combine(::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF),
                                            ::testing::Range(0, 8)),
                         param_name);

// ---- fp64: forward and backward chained in one graph, against central differences ----

const Case kSmallCases[] = {
    {"instance_n2c2h2w3_nhwc", Kind::INSTANCE, {2, 2, 2, 3}, {12, 1, 6, 2}, {1, 2, 1, 1}, 0},
    {"group_n2c4l3_g2", Kind::GROUP, {2, 4, 3}, {}, {1, 4, 1}, 2},
    {"ada_b2l3d4", Kind::ADA, {2, 3, 4}, {}, {2, 1, 4}, 0},
};

class NormExtraGradientFp64 : public ::testing::TestWithParam<int> {};

TEST_P(NormExtraGradientFp64, MatchesFiniteDifferences) {
  const Case& c = kSmallCases[GetParam()];
  std::mt19937_64 rng(300 + static_cast<uint64_t>(GetParam()));
  Data d = random_data(c, rng);
  const Indexing ix = indexing(c);
  graph::Graph g;
  g.set_io_data_type(DT::DOUBLE).set_intermediate_data_type(DT::DOUBLE).set_compute_data_type(DT::DOUBLE);
  auto x = input(g, "x", c.x, DT::DOUBLE, c.x_stride), dy = input(g, "dy", c.x, DT::DOUBLE, c.x_stride);
  auto scale = input(g, "scale", c.affine, DT::DOUBLE), bias = input(g, "bias", c.affine, DT::DOUBLE);
  auto fwd = build_forward(g, c, x, scale, bias, Phase::TRAINING, g.tensor(d.eps));
  auto grads = build_backward(g, c, dy, x, scale, fwd[1], fwd[2]);
  fwd[0]->set_output(true);
  for (auto& t : grads) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  HostTensor xb(x), dyb(dy), sb(scale), bb(bias);
  put(xb, d.x);
  put(dyb, d.dy);
  put(sb, d.scale);
  put(bb, d.bias);
  std::vector<HostTensor*> pack{&xb, &dyb, &sb, &bb};
  auto outs = poisoned({fwd[0], grads[0], grads[1], grads[2]}, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_CLOSE(outs[0]->values(), naive_forward(d, ix).y, 1e-12);
  const Values fd_x = finite_difference(d, ix, &Data::x), fd_scale = finite_difference(d, ix, &Data::scale);
  const Values fd_bias = finite_difference(d, ix, &Data::bias);
  auto fd_tol = [](const Values& want) { return 1e-7 * std::max(1.0, max_abs(want)); };
  EXPECT_CLOSE(outs[1]->values(), fd_x, fd_tol(fd_x));
  EXPECT_CLOSE(outs[2]->values(), fd_scale, fd_tol(fd_scale));
  EXPECT_CLOSE(outs[3]->values(), fd_bias, fd_tol(fd_bias));
}

INSTANTIATE_TEST_SUITE_P(SmallShapes, NormExtraGradientFp64, ::testing::Range(0, 3),
                         [](const auto& info) { return std::string(kSmallCases[info.param].label); });

// AdaLN in TRAINING may normalize other axes: statistics [B, 1, 1] normalize each sample over L and D.
TEST(AdaLayernormUserStatistics, NormalizesTheChosenAxes) {
  const Case c{"ada_b2l5d8_per_sample", Kind::ADA, {2, 5, 8}, {}, {2, 1, 8}, 0};
  std::mt19937_64 rng(450);
  Data d = random_data(c, rng);
  Indexing ix = indexing(c);
  for (size_t n = 0; n < ix.group.size(); ++n) ix.group[n] = n / 40;
  ix.groups = 2;
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", c.x), scale = input(g, "scale", c.affine), bias = input(g, "bias", c.affine);
  auto out = build_forward(g, c, x, scale, bias, Phase::TRAINING, g.tensor(static_cast<float>(d.eps)));
  out[1]->set_dim({2, 1, 1});  // the inv_variance follows
  for (auto& t : out) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(out[2]->get_dim(), (Dims{2, 1, 1}));
  HostTensor xb(x), sb(scale), bb(bias);
  put(xb, d.x);
  put(sb, d.scale);
  put(bb, d.bias);
  std::vector<HostTensor*> pack{&xb, &sb, &bb};
  auto outs = poisoned({out.begin(), out.end()}, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Forward want = naive_forward(d, ix);
  EXPECT_CLOSE(outs[0]->values(), want.y, tol(DT::FLOAT, want.y));
  EXPECT_CLOSE(outs[2]->values(), want.inv, tol(DT::FLOAT, want.inv));
}

// ---- RMSNorm and LayerNorm without a scale (a null scale means 1) ----

TEST(NormWithoutScale, RmsnormAndLayernormMatchNaive) {
  for (bool centered : {false, true}) {
    std::mt19937_64 rng(400 + centered);
    const Dims xd = {3, 5, 7};
    Data d = random_data({"", Kind::INSTANCE, xd, {}, {1, 5, 7}, 0}, rng);
    d.scale.clear();
    graph::Graph g;
    g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
    auto x = input(g, "x", xd, DT::FLOAT, {1, 3, 15});
    auto bias = input(g, "bias", {1, 5, 7});
    auto eps = g.tensor(static_cast<float>(d.eps));
    TensorPtr y, inv;
    if (centered) {
      auto out = g.layernorm(x, nullptr, bias,
                             graph::Layernorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps));
      y = out[0], inv = out[2];
    } else {
      auto out = g.rmsnorm(
          x, nullptr, graph::Rmsnorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps).set_bias(bias));
      y = out[0], inv = out[1];
    }
    y->set_output(true);
    inv->set_output(true);
    auto e = g.validate();
    ASSERT_TRUE(e.is_good()) << e.get_message();
    HostTensor xb(x), bb(bias), yb(y), ib(inv);
    put(xb, d.x);
    put(bb, d.bias);
    yb.poison();
    ib.poison();
    e = build_and_run(g, {&xb, &bb, &yb, &ib});
    ASSERT_TRUE(e.is_good()) << e.get_message();
    // One group per row of 35; RMSNorm has no mean to subtract.
    Values y_want(d.x.size()), inv_want(3, 0.0), mean(3, 0.0);
    for (size_t n = 0; n < d.x.size(); ++n)
      if (centered) mean[n / 35] += d.x[n] / 35;
    for (size_t n = 0; n < d.x.size(); ++n) inv_want[n / 35] += std::pow(d.x[n] - mean[n / 35], 2) / 35;
    for (double& v : inv_want) v = 1.0 / std::sqrt(v + d.eps);
    for (size_t n = 0; n < d.x.size(); ++n) y_want[n] = (d.x[n] - mean[n / 35]) * inv_want[n / 35] + d.bias[n % 35];
    EXPECT_CLOSE(yb.values(), y_want, 1e-5);
    EXPECT_CLOSE(ib.values(), inv_want, 1e-5 * max_abs(inv_want));
  }
}

// ---- JSON ----

TEST(NormExtraJson, RoundTripRunsBitwiseEqual) {
  graph::Graph g;
  g.set_io_data_type(DT::BFLOAT16).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const Dims xd = {2, 4, 6}, ch = {1, 4, 1};
  const std::vector<TensorPtr> ins = {input(g, "x", xd, DT::BFLOAT16, {1, 2, 8}), input(g, "dy", xd, DT::BFLOAT16),
                                      input(g, "scale", ch, DT::FLOAT),           input(g, "bias", ch, DT::FLOAT),
                                      input(g, "ada_scale", {2, 1, 6}),           input(g, "ada_bias", {2, 1, 6})};
  const TensorPtr &x = ins[0], &dy = ins[1], &scale = ins[2], &bias = ins[3];
  auto eps = g.tensor(1e-5f);
  auto in = g.instancenorm(x, scale, bias,
                           graph::Instancenorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps));
  auto in_b = g.instancenorm_backward(
      dy, x, scale, graph::Instancenorm_backward_attributes().set_saved_mean_and_inv_variance(in[1], in[2]));
  auto gn =
      g.groupnorm(x, scale, bias,
                  graph::Groupnorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps).set_group_count(2));
  auto gn_b = g.groupnorm_backward(
      dy, x, scale, graph::Groupnorm_backward_attributes().set_saved_mean_and_inv_variance(gn[1], gn[2]));
  auto ada = g.adalayernorm(x, ins[4], ins[5],
                            graph::AdaLayernorm_attributes().set_forward_phase(Phase::TRAINING).set_epsilon(eps));
  auto ada_b = g.adalayernorm_backward(
      dy, x, ins[4], graph::AdaLayernorm_backward_attributes().set_saved_mean_and_inv_variance(ada[1], ada[2]));
  auto ln = g.layernorm(x, nullptr, nullptr,
                        graph::Layernorm_attributes().set_forward_phase(Phase::INFERENCE).set_epsilon(eps));
  std::vector<TensorPtr> outputs;
  for (const auto& group : {in, in_b, gn, gn_b, ada, ada_b}) outputs.insert(outputs.end(), group.begin(), group.end());
  outputs.push_back(ln[0]);
  for (auto& o : outputs) o->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  for (const char* needle :
       {"\"INSTANCE_NORM\"", "\"INSTANCE_NORM_BACKWARD\"", "\"GROUP_NORM\"", "\"GROUP_NORM_BACKWARD\"",
        "\"ADA_LAYER_NORM\"", "\"ADA_LAYER_NORM_BACKWARD\"", "\"group_count\"", "\"TRAINING\""})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  std::mt19937_64 rng(12);
  std::vector<std::unique_ptr<HostTensor>> bufs;
  std::vector<HostTensor*> pack;
  for (const auto& t : ins) {
    bufs.push_back(std::make_unique<HostTensor>(t));
    bufs.back()->fill_random(rng, 0.5, 1.5);
    pack.push_back(bufs.back().get());
  }
  auto outs = poisoned(outputs, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::vector<std::vector<uint8_t>> first;
  for (auto& o : outs) {
    first.push_back(o->bytes);
    o->poison();
  }
  graph::Graph replay;
  e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  e = build_and_run(replay, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(outs[i]->bytes, first[i]) << outputs[i]->get_name();
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

// x [2, 6, 5] with per-channel scale.
struct Decl {
  graph::Graph g;
  TensorPtr x, scale;
  Decl() {
    g.set_io_data_type(DT::FLOAT);
    x = input(g, "x", {2, 6, 5});
    scale = input(g, "scale", {1, 6, 1});
  }
  graph::Groupnorm_attributes gn(int64_t groups) {
    return graph::Groupnorm_attributes()
        .set_name("gn0")
        .set_forward_phase(Phase::TRAINING)
        .set_epsilon(g.tensor(1e-5f))
        .set_group_count(groups);
  }
};

TEST(NormExtraErrors, GroupCount) {
  Decl d;
  d.g.groupnorm(d.x, d.scale, nullptr, d.gn(4));
  expect_error(d.g, error_code_t::INVALID_VALUE, {"gn0", "GROUP_NORM", "'group_count'", "4", "6"});
  Decl z;
  z.g.groupnorm(z.x, z.scale, nullptr, z.gn(0));
  expect_error(z.g, error_code_t::ATTRIBUTE_NOT_SET, {"gn0", "'group_count'", "0"});
  Decl b;
  b.g.groupnorm_backward(input(b.g, "dy", {2, 6, 5}), b.x, b.scale,
                         graph::Groupnorm_backward_attributes().set_name("gnb").set_saved_mean_and_inv_variance(
                             input(b.g, "mean", {2, 4, 1}), input(b.g, "inv", {2, 4, 1})));
  expect_error(b.g, error_code_t::INVALID_VALUE, {"gnb", "GROUP_NORM_BACKWARD", "'MEAN.dim[1]'", "4"});
}

TEST(NormExtraErrors, PhaseAndOperands) {
  Decl d;
  d.g.instancenorm(d.x, d.scale, nullptr,
                   graph::Instancenorm_attributes().set_name("in0").set_epsilon(d.g.tensor(1e-5f)));
  expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"in0", "INSTANCE_NORM", "'forward_phase'", "NOT_SET"});
  Decl e;
  e.g.instancenorm(e.x, e.scale, nullptr,
                   graph::Instancenorm_attributes().set_name("in0").set_forward_phase(Phase::INFERENCE));
  expect_error(e.g, error_code_t::ATTRIBUTE_NOT_SET, {"in0", "'EPSILON'", "null"});
  Decl s;
  s.g.instancenorm(s.x, input(s.g, "s", {2, 6, 1}), nullptr,
                   graph::Instancenorm_attributes()
                       .set_name("in0")
                       .set_forward_phase(Phase::INFERENCE)
                       .set_epsilon(s.g.tensor(1e-5f)));
  expect_error(s.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"in0", "'SCALE.dim'", "[2, 6, 1]", "[1, 6, 1]"});
  Decl a;
  a.g.adalayernorm(a.x, input(a.g, "s", {2, 3, 5}), nullptr,
                   graph::AdaLayernorm_attributes()
                       .set_name("ada0")
                       .set_forward_phase(Phase::TRAINING)
                       .set_epsilon(a.g.tensor(1e-5f)));
  expect_error(a.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"ada0", "ADA_LAYER_NORM", "'SCALE.dim'", "[2, 3, 5]"});
  Decl m;
  auto out = m.g.groupnorm(m.x, m.scale, nullptr, m.gn(3));
  out[1]->set_dim({2, 6, 1});
  expect_error(m.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"gn0", "'MEAN.dim'", "[2, 6, 1]", "[2, 3, 1]"});
  Decl y;
  y.g.instancenorm_backward(input(y.g, "dy", {2, 6, 4}), y.x, y.scale,
                            graph::Instancenorm_backward_attributes().set_name("inb").set_saved_mean_and_inv_variance(
                                input(y.g, "mean", {2, 6, 1}), input(y.g, "inv", {2, 6, 1})));
  expect_error(y.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"inb", "'DY.dim'", "[2, 6, 4]"});
}

}  // namespace
}  // namespace frost::test
