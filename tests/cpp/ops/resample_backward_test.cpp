// resample_backward (average and max pooling gradients) against central differences of the resample
// forward reference in fp64, with and without the forward's INDEX; JSON replay, inference and errors.
#include <cmath>
#include <functional>

#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;
using RM = ResampleMode_t;
using PM = PaddingMode_t;

struct PoolCase {
  std::string label;
  RM mode;
  PM pad;
  Dims xd, window, stride, pre, post;
  bool channels_last = false;
  bool with_index = false;  // MAXPOOL: bind the forward's INDEX (else dX recomputes the maxima from X)
};
void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.label; }

Dims strides_of(const Dims& d, bool channels_last) {
  Dims s(d.size());
  if (!channels_last) {
    int64_t acc = 1;
    for (size_t k = d.size(); k-- > 0;) s[k] = acc, acc *= d[k];
    return s;
  }
  // N, spatial..., C innermost.
  int64_t acc = d[1];
  s[1] = 1;
  for (size_t k = d.size(); k-- > 2;) s[k] = acc, acc *= d[k];
  s[0] = acc;
  return s;
}

template <class A>
A& with_pooling(A& a, const PoolCase& c) {
  a.set_name("pool").set_resampling_mode(c.mode).set_padding_mode(c.pad).set_window(c.window).set_stride(c.stride);
  return a.set_pre_padding(c.pre).set_post_padding(c.post);
}

// The forward graph (Y and, for max pooling, INDEX), built once and rerun on changed X.
struct Forward {
  graph::Graph g;
  TensorPtr x, y, index;
  std::unique_ptr<HostTensor> xb, yb, ib;
  Handle h = cpu_handle();
  std::unordered_map<int64_t, void*> pack;
  std::vector<uint8_t> ws;

  Forward(const PoolCase& c, DT io, std::mt19937_64& rng) {
    g.set_io_data_type(io).set_compute_data_type(io == DT::DOUBLE ? DT::DOUBLE : DT::FLOAT);
    x = input(g, "x", c.xd, io, strides_of(c.xd, c.channels_last));
    graph::Resample_attributes a;
    with_pooling(a, c).set_is_inference(c.mode != RM::MAXPOOL);
    auto [y_t, i_t] = g.resample(x, a);
    y = y_t, index = i_t;
    y->set_output(true);
    if (index) index->set_output(true);
    EXPECT_TRUE(g.build(h, {HeurMode_t::A}).is_good());
    xb = std::make_unique<HostTensor>(x), yb = std::make_unique<HostTensor>(y);
    xb->fill_random(rng);
    pack[x->get_uid()] = xb->data(), pack[y->get_uid()] = yb->data();
    if (index) ib = std::make_unique<HostTensor>(index), pack[index->get_uid()] = ib->data();
    int64_t size = 0;
    EXPECT_TRUE(g.get_workspace_size(size).is_good());
    ws.resize(static_cast<size_t>(size) + 1);
  }
  double loss(const std::vector<double>& dy) {
    EXPECT_TRUE(g.execute(h, pack, ws.data()).is_good());
    double sum = 0;
    for (int64_t n = 0; n < yb->volume(); ++n) sum += yb->get(n) * dy[static_cast<size_t>(n)];
    return sum;
  }
};

// The backward graph on copies of the forward's buffers: DY, X, and INDEX when the case binds it.
struct Backward {
  graph::Graph g;
  TensorPtr dy, x, index, dx;
  std::unique_ptr<HostTensor> dyb, xb, ib, dxb;
  std::vector<HostTensor*> buffers;

