#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <optional>

#include "ops/linear_attention/delta_rule_math.h"
#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;

// ---- The problem, and an independent naive recurrence on whole row-major tensors, in double ----

struct Problem {
  const char* label = "";
  bool kda = false;  // per-channel decay g [B, T, HV, K]; GDN's g is [B, T, HV]
  int64_t b = 1, t = 1, h = 1, hv = 1, kd = 4, vd = 4;
  bool l2norm = false, has_init = false, final_state = false;
  std::optional<float> scale;
  Dims cu;  // cu_seqlens values; empty: none
  DT cu_type = DT::INT32;
  Dims indices;      // state_indices values; empty: none
  int64_t pool = 0;  // initial-state rows when indices are given
  Dims q_stride;     // empty: packed
  std::vector<double> q, k, v, g, beta, init, d_o, d_final;

  int64_t sequences() const { return cu.empty() ? b : static_cast<int64_t>(cu.size()) - 1; }
  int64_t state_rows() const { return indices.empty() ? sequences() : pool; }
  Dims q_dims() const { return {b, t, h, kd}; }
  Dims v_dims() const { return {b, t, hv, vd}; }
  Dims g_dims() const { return kda ? Dims{b, t, hv, kd} : Dims{b, t, hv}; }
  Dims beta_dims() const { return {b, t, hv}; }
  Dims state_dims() const { return {state_rows(), hv, kd, vd}; }
};

size_t volume(const Dims& d) {
  int64_t n = 1;
  for (int64_t e : d) n *= e;
  return static_cast<size_t>(n);
}

struct Outputs {
  std::vector<double> o, final_state;
};

// o[token, hv] = scale * S^T q after S <- exp(g) S, then S <- S + beta k (v - S^T k)^T.
Outputs naive_forward(const Problem& p) {
  Outputs r{std::vector<double>(volume(p.v_dims()), 0.0), std::vector<double>(volume(p.state_dims()), 0.0)};
  if (p.has_init) r.final_state = p.init;
  const double scale = p.scale ? *p.scale : 1.0 / std::sqrt(static_cast<double>(p.kd));
  auto normalized = [&](const std::vector<double>& x, int64_t token, int64_t head) {
    std::vector<double> e(x.begin() + (token * p.h + head) * p.kd, x.begin() + (token * p.h + head + 1) * p.kd);
    if (!p.l2norm) return e;
    double ss = 0;
    for (double c : e) ss += c * c;
    for (double& c : e) c /= std::sqrt(ss + 1e-6);
    return e;
  };
  for (int64_t n = 0; n < p.sequences(); ++n) {
    const int64_t first = p.cu.empty() ? n * p.t : p.cu[static_cast<size_t>(n)];
    const int64_t last = p.cu.empty() ? (n + 1) * p.t : p.cu[static_cast<size_t>(n) + 1];
    const int64_t row = p.indices.empty() ? n : p.indices[static_cast<size_t>(n)];
    for (int64_t hv = 0; hv < p.hv; ++hv) {
      const int64_t head = hv / (p.hv / p.h);
      std::vector<std::vector<double>> s(static_cast<size_t>(p.kd), std::vector<double>(static_cast<size_t>(p.vd), 0));
      for (int64_t i = 0; i < p.kd; ++i)
        for (int64_t j = 0; j < p.vd; ++j)
          if (p.has_init) s[i][j] = p.init[static_cast<size_t>(((row * p.hv + hv) * p.kd + i) * p.vd + j)];
      for (int64_t tok = first; tok < last; ++tok) {
        const auto q = normalized(p.q, tok, head), k = normalized(p.k, tok, head);
        const int64_t bh = tok * p.hv + hv;
        for (int64_t i = 0; i < p.kd; ++i)
          for (int64_t j = 0; j < p.vd; ++j) s[i][j] *= std::exp(p.g[static_cast<size_t>(p.kda ? bh * p.kd + i : bh)]);
        for (int64_t j = 0; j < p.vd; ++j) {
          double recalled = 0;
          for (int64_t i = 0; i < p.kd; ++i) recalled += s[i][j] * k[i];
          const double delta = p.beta[static_cast<size_t>(bh)] * (p.v[static_cast<size_t>(bh * p.vd + j)] - recalled);
          for (int64_t i = 0; i < p.kd; ++i) s[i][j] += k[i] * delta;
          double out = 0;
          for (int64_t i = 0; i < p.kd; ++i) out += s[i][j] * q[i];
          r.o[static_cast<size_t>(bh * p.vd + j)] = scale * out;
        }
      }
      for (int64_t i = 0; i < p.kd; ++i)
        for (int64_t j = 0; j < p.vd; ++j)
          r.final_state[static_cast<size_t>(((row * p.hv + hv) * p.kd + i) * p.vd + j)] = s[i][j];
    }
  }
  return r;
}

