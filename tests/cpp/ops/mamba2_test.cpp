// MAMBA2 (Mamba-2's scan) on the CPU reference: against the quadratic (attention-like) form of the same model,
// computed here independently in double; packed sequences; a state carried between two calls; D per channel;
// JSON round trips; and errors that name the attribute, leaving outputs untouched.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>

#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;

struct Problem {
  const char* label = "";
  int64_t b = 1, t = 1, h = 1, g = 1, p = 2, n = 3;
  bool d = false, d_per_channel = false, z = false, dt_bias = false, softplus = false, has_init = false,
       final_state = false;
  std::optional<float> dt_min, dt_max;
  Dims cu;  // cu_seqlens; empty: none
  std::vector<double> x, dt, a, bm, cm, dv, zv, bias, init, dy, d_final;

  int64_t sequences() const { return cu.empty() ? b : static_cast<int64_t>(cu.size()) - 1; }
  Dims x_dims() const { return {b, t, h, p}; }
  Dims dt_dims() const { return {b, t, h}; }
  Dims bc_dims() const { return {b, t, g, n}; }
  Dims d_dims() const { return d_per_channel ? Dims{h, p} : Dims{h}; }
  Dims state_dims() const { return {sequences(), h, p, n}; }
};

size_t volume(const Dims& d) {
  int64_t v = 1;
  for (int64_t e : d) v *= e;
  return static_cast<size_t>(v);
}

Problem with_data(Problem p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  p.x = uniform_values(rng, volume(p.x_dims()), -1, 1);
  p.dt = uniform_values(rng, volume(p.dt_dims()), p.softplus ? -3.0 : 0.01, p.softplus ? 1.0 : 0.5);
  p.a = uniform_values(rng, static_cast<size_t>(p.h), -2, -0.1);
  p.bm = uniform_values(rng, volume(p.bc_dims()), -1, 1);
  p.cm = uniform_values(rng, volume(p.bc_dims()), -1, 1);
  if (p.d) p.dv = uniform_values(rng, volume(p.d_dims()), -1, 1);
  if (p.z) p.zv = uniform_values(rng, volume(p.x_dims()), -2, 2);
  if (p.dt_bias) p.bias = uniform_values(rng, static_cast<size_t>(p.h), -0.5, 0.5);
  if (p.has_init) p.init = uniform_values(rng, volume(p.state_dims()), -1, 1);
  p.dy = uniform_values(rng, volume(p.x_dims()), -1, 1);
  if (p.final_state) p.d_final = uniform_values(rng, volume(p.state_dims()), -1, 1);
  return p;
}

struct Outputs {
  std::vector<double> y, final_state;
};

