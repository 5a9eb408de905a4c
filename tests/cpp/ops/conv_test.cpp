#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>

#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;
using Mode = ConvolutionMode_t;

// ---- Cases: odd sizes, every dimensionality, padding / stride / dilation mixes, groups, NHWC ----

struct Case {
  const char* label;
  Dims x, w;                         // [N, C, spatial...] and [K, C / groups, filter...]
  Dims pre, post, stride, dilation;  // empty: the defaults (0, 0, 1, 1)
  bool channels_last = false;        // X (and so Y, DX) stored NHWC-like
  Mode mode = Mode::CROSS_CORRELATION;
  Dims x_strides, y_strides;  // set: gapped (non-packed) strides for X, DX and Y, DY
};

const Case kCases[] = {
    {"conv1d_pad1_stride2", {2, 3, 17}, {5, 3, 3}, {1}, {1}, {2}, {}},
    {"conv1d_L111_dilation3_flipped", {1, 1, 111}, {1, 1, 4}, {2}, {0}, {}, {3}, false, Mode::CONVOLUTION},
    {"conv2d_nhwc_asymmetric_padding", {2, 4, 9, 7}, {6, 4, 3, 2}, {1, 0}, {2, 1}, {1, 2}, {2, 1}, true},
    {"conv2d_groups3", {1, 6, 7, 8}, {9, 2, 3, 3}, {1, 1}, {1, 1}, {2, 1}, {}},
    {"conv2d_depthwise_nhwc", {2, 5, 6, 5}, {5, 1, 3, 3}, {1, 1}, {1, 1}, {}, {}, true},
    // A 1x1 filter with stride 2 leaves every other input position untouched: dgrad must write 0 there.
    {"conv2d_1x1_stride2", {1, 3, 5, 7}, {4, 3, 1, 1}, {}, {}, {2, 2}, {}},
    {"conv3d_nhwc_flipped",
     {1, 2, 5, 6, 4},
     {4, 2, 2, 3, 2},
     {1, 0, 1},
     {0, 2, 0},
     {2, 1, 2},
     {1, 2, 1},
     true,
     Mode::CONVOLUTION},
    // Gaps between rows, channels and images in every operand and output but the weights.
    {"conv2d_gapped_strides",
     {2, 3, 5, 4},
     {2, 3, 2, 2},
     {},
     {},
     {},
     {1, 2},
     false,
     Mode::CROSS_CORRELATION,
     {100, 30, 6, 1},
     {40, 16, 4, 1}},
};
constexpr int kCaseCount = static_cast<int>(sizeof(kCases) / sizeof(kCases[0]));

int64_t volume(const Dims& d) {
  int64_t v = 1;
  for (int64_t e : d) v *= e;
  return v;
}

int64_t at_or(const Dims& v, size_t i, int64_t fallback) { return v.empty() ? fallback : v[i]; }

// Y's dims by the textbook formula.
Dims y_dims(const Case& c) {
  Dims y{c.x[0], c.w[0]};
  for (size_t i = 0; i + 2 < c.x.size(); ++i) {
    const int64_t span = at_or(c.dilation, i, 1) * (c.w[2 + i] - 1) + 1;
    y.push_back((c.x[2 + i] + at_or(c.pre, i, 0) + at_or(c.post, i, 0) - span) / at_or(c.stride, i, 1) + 1);
  }
  return y;
}

// Strides of [N, C, spatial...] with C innermost (NHWC for rank 4).
Dims channels_last_strides(const Dims& d) {
  Dims s(d.size());
  int64_t step = d[1];
  s[1] = 1;
  for (size_t i = d.size(); i-- > 2;) {
    s[i] = step;
    step *= d[i];
  }
  s[0] = step;
  return s;
}

// Row-major multi-index of flat index n in dims d.
Dims unflatten(int64_t n, const Dims& d) {
  Dims idx(d.size());
  for (size_t k = d.size(); k-- > 0;) {
    idx[k] = n % d[k];
    n /= d[k];
  }
  return idx;
}

