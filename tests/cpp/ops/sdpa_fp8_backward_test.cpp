// sdpa_fp8_backward on the CPU reference: against the naive FP64 formula with the FP8 recipe's quantization
// points, the formula without them against central differences of the forward, and the op itself against
// central differences within the error the quantization of P and dS accounts for.
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>

#include "graph/shape_util.h"
#include "ops/fp8_attention_naive.h"
#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using graph::SDPA_fp8_backward_attributes;
constexpr double kInf = std::numeric_limits<double>::infinity();

double f32(double x) { return static_cast<float>(x); }

struct Case {
  std::string label;
  SdpaProblem p = base_problem();
  DT qkv = DT::FP8_E4M3, d_o = DT::FP8_E4M3, o = DT::FP8_E4M3, grads = DT::FLOAT;
  bool fp64 = false, bshd = false, scale_as_tensor = false;
  // Per-tensor scales as a recipe sets them: P (<= 1) and dS (a few units) land in E4M3's range. P = 1 (a
  // row with one visible key) maps to 224, an FP8 value: a scale putting it on a rounding midpoint (200
  // lies halfway between 192 and 208) would let FP32 noise in Stats pick either neighbour.
  double descale_q = 0.5, descale_k = 0.25, descale_v = 1.5, descale_o = 0.125, descale_do = 0.75;
  double scale_s = 224, scale_dp = 16, scale_dq = 1, scale_dk = 1, scale_dv = 1;

