#include <cmath>
#include <limits>

#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;
using RM = ResampleMode_t;
using PM = PaddingMode_t;

// ---- Independent naive pooling, in double, on row-major values ----

struct Pool {
  Dims xd, window, stride, pre, post;
  RM mode;
  PM pad;
};

Dims output_dims(const Pool& p) {
  Dims yd = {p.xd[0], p.xd[1]};
  for (size_t k = 0; k < p.window.size(); ++k)
    yd.push_back((p.xd[k + 2] + p.pre[k] + p.post[k] - p.window[k]) / p.stride[k] + 1);
  return yd;
}

int64_t count(const Dims& d) {
  int64_t n = 1;
  for (int64_t e : d) n *= e;
  return n;
}

// Decomposes a row-major index into coordinates.
Dims coords(int64_t n, const Dims& d) {
  Dims c(d.size());
  for (size_t k = d.size(); k-- > 0;) {
    c[k] = n % d[k];
    n /= d[k];
  }
  return c;
}

// Y and, for max pooling, the row-major window position of the first maximum.
std::pair<std::vector<double>, std::vector<double>> naive_pool(const Pool& p, const std::vector<double>& x) {
  const Dims yd = output_dims(p);
  const size_t spatial = p.window.size();
  std::vector<double> y, index;
  for (int64_t n = 0; n < count(yd); ++n) {
    const Dims yc = coords(n, yd);
    double acc = p.mode == RM::MAXPOOL ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    double best_at = -1, members = 0;
    for (int64_t w = 0; w < count(p.window); ++w) {
      const Dims wc = coords(w, p.window);
      Dims xc = {yc[0], yc[1]};
      bool inside = true;
      for (size_t k = 0; k < spatial; ++k) {
        int64_t i = yc[k + 2] * p.stride[k] - p.pre[k] + wc[k];
        inside = inside && i >= 0 && i < p.xd[k + 2];
        xc.push_back(i);
      }
      double v;
      if (inside || p.pad == PM::EDGE_VAL_PAD) {
        int64_t flat = 0;
        for (size_t k = 0; k < xc.size(); ++k)
          flat = flat * p.xd[k] + std::max<int64_t>(0, std::min(xc[k], p.xd[k] - 1));
        v = x[static_cast<size_t>(flat)];
      } else {
        v = p.pad == PM::ZERO_PAD ? 0.0 : -std::numeric_limits<double>::infinity();
      }
      if (p.mode == RM::MAXPOOL) {
        if (best_at < 0 || v > acc) acc = v, best_at = static_cast<double>(w);
      } else if (inside || p.mode == RM::AVGPOOL_INCLUDE_PADDING) {
        acc += v;
        members += 1;
      }
    }
    y.push_back(p.mode == RM::MAXPOOL ? acc : acc / members);
    index.push_back(best_at);
  }
  return {y, index};
}

void put(HostTensor& h, std::vector<double>& v) {
  for (int64_t n = 0; n < h.volume(); ++n) h.set(n, v[static_cast<size_t>(n)]);
  v = h.values();
}