// The quadratic form: y_t = sum_{s <= t} (C_t . B_s) exp(sum_{s < r <= t} dt_r A) dt_s x_s
//                           + C_t . (exp(sum_{r <= t} dt_r A) H_0) + D x_t, then times silu(z_t);
// the final state sum_s exp(sum_{s < r <= T} dt_r A) dt_s x_s B_s^T + exp(sum_r dt_r A) H_0.
Outputs quadratic_form(const Problem& p) {
  Outputs r{std::vector<double>(volume(p.x_dims()), 0.0), std::vector<double>(volume(p.state_dims()), 0.0)};
  auto step = [&](int64_t tok, int64_t head) {
    double v = p.dt[static_cast<size_t>(tok * p.h + head)] + (p.dt_bias ? p.bias[static_cast<size_t>(head)] : 0.0);
    if (p.softplus) v = v > 20 ? v : std::log1p(std::exp(v));
    if (p.dt_min) v = std::max(v, static_cast<double>(*p.dt_min));
    if (p.dt_max) v = std::min(v, static_cast<double>(*p.dt_max));
    return v;
  };
  for (int64_t s = 0; s < p.sequences(); ++s) {
    const int64_t first = p.cu.empty() ? s * p.t : p.cu[static_cast<size_t>(s)];
    const int64_t last = p.cu.empty() ? (s + 1) * p.t : p.cu[static_cast<size_t>(s) + 1];
    for (int64_t head = 0; head < p.h; ++head) {
      const int64_t grp = head / (p.h / p.g);
      const double a = p.a[static_cast<size_t>(head)];
      std::vector<double> cum(static_cast<size_t>(last - first + 1), 0.0);  // cum[i] = sum of dt A over tokens < i
      for (int64_t i = first; i < last; ++i)
        cum[static_cast<size_t>(i - first + 1)] = cum[static_cast<size_t>(i - first)] + step(i, head) * a;
      auto bc = [&](const std::vector<double>& m, int64_t tok, int64_t j) {
        return m[static_cast<size_t>((tok * p.g + grp) * p.n + j)];
      };
      auto h0 = [&](int64_t ch, int64_t j) {
        return p.has_init ? p.init[static_cast<size_t>(((s * p.h + head) * p.p + ch) * p.n + j)] : 0.0;
      };
      for (int64_t ti = first; ti < last; ++ti)
        for (int64_t ch = 0; ch < p.p; ++ch) {
          double y = 0;
          for (int64_t si = first; si <= ti; ++si) {
            double cb = 0;
            for (int64_t j = 0; j < p.n; ++j) cb += bc(p.cm, ti, j) * bc(p.bm, si, j);
            const double decay =
                std::exp(cum[static_cast<size_t>(ti - first + 1)] - cum[static_cast<size_t>(si - first + 1)]);
            y += cb * decay * step(si, head) * p.x[static_cast<size_t>((si * p.h + head) * p.p + ch)];
          }
          for (int64_t j = 0; j < p.n; ++j)
            y += bc(p.cm, ti, j) * std::exp(cum[static_cast<size_t>(ti - first + 1)]) * h0(ch, j);
          const size_t at = static_cast<size_t>((ti * p.h + head) * p.p + ch);
          if (p.d) y += p.dv[static_cast<size_t>(p.d_per_channel ? head * p.p + ch : head)] * p.x[at];
          if (p.z) y *= p.zv[at] / (1 + std::exp(-p.zv[at]));
          r.y[at] = y;
        }
      const double total = cum.back();
      for (int64_t ch = 0; ch < p.p; ++ch)
        for (int64_t j = 0; j < p.n; ++j) {
          double e = std::exp(total) * h0(ch, j);
          for (int64_t si = first; si < last; ++si)
            e += std::exp(total - cum[static_cast<size_t>(si - first + 1)]) * step(si, head) *
                 p.x[static_cast<size_t>((si * p.h + head) * p.p + ch)] * bc(p.bm, si, j);
          r.final_state[static_cast<size_t>(((s * p.h + head) * p.p + ch) * p.n + j)] = e;
        }
    }
  }
  return r;
}

// ---- The graph around a problem ----

struct Declared {
  graph::Graph g;
  ValuedInputs inputs;
  TensorPtr cu;
  std::vector<TensorPtr> outputs;  // Y [, FINAL_STATE]
};