double loss(const Problem& p) {
  const Outputs f = naive_forward(p);
  double l = 0;
  for (size_t i = 0; i < f.o.size(); ++i) l += p.d_o[i] * f.o[i];
  for (size_t i = 0; i < p.d_final.size(); ++i) l += p.d_final[i] * f.final_state[i];
  return l;
}

// Central differences of sum(d_o * o) + sum(d_final * final_state) against each element of `field`.
std::vector<double> finite_difference(Problem p, std::vector<double> Problem::*field) {
  return central_differences(p.*field, 1e-5, [&] { return loss(p); });
}

// Fresh random operands; g is a log decay in (-0.7, 0), beta a sigmoid output in (0.1, 0.9).
Problem with_data(Problem p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  p.q = uniform_values(rng, volume(p.q_dims()), -1, 1);
  p.k = uniform_values(rng, volume(p.q_dims()), -0.5, 0.5);
  p.v = uniform_values(rng, volume(p.v_dims()), -1, 1);
  p.g = uniform_values(rng, volume(p.g_dims()), -0.7, 0);
  p.beta = uniform_values(rng, volume(p.beta_dims()), 0.1, 0.9);
  if (p.has_init) p.init = uniform_values(rng, volume(p.state_dims()), -0.5, 0.5);
  p.d_o = uniform_values(rng, volume(p.v_dims()), -1, 1);
  if (p.final_state) p.d_final = uniform_values(rng, volume(p.state_dims()), -1, 1);
  return p;
}

// ---- The graph around a problem ----

struct Declared {
  graph::Graph g;
  ValuedInputs inputs;
  TensorPtr cu, indices;
  std::vector<TensorPtr> outputs;  // forward: O [, FINAL_STATE]; backward: DQ, DK, DV, DG, DBETA [, D_INITIAL_STATE]
};

template <class A>
A shared_attributes(A a, Problem& p, Declared& d, DT state_type) {
  a.set_name("la0").set_use_qk_l2norm_in_kernel(p.l2norm);
  if (p.scale) a.set_scale(*p.scale);
  if (p.has_init) {
    auto init = input(d.g, "init", p.state_dims(), state_type);
    d.inputs.emplace_back(init, &p.init);
    a.set_initial_state(init);
  }
  if (!p.cu.empty()) a.set_cu_seqlens(d.cu = input(d.g, "cu", {static_cast<int64_t>(p.cu.size())}, p.cu_type));
  if (!p.indices.empty())
    a.set_state_indices(d.indices = input(d.g, "idx", {static_cast<int64_t>(p.indices.size())}, DT::INT32));
  return a;
}