int64_t flatten(const Dims& idx, const Dims& d) {
  int64_t n = 0;
  for (size_t k = 0; k < d.size(); ++k) n = n * d[k] + idx[k];
  return n;
}

// Y[n, k, o] = sum_{c', t} X[n, g*Cg + c', o*s - pre + t*dil] * W[k, c', t or flipped t], straight from the
// definition, one output element at a time.
std::vector<double> naive_fprop(const Case& c, const std::vector<double>& x, const std::vector<double>& w) {
  const Dims yd = y_dims(c);
  const int64_t cg = c.w[1], groups = c.x[1] / cg, kg = c.w[0] / groups;
  const Dims taps(c.w.begin() + 2, c.w.end());
  std::vector<double> y(static_cast<size_t>(volume(yd)), 0.0);
  for (int64_t yi = 0; yi < volume(yd); ++yi) {
    const Dims o = unflatten(yi, yd);
    double sum = 0;
    for (int64_t cl = 0; cl < cg; ++cl)
      for (int64_t ti = 0; ti < volume(taps); ++ti) {
        const Dims t = unflatten(ti, taps);
        Dims xi{o[0], (o[1] / kg) * cg + cl}, wi{o[1], cl};
        bool inside = true;
        for (size_t a = 0; a < taps.size(); ++a) {
          const int64_t p = o[2 + a] * at_or(c.stride, a, 1) - at_or(c.pre, a, 0) + t[a] * at_or(c.dilation, a, 1);
          inside = inside && p >= 0 && p < c.x[2 + a];
          xi.push_back(p);
          wi.push_back(c.mode == Mode::CONVOLUTION ? taps[a] - 1 - t[a] : t[a]);
        }
        if (inside) sum += x[static_cast<size_t>(flatten(xi, c.x))] * w[static_cast<size_t>(flatten(wi, c.w))];
      }
    y[static_cast<size_t>(yi)] = sum;
  }
  return y;
}

// DX[n, c, i] gathered: for each tap t the output position o with o*s - pre + t*dil = i, if integral and in range.
std::vector<double> naive_dgrad(const Case& c, const std::vector<double>& dy, const std::vector<double>& w) {
  const Dims yd = y_dims(c);
  const int64_t cg = c.w[1], groups = c.x[1] / cg, kg = c.w[0] / groups;
  const Dims taps(c.w.begin() + 2, c.w.end());
  std::vector<double> dx(static_cast<size_t>(volume(c.x)), 0.0);
  for (int64_t xi = 0; xi < volume(c.x); ++xi) {
    const Dims i = unflatten(xi, c.x);
    const int64_t group = i[1] / cg, cl = i[1] % cg;
    double sum = 0;
    for (int64_t k = group * kg; k < (group + 1) * kg; ++k)
      for (int64_t ti = 0; ti < volume(taps); ++ti) {
        const Dims t = unflatten(ti, taps);
        Dims yi{i[0], k}, wi{k, cl};
        bool hit = true;
        for (size_t a = 0; a < taps.size(); ++a) {
          const int64_t num = i[2 + a] + at_or(c.pre, a, 0) - t[a] * at_or(c.dilation, a, 1);
          const int64_t s = at_or(c.stride, a, 1);
          hit = hit && num >= 0 && num % s == 0 && num / s < yd[2 + a];
          yi.push_back(num / s);
          wi.push_back(c.mode == Mode::CONVOLUTION ? taps[a] - 1 - t[a] : t[a]);
        }
        if (hit) sum += dy[static_cast<size_t>(flatten(yi, yd))] * w[static_cast<size_t>(flatten(wi, c.w))];
      }
    dx[static_cast<size_t>(xi)] = sum;
  }
  return dx;
}