  Backward(const PoolCase& c, const Forward& f, DT io, const std::vector<double>& dy_values) {
    g.set_io_data_type(io).set_compute_data_type(io == DT::DOUBLE ? DT::DOUBLE : DT::FLOAT);
    dy = input(g, "dy", f.y->get_dim(), io, f.y->get_stride());
    x = input(g, "x", c.xd, io, f.x->get_stride());
    graph::Resample_backward_attributes a;
    with_pooling(a, c).set_x(x);
    if (c.with_index)
      a.set_index(index = input(g, "index", f.index->get_dim(), f.index->get_data_type(), f.index->get_stride()));
    dx = g.resample_backward(dy, a);
    dx->set_output(true);
    EXPECT_TRUE(g.validate().is_good()) << g.validate().get_message();
    dyb = std::make_unique<HostTensor>(dy), xb = std::make_unique<HostTensor>(x),
    dxb = std::make_unique<HostTensor>(dx);
    for (int64_t n = 0; n < dyb->volume(); ++n) dyb->set(n, dy_values[static_cast<size_t>(n)]);
    xb->bytes = f.xb->bytes;
    dxb->poison();
    buffers = {dyb.get(), xb.get(), dxb.get()};
    if (index) {
      ib = std::make_unique<HostTensor>(index);
      ib->bytes = f.ib->bytes;
      buffers.push_back(ib.get());
    }
  }
};

class ResampleBackwardFd : public ::testing::TestWithParam<PoolCase> {};

TEST_P(ResampleBackwardFd, MatchesCentralDifferencesOfTheForward) {
  const PoolCase& c = GetParam();
  std::mt19937_64 rng(std::hash<std::string>{}(c.label));
  Forward f(c, DT::DOUBLE, rng);
  std::vector<double> dy(static_cast<size_t>(f.yb->volume()));
  std::uniform_real_distribution<double> u(-1, 1);
  for (double& e : dy) e = u(rng);
  f.loss(dy);
  // Pooling is piecewise linear in X: with a step of 2^-20 no maximum changes places, and the
  // differences are exact up to rounding.
  constexpr double kStep = 1.0 / (1 << 20);
  std::vector<double> fd(static_cast<size_t>(f.xb->volume()));
  for (int64_t n = 0; n < f.xb->volume(); ++n) {
    const double x0 = f.xb->get(n);
    f.xb->set(n, x0 + kStep);
    const double up = f.loss(dy);
    f.xb->set(n, x0 - kStep);
    const double down = f.loss(dy);
    f.xb->set(n, x0);
    fd[static_cast<size_t>(n)] = (up - down) / (2 * kStep);
  }
  f.loss(dy);  // Y and INDEX of the unperturbed X

  Backward b(c, f, DT::DOUBLE, dy);
  error_t e = build_and_run(b.g, b.buffers);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const std::vector<double> got = b.dxb->values();
  EXPECT_CLOSE(got, fd, 1e-7);
  double norm = 0;
  for (double x : fd) norm += std::fabs(x);
  EXPECT_GT(norm, 0.1) << "the gradient should not vanish";

  // In FP32 (float storage) the same gradients within float rounding.
  std::mt19937_64 rng32(std::hash<std::string>{}(c.label));
  Forward f32(c, DT::FLOAT, rng32);
  f32.loss(dy);
  Backward b32(c, f32, DT::FLOAT, dy);
  e = build_and_run(b32.g, b32.buffers);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_CLOSE(b32.dxb->values(), got, 2e-6);

  // The graph read back from its JSON gives the same bytes.
  const std::vector<uint8_t> first = b.dxb->bytes;
  std::string text;
  ASSERT_TRUE(b.g.serialize(text).is_good());
  graph::Graph replay;
  e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  b.dxb->poison();
  e = build_and_run(replay, b.buffers);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(b.dxb->bytes, first);
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

std::vector<PoolCase> fd_cases() {
  return {
      {"avg_include_zero_pad_2d",
       RM::AVGPOOL_INCLUDE_PADDING,
       PM::ZERO_PAD,
       {2, 3, 7, 5},
       {3, 2},
       {2, 1},
       {1, 0},
       {1, 1}},
      {"avg_include_edge_pad_2d_nhwc",
       RM::AVGPOOL_INCLUDE_PADDING,
       PM::EDGE_VAL_PAD,
       {2, 3, 7, 5},
       {3, 3},
       {2, 2},
       {2, 1},
       {1, 2},
       true},
      {"avg_exclude_3d",
       RM::AVGPOOL_EXCLUDE_PADDING,
       PM::ZERO_PAD,
       {1, 2, 5, 4, 3},
       {2, 3, 2},
       {1, 2, 1},
       {1, 1, 0},
       {0, 2, 1}},
      {"max_index_neg_inf_overlapping",
       RM::MAXPOOL,
       PM::NEG_INF_PAD,
       {2, 2, 9, 7},
       {3, 3},
       {2, 1},
       {1, 1},
       {1, 1},
       false,
       true},
      {"max_recomputed_edge_pad_3d",
       RM::MAXPOOL,
       PM::EDGE_VAL_PAD,
       {1, 3, 4, 5, 3},
       {2, 3, 2},
       {1, 2, 1},
       {1, 1, 1},
       {1, 1, 0}},
      {"max_index_zero_pad_nhwc", RM::MAXPOOL, PM::ZERO_PAD, {1, 4, 5, 5}, {3, 2}, {2, 2}, {2, 1}, {1, 1}, true, true},
      {"max_recomputed_unpadded", RM::MAXPOOL, PM::NOT_SET, {2, 1, 6, 6}, {2, 2}, {2, 2}, {0, 0}, {0, 0}},
  };
}

INSTANTIATE_TEST_SUITE_P(Pooling, ResampleBackwardFd, ::testing::ValuesIn(fd_cases()),
                         [](const auto& info) { return info.param.label; });

// Without X, dX takes the dims declared on it and DY's stride order.
TEST(ResampleBackward, DeclaredDxWithoutXForAveragePooling) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT);
  auto dy = input(g, "dy", {1, 2, 2, 3}, DT::FLOAT, {12, 1, 6, 2});
  graph::Resample_backward_attributes a;
  a.set_resampling_mode(RM::AVGPOOL_EXCLUDE_PADDING).set_window({2, 2}).set_pre_padding({0, 1});
  auto dx = g.resample_backward(dy, a);
  dx->set_dim({1, 2, 5, 5}).set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(dx->get_stride(), (Dims{50, 1, 10, 2}));
  HostTensor dyb(dy), dxb(dx);
  for (int64_t n = 0; n < dyb.volume(); ++n) dyb.set(n, static_cast<double>(n + 1));
  dxb.poison();
  ASSERT_TRUE(build_and_run(g, {&dyb, &dxb}).is_good());
  // Plane 0, output (0, 0) covers x rows 0..1, columns -1..0: two elements inside, each gets dy / 2.
  EXPECT_EQ(dxb.get(0), 0.5);
  // Row 4 lies in no window (5 rows, windows of 2 at stride 2 from 0): zero gradient.
  for (int64_t w = 0; w < 5; ++w) EXPECT_EQ(dxb.get(4 * 5 + w), 0.0);
}

