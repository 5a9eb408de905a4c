// sdpa_mxfp8_backward on the CPU reference: against a naive FP64 formula of frost/ops/sdpa_mxfp8.h with the
// MXFP8 recipe's quantization points, the formula without them against central differences of the dense
// forward, and the op against central differences within the error the quantization accounts for.
#include "ops/sdpa_mxfp8_harness.h"

namespace frost::test {
namespace {

using namespace mxfp8;

struct Backward {
  std::unique_ptr<Setup> s;
  Fp8BackwardInputs x;  // real values as the op must see them
};

Backward make_backward(const Case& c, uint64_t seed, bool consistent = false) {
  Backward bw;
  bw.s = std::make_unique<Setup>();
  Setup& s = *bw.s;
  const SdpaProblem& p = c.p;
  s.g.set_compute_data_type(c.fp64 ? DT::DOUBLE : DT::FLOAT);
  std::mt19937_64 rng(seed);
  const std::vector<int64_t> qd{p.b, p.h_q, p.s_q, p.d_qk}, kd{p.b, p.h_k, p.s_kv, p.d_qk};
  const std::vector<int64_t> vd{p.b, p.h_v, p.s_kv, p.d_v}, od{p.b, p.h_q, p.s_q, p.d_v};
  // consistent: the transposed copies hold the same values (uniform scales), as a quantizer of one tensor
  // along both axes would make them up to rounding.
  Operand q = block_scaled(s, c, rng, "q", qd, false);
  Operand q_t = block_scaled(s, c, rng, "q_t", qd, true, consistent ? &q : nullptr);
  Operand k = block_scaled(s, c, rng, "k", kd, false);
  Operand k_t = block_scaled(s, c, rng, "k_t", kd, true, consistent ? &k : nullptr);
  Operand v = block_scaled(s, c, rng, "v", vd, true);
  Operand d_o = block_scaled(s, c, rng, "do", od, false);
  Operand d_o_t = block_scaled(s, c, rng, "do_t", od, true, consistent ? &d_o : nullptr);
  HostTensor& o = s.add(packed(s.g, "o_f16", od, c.wide));
  HostTensor& d_o_wide = s.add(packed(s.g, "do_f16", od, c.wide));
  HostTensor& stats = s.add(packed(s.g, "stats", {p.b, p.h_q, p.s_q, 1}, DT::FLOAT));
  const SdpaNaiveResult fwd = sdpa_naive(f32_scale(p), q.real, k.real, v.real);
  for (int64_t n = 0; n < o.volume(); ++n) {
    o.set(n, fwd.o[static_cast<size_t>(n)]);
    d_o_wide.set(n, d_o.real[static_cast<size_t>(n)]);
  }
  for (int64_t n = 0; n < stats.volume(); ++n) stats.set(n, fwd.stats[static_cast<size_t>(n)]);
  SDPA_fp8_backward_attributes a;
  a.set_name("attn_mx_bwd");
  set_mask(c, s, a);
  auto outs = s.g.sdpa_mxfp8_backward(q.codes->t, q_t.codes->t, k.codes->t, k_t.codes->t, v.codes->t, o.t, d_o_wide.t,
                                      d_o.codes->t, d_o_t.codes->t, stats.t, q.scales->t, q_t.scales->t, k.scales->t,
                                      k_t.scales->t, v.scales->t, d_o.scales->t, d_o_t.scales->t, a);
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i]->set_output(true);
    if (i < 3) outs[i]->set_data_type(c.out);
  }
  const error_t e = s.g.validate();
  EXPECT_TRUE(e.is_good()) << e.get_message();
  if (e.is_bad()) return {};
  s.mark_outputs({outs.begin(), outs.end()});
  bw.x.q = q.real, bw.x.k = k.real, bw.x.v = v.real, bw.x.d_o = d_o.real;
  bw.x.q_for_dk = q_t.real, bw.x.k_for_dq = k_t.real, bw.x.d_o_for_dv = d_o_t.real;
  bw.x.o = o.values(), bw.x.d_o_for_delta = d_o_wide.values(), bw.x.stats = stats.values();
  return bw;
}

Fp8Gradients naive_backward(const Case& c, const Backward& bw, bool quantize = true) {
  auto p_quant = [&](std::vector<double>& m, int64_t, int64_t) {
    if (quantize)
      for (double& e : m) e = detail::round_to_saturated(c.qkv, 256 * e) / 256;
  };
  auto rows = [&](std::vector<double>& m, int64_t s_q, int64_t s_kv) {
    if (quantize)
      for (int64_t i = 0; i < s_q; ++i) mx_round_trip_naive(&m[static_cast<size_t>(i * s_kv)], s_kv, 1, c.d_o);
  };
  auto cols = [&](std::vector<double>& m, int64_t s_q, int64_t s_kv) {
    if (quantize)
      for (int64_t j = 0; j < s_kv; ++j) mx_round_trip_naive(&m[static_cast<size_t>(j)], s_q, s_kv, c.d_o);
  };
  return fp8_attention_backward_naive(f32_scale(c.p), bw.x, p_quant, rows, cols);
}