std::unique_ptr<Declared> declare(Problem& p, DT io, bool fp64, bool backward = false) {
  auto d = std::make_unique<Declared>();
  const DT state_type = fp64 ? DT::DOUBLE : DT::FLOAT;
  d->g.set_io_data_type(io).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(fp64 ? DT::DOUBLE : DT::FLOAT);
  auto x = input(d->g, "x", p.x_dims(), io), dt = input(d->g, "dt", p.dt_dims(), io);
  auto a = input(d->g, "A", {p.h}, DT::FLOAT);
  auto b = input(d->g, "B", p.bc_dims(), io), c = input(d->g, "C", p.bc_dims(), io);
  d->inputs = {{x, &p.x}, {dt, &p.dt}, {a, &p.a}, {b, &p.bm}, {c, &p.cm}};
  auto optional_input = [&](bool on, const char* name, const Dims& dims, DT dt_type, std::vector<double>* values) {
    if (!on) return TensorPtr();
    auto t = input(d->g, name, dims, dt_type);
    d->inputs.emplace_back(t, values);
    return t;
  };
  auto options = [&](auto attrs) {
    attrs.set_name("ssd0").set_dt_softplus(p.softplus);
    attrs.dt_min = p.dt_min, attrs.dt_max = p.dt_max;
    if (auto t = optional_input(p.d, "D", p.d_dims(), DT::FLOAT, &p.dv)) attrs.set_d(t);
    if (auto t = optional_input(p.z, "z", p.x_dims(), io, &p.zv)) attrs.set_z(t);
    if (auto t = optional_input(p.dt_bias, "dt_bias", {p.h}, DT::FLOAT, &p.bias)) attrs.set_dt_bias(t);
    if (auto t = optional_input(p.has_init, "h0", p.state_dims(), state_type, &p.init)) attrs.set_initial_state(t);
    if (!p.cu.empty()) attrs.set_cu_seqlens(d->cu = input(d->g, "cu", {static_cast<int64_t>(p.cu.size())}, DT::INT32));
    return attrs;
  };
  if (!backward) {
    const auto r =
        d->g.mamba2(x, dt, a, b, c, options(graph::Mamba2_attributes()).set_output_final_state(p.final_state));
    d->outputs = {r[0]};
    if (r[1]) {
      r[1]->set_data_type(state_type);
      d->outputs.push_back(r[1]);
    }
  } else {
    auto attrs = options(graph::Mamba2_backward_attributes());
    auto dy = optional_input(true, "dy", p.x_dims(), io, &p.dy);
    if (auto t = optional_input(p.final_state, "dh", p.state_dims(), state_type, &p.d_final))
      attrs.set_d_final_state(t);
    const auto r = d->g.mamba2_backward(x, dt, a, b, c, dy, attrs);
    for (const auto& t : r)
      if (t) d->outputs.push_back(t);
    if (r[8]) r[8]->set_data_type(state_type);
  }
  for (auto& t : d->outputs) t->set_output(true);
  return d;
}

// Validates and runs the declared graph; inputs are stored in their types and `p` gets back what was stored.
// Outputs start poisoned (NaN).
error_t run(Declared& d, Problem& p, std::vector<std::vector<double>>& results) {
  FROST_CHECK(d.g.validate());  // the strides the host buffers are laid out by
  return run_on_host(d.g, d.inputs, {{d.cu, &p.cu}}, d.outputs, results);
}

double tolerance(DT io, bool fp64, const std::vector<double>& want) {
  double m = 1;
  for (double e : want) m = std::max(m, std::fabs(e));
  return (fp64 ? 1e-12 : io == DT::BFLOAT16 ? 1e-2 : io == DT::HALF ? 2e-3 : 2e-5) * m;
}

Problem make(const char* label, int64_t b, int64_t t, int64_t h, int64_t g, int64_t p, int64_t n) {
  Problem pr;
  pr.label = label, pr.b = b, pr.t = t, pr.h = h, pr.g = g, pr.p = p, pr.n = n;
  return pr;
}

std::vector<Problem> cases() {
  std::vector<Problem> c;
  c.push_back(make("t1", 1, 1, 1, 1, 2, 3));
  Problem p = make("every_option", 2, 9, 4, 2, 3, 5);
  p.d = p.z = p.dt_bias = p.softplus = p.has_init = p.final_state = true;
  p.dt_min = 0.05f, p.dt_max = 0.8f;
  c.push_back(p);
  p = make("d_per_channel_groups_1", 1, 13, 3, 1, 4, 2);
  p.d = p.d_per_channel = p.final_state = true;
  c.push_back(p);
  p = make("packed_with_an_empty_sequence", 1, 12, 2, 2, 2, 4);
  p.cu = {0, 5, 5, 12}, p.has_init = p.final_state = p.softplus = true;
  c.push_back(p);
  return c;
}

using Param = std::tuple<int, DT>;
class Mamba2Forward : public ::testing::TestWithParam<Param> {};