std::unique_ptr<Declared> declare(Problem& p, DT io, bool fp64, bool backward) {
  auto d = std::make_unique<Declared>();
  const DT state_type = fp64 ? DT::DOUBLE : DT::FLOAT;
  d->g.set_io_data_type(io).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(fp64 ? DT::DOUBLE : DT::FLOAT);
  auto q = input(d->g, "q", p.q_dims(), io, p.q_stride), k = input(d->g, "k", p.q_dims(), io);
  auto v = input(d->g, "v", p.v_dims(), io), gt = input(d->g, "g", p.g_dims(), io);
  auto beta = input(d->g, "beta", p.beta_dims(), io);
  d->inputs = {{q, &p.q}, {k, &p.k}, {v, &p.v}, {gt, &p.g}, {beta, &p.beta}};
  if (!backward) {
    std::array<TensorPtr, 2> r;
    if (p.kda) {
      auto a = shared_attributes(graph::Kda_attributes(), p, *d, state_type).set_output_final_state(p.final_state);
      r = d->g.kda(q, k, v, gt, beta, a);
    } else {
      auto a = shared_attributes(graph::Gdn_attributes(), p, *d, state_type).set_output_final_state(p.final_state);
      r = d->g.gdn(q, k, v, gt, beta, a);
    }
    d->outputs = {r[0]};
    if (r[1]) {
      r[1]->set_data_type(state_type);
      d->outputs.push_back(r[1]);
    }
  } else {
    auto d_o = input(d->g, "do", p.v_dims(), io);
    d->inputs.emplace_back(d_o, &p.d_o);
    TensorPtr d_final;
    if (p.final_state) {
      d_final = input(d->g, "dht", p.state_dims(), state_type);
      d->inputs.emplace_back(d_final, &p.d_final);
    }
    std::array<TensorPtr, 6> r;
    if (p.kda) {
      auto a = shared_attributes(graph::Kda_backward_attributes(), p, *d, state_type);
      if (d_final) a.set_d_final_state(d_final);
      r = d->g.kda_backward(q, k, v, gt, beta, d_o, a);
    } else {
      auto a = shared_attributes(graph::Gdn_backward_attributes(), p, *d, state_type);
      if (d_final) a.set_d_final_state(d_final);
      r = d->g.gdn_backward(q, k, v, gt, beta, d_o, a);
    }
    for (auto& t : r)
      if (t) d->outputs.push_back(t);
    if (r[5]) r[5]->set_data_type(state_type);
  }
  for (auto& t : d->outputs) t->set_output(true);
  return d;
}

// Runs the declared graph; inputs are stored in their types and `p` gets back what was stored.
error_t run(Declared& d, Problem& p, std::vector<std::vector<double>>& results) {
  return run_on_host(d.g, d.inputs, {{d.cu, &p.cu}, {d.indices, &p.indices}}, d.outputs, results);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

double tolerance(DT io, bool fp64, const std::vector<double>& want) {
  const double rel = fp64 ? 1e-12 : io == DT::BFLOAT16 ? 1e-2 : io == DT::HALF ? 2e-3 : 2e-5;
  return rel * std::max(1.0, max_abs(want));
}

Problem make(const char* label, bool kda, int64_t b, int64_t t, int64_t h, int64_t hv, int64_t kd, int64_t vd) {
  Problem p;
  p.label = label, p.kda = kda, p.b = b, p.t = t, p.h = h, p.hv = hv, p.kd = kd, p.vd = vd;
  return p;
}

// Small shapes: the backward checks take central differences over every input element.
std::vector<Problem> small_cases() {
  std::vector<Problem> c;
  for (bool kda : {false, true}) {
    c.push_back(make("t1", kda, 1, 1, 1, 1, 4, 4));
    Problem p = make("t5_init_final", kda, 2, 5, 1, 1, 4, 8);
    p.has_init = p.final_state = true;
    c.push_back(p);
    p = make("t17_gva_l2norm_scale", kda, 1, 17, 2, 4, 4, 4);
    p.l2norm = true, p.scale = 0.7f, p.final_state = true;
    p.q_stride = {17 * 2 * 4, 4, 17 * 4, 1};  // q stored head-major [B, H, T, K]
    c.push_back(p);
    p = make("varlen_int32", kda, 1, 17, 1, 2, 8, 4);
    p.cu = {0, 5, 5, 17}, p.has_init = p.final_state = true;  // includes an empty sequence
    c.push_back(p);
    p = make("varlen_int64_pool_gva_l2norm", kda, 1, 17, 2, 4, 4, 4);
    p.cu = {0, 1, 12, 17}, p.cu_type = DT::INT64, p.indices = {3, 0, 4}, p.pool = 5, p.l2norm = true;
    p.has_init = p.final_state = true;
    c.push_back(p);
  }
  return c;
}

std::string case_name(const Problem& p) { return std::string(p.kda ? "kda_" : "gdn_") + p.label; }

// ---- Forward against the naive recurrence ----

using FwdParam = std::tuple<int, DT>;
class LinearAttentionForward : public ::testing::TestWithParam<FwdParam> {};

std::vector<Problem> forward_cases() {
  std::vector<Problem> c = small_cases();
  for (bool kda : {false, true}) {
    Problem p = make("t111_gva_l2norm_init", kda, 2, 111, 1, 3, 8, 8);
    p.has_init = p.final_state = p.l2norm = true;
    c.push_back(p);
  }
  return c;
}

TEST_P(LinearAttentionForward, MatchesNaiveRecurrence) {
  const auto [ci, io] = GetParam();
  const bool fp64 = io == DT::DOUBLE;
  Problem p = with_data(forward_cases()[static_cast<size_t>(ci)],
                        100 + static_cast<uint64_t>(ci) * 7 + static_cast<uint64_t>(io));
  auto d = declare(p, io, fp64, false);
  auto e = d->g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(d->outputs[0]->get_dim(), p.v_dims());
  std::vector<std::vector<double>> got;
  e = run(*d, p, got);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Outputs want = naive_forward(p);  // on the values the storage type kept
  EXPECT_CLOSE(got[0], want.o, tolerance(io, fp64, want.o));
  if (p.final_state) {
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(d->outputs[1]->get_data_type(), fp64 ? DT::DOUBLE : DT::FLOAT);
    EXPECT_EQ(d->outputs[1]->get_dim(), p.state_dims());
    EXPECT_CLOSE(got[1], want.final_state, tolerance(DT::FLOAT, fp64, want.final_state));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, LinearAttentionForward,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(forward_cases().size())),
                                            ::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF, DT::DOUBLE)),
                         [](const auto& info) {
                           return case_name(forward_cases()[static_cast<size_t>(std::get<0>(info.param))]) + "_" +
                                  std::string(to_string(std::get<1>(info.param)));
                         });

