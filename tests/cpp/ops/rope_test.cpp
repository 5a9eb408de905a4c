#include <cmath>

#include "graph/shape_util.h"
#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;

// ---- Independent naive formulas, in double, on row-major values ----

struct Problem {
  Dims xd;             // [b, h, s, d]
  int64_t rotary = 0;  // 0: d
  bool interleaved = false;
  std::vector<double> x, dy, cos, sin;  // tables [s, r/2]
  int64_t r() const { return rotary ? rotary : xd[3]; }
};

// Rotation matrix entries written per channel: y[c] = sum_k R[c][k] x[k] within one row.
std::vector<double> naive_rope(const Problem& p, const std::vector<double>& x, bool transposed) {
  const int64_t s = p.xd[2], d = p.xd[3], half = p.r() / 2;
  std::vector<double> y(x.size());
  for (size_t row = 0; row < x.size() / static_cast<size_t>(d); ++row) {
    const int64_t pos = static_cast<int64_t>(row) % s;
    for (int64_t c = 0; c < d; ++c) {
      double v = 0;
      for (int64_t k = 0; k < d; ++k) {
        // R[c][k] for the forward rotation; the backward uses R[k][c].
        const int64_t out = transposed ? k : c, from = transposed ? c : k;
        double entry = out == from && out >= p.r() ? 1.0 : 0.0;
        if (out < p.r() && from < p.r()) {
          const int64_t i_out = p.interleaved ? out / 2 : out % half, i_from = p.interleaved ? from / 2 : from % half;
          const bool first_out = p.interleaved ? out % 2 == 0 : out < half;
          const bool first_from = p.interleaved ? from % 2 == 0 : from < half;
          if (i_out == i_from) {
            const double cs = p.cos[static_cast<size_t>(pos * half + i_out)],
                         sn = p.sin[static_cast<size_t>(pos * half + i_out)];
            entry = first_out == first_from ? cs : first_out ? -sn : sn;
          }
        }
        v += entry * x[row * static_cast<size_t>(d) + static_cast<size_t>(k)];
      }
      y[row * static_cast<size_t>(d) + static_cast<size_t>(c)] = v;
    }
  }
  return y;
}

std::vector<double> fill(size_t n, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& e : v) e = u(rng);
  return v;
}

Problem random_problem(Dims xd, int64_t rotary, bool interleaved, std::mt19937_64& rng) {
  Problem p{std::move(xd), rotary, interleaved, {}, {}, {}, {}};
  const size_t n = static_cast<size_t>(p.xd[0] * p.xd[1] * p.xd[2] * p.xd[3]);
  p.x = fill(n, rng, -2, 2);
  p.dy = fill(n, rng, -1, 1);
  // Angles pos * theta_i as real tables use.
  const int64_t half = p.r() / 2;
  for (int64_t pos = 0; pos < p.xd[2]; ++pos)
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(pos + 1) * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(p.r()));
      p.cos.push_back(std::cos(angle));
      p.sin.push_back(std::sin(angle));
    }
  return p;
}

void put(HostTensor& h, std::vector<double>& v) {
  for (int64_t n = 0; n < h.volume(); ++n) h.set(n, v[static_cast<size_t>(n)]);
  v = h.values();
}

struct Case {
  const char* label;
  Dims xd;
  int64_t rotary;
  bool interleaved, bshd_layout, table4;
};
const Case kCases[] = {
    {"half_b2h3s17d8", {2, 3, 17, 8}, 0, false, false, false},
    {"interleaved_rot8_b1h2s5d12_bshd", {1, 2, 5, 12}, 8, true, true, true},
    {"half_rot4_b2h1s1d6", {2, 1, 1, 6}, 4, false, true, false},
    {"interleaved_b1h1s111d2", {1, 1, 111, 2}, 0, true, false, true},
};

// [b, h, s, d] dims stored as [b, s, h, d] with padded rows when `bshd`.
Dims strides_for(const Dims& xd, bool bshd) {
  if (!bshd) return {};
  const int64_t row = xd[3] + 2;
  return {xd[2] * xd[1] * row, row, xd[1] * row, 1};
}

using Param = std::tuple<int, DT, bool>;  // case, storage type, backward

class Rope : public ::testing::TestWithParam<Param> {};