// DW[k, c', r] = sum_{n, o} X[n, g*Cg + c', o*s - pre + t*dil] * DY[n, k, o], t = r (or flipped r).
std::vector<double> naive_wgrad(const Case& c, const std::vector<double>& x, const std::vector<double>& dy) {
  const Dims yd = y_dims(c);
  const int64_t cg = c.w[1], groups = c.x[1] / cg, kg = c.w[0] / groups;
  const Dims out_spatial(yd.begin() + 2, yd.end());
  std::vector<double> dw(static_cast<size_t>(volume(c.w)), 0.0);
  for (int64_t wi = 0; wi < volume(c.w); ++wi) {
    const Dims r = unflatten(wi, c.w);
    double sum = 0;
    for (int64_t n = 0; n < c.x[0]; ++n)
      for (int64_t oi = 0; oi < volume(out_spatial); ++oi) {
        const Dims o = unflatten(oi, out_spatial);
        Dims xi{n, (r[0] / kg) * cg + r[1]}, yi{n, r[0]};
        bool inside = true;
        for (size_t a = 0; a < o.size(); ++a) {
          const int64_t t = c.mode == Mode::CONVOLUTION ? c.w[2 + a] - 1 - r[2 + a] : r[2 + a];
          const int64_t p = o[a] * at_or(c.stride, a, 1) - at_or(c.pre, a, 0) + t * at_or(c.dilation, a, 1);
          inside = inside && p >= 0 && p < c.x[2 + a];
          xi.push_back(p);
          yi.push_back(o[a]);
        }
        if (inside) sum += x[static_cast<size_t>(flatten(xi, c.x))] * dy[static_cast<size_t>(flatten(yi, yd))];
      }
    dw[static_cast<size_t>(wi)] = sum;
  }
  return dw;
}

template <class A>
A attributes_of(const Case& c, const char* name) {
  A a;
  a.set_name(name).set_convolution_mode(c.mode);
  if (!c.pre.empty()) a.set_pre_padding(c.pre);
  if (!c.post.empty()) a.set_post_padding(c.post);
  if (!c.stride.empty()) a.set_stride(c.stride);
  if (!c.dilation.empty()) a.set_dilation(c.dilation);
  return a;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Half the relative spacing of a type's values: the rounding of one store.
double store_eps(DT t) {
  return t == DT::HALF ? std::ldexp(1.0, -11) : t == DT::BFLOAT16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -24);
}

// The three ops of one case in one graph: Y = fprop(X, W), DX = dgrad(DY, W), DW = wgrad(DY, X).
struct ConvGraph {
  graph::Graph g;
  TensorPtr x, w, dy, y, dx, dw;

  ConvGraph(const Case& c, DT in_type, DT out_type, DT compute) {
    g.set_io_data_type(in_type).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(compute);
    const Dims x_strides = c.channels_last ? channels_last_strides(c.x) : c.x_strides;
    const Dims y_strides = c.channels_last ? channels_last_strides(y_dims(c)) : c.y_strides;
    x = input(g, "x", c.x, in_type, x_strides);
    w = input(g, "w", c.w, in_type);
    dy = input(g, "dy", y_dims(c), in_type, y_strides);
    y = g.conv_fprop(x, w, attributes_of<graph::Conv_fprop_attributes>(c, "fprop"));
    dx = g.conv_dgrad(dy, w, attributes_of<graph::Conv_dgrad_attributes>(c, "dgrad"));
    dw = g.conv_wgrad(dy, x, attributes_of<graph::Conv_wgrad_attributes>(c, "wgrad"));
    dx->set_dim(c.x);
    dw->set_dim(c.w);
    for (const TensorPtr& t : {y, dx, dw}) t->set_output(true).set_data_type(out_type);
    if (!c.y_strides.empty()) y->set_stride(c.y_strides);
    if (!c.x_strides.empty()) dx->set_stride(c.x_strides);
  }
};

// ---- Storage types against the naive formulas ----

class ConvTypes : public ::testing::TestWithParam<std::tuple<DT, int>> {};