  static SdpaProblem base_problem() {
    SdpaProblem p;
    p.b = 2, p.h_q = 2, p.h_k = 2, p.h_v = 2, p.s_q = 17, p.s_kv = 23, p.d_qk = 16, p.d_v = 8;
    p.attn_scale = 0.3;
    return p;
  }
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

std::vector<int64_t> layout(const Case& c, const std::vector<int64_t>& d) {
  if (c.bshd) return {d[2] * d[1] * d[3], d[3], d[1] * d[3], 1};
  return detail::packed_strides(d);
}

// The graph and its buffers; inputs keep the declaration order of the builder.
struct Setup {
  graph::Graph g;
  std::vector<std::unique_ptr<HostTensor>> in, out;  // out: dQ, dK, dV, amax_dQ, amax_dK, amax_dV, amax_dP
  HostTensor& add(const TensorPtr& t) { return *in.emplace_back(std::make_unique<HostTensor>(t)); }
  HostTensor& named(const std::string& name) {
    for (auto& h : in)
      if (h->t->get_name() == name) return *h;
    throw std::runtime_error("no input " + name);
  }
  std::vector<HostTensor*> buffers() {
    std::vector<HostTensor*> all;
    for (auto& h : in) all.push_back(h.get());
    for (auto& h : out) all.push_back(h.get());
    return all;
  }
};

std::vector<double> scaled(std::vector<double> x, double s) {
  for (double& e : x) e *= s;
  return x;
}

std::unique_ptr<Setup> make_setup(const Case& c, uint64_t seed) {
  auto s = std::make_unique<Setup>();
  const SdpaProblem& p = c.p;
  graph::Graph& g = s->g;
  g.set_compute_data_type(c.fp64 ? DT::DOUBLE : DT::FLOAT);
  std::mt19937_64 rng(seed);
  auto operand = [&](const char* name, std::vector<int64_t> d, DT dt, bool random) -> HostTensor& {
    HostTensor& h = s->add(input(g, name, d, dt, layout(c, d)));
    if (random) h.fill_random(rng, -3.0, 3.0);
    return h;
  };
  auto scalar = [&](const char* name, double v) {
    HostTensor& h = s->add(input(g, name, {1, 1, 1, 1}, DT::FLOAT, {1, 1, 1, 1}));
    h.set(0, v);
    return h.t;
  };
  HostTensor& q = operand("q", {p.b, p.h_q, p.s_q, p.d_qk}, c.qkv, true);
  HostTensor& k = operand("k", {p.b, p.h_k, p.s_kv, p.d_qk}, c.qkv, true);
  HostTensor& v = operand("v", {p.b, p.h_v, p.s_kv, p.d_v}, c.qkv, true);
  HostTensor& o = operand("o", {p.b, p.h_q, p.s_q, p.d_v}, c.o, false);
  HostTensor& d_o = operand("do", {p.b, p.h_q, p.s_q, p.d_v}, c.d_o, true);
  HostTensor& stats = s->add(input(g, "stats", {p.b, p.h_q, p.s_q, 1}, DT::FLOAT, {p.h_q * p.s_q, p.s_q, 1, 1}));
  // O and Stats as the forward leaves them: the dense attention of the real operands, O stored as codes
  // (lengths clamped to the extents: a case may pass the op an out-of-range one on purpose).
  SdpaProblem valid = p;
  for (int64_t& l : valid.seq_len_q) l = std::min(l, p.s_q);
  for (int64_t& l : valid.seq_len_kv) l = std::min(l, p.s_kv);
  const SdpaNaiveResult fwd = sdpa_naive(valid, scaled(q.values(), f32(c.descale_q)),
                                         scaled(k.values(), f32(c.descale_k)), scaled(v.values(), f32(c.descale_v)));
  for (int64_t n = 0; n < o.volume(); ++n) o.set(n, fwd.o[static_cast<size_t>(n)] / c.descale_o);
  for (int64_t n = 0; n < stats.volume(); ++n) stats.set(n, fwd.stats[static_cast<size_t>(n)]);

  SDPA_fp8_backward_attributes a;
  a.set_name("attn8_bwd")
      .set_diagonal_alignment(p.bottom_right ? DiagonalAlignment_t::BOTTOM_RIGHT : DiagonalAlignment_t::TOP_LEFT);
  if (p.left_bound) a.set_diagonal_band_left_bound(*p.left_bound);
  if (p.right_bound) a.set_diagonal_band_right_bound(*p.right_bound);
  if (c.scale_as_tensor)
    a.set_attn_scale(scalar("attn_scale", p.attn_scale));
  else
    a.set_attn_scale(static_cast<float>(p.attn_scale));
  if (!p.seq_len_q.empty()) {
    HostTensor& lq = s->add(input(g, "seq_q", {p.b, 1, 1, 1}, DT::INT32, {1, 1, 1, 1}));
    HostTensor& lkv = s->add(input(g, "seq_kv", {p.b, 1, 1, 1}, DT::INT32, {1, 1, 1, 1}));
    for (int64_t b = 0; b < p.b; ++b) {
      lq.set(b, static_cast<double>(p.seq_len_q[static_cast<size_t>(b)]));
      lkv.set(b, static_cast<double>(p.seq_len_kv[static_cast<size_t>(b)]));
    }
    a.set_padding_mask(true).set_seq_len_q(lq.t).set_seq_len_kv(lkv.t);
  }
  auto outs = g.sdpa_fp8_backward(
      q.t, k.t, v.t, o.t, d_o.t, stats.t, scalar("descale_q", c.descale_q), scalar("descale_k", c.descale_k),
      scalar("descale_v", c.descale_v), scalar("descale_o", c.descale_o), scalar("descale_do", c.descale_do),
      scalar("descale_s", 1.0 / c.scale_s), scalar("descale_dp", 1.0 / c.scale_dp), scalar("scale_s", c.scale_s),
      scalar("scale_dq", c.scale_dq), scalar("scale_dk", c.scale_dk), scalar("scale_dv", c.scale_dv),
      scalar("scale_dp", c.scale_dp), a);
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i]->set_output(true);
    if (i < 3) outs[i]->set_data_type(c.grads);
  }
  const error_t e = g.validate();
  EXPECT_TRUE(e.is_good()) << e.get_message();
  if (e.is_bad()) return nullptr;
  for (const auto& t : outs) {
    s->out.push_back(std::make_unique<HostTensor>(t));
    s->out.back()->poison();
  }
  return s;
}

// The op's definition on the stored operands: real values are code * descale, P and dS quantized as the
// recipe says (or not, with quantize = false). amax_dp is filled when quantizing.
struct Expected {
  Fp8Gradients g;
  double amax_dp = 0;
};