TEST(ResampleBackward, IndexOutOfRangeFailsAndLeavesDxUntouched) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT);
  auto dy = input(g, "dy", {1, 1, 2, 2}), x = input(g, "x", {1, 1, 4, 4});
  auto index = input(g, "index", {1, 1, 2, 2}, DT::INT32);
  graph::Resample_backward_attributes a;
  a.set_name("pool_bwd").set_resampling_mode(RM::MAXPOOL).set_window({2, 2}).set_x(x).set_index(index);
  auto dx = g.resample_backward(dy, a);
  dx->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor dyb(dy), xb(x), ib(index), dxb(dx);
  std::mt19937_64 rng(1);
  dyb.fill_random(rng), xb.fill_random(rng);
  for (int64_t n = 0; n < 4; ++n) ib.set(n, n == 2 ? 4 : n);
  dxb.poison();
  const std::vector<uint8_t> before = dxb.bytes;
  const error_t e = build_and_run(g, {&dyb, &xb, &ib, &dxb});
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  for (const char* m : {"'pool_bwd'", "INDEX", "4 at element 2", "[0, 4)"})
    EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  EXPECT_EQ(dxb.bytes, before);
}

TEST(ResampleBackward, ErrorsNameNodeAttributeAndValue) {
  struct Bad {
    const char* label;
    std::function<void(graph::Graph&, graph::Resample_backward_attributes&, Dims&)> setup;
    error_code_t code;
    std::vector<std::string> mentions;
    Dims dx_dims = {};  // declared on dX when set
  };
  using A = graph::Resample_backward_attributes;
  const std::vector<Bad> bad = {
      {"no_dims",
       [](auto&, A& a, Dims&) {
         a.set_resampling_mode(RM::AVGPOOL_INCLUDE_PADDING).set_window({2, 2});
       },
       error_code_t::ATTRIBUTE_NOT_SET,
       {"DX.dim", "set_x"}},
      {"mode_unset",
       [](auto& g, A& a, Dims&) {
         a.set_window({2, 2}).set_x(input(g, "x", {1, 2, 6, 6}));
       },
       error_code_t::ATTRIBUTE_NOT_SET,
       {"resampling_mode", "NOT_SET"}},
      {"dy_dims",
       [](auto& g, A& a, Dims&) {
         a.set_resampling_mode(RM::AVGPOOL_INCLUDE_PADDING).set_window({3, 3}).set_x(input(g, "x", {1, 2, 6, 6}));
       },
       error_code_t::SHAPE_DEDUCTION_FAILED,
       {"DY.dim", "[1, 2, 3, 3]", "[1, 2, 2, 2]"}},
      {"max_without_index_or_x",
       [](auto&, A& a, Dims&) {
         a.set_resampling_mode(RM::MAXPOOL).set_window({2, 2});
       },
       error_code_t::ATTRIBUTE_NOT_SET,
       {"INDEX", "INDEX or X"},
       {1, 2, 6, 6}},
      {"index_with_average",
       [](auto& g, A& a, Dims&) {
         a.set_resampling_mode(RM::AVGPOOL_INCLUDE_PADDING).set_window({2, 2}).set_x(input(g, "x", {1, 2, 6, 6}));
         a.set_index(input(g, "i", {1, 2, 3, 3}, DT::INT32));
       },
       error_code_t::INVALID_VALUE,
       {"INDEX", "only MAXPOOL"}},
      {"index_dims",
       [](auto& g, A& a, Dims&) {
         a.set_resampling_mode(RM::MAXPOOL).set_window({2, 2}).set_x(input(g, "x", {1, 2, 6, 6}));
         a.set_index(input(g, "i", {1, 2, 3, 2}, DT::INT32));
       },
       error_code_t::SHAPE_DEDUCTION_FAILED,
       {"INDEX.dim", "[1, 2, 3, 2]"}},
      {"index_type",
       [](auto& g, A& a, Dims& dy) {
         dy = {1, 2, 1, 1};
         a.set_resampling_mode(RM::MAXPOOL).set_window({12, 12}).set_x(input(g, "x", {1, 2, 12, 12}));
         a.set_index(input(g, "i", {1, 2, 1, 1}, DT::INT8));
       },
       error_code_t::INVALID_VALUE,
       {"INDEX.data_type", "INT8", "143"}},
      {"x_type",
       [](auto& g, A& a, Dims&) {
         a.set_resampling_mode(RM::MAXPOOL).set_window({2, 2}).set_x(input(g, "x", {1, 2, 6, 6}, DT::INT32));
       },
       error_code_t::INVALID_VALUE,
       {"X.data_type", "INT32"}},
      {"neg_inf_average",
       [](auto& g, A& a, Dims&) {
         a.set_resampling_mode(RM::AVGPOOL_INCLUDE_PADDING).set_padding_mode(PM::NEG_INF_PAD).set_window({2, 2});
         a.set_x(input(g, "x", {1, 2, 6, 6}));
       },
       error_code_t::INVALID_VALUE,
       {"padding_mode", "NEG_INF_PAD"}},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.label);
    graph::Graph g;
    g.set_io_data_type(DT::FLOAT);
    graph::Resample_backward_attributes a;
    a.set_name("pool_bwd");
    Dims dy_dims{1, 2, 3, 3};
    b.setup(g, a, dy_dims);
    auto dx = g.resample_backward(input(g, "dy", dy_dims), a);
    dx->set_output(true);
    if (!b.dx_dims.empty()) dx->set_dim(b.dx_dims);
    const error_t e = g.validate();
    EXPECT_EQ(e.get_code(), b.code) << e.get_message();
    EXPECT_NE(e.get_message().find("pool_bwd"), std::string::npos) << e.get_message();
    for (const std::string& m : b.mentions)
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  }
}

}  // namespace
}  // namespace frost::test