TEST_P(ConvTypes, AllThreeOpsMatchNaive) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  ConvGraph cg(c, dt, dt, DT::FLOAT);
  auto e = cg.g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(cg.y->get_dim(), y_dims(c));
  if (c.channels_last) {
    // Inferred outputs keep the operands' layout.
    EXPECT_EQ(cg.y->get_stride(), channels_last_strides(y_dims(c)));
    EXPECT_EQ(cg.dx->get_stride(), channels_last_strides(c.x));
  }
  std::mt19937_64 rng(100 + static_cast<uint64_t>(ci) * 7 + static_cast<uint64_t>(dt));
  HostTensor xb(cg.x), wb(cg.w), dyb(cg.dy), yb(cg.y), dxb(cg.dx), dwb(cg.dw);
  for (HostTensor* h : {&xb, &wb, &dyb}) h->fill_random(rng);
  for (HostTensor* h : {&yb, &dxb, &dwb}) h->poison();
  e = build_and_run(cg.g, {&xb, &wb, &dyb, &yb, &dxb, &dwb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  // The naive formulas read the stored (rounded) inputs; what remains is one rounding on store and
  // FP32 accumulation over at most a few hundred terms of magnitude <= 1.
  auto tol = [&](const std::vector<double>& want) { return max_abs(want) * store_eps(dt) + 5e-5; };
  const auto y = naive_fprop(c, xb.values(), wb.values());
  const auto dx = naive_dgrad(c, dyb.values(), wb.values());
  const auto dw = naive_wgrad(c, xb.values(), dyb.values());
  EXPECT_CLOSE(yb.values(), y, tol(y));
  EXPECT_CLOSE(dxb.values(), dx, tol(dx));
  EXPECT_CLOSE(dwb.values(), dw, tol(dw));
}

std::string case_name(int ci) { return kCases[ci].label; }

INSTANTIATE_TEST_SUITE_P(Storage, ConvTypes,
                         ::testing::Combine(::testing::Values(DT::FLOAT, DT::HALF, DT::BFLOAT16),
                                            ::testing::Range(0, kCaseCount)),
                         [](const auto& info) {
                           return std::string(to_string(std::get<0>(info.param))) + "_" +
                                  case_name(std::get<1>(info.param));
                         });

// fp8 operands (fprop only), FP32 output: exact products of the stored values, FP32 sums.
class ConvFp8 : public ::testing::TestWithParam<std::tuple<DT, int>> {};

TEST_P(ConvFp8, FpropMatchesNaive) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", c.x, dt, c.channels_last ? channels_last_strides(c.x) : Dims{});
  auto w = input(g, "w", c.w, dt);
  auto y = g.conv_fprop(x, w, attributes_of<graph::Conv_fprop_attributes>(c, "fprop8"));
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor xb(x), wb(w), yb(y);
  std::mt19937_64 rng(7 + static_cast<uint64_t>(ci));
  xb.fill_random(rng);
  wb.fill_random(rng);
  yb.poison();
  ASSERT_TRUE(build_and_run(g, {&xb, &wb, &yb}).is_good());
  EXPECT_CLOSE(yb.values(), naive_fprop(c, xb.values(), wb.values()), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Fp8, ConvFp8, ::testing::Combine(::testing::Values(DT::FP8_E4M3, DT::FP8_E5M2), ::testing::Values(0, 2, 3, 6)),
    [](const auto& info) {
      return std::string(to_string(std::get<0>(info.param))) + "_" + case_name(std::get<1>(info.param));
    });

// ---- fp64: exact against the naive formulas, adjoint identities and central differences ----

class ConvGradientFp64 : public ::testing::TestWithParam<int> {};

TEST_P(ConvGradientFp64, AdjointsAndFiniteDifferences) {
  const Case& c = kCases[GetParam()];
  ConvGraph cg(c, DT::DOUBLE, DT::DOUBLE, DT::DOUBLE);
  auto e = cg.g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::mt19937_64 rng(900 + static_cast<uint64_t>(GetParam()));
  HostTensor xb(cg.x), wb(cg.w), dyb(cg.dy), yb(cg.y), dxb(cg.dx), dwb(cg.dw);
  for (HostTensor* h : {&xb, &wb, &dyb}) h->fill_random(rng);
  for (HostTensor* h : {&yb, &dxb, &dwb}) h->poison();
  e = build_and_run(cg.g, {&xb, &wb, &dyb, &yb, &dxb, &dwb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const auto x = xb.values(), w = wb.values(), dy = dyb.values();
  const auto y = yb.values(), dx = dxb.values(), dw = dwb.values();
  EXPECT_CLOSE(y, naive_fprop(c, x, w), 1e-12);
  EXPECT_CLOSE(dx, naive_dgrad(c, dy, w), 1e-12);
  EXPECT_CLOSE(dw, naive_wgrad(c, x, dy), 1e-12);
  // <conv(x, w), dy> = <x, dgrad(dy, w)> = <w, wgrad(x, dy)>.
  const double ydy = dot(y, dy);
  EXPECT_NEAR(dot(x, dx), ydy, 1e-10 * std::max(1.0, std::fabs(ydy)));
  EXPECT_NEAR(dot(w, dw), ydy, 1e-10 * std::max(1.0, std::fabs(ydy)));
  // Central differences of L = <naive_fprop(x, w), dy> in every element of x and of w.
  const double h = 1e-3;
  auto loss = [&](const std::vector<double>& xs, const std::vector<double>& ws) {
    return dot(naive_fprop(c, xs, ws), dy);
  };
  // Up to ~48 evenly spread elements per operand, first and last included, keep CI fast.
  auto differences = [&](const std::vector<double>& at, bool in_x, std::vector<double>& got_subset,
                         const std::vector<double>& got) {
    std::vector<size_t> picks;
    for (size_t i = 0; i < at.size(); i += (at.size() + 47) / 48) picks.push_back(i);
    if (picks.back() != at.size() - 1) picks.push_back(at.size() - 1);
    std::vector<double> fd, probe = at;
    for (size_t i : picks) {
      probe[i] = at[i] + h;
      const double up = in_x ? loss(probe, w) : loss(x, probe);
      probe[i] = at[i] - h;
      fd.push_back((up - (in_x ? loss(probe, w) : loss(x, probe))) / (2 * h));
      probe[i] = at[i];
      got_subset.push_back(got[i]);
    }
    return fd;
  };
  std::vector<double> dx_at, dw_at;
  const std::vector<double> fd_x = differences(x, true, dx_at, dx), fd_w = differences(w, false, dw_at, dw);
  EXPECT_CLOSE(dx_at, fd_x, 1e-9);
  EXPECT_CLOSE(dw_at, fd_w, 1e-9);
  // The checks can fail: the other convolution mode's gradient is far off (for any filter wider than 1).
  if (volume(Dims(c.w.begin() + 2, c.w.end())) > 1) {
    Case other = c;
    other.mode = c.mode == Mode::CONVOLUTION ? Mode::CROSS_CORRELATION : Mode::CONVOLUTION;
    EXPECT_GT(compare(naive_wgrad(other, x, dy), dw).max_abs, 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvGradientFp64, ::testing::Range(0, kCaseCount),
                         [](const auto& info) { return case_name(info.param); });

TEST(ConvFp64, ComputeTypeDecidesThePrecision) {
  // DOUBLE tensors, 64 channels x 3x3 taps: the fp64 mode is exact to double rounding, FP32 is not.
  const Case c{"wide", {1, 64, 5, 5}, {2, 64, 3, 3}, {1, 1}, {1, 1}, {}, {}};
  std::vector<double> errors;
  for (DT compute : {DT::DOUBLE, DT::FLOAT}) {
    graph::Graph g;
    g.set_io_data_type(DT::DOUBLE).set_compute_data_type(compute);
    auto x = input(g, "x", c.x, DT::DOUBLE);
    auto w = input(g, "w", c.w, DT::DOUBLE);
    auto y = g.conv_fprop(x, w, attributes_of<graph::Conv_fprop_attributes>(c, "wide"));
    y->set_output(true);
    ASSERT_TRUE(g.validate().is_good());
    HostTensor xb(x), wb(w), yb(y);
    std::mt19937_64 rng(3);
    xb.fill_random(rng);
    wb.fill_random(rng);
    yb.poison();
    ASSERT_TRUE(build_and_run(g, {&xb, &wb, &yb}).is_good());
    errors.push_back(compare(yb.values(), naive_fprop(c, xb.values(), wb.values())).max_abs);
  }
  EXPECT_LE(errors[0], 1e-12);
  EXPECT_GT(errors[1], 1e-9);
}

// ---- JSON ----

TEST(ConvJson, RoundTripRunsBitwiseEqual) {
  const Case& c = kCases[6];  // 3-D, NHWC, flipped, every attribute set
  ConvGraph cg(c, DT::BFLOAT16, DT::BFLOAT16, DT::FLOAT);
  auto e = cg.g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::string text;
  ASSERT_TRUE(cg.g.serialize(text).is_good());
  for (const char* needle :
       {"\"CONV_FPROP\"", "\"CONV_DGRAD\"", "\"CONV_WGRAD\"", "\"pre_padding\"", "\"post_padding\"", "\"stride\"",
        "\"dilation\"", "\"convolution_mode\"", "\"CONVOLUTION\"", "\"DW\""})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  HostTensor xb(cg.x), wb(cg.w), dyb(cg.dy), yb(cg.y), dxb(cg.dx), dwb(cg.dw);
  std::mt19937_64 rng(17);
  for (HostTensor* h : {&xb, &wb, &dyb}) h->fill_random(rng);
  for (HostTensor* h : {&yb, &dxb, &dwb}) h->poison();
  const std::vector<HostTensor*> pack = {&xb, &wb, &dyb, &yb, &dxb, &dwb};
  ASSERT_TRUE(build_and_run(cg.g, pack).is_good());
  const auto y = yb.bytes, dx = dxb.bytes, dw = dwb.bytes;
  for (HostTensor* h : {&yb, &dxb, &dwb}) h->poison();
  graph::Graph replay;
  e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  e = build_and_run(replay, pack);  // same uids, same buffers
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(yb.bytes, y);
  EXPECT_EQ(dxb.bytes, dx);
  EXPECT_EQ(dwb.bytes, dw);
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

TEST(ConvJson, UnknownModeAndMalformedListsAreRejected) {
  ConvGraph cg(kCases[1], DT::FLOAT, DT::FLOAT, DT::FLOAT);
  ASSERT_TRUE(cg.g.validate().is_good());
  std::string text;
  ASSERT_TRUE(cg.g.serialize(text).is_good());
  // Edits one attribute of the CONV_DGRAD node in the serialized text.
  auto with_attribute = [&](const char* key, nlohmann::json value) {
    nlohmann::json j = nlohmann::json::parse(text);
    for (auto& node : j["nodes"])
      if (node["tag"] == "CONV_DGRAD") node[key] = value;
    return j.dump(1);
  };
  graph::Graph bad_mode;
  auto e = bad_mode.deserialize(with_attribute("convolution_mode", "SIDEWAYS"));
  EXPECT_EQ(e.get_code(), error_code_t::UNSUPPORTED_GRAPH_FORMAT) << e.get_message();
  EXPECT_NE(e.get_message().find("convolution_mode"), std::string::npos) << e.get_message();
  graph::Graph bad_list;
  e = bad_list.deserialize(with_attribute("dilation", "3"));
  EXPECT_EQ(e.get_code(), error_code_t::UNSUPPORTED_GRAPH_FORMAT) << e.get_message();
  EXPECT_NE(e.get_message().find("dilation"), std::string::npos) << e.get_message();
  // A well-formed list of the wrong length is caught by validation, naming the node.
  graph::Graph short_list;
  ASSERT_TRUE(short_list.deserialize(with_attribute("stride", nlohmann::json::array({1, 1}))).is_good());
  const auto v = short_list.validate();
  EXPECT_TRUE(v.is_bad());
  EXPECT_NE(v.get_message().find("'dgrad'"), std::string::npos) << v.get_message();
  EXPECT_NE(v.get_message().find("stride"), std::string::npos) << v.get_message();
}

// ---- Errors: each names the node, the attribute and the offending value ----

void expect_error(graph::Graph& g, error_code_t code, std::initializer_list<const char*> needles) {
  const auto e = g.validate();
  EXPECT_EQ(e.get_code(), code) << e.get_message();
  for (const char* n : needles) EXPECT_NE(e.get_message().find(n), std::string::npos) << e.get_message();
}

// x [2, 6, 9, 8] and w [4, 3, 3, 3] (two groups); each test changes one thing.
struct Decl {
  graph::Graph g;
  TensorPtr x, w;
  explicit Decl(Dims x_dims = {2, 6, 9, 8}, Dims w_dims = {4, 3, 3, 3}, DT x_type = DT::FLOAT) {
    g.set_io_data_type(DT::FLOAT);
    x = input(g, "x", std::move(x_dims), x_type);
    w = input(g, "w", std::move(w_dims));
  }
  static graph::Conv_fprop_attributes fprop() { return graph::Conv_fprop_attributes().set_name("conv0"); }
};

TEST(ConvErrors, NullOperand) {
  Decl d;
  d.g.conv_fprop(d.x, nullptr, Decl::fprop());
  expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"conv0", "W", "null"});
}

TEST(ConvErrors, Ranks) {
  Decl rank2({2, 6}, {4, 3});
  rank2.g.conv_fprop(rank2.x, rank2.w, Decl::fprop());
  expect_error(rank2.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"conv0", "X.dim", "[2, 6]", "rank 3, 4 or 5"});
  Decl rank6({1, 1, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 1});
  rank6.g.conv_fprop(rank6.x, rank6.w, Decl::fprop());
  expect_error(rank6.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"conv0", "X.dim", "[1, 1, 2, 2, 2, 2]"});
  Decl mixed({2, 6, 9, 8}, {4, 3, 3});
  mixed.g.conv_fprop(mixed.x, mixed.w, Decl::fprop());
  expect_error(mixed.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"conv0", "W.dim", "[4, 3, 3]", "rank 4"});
}

TEST(ConvErrors, DataTypes) {
  Decl ints({2, 6, 9, 8}, {4, 3, 3, 3}, DT::INT32);
  ints.g.conv_fprop(ints.x, ints.w, Decl::fprop());
  expect_error(ints.g, error_code_t::INVALID_VALUE, {"conv0", "X.data_type", "INT32"});
  Decl fp8_out;
  fp8_out.g.conv_fprop(fp8_out.x, fp8_out.w, Decl::fprop())->set_output(true).set_data_type(DT::FP8_E4M3);
  expect_error(fp8_out.g, error_code_t::INVALID_VALUE, {"conv0", "Y.data_type", "FP8_E4M3"});
  // fp8 is accepted for fprop operands only.
  Decl fp8_dgrad;
  auto dy = input(fp8_dgrad.g, "dy", {2, 4, 7, 6}, DT::FP8_E4M3);
  fp8_dgrad.g.conv_dgrad(dy, fp8_dgrad.w, graph::Conv_dgrad_attributes().set_name("dg"))->set_dim({2, 6, 9, 8});
  expect_error(fp8_dgrad.g, error_code_t::INVALID_VALUE, {"dg", "DY.data_type", "FP8_E4M3"});
}

TEST(ConvErrors, PaddingStrideDilationValues) {
  const std::vector<std::tuple<graph::Conv_fprop_attributes, const char*, const char*>> bad = {
      {Decl::fprop().set_padding({1, 1, 1}), "pre_padding", "[1, 1, 1]"},
      {Decl::fprop().set_post_padding({1}), "post_padding", "[1]"},
      {Decl::fprop().set_pre_padding({0, -1}), "pre_padding", "[0, -1]"},
      {Decl::fprop().set_stride({1, 0}), "stride", "[1, 0]"},
      {Decl::fprop().set_dilation({0, 1}), "dilation", "[0, 1]"},
      {Decl::fprop().set_convolution_mode(Mode::NOT_SET), "convolution_mode", "NOT_SET"},
  };
  for (const auto& [attr, name, value] : bad) {
    Decl d;
    d.g.conv_fprop(d.x, d.w, attr);
    const auto e = d.g.validate();
    EXPECT_TRUE(e.is_bad()) << name;
    for (const char* n : {"conv0", name, value})
      EXPECT_NE(e.get_message().find(n), std::string::npos) << e.get_message();
  }
}

TEST(ConvErrors, ChannelsAndGroups) {
  Decl not_multiple({2, 6, 9, 8}, {4, 4, 3, 3});
  not_multiple.g.conv_fprop(not_multiple.x, not_multiple.w, Decl::fprop());
  expect_error(not_multiple.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"conv0", "W.dim", "[4, 4, 3, 3]", "6 channels"});
  Decl k_split({2, 6, 9, 8}, {5, 2, 3, 3});  // 3 groups, 5 output channels
  k_split.g.conv_fprop(k_split.x, k_split.w, Decl::fprop());
  expect_error(k_split.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"conv0", "W.dim", "[5, 2, 3, 3]", "3 groups"});
}