// ---- Backward against central differences of the naive forward ----

using BwdParam = std::tuple<int, DT>;
class LinearAttentionBackward : public ::testing::TestWithParam<BwdParam> {};

TEST_P(LinearAttentionBackward, MatchesFiniteDifferences) {
  const auto [ci, io] = GetParam();
  const bool fp64 = io == DT::DOUBLE;
  Problem p = with_data(small_cases()[static_cast<size_t>(ci)],
                        500 + static_cast<uint64_t>(ci) * 7 + static_cast<uint64_t>(io));
  auto d = declare(p, io, fp64, true);
  auto e = d->g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::vector<std::vector<double>> got;
  e = run(*d, p, got);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  ASSERT_EQ(got.size(), p.has_init ? 6u : 5u);
  std::vector<std::vector<double> Problem::*> fields = {&Problem::q, &Problem::k, &Problem::v, &Problem::g,
                                                        &Problem::beta};
  if (p.has_init) fields.push_back(&Problem::init);
  const char* names[] = {"dq", "dk", "dv", "dg", "dbeta", "d_initial_state"};
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::vector<double> want = finite_difference(p, fields[i]);
    // Differences carry ~1e-10 of truncation error; the stored 16-bit gradients their rounding.
    const double tol = fp64 ? 1e-8 * std::max(1.0, max_abs(want)) : tolerance(i == 5 ? DT::FLOAT : io, false, want);
    SCOPED_TRACE(names[i]);
    EXPECT_CLOSE(got[i], want, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, LinearAttentionBackward,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(small_cases().size())),
                                            ::testing::Values(DT::DOUBLE, DT::FLOAT, DT::BFLOAT16, DT::HALF)),
                         [](const auto& info) {
                           return case_name(small_cases()[static_cast<size_t>(std::get<0>(info.param))]) + "_" +
                                  std::string(to_string(std::get<1>(info.param)));
                         });