Expected expected(const Case& c, Setup& s, bool quantize = true) {
  Fp8BackwardInputs x;
  x.q = scaled(s.named("q").values(), f32(c.descale_q));
  x.k = scaled(s.named("k").values(), f32(c.descale_k));
  x.v = scaled(s.named("v").values(), f32(c.descale_v));
  x.o = scaled(s.named("o").values(), f32(c.descale_o));
  x.d_o = scaled(s.named("do").values(), f32(c.descale_do));
  x.stats = s.named("stats").values();
  SdpaProblem p = c.p;
  p.attn_scale = f32(p.attn_scale);
  Expected r;
  const double scale_s = f32(c.scale_s), descale_s = f32(1.0 / c.scale_s);
  const double scale_dp = f32(c.scale_dp), descale_dp = f32(1.0 / c.scale_dp);
  auto quantize_p = [&](std::vector<double>& m, int64_t, int64_t) {
    if (quantize)
      for (double& e : m) e = detail::round_to_saturated(c.qkv, e * scale_s) * descale_s;
  };
  auto quantize_ds = [&](std::vector<double>& m, int64_t, int64_t) {
    for (double& e : m) {
      r.amax_dp = std::max(r.amax_dp, std::fabs(e));
      if (quantize) e = detail::round_to_saturated(c.d_o, e * scale_dp) * descale_dp;
    }
  };
  r.g = fp8_attention_backward_naive(p, x, quantize_p, quantize_ds, quantize_ds);
  return r;
}

double stored(DT t, double x) {
  return t == DT::FP8_E4M3 || t == DT::FP8_E5M2 ? detail::round_to_saturated(t, x) : detail::round_to(t, x);
}

// got holds the stored gradient; want the unscaled one. fp64: the stored value of want * scale up to FP64
// noise; FP32: within the FP32 noise of the accumulation and of P's and dS's rounding to FP8, which may flip
// one FP8 step where a value lands within FP32 rounding of a midpoint (a few such steps per element).
void expect_gradient(const HostTensor& got, const std::vector<double>& want, double scale, DT type, bool fp64,
                     const char* what) {
  SCOPED_TRACE(what);
  const std::vector<double> g = got.values();
  ASSERT_EQ(g.size(), want.size());
  double peak = 0;
  for (double w : want) peak = std::max(peak, std::fabs(w * scale));
  const double noise = fp64 ? 1e-9 * peak + 1e-12 : 0.02 * peak + 1e-6;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_FALSE(std::isnan(g[i])) << "element " << i << " not written";
    const double e = stored(type, want[i] * scale);
    const double step = type == DT::FLOAT ? 1e-6 * std::fabs(e) : std::fabs(e) / 8 + 1e-3;
    ASSERT_LE(std::fabs(g[i] - e), noise + (fp64 ? (type == DT::FLOAT ? 1e-6 * std::fabs(e) : 1e-12) : step))
        << "element " << i << " want " << want[i] * scale;
  }
}

double amax(const std::vector<double>& x) {
  double m = 0;
  for (double e : x) m = std::max(m, std::fabs(e));
  return m;
}

class SdpaFp8BackwardCases : public ::testing::TestWithParam<Case> {};

TEST_P(SdpaFp8BackwardCases, MatchesNaiveWithQuantizedPAndDs) {
  const Case& c = GetParam();
  auto s = make_setup(c, 2024);
  ASSERT_TRUE(s);
  const error_t e = build_and_run(s->g, s->buffers());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Expected want = expected(c, *s);
  expect_gradient(*s->out[0], want.g.dq, f32(c.scale_dq), c.grads, c.fp64, "dQ");
  expect_gradient(*s->out[1], want.g.dk, f32(c.scale_dk), c.grads, c.fp64, "dK");
  expect_gradient(*s->out[2], want.g.dv, f32(c.scale_dv), c.grads, c.fp64, "dV");
  EXPECT_GT(amax(want.g.dv), 0.0);
  const double amax_tol = c.fp64 ? 1e-6 : 0.02;  // amaxes are FLOAT; FP32 carries P and dS's rounding flips
  EXPECT_NEAR(s->out[3]->get(0), amax(want.g.dq), amax_tol * amax(want.g.dq) + 1e-9);
  EXPECT_NEAR(s->out[4]->get(0), amax(want.g.dk), amax_tol * amax(want.g.dk) + 1e-9);
  EXPECT_NEAR(s->out[5]->get(0), amax(want.g.dv), amax_tol * amax(want.g.dv) + 1e-9);
  EXPECT_NEAR(s->out[6]->get(0), want.amax_dp, (c.fp64 ? 1e-6 : 1e-4) * want.amax_dp + 1e-9);
}