TEST(ConvErrors, FilterLargerThanPaddedInput) {
  Decl d({2, 6, 9, 4}, {4, 3, 3, 3});
  d.g.conv_fprop(d.x, d.w, Decl::fprop().set_dilation({1, 2}));  // spans 5 > 4
  expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"conv0", "X.dim", "[2, 6, 9, 4]", "spans 5", "input's 4"});
}

TEST(ConvErrors, OutputDims) {
  Decl y_wrong;
  y_wrong.g.conv_fprop(y_wrong.x, y_wrong.w, Decl::fprop())->set_dim({2, 4, 7, 7});
  expect_error(y_wrong.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"conv0", "Y.dim", "[2, 4, 7, 7]", "[2, 4, 7, 6]"});
  Decl dx_unset;
  auto dy = input(dx_unset.g, "dy", {2, 4, 7, 6});
  dx_unset.g.conv_dgrad(dy, dx_unset.w, graph::Conv_dgrad_attributes().set_name("dg"));
  expect_error(dx_unset.g, error_code_t::ATTRIBUTE_NOT_SET, {"dg", "DX.dim", "unset"});
  Decl dw_unset;
  dy = input(dw_unset.g, "dy", {2, 4, 7, 6});
  dw_unset.g.conv_wgrad(dy, dw_unset.x, graph::Conv_wgrad_attributes().set_name("wg"));
  expect_error(dw_unset.g, error_code_t::ATTRIBUTE_NOT_SET, {"wg", "DW.dim", "unset"});
  Decl dy_wrong;
  dy = input(dy_wrong.g, "dy", {2, 4, 7, 7});
  dy_wrong.g.conv_dgrad(dy, dy_wrong.w, graph::Conv_dgrad_attributes().set_name("dg"))->set_dim({2, 6, 9, 8});
  expect_error(dy_wrong.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"dg", "DY.dim", "[2, 4, 7, 7]", "[2, 4, 7, 6]"});
  Decl dw_zero;
  dy = input(dw_zero.g, "dy", {2, 4, 7, 6});
  dw_zero.g.conv_wgrad(dy, dw_zero.x, graph::Conv_wgrad_attributes().set_name("wg"))->set_dim({4, 0, 3, 3});
  expect_error(dw_zero.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"wg", "DW.dim", "[4, 0, 3, 3]"});
}

}  // namespace
}  // namespace frost::test
