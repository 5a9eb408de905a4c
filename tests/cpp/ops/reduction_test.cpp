#include <cmath>
#include <limits>

#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using R = ReductionMode_t;

// Each output element's exact value (in double) and the magnitude its rounding error scales with.
struct Naive {
  std::vector<double> value, scale;
};

// Folds X into Y's shape by the mode's definition, written out per mode.
Naive naive_reduce(R mode, const HostTensor& x, const std::vector<int64_t>& ydims) {
  const auto& xd = x.t->get_dim();
  int64_t ycount = 1;
  for (int64_t e : ydims) ycount *= e;
  std::vector<std::vector<double>> groups(static_cast<size_t>(ycount));
  for (int64_t n = 0; n < x.volume(); ++n) {
    int64_t rest = n, yi = 0, ystride = 1;
    for (size_t k = xd.size(); k-- > 0;) {
      const int64_t i = rest % xd[k];
      rest /= xd[k];
      if (ydims[k] != 1) yi += i * ystride;
      ystride *= ydims[k];
    }
    groups[static_cast<size_t>(yi)].push_back(x.get(n));
  }
  Naive r;
  for (const auto& g : groups) {
    double v = 0, s = 0;
    switch (mode) {
      case R::ADD:
        for (double e : g) {
          v += e;
          s += std::fabs(e);
        }
        break;
      case R::AVG:
        for (double e : g) {
          v += e / static_cast<double>(g.size());
          s += std::fabs(e) / static_cast<double>(g.size());
        }
        break;
      case R::NORM1:
        for (double e : g) v += std::fabs(e);
        s = v;
        break;
      case R::NORM2:
        for (double e : g) v += e * e;
        v = std::sqrt(v);
        s = v;
        break;
      case R::MUL:
        v = 1;
        for (double e : g) v *= e;
        s = std::fabs(v);
        break;
      case R::MUL_NO_ZEROS:
        v = 1;
        for (double e : g)
          if (e != 0) v *= e;
        s = std::fabs(v);
        break;
      case R::MIN:
        v = g[0];
        for (double e : g) v = std::min(v, e);
        break;
      case R::MAX:
        v = g[0];
        for (double e : g) v = std::max(v, e);
        break;
      case R::AMAX:
        for (double e : g) v = std::max(v, std::fabs(e));
        break;
      default:
        v = NAN;
    }
    r.value.push_back(v);
    r.scale.push_back(s * static_cast<double>(g.size()));
  }
  return r;
}

// |got - want| <= rel * scale + abs_floor for every element, and no element left unwritten.
void expect_within(const std::vector<double>& got, const Naive& want, double rel, double store_eps) {
  ASSERT_EQ(got.size(), want.value.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = rel * want.scale[i] + store_eps * std::fabs(want.value[i]) + 1e-12;
    EXPECT_NEAR(got[i], want.value[i], tol) << "element " << i;
  }
}

void expect_error(graph::Graph& g, error_code_t code, const std::vector<std::string>& parts) {
  auto e = g.validate();
  EXPECT_EQ(e.get_code(), code) << e.get_message();
  for (const auto& p : parts)
    EXPECT_NE(e.get_message().find(p), std::string::npos) << "'" << p << "' not in: " << e.get_message();
}

class ReductionModes : public ::testing::TestWithParam<R> {};

TEST_P(ReductionModes, MatchesNaiveOverEveryDimPattern) {
  const R mode = GetParam();
  const bool product = mode == R::MUL || mode == R::MUL_NO_ZEROS;
  std::mt19937_64 rng(static_cast<uint64_t>(mode) * 1009 + 3);
  // X [17, 5, 11] stored as a permuted layout (the 17-extent dim innermost).
  const std::vector<int64_t> xdims = {17, 5, 11}, xstrides = {1, 17 * 11, 17};
  for (const std::vector<int64_t>& ydims :
       std::vector<std::vector<int64_t>>{{17, 1, 11}, {1, 5, 1}, {1, 1, 1}, {17, 5, 1}, {17, 5, 11}}) {
    graph::Graph g;
    g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
    auto x = input(g, "x", xdims, DT::FLOAT, xstrides);
    auto y = g.reduction(x, graph::Reduction_attributes().set_mode(mode));
    y->set_output(true).set_dim(ydims);
    ASSERT_TRUE(g.validate().is_good());
    HostTensor xb(x), yb(y);
    if (product) {
      // Factors near 1 (either sign) keep a product of 935 of them well inside FP32's range.
      xb.fill_random(rng, 0.8, 1.25);
      for (int64_t n = 0; n < xb.volume(); n += 3) xb.set(n, -xb.get(n));
      if (mode == R::MUL_NO_ZEROS)
        for (int64_t n = 0; n < xb.volume(); n += 7) xb.set(n, 0);
    } else {
      xb.fill_random(rng);
    }
    yb.poison();
    auto e = build_and_run(g, {&xb, &yb});
    ASSERT_TRUE(e.is_good()) << e.get_message();
    // FP32 folding: the error of n sequential folds is at most n * 2^-24 times the sum of the magnitudes.
    expect_within(yb.values(), naive_reduce(mode, xb, ydims), 1.2e-7, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, ReductionModes,
                         ::testing::Values(R::ADD, R::MUL, R::MIN, R::MAX, R::AMAX, R::AVG, R::NORM1, R::NORM2,
                                           R::MUL_NO_ZEROS),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Reduction, StorageTypes) {
  struct Case {
    DT x, y;
    R mode;
  };
  const Case cases[] = {{DT::BFLOAT16, DT::FLOAT, R::ADD},     {DT::HALF, DT::HALF, R::MAX},
                        {DT::FP8_E4M3, DT::BFLOAT16, R::AMAX}, {DT::FP8_E5M2, DT::FLOAT, R::NORM2},
                        {DT::FLOAT, DT::BFLOAT16, R::AVG},     {DT::HALF, DT::FP8_E4M3, R::MIN}};
  std::mt19937_64 rng(77);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(to_string(c.x)) + " -> " + std::string(to_string(c.y)) + " " +
                 std::string(to_string(c.mode)));
    graph::Graph g;
    g.set_io_data_type(DT::FLOAT);
    auto x = input(g, "x", {3, 111}, c.x);
    auto y = g.reduction(x, graph::Reduction_attributes().set_mode(c.mode));
    y->set_output(true).set_dim({3, 1}).set_data_type(c.y);
    ASSERT_TRUE(g.validate().is_good());
    HostTensor xb(x), yb(y);
    xb.fill_random(rng);
    yb.poison();
    ASSERT_TRUE(build_and_run(g, {&xb, &yb}).is_good());
    const double eps = c.y == DT::FLOAT      ? 0
                       : c.y == DT::HALF     ? std::ldexp(1.0, -11)
                       : c.y == DT::BFLOAT16 ? std::ldexp(1.0, -8)
                                             : std::ldexp(1.0, -4);
    expect_within(yb.values(), naive_reduce(c.mode, xb, {3, 1}), 2e-7, eps);
  }
}

