// SWIGLU_MLP: the CPU reference against a naive loop (both weight forms, odd extents, strided weights,
// BF16 rounding of the intermediate), the checker's ability to fail, validation errors that name the
// attribute, and the JSON round trip.
#include <cmath>

#include "common/dtype_convert.h"
#include "graph/shape_util.h"
#include "test_util.h"

namespace frost::test {
namespace {

using graph::Swiglu_mlp_attributes;

struct Mlp {
  int64_t t = 5, h = 24, f = 16;
  DataType_t dt = DataType_t::FLOAT;
  bool interleaved = false, gate_k_major = false;
};

struct MlpGraph {
  graph::Graph g;
  TensorPtr x, gate, up, gate_up, down, y;
};

TensorPtr dense_input(graph::Graph& g, const std::string& name, std::vector<int64_t> dims, DataType_t dt,
                      std::vector<int64_t> strides = {}) {
  if (strides.empty()) strides = detail::packed_strides(dims);
  return input(g, name, std::move(dims), dt, std::move(strides));
}

void build(MlpGraph& m, const Mlp& c) {
  m.g.set_io_data_type(c.dt).set_compute_data_type(DataType_t::FLOAT);
  m.x = dense_input(m.g, "x", {c.t, c.h}, c.dt);
  m.down = dense_input(m.g, "w_down", {c.f, c.h}, c.dt);
  if (c.interleaved) {
    m.gate_up = dense_input(m.g, "w_gate_up", {c.h, 2 * c.f}, c.dt);
    m.y = m.g.swiglu_mlp(m.x, m.gate_up, m.down, Swiglu_mlp_attributes().set_name("mlp"));
  } else {
    // A K-major gate ([F, H] storage, nn.Linear's layout) next to an N-major up.
    m.gate = c.gate_k_major ? dense_input(m.g, "w_gate", {c.h, c.f}, c.dt, {1, c.h})
                            : dense_input(m.g, "w_gate", {c.h, c.f}, c.dt);
    m.up = dense_input(m.g, "w_up", {c.h, c.f}, c.dt);
    m.y = m.g.swiglu_mlp(m.x, m.gate, m.up, m.down, Swiglu_mlp_attributes().set_name("mlp"));
  }
  m.y->set_output(true);
}

// y = round(silu(x Wg) * (x Wu)) Wd in double, the intermediate rounded to `dt`.
std::vector<double> naive(const Mlp& c, const std::vector<double>& x, const std::vector<double>& wg,
                          const std::vector<double>& wu, const std::vector<double>& wd) {
  std::vector<double> y(static_cast<size_t>(c.t * c.h), 0.0);
  for (int64_t r = 0; r < c.t; ++r)
    for (int64_t j = 0; j < c.f; ++j) {
      double g = 0, u = 0;
      for (int64_t k = 0; k < c.h; ++k) {
        g += x[static_cast<size_t>(r * c.h + k)] * wg[static_cast<size_t>(k * c.f + j)];
        u += x[static_cast<size_t>(r * c.h + k)] * wu[static_cast<size_t>(k * c.f + j)];
      }
      const double mid = detail::round_to(c.dt, g / (1 + std::exp(-g)) * u);
      for (int64_t k = 0; k < c.h; ++k)
        y[static_cast<size_t>(r * c.h + k)] += mid * wd[static_cast<size_t>(j * c.h + k)];
    }
  return y;
}

struct MlpRun {
  std::vector<double> y, x, gate, up, down;
};

// Random inputs; with `interleaved`, the same gate and up values packed into W_GATE_UP.
MlpRun run(const Mlp& c, uint64_t seed) {
  MlpGraph m;
  build(m, c);
  EXPECT_TRUE(m.g.validate().is_good());
  std::mt19937_64 rng(seed);
  HostTensor x(m.x), down(m.down), y(m.y);
  x.fill_random(rng);
  down.fill_random(rng, -0.5, 0.5);
  MlpRun out;
  HostTensor gate(c.interleaved ? m.gate_up : m.gate), up(c.interleaved ? m.gate_up : m.up);
  out.gate.resize(static_cast<size_t>(c.h * c.f));
  out.up.resize(out.gate.size());
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (auto& v : out.gate) v = detail::round_to(c.dt, u(rng));
  for (auto& v : out.up) v = detail::round_to(c.dt, u(rng));
  std::vector<HostTensor*> buffers{&x, &down, &y};
  if (c.interleaved) {
    for (int64_t k = 0; k < c.h; ++k)
      for (int64_t j = 0; j < c.f; ++j) {
        const int64_t col = (j / 8) * 16 + j % 8;
        gate.set(k * 2 * c.f + col, out.gate[static_cast<size_t>(k * c.f + j)]);
        gate.set(k * 2 * c.f + col + 8, out.up[static_cast<size_t>(k * c.f + j)]);
      }
    buffers.push_back(&gate);
  } else {
    for (int64_t n = 0; n < c.h * c.f; ++n) {
      gate.set(n, out.gate[static_cast<size_t>(n)]);
      up.set(n, out.up[static_cast<size_t>(n)]);
    }
    buffers.push_back(&gate);
    buffers.push_back(&up);
  }
  y.poison();
  const error_t e = build_and_run(m.g, buffers);
  EXPECT_TRUE(e.is_good()) << e.get_message();
  out.y = y.values(), out.x = x.values(), out.down = down.values();
  return out;
}

TEST(SwigluMlp, ReferenceMatchesNaiveLoop) {
  for (DataType_t dt : {DataType_t::FLOAT, DataType_t::BFLOAT16})
    for (bool k_major : {false, true})
      for (int64_t t : {1, 5, 17}) {
        Mlp c;
        c.dt = dt, c.t = t, c.h = 24, c.f = 16, c.gate_k_major = k_major;
        SCOPED_TRACE(std::string(to_string(dt)) + " T" + std::to_string(t) + (k_major ? " gate K-major" : ""));
        const MlpRun r = run(c, static_cast<uint64_t>(t * 7 + k_major));
        const auto want = naive(c, r.x, r.gate, r.up, r.down);
        const auto err = compare(r.y, want);
        EXPECT_FALSE(err.has_nan) << "an output element was not written";
        // FLOAT: FP32 sums against double; BF16: the output's own rounding plus rare one-ulp flips of
        // the intermediate where the FP32 and double sums straddle a rounding boundary.
        EXPECT_LE(err.rel_l2, dt == DataType_t::FLOAT ? 1e-6 : 8e-3) << "max abs " << err.max_abs;
        // The checker fails on a wrong answer: up and gate swapped.
        const auto wrong = naive(c, r.x, r.up, r.gate, r.down);
        EXPECT_GT(compare(r.y, wrong).rel_l2, 0.1);
      }
}

TEST(SwigluMlp, InterleavedWeightEqualsSeparateWeights) {
  for (DataType_t dt : {DataType_t::FLOAT, DataType_t::BFLOAT16}) {
    Mlp c;
    c.dt = dt, c.t = 3, c.h = 40, c.f = 24;
    const MlpRun separate = run(c, 11);
    c.interleaved = true;
    const MlpRun packed = run(c, 11);
    ASSERT_EQ(separate.gate, packed.gate);
    EXPECT_EQ(separate.y, packed.y);
  }
}

// Validation message of a graph built by `make`.
std::string validate_message(const std::function<void(graph::Graph&)>& make) {
  graph::Graph g;
  make(g);
  const error_t e = g.validate();
  EXPECT_TRUE(e.is_bad());
  return e.get_message();
}

TEST(SwigluMlp, BadShapesAndTypesNameTheAttribute) {
  const DataType_t bf = DataType_t::BFLOAT16;
  auto mlp = [&](graph::Graph& g, std::vector<int64_t> x, std::vector<int64_t> wg, std::vector<int64_t> wu,
                 std::vector<int64_t> wd, DataType_t up_type = DataType_t::BFLOAT16,
                 DataType_t x_type = DataType_t::BFLOAT16) {
    g.swiglu_mlp(dense_input(g, "x", x, x_type), dense_input(g, "wg", wg, bf), dense_input(g, "wu", wu, up_type),
                 dense_input(g, "wd", wd, bf), Swiglu_mlp_attributes())
        ->set_output(true);
  };
  struct Bad {
    std::function<void(graph::Graph&)> make;
    std::string attr;
  };
  const std::vector<Bad> cases = {
      {[&](graph::Graph& g) {
         mlp(g, {4, 8}, {9, 16}, {9, 16}, {16, 8});
       },
       "W_GATE.dim"},
      {[&](graph::Graph& g) {
         mlp(g, {4, 8}, {8, 16}, {8, 24}, {16, 8});
       },
       "W_UP.dim"},
      {[&](graph::Graph& g) {
         mlp(g, {4, 8}, {8, 16}, {8, 16}, {16, 9});
       },
       "W_DOWN.dim"},
      {[&](graph::Graph& g) {
         mlp(g, {2, 4, 8}, {8, 16}, {8, 16}, {16, 8});
       },
       "X.dim"},
      {[&](graph::Graph& g) {
         mlp(g, {4, 8}, {8, 16}, {8, 16}, {16, 8}, DataType_t::HALF);
       },
       "W_UP.data_type"},
      {[&](graph::Graph& g) {
         mlp(g, {4, 8}, {8, 16}, {8, 16}, {16, 8}, bf, DataType_t::INT32);
       },
       "X.data_type"},
      {[&](graph::Graph& g) {
         g.swiglu_mlp(dense_input(g, "x", {4, 8}, bf), dense_input(g, "wgu", {8, 24}, bf),
                      dense_input(g, "wd", {12, 8}, bf), Swiglu_mlp_attributes())
             ->set_output(true);
       },
       "W_GATE_UP.dim"},
      {[&](graph::Graph& g) {
         g.swiglu_mlp(dense_input(g, "x", {4, 8}, bf), nullptr, dense_input(g, "wu", {8, 16}, bf),
                      dense_input(g, "wd", {16, 8}, bf), Swiglu_mlp_attributes())
             ->set_output(true);
       },
       "W_GATE"},
  };
  for (const auto& c : cases) {
    const std::string msg = validate_message(c.make);
    EXPECT_NE(msg.find(c.attr), std::string::npos) << c.attr << ": " << msg;
  }
}

TEST(SwigluMlp, JsonRoundTripKeepsTheWeightForm) {
  for (bool interleaved : {false, true}) {
    Mlp c;
    c.interleaved = interleaved, c.dt = DataType_t::BFLOAT16;
    MlpGraph m;
    build(m, c);
    ASSERT_TRUE(m.g.validate().is_good());
    std::string text, again;
    ASSERT_TRUE(m.g.serialize(text).is_good());
    graph::Graph replay;
    ASSERT_TRUE(replay.deserialize(text).is_good());
    ASSERT_TRUE(replay.validate().is_good());
    ASSERT_TRUE(replay.serialize(again).is_good());
    EXPECT_EQ(text, again);
    EXPECT_NE(text.find(interleaved ? "W_GATE_UP" : "W_GATE"), std::string::npos);
  }
}

}  // namespace
}  // namespace frost::test
