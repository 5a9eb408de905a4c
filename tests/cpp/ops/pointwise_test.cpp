#include <cmath>

#include "ops/pointwise/pointwise_node.h"
#include "test_util.h"

namespace frost::test {
namespace {

using M = PointwiseMode_t;

// Independent definitions of each mode, written from the formulas (not from the engine).
double naive(M m, double a, double b, double c) {
  const double pi = 3.14159265358979323846;
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  switch (m) {
    case M::ADD: return a + b;
    case M::SUB: return a - b;
    case M::MUL: return a * b;
    case M::DIV: return a / b;
    case M::ADD_SQUARE: return a + b * b;
    case M::MAX: return a > b ? a : b;
    case M::MIN: return a < b ? a : b;
    case M::MOD: return std::fmod(a, b);
    case M::POW: return std::pow(a, b);
    case M::SQRT: return std::sqrt(a);
    case M::RSQRT: return 1 / std::sqrt(a);
    case M::RECIPROCAL: return 1 / a;
    case M::EXP: return std::exp(a);
    case M::LOG: return std::log(a);
    case M::NEG: return -a;
    case M::ABS: return a < 0 ? -a : a;
    case M::CEIL: return std::ceil(a);
    case M::FLOOR: return std::floor(a);
    case M::SIN: return std::sin(a);
    case M::COS: return std::cos(a);
    case M::TAN: return std::tan(a);
    case M::ERF: return std::erf(a);
    case M::IDENTITY: return a;
    case M::LOGICAL_NOT: return a == 0;
    case M::LOGICAL_AND: return a != 0 && b != 0;
    case M::LOGICAL_OR: return a != 0 || b != 0;
    case M::CMP_EQ: return a == b;
    case M::CMP_NEQ: return a != b;
    case M::CMP_GT: return a > b;
    case M::CMP_GE: return a >= b;
    case M::CMP_LT: return a < b;
    case M::CMP_LE: return a <= b;
    case M::BINARY_SELECT: return c != 0 ? a : b;
    case M::RELU_FWD: return a > 0 ? a : 0;
    case M::TANH_FWD: return std::tanh(a);
    case M::SIGMOID_FWD: return sig(a);
    case M::ELU_FWD: return a > 0 ? a : std::exp(a) - 1;
    case M::GELU_FWD: return a * 0.5 * std::erfc(-a / std::sqrt(2.0));
    case M::GELU_APPROX_TANH_FWD: return 0.5 * a * (1 + std::tanh(std::sqrt(2 / pi) * (a + 0.044715 * a * a * a)));
    case M::SOFTPLUS_FWD: return std::log(1 + std::exp(a));
    case M::SWISH_FWD: return a * sig(a);
    default: break;
  }
  // Backward modes: a = dy, b = x; derivative by central differences of the forward formula.
  M fwd = M::NOT_SET;
  switch (m) {
    case M::RELU_BWD: return b > 0 ? a : 0;
    case M::TANH_BWD: fwd = M::TANH_FWD; break;
    case M::SIGMOID_BWD: fwd = M::SIGMOID_FWD; break;
    case M::ELU_BWD: fwd = M::ELU_FWD; break;
    case M::GELU_BWD: fwd = M::GELU_FWD; break;
    case M::GELU_APPROX_TANH_BWD: fwd = M::GELU_APPROX_TANH_FWD; break;
    case M::SOFTPLUS_BWD: fwd = M::SOFTPLUS_FWD; break;
    case M::SWISH_BWD: fwd = M::SWISH_FWD; break;
    default: return NAN;
  }
  const double h = 1e-6;
  return a * (naive(fwd, b + h, 0, 0) - naive(fwd, b - h, 0, 0)) / (2 * h);
}

struct Range {
  double lo, hi;
};
Range input_range(M m) {
  switch (m) {
    case M::SQRT: case M::RSQRT: case M::LOG: case M::POW: return {0.1, 2.0};
    case M::DIV: case M::MOD: case M::RECIPROCAL: return {0.5, 2.0};
    case M::TAN: return {-1.0, 1.0};
    default: return {-2.0, 2.0};
  }
}

class PointwiseModes : public ::testing::TestWithParam<M> {};

TEST_P(PointwiseModes, MatchesNaiveWithBroadcast) {
  const M mode = GetParam();
  const int arity = detail::pointwise_arity(mode);
  std::mt19937_64 rng(static_cast<uint64_t>(mode) * 7919 + 1);
  graph::Graph g;
  g.set_io_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  // Odd extents and a broadcast along every input: [17, 1, 5] with [1, 3, 5] (and [17, 3, 1]).
  const std::vector<std::vector<int64_t>> shapes = {{17, 1, 5}, {1, 3, 5}, {17, 3, 1}};
  std::vector<TensorPtr> ins;
  for (int i = 0; i < arity; ++i) ins.push_back(input(g, "in" + std::to_string(i), shapes[i]));
  graph::Pointwise_attributes attr;
  attr.set_mode(mode);
  TensorPtr y = arity == 1 ? g.pointwise(ins[0], attr)
                : arity == 2 ? g.pointwise(ins[0], ins[1], attr)
                             : g.pointwise(ins[0], ins[1], ins[2], attr);
  y->set_output(true).set_data_type(DataType_t::FLOAT);
  ASSERT_TRUE(g.validate().is_good());
  std::vector<HostTensor> bufs;
  for (auto& t : ins) bufs.emplace_back(t);
  const Range r = input_range(mode);
  for (auto& b : bufs) b.fill_random(rng, r.lo, r.hi);
  if (mode == M::BINARY_SELECT)
    for (int64_t n = 0; n < bufs[2].volume(); ++n) bufs[2].set(n, n % 2);
  HostTensor out(y);
  out.poison();
  std::vector<HostTensor*> all;
  for (auto& b : bufs) all.push_back(&b);
  all.push_back(&out);
  auto e = build_and_run(g, all);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const int64_t nj = arity == 1 ? 1 : 3;
  const std::vector<int64_t> od = {17, nj, 5};
  ASSERT_EQ(y->get_dim(), od);
  std::vector<double> want(static_cast<size_t>(out.volume()));
  for (int64_t i = 0; i < 17; ++i)
    for (int64_t j = 0; j < nj; ++j)
      for (int64_t k = 0; k < 5; ++k) {
        const int64_t n = (i * nj + j) * 5 + k;
        const double a = bufs[0].get(i * 5 + k);
        const double b = arity > 1 ? bufs[1].get(j * 5 + k) : 0;
        const double c = arity > 2 ? bufs[2].get(i * 3 + j) : 0;
        want[static_cast<size_t>(n)] = naive(mode, a, b, c);
      }
  EXPECT_CLOSE(out.values(), want, 2e-5 * (1 + 10 * (mode == M::EXP || mode == M::POW)));
}

INSTANTIATE_TEST_SUITE_P(AllModes, PointwiseModes,
                         ::testing::Values(M::ADD, M::MUL, M::SQRT, M::MAX, M::MIN, M::RELU_FWD, M::TANH_FWD,
                                           M::SIGMOID_FWD, M::ELU_FWD, M::GELU_FWD, M::SOFTPLUS_FWD, M::SWISH_FWD,
                                           M::RELU_BWD, M::TANH_BWD, M::SIGMOID_BWD, M::ELU_BWD, M::GELU_BWD,
                                           M::SOFTPLUS_BWD, M::SWISH_BWD, M::ERF, M::IDENTITY,
                                           M::GELU_APPROX_TANH_BWD, M::GELU_APPROX_TANH_FWD, M::BINARY_SELECT,
                                           M::EXP, M::LOG, M::NEG, M::MOD, M::POW, M::ABS, M::CEIL, M::COS,
                                           M::FLOOR, M::RSQRT, M::SIN, M::LOGICAL_NOT, M::TAN, M::SUB,
                                           M::ADD_SQUARE, M::DIV, M::CMP_EQ, M::CMP_NEQ, M::CMP_GT, M::CMP_GE,
                                           M::CMP_LT, M::CMP_LE, M::LOGICAL_AND, M::LOGICAL_OR, M::RECIPROCAL),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Pointwise, GenIndexAlongAxis) {
  graph::Graph g;
  g.set_io_data_type(DataType_t::FLOAT);
  auto x = input(g, "x", {4, 3, 2});
  auto y = g.pointwise(x, graph::Pointwise_attributes().set_mode(M::GEN_INDEX).set_axis(1));
  y->set_output(true).set_data_type(DataType_t::INT32);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor xb2(x), yb2(y);
  yb2.poison();
  ASSERT_TRUE(build_and_run(g, {&xb2, &yb2}).is_good());
  for (int64_t n = 0; n < 24; ++n) EXPECT_EQ(yb2.get(n), (n / 2) % 3);
}

TEST(Pointwise, ReluClipsAndSlope) {
  graph::Graph g;
  g.set_io_data_type(DataType_t::FLOAT);
  auto x = input(g, "x", {1, 111});
  auto y = g.pointwise(x, graph::Pointwise_attributes()
                              .set_mode(M::RELU_FWD)
                              .set_relu_lower_clip(-0.5f)
                              .set_relu_upper_clip(0.75f)
                              .set_relu_lower_clip_slope(0.1f));
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor xb(x), yb(y);
  std::mt19937_64 rng(3);
  xb.fill_random(rng, -2, 2);
  yb.poison();
  ASSERT_TRUE(build_and_run(g, {&xb, &yb}).is_good());
  for (int64_t n = 0; n < 111; ++n) {
    const double v = xb.get(n);
    const double want = v < -0.5 ? -0.5 + 0.1 * (v + 0.5) : (v > 0.75 ? 0.75 : v);
    EXPECT_NEAR(yb.get(n), want, 1e-6);
  }
}

TEST(Pointwise, ErrorsNameNodeAttributeAndValue) {
  {
    graph::Graph g;
    g.set_io_data_type(DataType_t::FLOAT);
    auto a = input(g, "a", {2, 3});
    auto b = input(g, "b", {4, 3});
    g.pointwise(a, b, graph::Pointwise_attributes().set_mode(M::ADD).set_name("add0"));
    auto e = g.validate();
    EXPECT_EQ(e.get_code(), error_code_t::SHAPE_DEDUCTION_FAILED);
    EXPECT_NE(e.get_message().find("add0"), std::string::npos) << e.get_message();
    EXPECT_NE(e.get_message().find("[2, 3] and [4, 3]"), std::string::npos) << e.get_message();
  }
  {
    graph::Graph g;
    g.set_io_data_type(DataType_t::FLOAT);
    auto a = input(g, "a", {2, 3});
    g.pointwise(a, graph::Pointwise_attributes().set_mode(M::ADD));
    EXPECT_EQ(g.validate().get_code(), error_code_t::ATTRIBUTE_NOT_SET);
  }
  {
    graph::Graph g;
    g.set_io_data_type(DataType_t::FLOAT);
    g.pointwise(nullptr, graph::Pointwise_attributes().set_mode(M::EXP));
    EXPECT_EQ(g.validate().get_code(), error_code_t::ATTRIBUTE_NOT_SET);
  }
  {
    graph::Graph g;
    g.set_io_data_type(DataType_t::FLOAT);
    auto a = input(g, "a", {2, 3});
    g.pointwise(a, graph::Pointwise_attributes());
    auto e = g.validate();
    EXPECT_EQ(e.get_code(), error_code_t::ATTRIBUTE_NOT_SET);
    EXPECT_NE(e.get_message().find("'mode'"), std::string::npos) << e.get_message();
  }
}

}  // namespace
}  // namespace frost::test