// The check can fail: a gradient that forgets the decay's contribution is far from the differences.
TEST(LinearAttentionBackward, FiniteDifferenceCheckCanFail) {
  Problem p = with_data(small_cases()[1], 9);
  const std::vector<double> fd = finite_difference(p, &Problem::g);
  EXPECT_GT(compare(std::vector<double>(fd.size(), 0.0), fd).max_abs, 1e-3);
  std::vector<double> scaled = fd;
  for (double& e : scaled) e *= 1.01;
  EXPECT_GT(compare(scaled, fd).max_abs, 1e-8 * std::max(1.0, max_abs(fd)));
}

// ---- The chunked (WY/UT) form agrees with the recurrence to fp64 rounding ----

TEST(LinearAttentionChunked, MatchesRecurrenceInFp64) {
  std::mt19937_64 rng(77);
  for (int64_t width : {int64_t{1}, int64_t{8}})  // GDN's scalar decay, KDA's per channel
    for (int64_t len : {1, 17, 63, 64, 65, 150}) {
      detail::DeltaRuleProblem<double> p;
      p.len = len, p.key_dim = 8, p.value_dim = 4, p.decay_width = width, p.scale = 0.3;
      p.q = uniform_values(rng, static_cast<size_t>(len * 8), -1, 1);
      p.k = uniform_values(rng, static_cast<size_t>(len * 8), -0.5, 0.5);
      p.v = uniform_values(rng, static_cast<size_t>(len * 4), -1, 1);
      p.g = uniform_values(rng, static_cast<size_t>(len * width), -0.7, 0);
      p.beta = uniform_values(rng, static_cast<size_t>(len), 0.1, 0.9);
      p.state = uniform_values(rng, 32, -0.5, 0.5);
      detail::DeltaRuleProblem<double> chunked = p;
      const std::vector<double> o = detail::delta_rule_recurrent(p);
      for (int64_t chunk : {64, 16}) {
        detail::DeltaRuleProblem<double> c = chunked;
        const std::vector<double> oc = detail::delta_rule_chunked(c, chunk);
        SCOPED_TRACE("len " + std::to_string(len) + " width " + std::to_string(width) + " chunk " +
                     std::to_string(chunk));
        EXPECT_CLOSE(oc, o, 1e-13 * std::max(1.0, max_abs(o)));
        EXPECT_CLOSE(c.state, p.state, 1e-13 * std::max(1.0, max_abs(p.state)));
      }
    }
}

// ---- Determinism and JSON ----

// The GPU tests run the FP64 and FP32 references of one graph at once: each run reads the graph and the inputs
// and writes only its own outputs, so the results are bitwise those of runs one after the other.
TEST(LinearAttentionReference, TwoPrecisionsAtOnceMatchOneAfterTheOther) {
  for (bool kda : {false, true}) {
    Problem p = make("at_once", kda, 2, 70, 2, 4, 8, 8);
    p.has_init = p.final_state = true;
    p = with_data(p, 11);
    auto d = declare(p, DT::FLOAT, false, true);
    Handle h = cpu_handle();
    ASSERT_TRUE(d->g.build(h, {HeurMode_t::A}).is_good());
    std::vector<std::unique_ptr<HostTensor>> in;
    std::unordered_map<int64_t, void*> packs[4];  // F64 and F32 one after the other, then at once
    std::vector<std::unique_ptr<HostTensor>> outs[4];
    for (auto& [t, values] : d->inputs) {
      in.push_back(std::make_unique<HostTensor>(t));
      for (int64_t n = 0; n < in.back()->volume(); ++n) in.back()->set(n, (*values)[static_cast<size_t>(n)]);
      for (auto& pack : packs) pack[t->get_uid()] = in.back()->data();
    }
    for (int r = 0; r < 4; ++r)
      for (const auto& t : d->outputs) {
        outs[r].push_back(std::make_unique<HostTensor>(t));
        packs[r][t->get_uid()] = outs[r].back()->data();
      }
    const auto run = [&](int r) {
      return detail::reference_execute(d->g.state(), packs[r], r % 2 ? detail::Precision::F32 : detail::Precision::F64);
    };
    ASSERT_TRUE(run(0).is_good());
    ASSERT_TRUE(run(1).is_good());
    auto f32 = std::async(std::launch::async, [&] { return run(3); });
    ASSERT_TRUE(run(2).is_good());
    ASSERT_TRUE(f32.get().is_good());
    for (size_t i = 0; i < d->outputs.size(); ++i) {
      EXPECT_EQ(outs[2][i]->bytes, outs[0][i]->bytes) << case_name(p) << " output " << i << " (FP64)";
      EXPECT_EQ(outs[3][i]->bytes, outs[1][i]->bytes) << case_name(p) << " output " << i << " (FP32)";
    }
    EXPECT_NE(outs[0][0]->bytes, outs[1][0]->bytes) << "the two precisions should differ somewhere";
  }
}