std::vector<Case> all_cases() {
  Fp64Twins<Case> cs;
  auto add = [&](std::string label, std::function<void(Case&)> tweak) { cs.add(std::move(label), tweak); };
  add("e4m3_plain", [](Case&) {});
  add("e5m2_bshd_e4m3_grads_scaled", [](Case& c) {
    c.qkv = c.d_o = c.o = DT::FP8_E5M2, c.bshd = true, c.grads = DT::FP8_E4M3;
    c.scale_dq = 64, c.scale_dk = 64, c.scale_dv = 4;
  });
  // The usual training recipe: E4M3 activations, E5M2 gradients (P in Q's type, dS in dO's).
  add("e4m3_activations_e5m2_gradients", [](Case& c) { c.d_o = DT::FP8_E5M2, c.grads = DT::FP8_E5M2; });
  add("causal_gqa_mqa", [](Case& c) { c.p.h_q = 4, c.p.h_k = 2, c.p.h_v = 1, c.p.right_bound = 0; });
  add("bottom_right_window_s_q_5",
      [](Case& c) { c.p.s_q = 5, c.p.s_kv = 17, c.p.left_bound = 4, c.p.right_bound = 0, c.p.bottom_right = true; });
  add("padding_empty_batch", [](Case& c) { c.p.seq_len_q = {9, 17}, c.p.seq_len_kv = {0, 20}; });
  add("s_q_1", [](Case& c) { c.p.s_q = 1, c.p.s_kv = 17; });
  add("o_bf16_bf16_grads_scale_tensor",
      [](Case& c) { c.o = DT::BFLOAT16, c.descale_o = 1, c.grads = DT::BFLOAT16, c.scale_as_tensor = true; });
  add("ones", [](Case& c) { c.p.b = c.p.h_q = c.p.h_k = c.p.h_v = c.p.s_q = c.p.s_kv = c.p.d_qk = c.p.d_v = 1; });
  return cs.cases;
}

INSTANTIATE_TEST_SUITE_P(Sweep, SdpaFp8BackwardCases, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.label; });

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  return std::sqrt(num / den);
}

// A case whose forward O is exact (FLOAT, descale 1), so the only lossy steps left are the recipe's.
Case fd_case() {
  Case c;
  c.fp64 = true, c.o = DT::FLOAT, c.descale_o = 1;
  c.p.b = 1, c.p.h_q = 2, c.p.h_k = 1, c.p.h_v = 1, c.p.s_q = 5, c.p.s_kv = 17, c.p.d_qk = 8, c.p.d_v = 8;
  c.p.right_bound = 2;
  return c;
}

TEST(SdpaFp8Backward, UnquantizedFormulaMatchesFiniteDifferences) {
  const Case c = fd_case();
  auto s = make_setup(c, 7);
  ASSERT_TRUE(s);
  SdpaProblem p = c.p;
  p.attn_scale = f32(p.attn_scale);
  const Expected exact = expected(c, *s, false);
  const Fp8Gradients fd = central_differences(
      p, scaled(s->named("q").values(), f32(c.descale_q)), scaled(s->named("k").values(), f32(c.descale_k)),
      scaled(s->named("v").values(), f32(c.descale_v)), scaled(s->named("do").values(), f32(c.descale_do)));
  EXPECT_LT(rel_l2(exact.g.dq, fd.dq), 1e-7);
  EXPECT_LT(rel_l2(exact.g.dk, fd.dk), 1e-7);
  EXPECT_LT(rel_l2(exact.g.dv, fd.dv), 1e-7);
}