TEST(Reduction, Fp64ModeSumsInDouble) {
  std::vector<double> rel_errors;
  for (DT compute : {DT::DOUBLE, DT::FLOAT}) {
    graph::Graph g;
    g.set_io_data_type(DT::DOUBLE).set_compute_data_type(compute);
    auto x = input(g, "x", {2, 20000});
    auto y = g.reduction(x, graph::Reduction_attributes().set_mode(R::ADD));
    y->set_output(true).set_dim({2, 1});
    ASSERT_TRUE(g.validate().is_good());
    HostTensor xb(x), yb(y);
    std::mt19937_64 rng(9);
    xb.fill_random(rng, 0, 1);
    yb.poison();
    ASSERT_TRUE(build_and_run(g, {&xb, &yb}).is_good());
    const Naive want = naive_reduce(R::ADD, xb, {2, 1});
    rel_errors.push_back(std::fabs(yb.get(0) - want.value[0]) / want.value[0]);
  }
  EXPECT_LE(rel_errors[0], 1e-13);
  EXPECT_GT(rel_errors[1], 1e-9);
}

TEST(Reduction, OutputStridesFollowInputLayout) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT);
  auto x = input(g, "x", {4, 6, 8}, DT::FLOAT, {1, 32, 4});
  auto y = g.reduction(x, graph::Reduction_attributes().set_mode(R::ADD));
  y->set_output(true).set_dim({4, 1, 8});
  ASSERT_TRUE(g.validate().is_good());
  EXPECT_EQ(y->get_stride(), (std::vector<int64_t>{1, 32, 4}));
}

TEST(Reduction, ErrorsNameNodeAttributeAndValue) {
  auto make = [](graph::Reduction_attributes a, std::vector<int64_t> ydims, bool null_input = false) {
    auto g = std::make_unique<graph::Graph>();
    g->set_io_data_type(DT::FLOAT);
    auto x = input(*g, "x", {17, 5, 11});
    auto y = g->reduction(null_input ? nullptr : x, a.set_name("red"));
    if (!ydims.empty()) y->set_dim(ydims);
    return g;
  };
  const auto add = graph::Reduction_attributes().set_mode(R::ADD);
  expect_error(*make(graph::Reduction_attributes(), {17, 1, 11}), error_code_t::ATTRIBUTE_NOT_SET,
               {"'red'", "'mode'", "NOT_SET"});
  expect_error(*make(add, {}), error_code_t::ATTRIBUTE_NOT_SET, {"'red'", "'Y.dim'", "unset"});
  expect_error(*make(add, {17, 11}), error_code_t::SHAPE_DEDUCTION_FAILED,
               {"'red'", "'Y.dim'", "[17, 11]", "[17, 5, 11]"});
  expect_error(*make(add, {17, 3, 11}), error_code_t::SHAPE_DEDUCTION_FAILED,
               {"'red'", "'Y.dim'", "[17, 3, 11]", "dim 1"});
  expect_error(*make(add, {1, 1, 1}, true), error_code_t::ATTRIBUTE_NOT_SET, {"'red'", "X"});
}

TEST(Reduction, JsonRoundTripRunsBitwiseEqual) {
  graph::Graph g;
  g.set_io_data_type(DT::HALF).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", {17, 5, 11}, DT::HALF, {1, 17 * 11, 17});
  auto s = g.reduction(x, graph::Reduction_attributes().set_name("sum").set_mode(R::NORM2).set_is_deterministic(true));
  s->set_dim({17, 1, 11});
  auto y = g.reduction(s, graph::Reduction_attributes().set_name("max").set_mode(R::MAX));
  y->set_output(true).set_dim({1, 1, 11});
  ASSERT_TRUE(g.validate().is_good());
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  graph::Graph g2;
  auto e = g2.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  HostTensor xb(x), yb(y);
  std::mt19937_64 rng(41);
  xb.fill_random(rng);
  yb.poison();
  ASSERT_TRUE(build_and_run(g, {&xb, &yb}).is_good());
  const std::vector<uint8_t> first = yb.bytes;
  yb.poison();
  e = build_and_run(g2, {&xb, &yb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(yb.bytes, first);
  std::string text2;
  ASSERT_TRUE(g2.serialize(text2).is_good());
  EXPECT_EQ(text2, text);
}

}  // namespace
}  // namespace frost::test