TEST(LinearAttentionJson, RoundTripRunsBitwiseEqual) {
  Problem fwd = make("json", false, 1, 17, 2, 4, 4, 4);
  fwd.cu = {0, 6, 17}, fwd.has_init = fwd.final_state = fwd.l2norm = true, fwd.scale = 0.5f;
  fwd.indices = {1, 0}, fwd.pool = 3;
  Problem bwd = fwd;
  bwd.kda = true, bwd.cu_type = DT::INT64, bwd.indices.clear(), bwd.scale.reset();
  for (Problem* pp : {&fwd, &bwd}) {
    Problem& p = *pp = with_data(*pp, 31);
    auto d = declare(p, DT::BFLOAT16, false, p.kda);
    ASSERT_TRUE(d->g.validate().is_good());
    std::string text;
    ASSERT_TRUE(d->g.serialize(text).is_good());
    for (const char* needle :
         {p.kda ? "\"KDA_BACKWARD\"" : "\"GDN\"", "\"use_qk_l2norm_in_kernel\"", "\"CU_SEQLENS\"", "\"INITIAL_STATE\""})
      EXPECT_NE(text.find(needle), std::string::npos) << needle;
    std::vector<std::vector<double>> first, second, third;
    ASSERT_TRUE(run(*d, p, first).is_good());
    ASSERT_TRUE(run(*d, p, second).is_good());
    Declared replay;
    replay.inputs = d->inputs, replay.cu = d->cu, replay.indices = d->indices, replay.outputs = d->outputs;
    auto e = replay.g.deserialize(text);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    ASSERT_TRUE(run(replay, p, third).is_good());  // same uids, so the same declarations bind
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(compare(first[i], second[i]).max_abs, 0.0) << "run to run, output " << i;
      EXPECT_EQ(compare(first[i], third[i]).max_abs, 0.0) << "after the round trip, output " << i;
    }
    std::string again;
    ASSERT_TRUE(replay.g.serialize(again).is_good());
    EXPECT_EQ(again, text);
  }
}

// ---- Errors ----

struct Shapes {
  Dims q{1, 5, 2, 4}, k{1, 5, 2, 4}, v{1, 5, 4, 4}, g{1, 5, 4}, beta{1, 5, 4};
};

// Declares gdn (or kda) named "la0" on these shapes; `extra` adds optional inputs, then validates.
error_t validate_with(const Shapes& s, bool kda,
                      const std::function<void(graph::Graph&, graph::Kda_attributes&)>& extra) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT);
  graph::Kda_attributes a;
  a.set_name("la0");
  if (extra) extra(g, a);
  auto q = input(g, "q", s.q), k = input(g, "k", s.k), v = input(g, "v", s.v), gt = input(g, "g", s.g);
  auto beta = s.beta.empty() ? nullptr : input(g, "beta", s.beta);
  if (kda) {
    g.kda(q, k, v, gt, beta, a)[0]->set_output(true);
  } else {
    graph::Gdn_attributes b;
    b.set_name("la0");
    b.inputs = a.inputs;
    b.scale = a.scale;
    g.gdn(q, k, v, gt, beta, b)[0]->set_output(true);
  }
  return g.validate();
}