TEST(SdpaFp8Backward, GradientsTrackFiniteDifferencesWithinTheQuantization) {
  const Case c = fd_case();
  auto s = make_setup(c, 7);
  ASSERT_TRUE(s);
  SdpaProblem p = c.p;
  p.attn_scale = f32(p.attn_scale);
  const Fp8Gradients fd = central_differences(
      p, scaled(s->named("q").values(), f32(c.descale_q)), scaled(s->named("k").values(), f32(c.descale_k)),
      scaled(s->named("v").values(), f32(c.descale_v)), scaled(s->named("do").values(), f32(c.descale_do)));
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  // E4M3 keeps 3 mantissa bits: each quantized P and dS is off by up to 1/16 of itself, so the gradients
  // differ from the exact ones by a few percent; wrong scale bookkeeping would be off by far more.
  const double dq = rel_l2(s->out[0]->values(), fd.dq), dk = rel_l2(s->out[1]->values(), fd.dk);
  const double dv = rel_l2(s->out[2]->values(), fd.dv);
  EXPECT_LT(dq, 0.1);
  EXPECT_LT(dk, 0.1);
  EXPECT_LT(dv, 0.1);
  // The same check fails on a wrong input: a doubled dO descale in the graph.
  s->named("descale_do").set(0, 2 * c.descale_do);
  for (auto& h : s->out) h->poison();
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  EXPECT_GT(rel_l2(s->out[2]->values(), fd.dv), 0.5);
  EXPECT_GT(rel_l2(s->out[0]->values(), fd.dq), 0.3);
}

TEST(SdpaFp8Backward, PaddingRowsAndKeysGetZeroGradients) {
  Case c;
  c.p.seq_len_q = {3, 17}, c.p.seq_len_kv = {0, 11};
  auto s = make_setup(c, 8);
  ASSERT_TRUE(s);
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  const SdpaProblem& p = c.p;
  // Batch 0 sees no key: every gradient of it is zero. Batch 1: keys past 11 get nothing.
  for (int64_t n = 0; n < p.h_q * p.s_q * p.d_qk; ++n) EXPECT_EQ(s->out[0]->get(n), 0.0);
  for (int64_t h = 0; h < p.h_k; ++h)
    for (int64_t j = 11; j < p.s_kv; ++j)
      for (int64_t d = 0; d < p.d_qk; ++d) EXPECT_EQ(s->out[1]->get(((p.h_k + h) * p.s_kv + j) * p.d_qk + d), 0.0);
  EXPECT_GT(s->out[3]->get(0), 0.0);
}

TEST(SdpaFp8Backward, SequenceLengthOutOfRangeFailsAndLeavesOutputsUntouched) {
  Case c;
  c.p.seq_len_q = {17, 18}, c.p.seq_len_kv = {5, 5};
  auto s = make_setup(c, 2);
  ASSERT_TRUE(s);
  std::vector<std::vector<uint8_t>> before;
  for (auto& h : s->out) before.push_back(h->bytes);
  const error_t e = build_and_run(s->g, s->buffers());
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("SEQ_LEN_Q"), std::string::npos) << e.get_message();
  for (size_t i = 0; i < s->out.size(); ++i) EXPECT_EQ(s->out[i]->bytes, before[i]);
}