struct Case {
  const char* label;
  Dims xd, window, stride, pre, post;
  bool channels_last;
};
const Case kCases[] = {
    {"2d_n2c3h17w11", {2, 3, 17, 11}, {3, 2}, {2, 3}, {1, 0}, {1, 1}, false},
    {"2d_nhwc_n1c5h9w7", {1, 5, 9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true},
    {"3d_n1c2d5h7w6", {1, 2, 5, 7, 6}, {2, 3, 2}, {1, 2, 2}, {1, 1, 0}, {0, 1, 1}, false},
    {"2d_1x1_n1c1h1w1", {1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, false},
};
struct Mode {
  const char* label;
  RM mode;
  PM pad;
};
const Mode kModes[] = {{"avg_include_zero", RM::AVGPOOL_INCLUDE_PADDING, PM::ZERO_PAD},
                       {"avg_include_edge", RM::AVGPOOL_INCLUDE_PADDING, PM::EDGE_VAL_PAD},
                       {"avg_exclude", RM::AVGPOOL_EXCLUDE_PADDING, PM::NOT_SET},
                       {"max_neg_inf", RM::MAXPOOL, PM::NOT_SET},
                       {"max_zero", RM::MAXPOOL, PM::ZERO_PAD},
                       {"max_edge", RM::MAXPOOL, PM::EDGE_VAL_PAD}};

Dims strides_for(const Dims& xd, bool channels_last) {
  if (!channels_last) return {};
  // [N, C, H, W] dims in NHWC memory with two spare channels per pixel.
  const int64_t pixel = xd[1] + 2;
  return {xd[2] * xd[3] * pixel, 1, xd[3] * pixel, pixel};
}

using Param = std::tuple<int, int, DT>;

class Resample : public ::testing::TestWithParam<Param> {};

TEST_P(Resample, MatchesNaivePooling) {
  const auto [ci, mi, dt] = GetParam();
  const Case& c = kCases[ci];
  const Mode& m = kModes[mi];
  const bool fp64 = dt == DT::DOUBLE;
  std::mt19937_64 rng(700 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(mi) * 7 + static_cast<uint64_t>(dt));
  Pool p{c.xd,
         c.window,
         c.stride,
         c.pre,
         c.post,
         m.mode,
         m.pad != PM::NOT_SET    ? m.pad
         : m.mode == RM::MAXPOOL ? PM::NEG_INF_PAD
                                 : PM::ZERO_PAD};
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(fp64 ? DT::DOUBLE : DT::FLOAT);
  auto x = input(g, "x", c.xd, dt, strides_for(c.xd, c.channels_last));
  const bool training = m.mode == RM::MAXPOOL;
  auto [y, index] = g.resample(x, graph::Resample_attributes()
                                      .set_resampling_mode(m.mode)
                                      .set_padding_mode(m.pad)
                                      .set_window(c.window)
                                      .set_stride(c.stride)
                                      .set_pre_padding(c.pre)
                                      .set_post_padding(c.post)
                                      .set_is_inference(!training));
  ASSERT_EQ(index != nullptr, training);
  y->set_output(true);
  if (index) index->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(y->get_dim(), output_dims(p));
  HostTensor xb(x), yb(y);
  std::vector<double> xv(static_cast<size_t>(xb.volume()));
  std::uniform_real_distribution<double> u(-1, 1);
  for (double& v : xv) v = u(rng);
  put(xb, xv);
  yb.poison();
  std::vector<HostTensor*> pack{&xb, &yb};
  std::unique_ptr<HostTensor> ib;
  if (index) {
    EXPECT_EQ(index->get_data_type(), DT::INT32);
    ib = std::make_unique<HostTensor>(index);
    ib->poison();
    pack.push_back(ib.get());
  }
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const auto [want, want_index] = naive_pool(p, xv);
  const double tol = dt == DT::HALF ? 1e-3 : dt == DT::BFLOAT16 ? 8e-3 : fp64 ? 1e-15 : 1e-6;
  EXPECT_CLOSE(yb.values(), want, tol);
  if (ib) {
    EXPECT_EQ(ib->values(), want_index);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Resample,
                         ::testing::Combine(::testing::Range(0, 4), ::testing::Range(0, 6),
                                            ::testing::Values(DT::FLOAT, DT::HALF, DT::BFLOAT16, DT::DOUBLE)),
                         [](const auto& info) {
                           return std::string(kCases[std::get<0>(info.param)].label) + "_" +
                                  kModes[std::get<1>(info.param)].label + "_" +
                                  std::string(to_string(std::get<2>(info.param)));
                         });

TEST(ResampleMax, NanPropagatesAndTiesTakeTheFirstPosition) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", {1, 1, 2, 4});
  auto [y, index] = g.resample(
      x, graph::Resample_attributes().set_resampling_mode(RM::MAXPOOL).set_window({2, 2}).set_is_inference(false));
  y->set_output(true);
  index->set_output(true).set_data_type(DT::INT8);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor xb(x), yb(y), ib(index);
  const double vals[] = {1, 5, 0, NAN, 5, 2, 3, 7};  // windows {1, 5, 5, 2} and {0, NaN, 3, 7}
  for (int n = 0; n < 8; ++n) xb.set(n, vals[n]);
  ASSERT_TRUE(build_and_run(g, {&xb, &yb, &ib}).is_good());
  EXPECT_EQ(yb.get(0), 5.0);
  EXPECT_EQ(ib.get(0), 1.0);
  EXPECT_TRUE(std::isnan(yb.get(1)));
  EXPECT_EQ(ib.get(1), 1.0);
}

// ---- JSON ----

TEST(ResampleJson, RoundTripRunsBitwiseEqual) {
  graph::Graph g;
  g.set_io_data_type(DT::HALF).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", {2, 3, 5, 6, 7}, DT::HALF);
  auto mx = g.resample(x, graph::Resample_attributes()
                              .set_resampling_mode(RM::MAXPOOL)
                              .set_padding_mode(PM::EDGE_VAL_PAD)
                              .set_window({2, 2, 3})
                              .set_stride({1, 2, 2})
                              .set_pre_padding({1, 0, 1})
                              .set_post_padding({0, 1, 1})
                              .set_is_inference(false));
  auto avg = g.resample(mx[0], graph::Resample_attributes()
                                   .set_resampling_mode(RM::AVGPOOL_EXCLUDE_PADDING)
                                   .set_window({2, 2, 2})
                                   .set_pre_padding({1, 1, 1}));
  const std::vector<TensorPtr> outputs = {mx[1], avg[0]};
  for (const auto& t : outputs) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  for (const char* needle : {"\"RESAMPLE\"", "\"MAXPOOL\"", "\"EDGE_VAL_PAD\"", "\"AVGPOOL_EXCLUDE_PADDING\"",
                             "\"pre_padding\"", "\"is_inference\"", "\"INDEX\""})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  std::mt19937_64 rng(9);
  HostTensor xb(x), b0(outputs[0]), b1(outputs[1]);
  xb.fill_random(rng);
  b0.poison();
  b1.poison();
  ASSERT_TRUE(build_and_run(g, {&xb, &b0, &b1}).is_good());
  const auto first0 = b0.bytes, first1 = b1.bytes;
  b0.poison();
  b1.poison();
  graph::Graph replay;
  e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  ASSERT_TRUE(build_and_run(replay, {&xb, &b0, &b1}).is_good());
  EXPECT_EQ(b0.bytes, first0);
  EXPECT_EQ(b1.bytes, first1);
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

graph::Resample_attributes avg2x2() {
  return graph::Resample_attributes()
      .set_name("pool0")
      .set_resampling_mode(RM::AVGPOOL_INCLUDE_PADDING)
      .set_window({2, 2});
}

TEST(ResampleErrors, ModesAndPadding) {
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2().set_resampling_mode(RM::NOT_SET));
    expect_error(g, error_code_t::ATTRIBUTE_NOT_SET, {"pool0", "RESAMPLE", "'resampling_mode'", "NOT_SET"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2().set_resampling_mode(RM::BILINEAR));
    expect_error(g, error_code_t::GRAPH_NOT_SUPPORTED, {"pool0", "'resampling_mode'", "BILINEAR"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2().set_padding_mode(PM::NEG_INF_PAD));
    expect_error(g, error_code_t::INVALID_VALUE, {"pool0", "'padding_mode'", "NEG_INF_PAD"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2().set_pre_padding({2, 0}));
    expect_error(g, error_code_t::INVALID_VALUE, {"pool0", "'pre_padding'", "[2, 0]"});
  }
}

TEST(ResampleErrors, PostPaddingAndNegativeLists) {
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2().set_post_padding({0, 2}));
    expect_error(g, error_code_t::INVALID_VALUE, {"pool0", "'post_padding'", "[0, 2]"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2().set_pre_padding({-1, 0}));
    expect_error(g, error_code_t::INVALID_VALUE, {"pool0", "'pre_padding'", "[-1, 0]"});
  }
  {
    graph::Graph g;
    g.resample(nullptr, avg2x2());
    expect_error(g, error_code_t::ATTRIBUTE_NOT_SET, {"pool0", "X"});
  }
}

TEST(ResampleErrors, ShapesAndLists) {
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 4, 4}), avg2x2());
    expect_error(g, error_code_t::SHAPE_DEDUCTION_FAILED, {"pool0", "'X.dim'", "[1, 4, 4]"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2().set_window({2, 2, 2}));
    expect_error(g, error_code_t::INVALID_VALUE, {"pool0", "'window'", "[2, 2, 2]"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2().set_stride({0, 1}));
    expect_error(g, error_code_t::INVALID_VALUE, {"pool0", "'stride'", "[0, 1]"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 1}), avg2x2());
    expect_error(g, error_code_t::SHAPE_DEDUCTION_FAILED, {"pool0", "'window'", "[2, 2]"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2().set_window({}));
    expect_error(g, error_code_t::ATTRIBUTE_NOT_SET, {"pool0", "'window'"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}), avg2x2())[0]->set_dim({1, 1, 3, 2});
    expect_error(g, error_code_t::SHAPE_DEDUCTION_FAILED, {"pool0", "'Y.dim'", "[1, 1, 3, 2]", "[1, 1, 2, 2]"});
  }
  {
    graph::Graph g;
    auto out = g.resample(input(g, "x", {1, 1, 20, 20}),
                          avg2x2().set_resampling_mode(RM::MAXPOOL).set_window({12, 12}).set_is_inference(false));
    out[1]->set_data_type(DT::INT8);
    expect_error(g, error_code_t::INVALID_VALUE, {"pool0", "'INDEX.data_type'", "INT8", "143"});
  }
  {
    graph::Graph g;
    g.resample(input(g, "x", {1, 1, 4, 4}, DT::INT32), avg2x2());
    expect_error(g, error_code_t::INVALID_VALUE, {"pool0", "'X.data_type'", "INT32"});
  }
}

}  // namespace
}  // namespace frost::test