TEST_P(Rope, MatchesNaiveRotation) {
  const auto [ci, dt, backward] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(500 + static_cast<uint64_t>(ci) * 17 + static_cast<uint64_t>(dt) * 3 + backward);
  Problem p = random_problem(c.xd, c.rotary, c.interleaved, rng);
  graph::Graph g;
  const bool fp64 = dt == DT::DOUBLE;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(fp64 ? DT::DOUBLE : DT::FLOAT);
  auto x = input(g, "x", c.xd, dt, strides_for(c.xd, c.bshd_layout));
  const Dims td = c.table4 ? Dims{1, 1, c.xd[2], p.r() / 2} : Dims{c.xd[2], p.r() / 2};
  auto cos = input(g, "cos", td, fp64 ? DT::DOUBLE : DT::FLOAT);
  auto sin = input(g, "sin", td, fp64 ? DT::DOUBLE : DT::FLOAT);
  TensorPtr y;
  if (backward) {
    auto a = graph::Rope_backward_attributes().set_interleaved(c.interleaved);
    if (c.rotary) a.set_rotary_dim(c.rotary);
    y = g.rope_backward(x, cos, sin, a);
  } else {
    auto a = graph::Rope_attributes().set_interleaved(c.interleaved);
    if (c.rotary) a.set_rotary_dim(c.rotary);
    y = g.rope(x, cos, sin, a);
  }
  y->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(y->get_dim(), c.xd);
  EXPECT_EQ(y->get_stride(), detail::strides_like(c.xd, x->get_stride())) << "Y follows X's axis order";
  HostTensor xb(x), cb(cos), sb(sin), yb(y);
  put(xb, p.x);
  put(cb, p.cos);
  put(sb, p.sin);
  yb.poison();
  e = build_and_run(g, {&xb, &cb, &sb, &yb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const auto want = naive_rope(p, p.x, backward);
  const double tol = dt == DT::HALF ? 4e-3 : dt == DT::BFLOAT16 ? 3e-2 : fp64 ? 1e-14 : 1e-6;
  EXPECT_CLOSE(yb.values(), want, tol * 3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Rope,
                         ::testing::Combine(::testing::Range(0, 4),
                                            ::testing::Values(DT::FLOAT, DT::HALF, DT::BFLOAT16, DT::DOUBLE),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(kCases[std::get<0>(info.param)].label) + "_" +
                                  std::string(to_string(std::get<1>(info.param))) +
                                  (std::get<2>(info.param) ? "_backward" : "_forward");
                         });

// ---- fp64: forward and backward chained, backward against central differences of the forward ----

TEST(RopeGradientFp64, MatchesFiniteDifferences) {
  for (int ci : {1, 2}) {
    const Case& c = kCases[ci];
    std::mt19937_64 rng(900 + static_cast<uint64_t>(ci));
    Problem p = random_problem(c.xd, c.rotary, c.interleaved, rng);
    graph::Graph g;
    g.set_io_data_type(DT::DOUBLE).set_intermediate_data_type(DT::DOUBLE).set_compute_data_type(DT::DOUBLE);
    auto x = input(g, "x", c.xd, DT::DOUBLE, strides_for(c.xd, c.bshd_layout));
    auto dy = input(g, "dy", c.xd, DT::DOUBLE);
    auto cos = input(g, "cos", {c.xd[2], p.r() / 2}, DT::DOUBLE);
    auto sin = input(g, "sin", {c.xd[2], p.r() / 2}, DT::DOUBLE);
    auto y = g.rope(x, cos, sin, graph::Rope_attributes().set_interleaved(c.interleaved).set_rotary_dim(p.r()));
    auto dx = g.rope_backward(dy, cos, sin,
                              graph::Rope_backward_attributes().set_interleaved(c.interleaved).set_rotary_dim(p.r()));
    y->set_output(true);
    dx->set_output(true);
    ASSERT_TRUE(g.validate().is_good());
    HostTensor xb(x), dyb(dy), cb(cos), sb(sin), yb(y), dxb(dx);
    put(xb, p.x);
    put(dyb, p.dy);
    put(cb, p.cos);
    put(sb, p.sin);
    yb.poison();
    dxb.poison();
    auto e = build_and_run(g, {&xb, &dyb, &cb, &sb, &yb, &dxb});
    ASSERT_TRUE(e.is_good()) << e.get_message();
    // L(x) = sum(dy * rope(x)); dL/dx by central differences of the naive forward.
    const double h = 1e-6;
    std::vector<double> fd(p.x.size());
    for (size_t i = 0; i < p.x.size(); ++i) {
      auto loss = [&](double delta) {
        std::vector<double> xs = p.x;
        xs[i] += delta;
        const auto ys = naive_rope(p, xs, false);
        double l = 0;
        for (size_t k = 0; k < ys.size(); ++k) l += p.dy[k] * ys[k];
        return l;
      };
      fd[i] = (loss(h) - loss(-h)) / (2 * h);
    }
    EXPECT_CLOSE(dxb.values(), fd, 1e-8);
    EXPECT_CLOSE(yb.values(), naive_rope(p, p.x, false), 1e-13);
    // The check can fail: the forward rotation applied to dy is not the gradient.
    EXPECT_GT(compare(naive_rope(p, p.dy, false), fd).max_abs, 1e-3);
  }
}

// ---- JSON ----

TEST(RopeJson, RoundTripRunsBitwiseEqual) {
  graph::Graph g;
  g.set_io_data_type(DT::BFLOAT16).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", {2, 2, 7, 10}, DT::BFLOAT16);
  auto cos = input(g, "cos", {1, 1, 7, 3}, DT::FLOAT);
  auto sin = input(g, "sin", {1, 1, 7, 3}, DT::FLOAT);
  auto y = g.rope(x, cos, sin, graph::Rope_attributes().set_interleaved(true).set_rotary_dim(6));
  auto dx = g.rope_backward(y, cos, sin, graph::Rope_backward_attributes().set_rotary_dim(6));
  dx->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  for (const char* needle : {"\"ROPE\"", "\"ROPE_BACKWARD\"", "\"interleaved\"", "\"rotary_dim\"", "\"COS\"", "\"DY\""})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  std::mt19937_64 rng(3);
  HostTensor xb(x), cb(cos), sb(sin), db(dx);
  for (HostTensor* h : {&xb, &cb, &sb}) h->fill_random(rng);
  db.poison();
  ASSERT_TRUE(build_and_run(g, {&xb, &cb, &sb, &db}).is_good());
  const auto first = db.bytes;
  db.poison();
  graph::Graph replay;
  auto e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  ASSERT_TRUE(build_and_run(replay, {&xb, &cb, &sb, &db}).is_good());
  EXPECT_EQ(db.bytes, first);
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

TEST(RopeErrors, RotaryDimAndShapes) {
  const auto attr = graph::Rope_attributes().set_name("rope0");
  for (int64_t bad : {7, 10, 0}) {
    graph::Graph g;
    g.rope(input(g, "x", {1, 2, 3, 8}), input(g, "c", {3, 4}), input(g, "s", {3, 4}),
           graph::Rope_attributes(attr).set_rotary_dim(bad));
    expect_error(g, error_code_t::INVALID_VALUE, {"rope0", "ROPE", "'rotary_dim'", std::to_string(bad).c_str()});
  }
  {
    graph::Graph g;
    g.rope(input(g, "x", {2, 3, 8}), input(g, "c", {3, 4}), input(g, "s", {3, 4}), attr);
    expect_error(g, error_code_t::SHAPE_DEDUCTION_FAILED, {"rope0", "'X.dim'", "[2, 3, 8]"});
  }
  {
    graph::Graph g;
    g.rope(input(g, "x", {1, 2, 3, 8}), input(g, "c", {3, 4}), input(g, "s", {4, 4}), attr);
    expect_error(g, error_code_t::SHAPE_DEDUCTION_FAILED, {"rope0", "'SIN.dim'", "[4, 4]", "[3, 4]"});
  }
  {
    graph::Graph g;
    g.rope_backward(input(g, "dy", {1, 2, 3, 8}, DT::INT32), input(g, "c", {3, 4}), input(g, "s", {3, 4}),
                    graph::Rope_backward_attributes().set_name("ropeb"));
    expect_error(g, error_code_t::INVALID_VALUE, {"ropeb", "ROPE_BACKWARD", "'DY.data_type'", "INT32"});
  }
  {
    graph::Graph g;
    g.rope(input(g, "x", {1, 2, 3, 8}), input(g, "c", {3, 4}, DT::INT32), input(g, "s", {3, 4}), attr);
    expect_error(g, error_code_t::INVALID_VALUE, {"rope0", "'COS.data_type'", "INT32"});
  }
  {
    graph::Graph g;
    g.rope(input(g, "x", {1, 2, 3, 8}), nullptr, input(g, "s", {3, 4}), attr);
    expect_error(g, error_code_t::ATTRIBUTE_NOT_SET, {"rope0", "COS"});
  }
  {
    graph::Graph g;
    g.rope(input(g, "x", {1, 2, 3, 8}), input(g, "c", {3, 4}), input(g, "s", {3, 4}), attr)->set_dim({1, 2, 3, 9});
    expect_error(g, error_code_t::SHAPE_DEDUCTION_FAILED, {"rope0", "'Y.dim'", "[1, 2, 3, 9]"});
  }
}

}  // namespace
}  // namespace frost::test