TEST(SdpaFp8Backward, JsonRoundTripIsBitwiseIdentical) {
  Case c;
  c.grads = DT::FP8_E4M3, c.scale_dq = 64, c.p.h_k = 1, c.p.left_bound = 9, c.p.right_bound = 1;
  c.p.bottom_right = true, c.p.seq_len_q = {11, 17}, c.p.seq_len_kv = {23, 15}, c.scale_as_tensor = true;
  auto s = make_setup(c, 77);
  ASSERT_TRUE(s);
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  std::vector<std::vector<uint8_t>> first;
  for (auto& h : s->out) first.push_back(h->bytes);
  std::string text;
  ASSERT_TRUE(s->g.serialize(text).is_good());
  EXPECT_NE(text.find("\"SDPA_FP8_BACKWARD\""), std::string::npos);
  graph::Graph replay;
  const error_t e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (auto& h : s->out) h->poison();
  ASSERT_TRUE(build_and_run(replay, s->buffers()).is_good());
  for (size_t i = 0; i < s->out.size(); ++i) EXPECT_EQ(s->out[i]->bytes, first[i]) << "output " << i;
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

TEST(SdpaFp8Backward, ErrorsNameNodeAttributeAndValue) {
  using E = error_code_t;
  struct Decl {
    std::vector<int64_t> q{1, 2, 5, 8}, k{1, 2, 7, 8}, v{1, 2, 7, 4}, o{1, 2, 5, 4}, stats{1, 2, 5, 1};
    std::vector<int64_t> scale_dk{1, 1, 1, 1};
    DT q_type = DT::FP8_E4M3, do_type = DT::FP8_E4M3, o_type = DT::FP8_E4M3, dq_type = DT::FP8_E4M3;
    bool null_descale_dp = false, padding_without_lengths = false;
    std::optional<int64_t> right;
  };
  struct ErrorCase {
    const char* what;
    std::function<void(Decl&)> tweak;
    E code;
    std::vector<std::string> mentions;
  };
  const std::vector<ErrorCase> cases = {
      {"q type", [](Decl& d) { d.q_type = DT::HALF; }, E::INVALID_VALUE, {"Q.data_type", "HALF"}},
      {"do type", [](Decl& d) { d.do_type = DT::BFLOAT16; }, E::INVALID_VALUE, {"DO.data_type", "BFLOAT16"}},
      {"o type", [](Decl& d) { d.o_type = DT::INT8; }, E::INVALID_VALUE, {"O.data_type", "INT8"}},
      {"o dims",
       [](Decl& d) {
         d.o = {1, 2, 5, 8};
       },
       E::INVALID_VALUE,
       {"O.dim", "[1, 2, 5, 8]"}},
      {"heads",
       [](Decl& d) {
         d.k = {1, 3, 7, 8};
       },
       E::INVALID_VALUE,
       {"K.dim", "[1, 3, 7, 8]"}},
      {"stats",
       [](Decl& d) {
         d.stats = {1, 2, 5};
       },
       E::INVALID_VALUE,
       {"STATS.dim", "[1, 2, 5]"}},
      {"null descale", [](Decl& d) { d.null_descale_dp = true; }, E::ATTRIBUTE_NOT_SET, {"DESCALE_DP"}},
      {"scale dims",
       [](Decl& d) {
         d.scale_dk = {1, 2};
       },
       E::INVALID_VALUE,
       {"SCALE_DK", "[1, 2]"}},
      {"padding", [](Decl& d) { d.padding_without_lengths = true; }, E::ATTRIBUTE_NOT_SET, {"SEQ_LEN_Q"}},
      {"band", [](Decl& d) { d.right = -1; }, E::INVALID_VALUE, {"diagonal_band_right_bound", "-1"}},
      {"dq type", [](Decl& d) { d.dq_type = DT::INT32; }, E::INVALID_VALUE, {"DQ.data_type", "INT32"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Decl d;
    c.tweak(d);
    graph::Graph g;
    auto one = [&](const char* name, std::vector<int64_t> dims = {1, 1, 1, 1}) { return input(g, name, dims); };
    SDPA_fp8_backward_attributes a;
    a.set_name("attn8_bwd").set_attn_scale(0.5f).set_padding_mask(d.padding_without_lengths);
    if (d.right) a.set_diagonal_band_right_bound(*d.right);
    auto outs = g.sdpa_fp8_backward(
        input(g, "q", d.q, d.q_type), input(g, "k", d.k, DT::FP8_E4M3), input(g, "v", d.v, DT::FP8_E4M3),
        input(g, "o", d.o, d.o_type), input(g, "do", {1, 2, 5, 4}, d.do_type), input(g, "stats", d.stats), one("dq"),
        one("dk"), one("dv"), one("do_"), one("ddo"), one("ds"), d.null_descale_dp ? nullptr : one("ddp"), one("ss"),
        one("sdq"), one("sdk", d.scale_dk), one("sdv"), one("sdp"), a);
    outs[0]->set_output(true).set_data_type(d.dq_type);
    const error_t e = g.validate();
    EXPECT_EQ(e.get_code(), c.code) << e.get_message();
    EXPECT_NE(e.get_message().find("attn8_bwd"), std::string::npos) << e.get_message();
    for (const auto& m : c.mentions)
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  }
}

}  // namespace
}  // namespace frost::test