TEST_P(Mamba2Forward, MatchesTheQuadraticForm) {
  const auto [ci, io] = GetParam();
  const bool fp64 = io == DT::DOUBLE;
  Problem p =
      with_data(cases()[static_cast<size_t>(ci)], 40 + static_cast<uint64_t>(ci) * 5 + static_cast<uint64_t>(io));
  auto d = declare(p, io, fp64);
  auto e = d->g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(d->outputs[0]->get_dim(), p.x_dims());
  std::vector<std::vector<double>> got;
  e = run(*d, p, got);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Outputs want = quadratic_form(p);  // on the values the storage types kept
  EXPECT_CLOSE(got[0], want.y, tolerance(io, fp64, want.y));
  if (p.final_state) {
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(d->outputs[1]->get_dim(), p.state_dims());
    EXPECT_CLOSE(got[1], want.final_state, tolerance(DT::FLOAT, fp64, want.final_state));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Mamba2Forward,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(cases().size())),
                                            ::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF, DT::DOUBLE)),
                         [](const auto& info) {
                           return std::string(cases()[static_cast<size_t>(std::get<0>(info.param))].label) + "_" +
                                  std::string(to_string(std::get<1>(info.param)));
                         });

// Two calls, the second starting from the first's final state, give the one-call result (fp64 mode).
TEST(Mamba2State, CarriesBetweenCalls) {
  Problem whole = with_data(make("whole", 1, 10, 2, 1, 3, 4), 7);
  whole.final_state = whole.softplus = true;
  auto split = [&](int64_t from, int64_t to) {
    Problem part = whole;
    part.t = to - from;
    auto slice = [&](const std::vector<double>& v, size_t per_token) {
      return std::vector<double>(v.begin() + from * per_token, v.begin() + to * per_token);
    };
    part.x = slice(whole.x, static_cast<size_t>(whole.h * whole.p));
    part.dt = slice(whole.dt, static_cast<size_t>(whole.h));
    part.bm = slice(whole.bm, static_cast<size_t>(whole.g * whole.n));
    part.cm = slice(whole.cm, static_cast<size_t>(whole.g * whole.n));
    return part;
  };
  std::vector<std::vector<double>> all, first, second;
  auto d = declare(whole, DT::DOUBLE, true);
  ASSERT_TRUE(run(*d, whole, all).is_good());
  Problem a = split(0, 4), b = split(4, 10);
  auto da = declare(a, DT::DOUBLE, true);
  ASSERT_TRUE(run(*da, a, first).is_good());
  b.has_init = true, b.init = first[1];
  auto db = declare(b, DT::DOUBLE, true);
  ASSERT_TRUE(run(*db, b, second).is_good());
  const size_t cut = static_cast<size_t>(4 * whole.h * whole.p);
  for (size_t i = 0; i < all[0].size(); ++i)
    EXPECT_NEAR(i < cut ? first[0][i] : second[0][i - cut], all[0][i], 1e-12) << "y " << i;
  EXPECT_CLOSE(second[1], all[1], 1e-12);
}

// ---- Backward against central differences of the quadratic form ----

double loss(const Problem& p) {
  const Outputs f = quadratic_form(p);
  double l = 0;
  for (size_t i = 0; i < f.y.size(); ++i) l += p.dy[i] * f.y[i];
  for (size_t i = 0; i < p.d_final.size(); ++i) l += p.d_final[i] * f.final_state[i];
  return l;
}

std::vector<double> finite_difference(Problem p, std::vector<double> Problem::*field) {
  return central_differences(p.*field, 1e-6, [&] { return loss(p); });
}

class Mamba2Backward : public ::testing::TestWithParam<int> {};