void expect_error(const error_t& e, error_code_t code, std::initializer_list<const char*> needles) {
  EXPECT_EQ(e.get_code(), code) << e.get_message();
  for (const char* n : needles) EXPECT_NE(e.get_message().find(n), std::string::npos) << e.get_message();
}

TEST(LinearAttentionErrors, Shapes) {
  using C = error_code_t;
  Shapes s;
  EXPECT_TRUE(validate_with(s, false, {}).is_good());
  s.k = {1, 5, 2, 8};
  expect_error(validate_with(s, false, {}), C::SHAPE_DEDUCTION_FAILED, {"'la0'", "(GDN)", "K.dim", "[1, 5, 2, 8]"});
  s = Shapes();
  s.v = {1, 5, 3, 4}, s.g = {1, 5, 3}, s.beta = {1, 5, 3};
  expect_error(validate_with(s, false, {}), C::INVALID_VALUE, {"V.dim", "[1, 5, 3, 4]", "multiple of Q's 2 heads"});
  s = Shapes();
  s.v = {1, 6, 4, 4};
  expect_error(validate_with(s, false, {}), C::SHAPE_DEDUCTION_FAILED, {"V.dim", "[1, 6, 4, 4]"});
  s = Shapes();
  s.g = {1, 5, 4, 4};
  expect_error(validate_with(s, false, {}), C::SHAPE_DEDUCTION_FAILED, {"G.dim", "[1, 5, 4, 4]", "GDN"});
  s = Shapes();
  expect_error(validate_with(s, true, {}), C::SHAPE_DEDUCTION_FAILED, {"(KDA)", "G.dim", "[1, 5, 4]", "[1, 5, 4, 4]"});
  expect_error(validate_with(Shapes{.beta = {1, 5, 2}}, false, {}), C::SHAPE_DEDUCTION_FAILED,
               {"BETA.dim", "[1, 5, 2]"});
  expect_error(validate_with(Shapes{.q = {1, 5, 8}}, false, {}), C::INVALID_VALUE, {"Q.dim", "[1, 5, 8]", "rank 4"});
  expect_error(validate_with(Shapes{.beta = {}}, false, {}), C::ATTRIBUTE_NOT_SET, {"BETA", "null"});
}

TEST(LinearAttentionErrors, OptionalInputs) {
  using C = error_code_t;
  const Shapes two_batches{.q = {2, 5, 2, 4}, .k = {2, 5, 2, 4}, .v = {2, 5, 4, 4}, .g = {2, 5, 4}, .beta = {2, 5, 4}};
  expect_error(validate_with(two_batches, false,
                             [](graph::Graph& g, auto& a) { a.set_cu_seqlens(input(g, "cu", {3}, DT::INT32)); }),
               C::INVALID_VALUE, {"'la0'", "Q.dim", "[2, 5, 2, 4]", "B must be 1"});
  expect_error(validate_with({}, false, [](graph::Graph& g, auto& a) { a.set_cu_seqlens(input(g, "cu", {3})); }),
               C::INVALID_VALUE, {"CU_SEQLENS.data_type", "FLOAT", "INT32 or INT64"});
  expect_error(
      validate_with({}, false, [](graph::Graph& g, auto& a) { a.set_state_indices(input(g, "idx", {1}, DT::INT32)); }),
      C::ATTRIBUTE_NOT_SET, {"INITIAL_STATE", "null", "pool"});
  expect_error(validate_with({}, false,
                             [](graph::Graph& g, auto& a) {
                               a.set_initial_state(input(g, "h0", {2, 4, 4, 4}));
                             }),
               C::SHAPE_DEDUCTION_FAILED, {"INITIAL_STATE.dim", "[2, 4, 4, 4]", "[1, 4, 4, 4]"});
  expect_error(validate_with({}, false,
                             [](graph::Graph& g, auto& a) {
                               a.set_initial_state(input(g, "h0", {1, 4, 4, 4}, DT::HALF));
                             }),
               C::INVALID_VALUE, {"INITIAL_STATE.data_type", "HALF"});
  expect_error(validate_with({}, false, [](graph::Graph&, auto& a) { a.set_scale(NAN); }), C::INVALID_VALUE,
               {"scale", "nan", "finite"});
  // A pool may have any number of rows; the indices must name one per sequence.
  EXPECT_TRUE(validate_with({}, false, [](graph::Graph& g, auto& a) {
                a.set_initial_state(input(g, "h0", {7, 4, 4, 4})).set_state_indices(input(g, "idx", {1}, DT::INT32));
              }).is_good());
  expect_error(
      validate_with(
          {}, false,
          [](graph::Graph& g, auto& a) {
            a.set_initial_state(input(g, "h0", {7, 4, 4, 4})).set_state_indices(input(g, "idx", {2}, DT::INT32));
          }),
      C::SHAPE_DEDUCTION_FAILED, {"STATE_INDICES.dim", "[2]"});
}