class SdpaMxfp8BackwardCases : public ::testing::TestWithParam<Case> {};

TEST_P(SdpaMxfp8BackwardCases, MatchesNaive) {
  const Case& c = GetParam();
  Backward bw = make_backward(c, 404);
  ASSERT_TRUE(bw.s);
  const error_t e = build_and_run(bw.s->g, bw.s->buffers());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Fp8Gradients want = naive_backward(c, bw);
  expect_stored_close(*bw.s->out[0], want.dq, c.out, c.fp64, 0.03, "dQ");
  expect_stored_close(*bw.s->out[1], want.dk, c.out, c.fp64, 0.03, "dK");
  expect_stored_close(*bw.s->out[2], want.dv, c.out, c.fp64, 0.03, "dV");
  const double tol = c.fp64 ? 1e-6 : 0.03;
  EXPECT_NEAR(bw.s->out[3]->get(0), amax(want.dq), tol * amax(want.dq) + 1e-9);
  EXPECT_NEAR(bw.s->out[4]->get(0), amax(want.dk), tol * amax(want.dk) + 1e-9);
  EXPECT_NEAR(bw.s->out[5]->get(0), amax(want.dv), tol * amax(want.dv) + 1e-9);
  EXPECT_GT(amax(want.dq), 0.0);
}

std::vector<Case> backward_cases() {
  Fp64Twins<Case> cs;
  auto add = [&](std::string label, std::function<void(Case&)> tweak) { cs.add(std::move(label), tweak); };
  add("e4m3_partial_blocks", [](Case&) {});
  add("e5m2_causal_gqa_half", [](Case& c) {
    c.qkv = c.d_o = DT::FP8_E5M2, c.wide = DT::HALF, c.out = DT::HALF, c.p.h_q = 4, c.p.h_k = 2, c.p.h_v = 1;
    c.p.right_bound = 0;
  });
  add("e4m3_e5m2_gradients", [](Case& c) { c.d_o = DT::FP8_E5M2; });
  add("padding_padded_scales_float", [](Case& c) {
    c.wide = DT::FLOAT, c.out = DT::FLOAT, c.scale_padding = 2, c.p.seq_len_q = {17, 6}, c.p.seq_len_kv = {35, 0};
  });
  add("s_q_1_window", [](Case& c) { c.p.s_q = 1, c.p.left_bound = 20, c.p.right_bound = 0, c.p.bottom_right = true; });
  return cs.cases;
}

INSTANTIATE_TEST_SUITE_P(Sweep, SdpaMxfp8BackwardCases, ::testing::ValuesIn(backward_cases()),
                         [](const auto& info) { return info.param.label; });

Case fd_case() {
  Case c;
  c.fp64 = true, c.uniform_scales = true, c.wide = DT::FLOAT, c.out = DT::FLOAT;
  c.p.b = 1, c.p.h_q = 2, c.p.h_k = 1, c.p.h_v = 1, c.p.s_q = 9, c.p.s_kv = 17, c.p.d_qk = 8, c.p.d_v = 8;
  c.p.right_bound = 3;
  return c;
}

TEST(SdpaMxfp8Backward, UnquantizedFormulaMatchesFiniteDifferences) {
  const Case c = fd_case();
  Backward bw = make_backward(c, 3, true);
  ASSERT_TRUE(bw.s);
  const Fp8Gradients exact = naive_backward(c, bw, false);
  const Fp8Gradients fd = central_differences(f32_scale(c.p), bw.x.q, bw.x.k, bw.x.v, bw.x.d_o);
  EXPECT_LT(rel_l2(exact.dq, fd.dq), 1e-7);
  EXPECT_LT(rel_l2(exact.dk, fd.dk), 1e-7);
  EXPECT_LT(rel_l2(exact.dv, fd.dv), 1e-7);
}

TEST(SdpaMxfp8Backward, GradientsTrackFiniteDifferencesWithinTheQuantization) {
  const Case c = fd_case();
  Backward bw = make_backward(c, 3, true);
  ASSERT_TRUE(bw.s);
  const Fp8Gradients fd = central_differences(f32_scale(c.p), bw.x.q, bw.x.k, bw.x.v, bw.x.d_o);
  ASSERT_TRUE(build_and_run(bw.s->g, bw.s->buffers()).is_good());
  // Only P (at 256 in E4M3) and dS (MXFP8 blocks) are rounded: a few percent at most.
  EXPECT_LT(rel_l2(bw.s->out[0]->values(), fd.dq), 0.1);
  EXPECT_LT(rel_l2(bw.s->out[1]->values(), fd.dk), 0.1);
  EXPECT_LT(rel_l2(bw.s->out[2]->values(), fd.dv), 0.1);
  // The check fails on a wrong input: dO_T's scales doubled move dV by 100%.
  HostTensor& sf = *bw.s->in[13];
  ASSERT_EQ(sf.t->get_name(), "sf_do_t");
  for (int64_t n = 0; n < sf.volume(); ++n) sf.set(n, 2 * sf.get(n));
  ASSERT_TRUE(build_and_run(bw.s->g, bw.s->buffers()).is_good());
  EXPECT_GT(rel_l2(bw.s->out[2]->values(), fd.dv), 0.5);
}