TEST_P(Mamba2Backward, MatchesFiniteDifferences) {
  Problem p = with_data(cases()[static_cast<size_t>(GetParam())], 70 + static_cast<uint64_t>(GetParam()));
  auto d = declare(p, DT::DOUBLE, true, true);
  std::vector<std::vector<double>> got;
  const auto e = run(*d, p, got);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  // Outputs in builder order, the optional ones where their input is given.
  std::vector<std::pair<const char*, std::vector<double> Problem::*>> fields{
      {"dx", &Problem::x}, {"ddt", &Problem::dt}, {"dA", &Problem::a}, {"dB", &Problem::bm}, {"dC", &Problem::cm}};
  if (p.d) fields.emplace_back("dD", &Problem::dv);
  if (p.z) fields.emplace_back("dz", &Problem::zv);
  if (p.dt_bias) fields.emplace_back("ddt_bias", &Problem::bias);
  if (p.has_init) fields.emplace_back("dh0", &Problem::init);
  ASSERT_EQ(got.size(), fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::vector<double> want = finite_difference(p, fields[i].second);
    double scale = 1;
    for (double w : want) scale = std::max(scale, std::fabs(w));
    SCOPED_TRACE(fields[i].first);
    EXPECT_CLOSE(got[i], want, 1e-6 * scale);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Mamba2Backward, ::testing::Range(0, static_cast<int>(cases().size())),
                         [](const auto& info) { return std::string(cases()[static_cast<size_t>(info.param)].label); });

// The finite-difference check above can fail: a gradient off by a little is caught.
TEST(Mamba2Backward, FiniteDifferenceCheckCanFail) {
  Problem p = with_data(cases()[1], 71);
  const std::vector<double> want = finite_difference(p, &Problem::x);
  std::vector<double> off = want;
  off[3] += 1e-3;
  EXPECT_GT(compare(off, want).max_abs, 1e-6 * 10);
}

TEST(Mamba2Json, RoundTripRunsBitwiseEqual) {
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    Problem p = with_data(cases()[1], 11);
    auto d = declare(p, DT::BFLOAT16, false, backward);
    ASSERT_TRUE(d->g.validate().is_good());
    std::string text;
    ASSERT_TRUE(d->g.serialize(text).is_good());
    for (const char* needle : {backward ? "\"MAMBA2_BACKWARD\"" : "\"MAMBA2\"", "\"dt_softplus\"", "\"dt_min\"",
                               "\"dt_max\"", "\"DT_BIAS\"", "\"Z\""})
      EXPECT_NE(text.find(needle), std::string::npos) << needle;
    std::vector<std::vector<double>> first, second;
    ASSERT_TRUE(run(*d, p, first).is_good());
    Declared replay;
    replay.inputs = d->inputs, replay.cu = d->cu, replay.outputs = d->outputs;
    auto e = replay.g.deserialize(text);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    ASSERT_TRUE(run(replay, p, second).is_good());  // same uids, so the same declarations bind
    for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(compare(first[i], second[i]).max_abs, 0.0) << "output " << i;
    std::string again;
    ASSERT_TRUE(replay.g.serialize(again).is_good());
    EXPECT_EQ(again, text);
  }
}

TEST(Mamba2Attributes, InfiniteDtLimitsLeaveThatSideUnclamped) {
  const float inf = std::numeric_limits<float>::infinity();
  auto a = graph::Mamba2_attributes().set_dt_limit(0.f, inf);
  EXPECT_EQ(a.dt_min, 0.f);
  EXPECT_FALSE(a.dt_max.has_value());
  a.set_dt_limit(-inf, 2.f);
  EXPECT_FALSE(a.dt_min.has_value());
  EXPECT_EQ(a.dt_max, 2.f);
}

// ---- Errors ----

// validate()'s message for one MAMBA2 node on `p`'s shapes, with `extra` binding options ("" when valid).
std::string validate_message(const Problem& p,
                             const std::function<void(graph::Graph&, graph::Mamba2_attributes&)>& extra) {
  graph::Graph g;
  auto x = input(g, "x", p.x_dims()), dt = input(g, "dt", p.dt_dims()), a = input(g, "A", {p.h});
  auto b = input(g, "B", p.bc_dims()), c = input(g, "C", p.bc_dims());
  graph::Mamba2_attributes attrs;
  extra(g, attrs);
  g.mamba2(x, dt, a, b, c, attrs);
  const auto e = g.validate();
  return e.is_good() ? "" : e.get_message();
}