TEST(LinearAttentionErrors, BackwardAndOutputs) {
  using C = error_code_t;
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT);
  auto q = input(g, "q", {1, 5, 2, 4}), v = input(g, "v", {1, 5, 2, 4}), gt = input(g, "g", {1, 5, 2});
  auto beta = input(g, "beta", {1, 5, 2}), d_o = input(g, "do", {1, 5, 2, 3});
  auto r = g.gdn_backward(q, q, v, gt, beta, d_o, graph::Gdn_backward_attributes().set_name("la0"));
  for (auto& t : r)
    if (t) t->set_output(true);
  expect_error(g.validate(), C::SHAPE_DEDUCTION_FAILED, {"'la0'", "GDN_BACKWARD", "DO.dim", "[1, 5, 2, 3]"});

  graph::Graph f;
  f.set_io_data_type(DT::FLOAT);
  auto q2 = input(f, "q", {1, 5, 2, 4}), v2 = input(f, "v", {1, 5, 2, 4}), g2 = input(f, "g", {1, 5, 2});
  auto o = f.gdn(q2, q2, v2, g2, input(f, "beta", {1, 5, 2}), graph::Gdn_attributes().set_name("la0"))[0];
  o->set_output(true).set_dim({1, 5, 2, 8});
  expect_error(f.validate(), C::SHAPE_DEDUCTION_FAILED, {"O.dim", "[1, 5, 2, 8]", "[1, 5, 2, 4]"});
}

// Bad offsets or state rows are found before any output is written.
TEST(LinearAttentionErrors, RuntimeValuesLeaveOutputsUntouched) {
  Problem base = make("runtime", false, 1, 17, 1, 2, 4, 4);
  base.cu = {0, 5, 17}, base.has_init = base.final_state = true;
  base.indices = {1, 0}, base.pool = 3;
  const std::vector<std::pair<std::function<void(Problem&)>, std::vector<const char*>>> cases = {
      {[](Problem& p) {
         p.cu = {0, 5, 16};
       },
       {"CU_SEQLENS", "[0, ..., 16]", "T = 17"}},
      {[](Problem& p) {
         p.cu = {0, 9, 5, 17}, p.indices = {0, 1, 2};
       },
       {"CU_SEQLENS", "5 at 2", "decrease"}},
      {[](Problem& p) {
         p.indices = {1, 1};
       },
       {"STATE_INDICES", "1 at 1", "distinct"}},
      {[](Problem& p) {
         p.indices = {3, 0};
       },
       {"STATE_INDICES", "3 at 0", "[0, 3)"}},
  };
  for (const auto& [edit, needles] : cases) {
    Problem p = with_data(base, 5);
    edit(p);
    auto d = declare(p, DT::FLOAT, false, false);
    ASSERT_TRUE(d->g.validate().is_good());
    std::vector<std::vector<double>> got;
    const error_t e = run(*d, p, got);
    EXPECT_TRUE(e.is_bad());
    for (const char* n : needles) EXPECT_NE(e.get_message().find(n), std::string::npos) << e.get_message();
    for (const auto& out : got)
      for (double x : out) EXPECT_TRUE(std::isnan(x));
  }
}

}  // namespace
}  // namespace frost::test