TEST(SdpaMxfp8Backward, JsonRoundTripIsBitwiseIdentical) {
  Case c = backward_cases()[6];  // padding
  Backward bw = make_backward(c, 21);
  ASSERT_TRUE(bw.s);
  ASSERT_TRUE(build_and_run(bw.s->g, bw.s->buffers()).is_good());
  std::vector<std::vector<uint8_t>> first;
  for (auto& h : bw.s->out) first.push_back(h->bytes);
  std::string text;
  ASSERT_TRUE(bw.s->g.serialize(text).is_good());
  EXPECT_NE(text.find("\"SDPA_MXFP8_BACKWARD\""), std::string::npos);
  graph::Graph replay;
  const error_t e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (auto& h : bw.s->out) h->poison();
  ASSERT_TRUE(build_and_run(replay, bw.s->buffers()).is_good());
  for (size_t i = 0; i < bw.s->out.size(); ++i) EXPECT_EQ(bw.s->out[i]->bytes, first[i]) << "output " << i;
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

TEST(SdpaMxfp8, ErrorsNameNodeAttributeAndValue) {
  using E = error_code_t;
  struct Decl {
    std::vector<int64_t> sf_q{1, 2, 5, 2}, sf_v{1, 2, 1, 8}, q_t{1, 2, 5, 40};
    DT sf_k_type = DT::FP8_E8M0, o_type = DT::BFLOAT16;
    bool bad_reordering = false, null_sf_do_t = false;
  };
  struct ErrorCase {
    const char* what;
    std::function<void(Decl&)> tweak;
    E code;
    std::vector<std::string> mentions;
  };
  const std::vector<ErrorCase> cases = {
      {"scale type", [](Decl& d) { d.sf_k_type = DT::FLOAT; }, E::INVALID_VALUE, {"DESCALE_K.data_type", "FLOAT"}},
      {"scale too small",
       [](Decl& d) {
         d.sf_q = {1, 2, 5, 1};
       },
       E::INVALID_VALUE,
       {"DESCALE_Q.dim", "[1, 2, 5, 1]"}},
      {"v scale axis",
       [](Decl& d) {
         d.sf_v = {1, 2, 7, 1};
       },
       E::INVALID_VALUE,
       {"DESCALE_V.dim", "[1, 2, 7, 1]"}},
      {"q_t dims",
       [](Decl& d) {
         d.q_t = {1, 2, 6, 40};
       },
       E::INVALID_VALUE,
       {"Q_T.dim", "[1, 2, 6, 40]"}},
      {"o type", [](Decl& d) { d.o_type = DT::FP8_E4M3; }, E::INVALID_VALUE, {"O.data_type", "FP8_E4M3"}},
      {"reordering", [](Decl& d) { d.bad_reordering = true; }, E::INVALID_VALUE, {"F8_128x4", "multiple of 128"}},
      {"null", [](Decl& d) { d.null_sf_do_t = true; }, E::ATTRIBUTE_NOT_SET, {"DESCALE_DO_T"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Decl d;
    c.tweak(d);
    graph::Graph g;
    auto t = [&](const char* name, std::vector<int64_t> dims, DT dt = DT::FP8_E4M3) {
      return input(g, name, dims, dt);
    };
    graph::Tensor_attributes sq;
    sq.set_name("sf_q").set_dim(d.sf_q).set_data_type(DT::FP8_E8M0);
    if (d.bad_reordering) sq.set_reordering_type(TensorReordering_t::F8_128x4);
    const std::vector<int64_t> qd{1, 2, 5, 40}, vd{1, 2, 7, 8}, od{1, 2, 5, 8};
    g.sdpa_mxfp8_backward(t("q", qd), t("q_t", d.q_t), t("k", {1, 2, 7, 40}), t("k_t", {1, 2, 7, 40}), t("v", vd),
                          t("o", od, d.o_type), t("do16", od, DT::BFLOAT16), t("do", od), t("do_t", od),
                          t("stats", {1, 2, 5, 1}, DT::FLOAT), g.tensor(sq), t("sf_q_t", {1, 2, 1, 40}, DT::FP8_E8M0),
                          t("sf_k", {1, 2, 7, 2}, d.sf_k_type), t("sf_k_t", {1, 2, 1, 40}, DT::FP8_E8M0),
                          t("sf_v", d.sf_v, DT::FP8_E8M0), t("sf_do", {1, 2, 5, 1}, DT::FP8_E8M0),
                          d.null_sf_do_t ? nullptr : t("sf_do_t", {1, 2, 1, 8}, DT::FP8_E8M0),
                          SDPA_fp8_backward_attributes().set_name("mx_bwd"));
    const error_t e = g.validate();
    EXPECT_EQ(e.get_code(), c.code) << e.get_message();
    EXPECT_NE(e.get_message().find("mx_bwd"), std::string::npos) << e.get_message();
    for (const auto& m : c.mentions)
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  }
}

}  // namespace
}  // namespace frost::test