TEST(Mamba2Errors, NameTheAttribute) {
  const Problem p = make("base", 2, 5, 4, 2, 3, 2);
  auto none = [](graph::Graph&, graph::Mamba2_attributes&) {};
  EXPECT_EQ(validate_message(p, none), "");
  Problem three_groups = p;
  three_groups.g = 3;  // does not divide 4 heads
  EXPECT_NE(validate_message(three_groups, none).find("B.dim"), std::string::npos);
  const std::pair<const char*, std::function<void(graph::Graph&, graph::Mamba2_attributes&)>> broken[] = {
      {"D.dim", [&](graph::Graph& g, graph::Mamba2_attributes& a) { a.set_d(input(g, "D", {p.h + 1})); }},
      {"Z.dim",
       [&](graph::Graph& g, graph::Mamba2_attributes& a) {
         a.set_z(input(g, "z", {p.b, p.t, p.h, 1}));
       }},
      {"DT_BIAS.dim", [&](graph::Graph& g, graph::Mamba2_attributes& a) { a.set_dt_bias(input(g, "bias", {1})); }},
      {"dt_min", [](graph::Graph&, graph::Mamba2_attributes& a) { a.set_dt_limit(2.f, 1.f); }},
      {"CU_SEQLENS",
       [](graph::Graph& g, graph::Mamba2_attributes& a) {  // packed sequences need B == 1
         a.set_cu_seqlens(input(g, "cu", {3}, DT::INT32));
       }},
      {"INITIAL_STATE.dim",
       [&](graph::Graph& g, graph::Mamba2_attributes& a) {  // 3 states for 2 sequences
         a.set_initial_state(input(g, "h0", {3, p.h, p.p, p.n}));
       }},
      {"INITIAL_STATE.data_type",
       [&](graph::Graph& g, graph::Mamba2_attributes& a) {
         a.set_initial_state(input(g, "h0", {p.b, p.h, p.p, p.n}, DT::BFLOAT16));
       }},
  };
  for (const auto& [attr, extra] : broken) {
    const std::string message = validate_message(p, extra);
    EXPECT_NE(message.find(attr), std::string::npos) << attr << ": " << message;
  }
}

// The backward names its own ports: dY of another shape, and a final state's gradient of the wrong sequence count.
TEST(Mamba2Errors, BackwardNamesItsPorts) {
  const Problem p = make("base", 2, 5, 4, 2, 3, 2);
  auto message = [&](const Dims& dy_dims, const Dims& dh_dims) {
    graph::Graph g;
    auto x = input(g, "x", p.x_dims()), dt = input(g, "dt", p.dt_dims()), a = input(g, "A", {p.h});
    auto b = input(g, "B", p.bc_dims()), c = input(g, "C", p.bc_dims()), dy = input(g, "dy", dy_dims);
    g.mamba2_backward(x, dt, a, b, c, dy,
                      graph::Mamba2_backward_attributes().set_d_final_state(input(g, "dh", dh_dims)));
    const auto e = g.validate();
    return e.is_good() ? std::string() : e.get_message();
  };
  EXPECT_EQ(message(p.x_dims(), p.state_dims()), "");
  EXPECT_NE(message({p.b, p.t, p.h, p.p + 1}, p.state_dims()).find("DY.dim"), std::string::npos);
  EXPECT_NE(message(p.x_dims(), {3, p.h, p.p, p.n}).find("D_FINAL_STATE.dim"), std::string::npos);
}

// Offsets that do not end at T fail at execute and leave the outputs as they were.
TEST(Mamba2Errors, BadOffsetsLeaveOutputsUntouched) {
  Problem p = with_data(make("bad_cu", 1, 6, 2, 1, 2, 2), 5);
  p.cu = {0, 2, 5};  // ends at 5, not T = 6
  p.final_state = true;
  auto d = declare(p, DT::FLOAT, false);
  ASSERT_TRUE(d->g.validate().is_good());
  std::vector<std::vector<double>> got;
  const auto e = run(*d, p, got);
  EXPECT_FALSE(e.is_good());
  EXPECT_NE(e.get_message().find("CU_SEQLENS"), std::string::npos) << e.get_message();
  for (const auto& out : got)
    for (double v : out) EXPECT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace frost::test
