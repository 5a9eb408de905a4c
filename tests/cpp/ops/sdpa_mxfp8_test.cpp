// sdpa_mxfp8 on the CPU reference: against a naive FP64 formula of frost/ops/sdpa_mxfp8.h on block-scaled
// operands (extents that are not multiples of 32), with block_scale_quantize feeding it, and with cuDNN's
// F8_128x4 scale layout.
#include "ops/sdpa_mxfp8_harness.h"

namespace frost::test {
namespace {

using namespace mxfp8;

struct Forward {
  std::unique_ptr<Setup> s;
  Operand q, k, v;
};

Forward make_forward(const Case& c, uint64_t seed) {
  Forward f;
  f.s = std::make_unique<Setup>();
  Setup& s = *f.s;
  const SdpaProblem& p = c.p;
  s.g.set_compute_data_type(c.fp64 ? DT::DOUBLE : DT::FLOAT);
  std::mt19937_64 rng(seed);
  f.q = block_scaled(s, c, rng, "q", {p.b, p.h_q, p.s_q, p.d_qk}, false);
  f.k = block_scaled(s, c, rng, "k", {p.b, p.h_k, p.s_kv, p.d_qk}, false);
  f.v = block_scaled(s, c, rng, "v", {p.b, p.h_v, p.s_kv, p.d_v}, true);
  SDPA_fp8_attributes a;
  a.set_name("attn_mx").set_generate_stats(true);
  set_mask(c, s, a);
  auto [o, stats, amax_o] =
      s.g.sdpa_mxfp8(f.q.codes->t, f.k.codes->t, f.v.codes->t, f.q.scales->t, f.k.scales->t, f.v.scales->t, a);
  o->set_output(true).set_data_type(c.out);
  stats->set_output(true);
  amax_o->set_output(true);
  const error_t e = s.g.validate();
  EXPECT_TRUE(e.is_good()) << e.get_message();
  if (e.is_bad()) return {};
  s.mark_outputs({o, stats, amax_o});
  return f;
}

struct NaiveForward {
  std::vector<double> o, stats;
};

// O = sum_j (fp8(16 e_j) / 16) V_j / l, e_j = exp(S_j - max S), from sdpa.h's masks on real values.
NaiveForward naive_forward(const SdpaProblem& p, DT p_type, const std::vector<double>& q, const std::vector<double>& k,
                           const std::vector<double>& v) {
  NaiveForward r;
  r.o.assign(static_cast<size_t>(p.b * p.h_q * p.s_q * p.d_v), 0.0);
  r.stats.assign(static_cast<size_t>(p.b * p.h_q * p.s_q), -std::numeric_limits<double>::infinity());
  const bool padding = !p.seq_len_q.empty();
  for (int64_t b = 0; b < p.b; ++b)
    for (int64_t h = 0; h < p.h_q; ++h) {
      const int64_t rows = padding ? p.seq_len_q[static_cast<size_t>(b)] : p.s_q;
      const int64_t keys = padding ? p.seq_len_kv[static_cast<size_t>(b)] : p.s_kv;
      const int64_t kh = h * p.h_k / p.h_q, vh = h * p.h_v / p.h_q;
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t row = (b * p.h_q + h) * p.s_q + i, diagonal = p.bottom_right ? i + keys - rows : i;
        std::vector<std::pair<int64_t, double>> logits;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < keys; ++j) {
          if ((p.left_bound && j <= diagonal - *p.left_bound) || (p.right_bound && j > diagonal + *p.right_bound))
            continue;
          double dot = 0;
          for (int64_t d = 0; d < p.d_qk; ++d)
            dot += q[static_cast<size_t>(row * p.d_qk + d)] *
                   k[static_cast<size_t>(((b * p.h_k + kh) * p.s_kv + j) * p.d_qk + d)];
          logits.push_back({j, p.attn_scale * dot});
          mx = std::max(mx, p.attn_scale * dot);
        }
        if (logits.empty()) continue;
        double l = 0;
        for (const auto& [j, s] : logits) l += std::exp(s - mx);
        r.stats[static_cast<size_t>(row)] = mx + std::log(l);
        for (const auto& [j, s] : logits) {
          const double w = detail::round_to_saturated(p_type, 16 * std::exp(s - mx)) / 16 / l;
          for (int64_t d = 0; d < p.d_v; ++d)
            r.o[static_cast<size_t>(row * p.d_v + d)] +=
                w * v[static_cast<size_t>(((b * p.h_v + vh) * p.s_kv + j) * p.d_v + d)];
        }
      }
    }
  return r;
}

class SdpaMxfp8ForwardCases : public ::testing::TestWithParam<Case> {};

TEST_P(SdpaMxfp8ForwardCases, MatchesNaive) {
  const Case& c = GetParam();
  Forward f = make_forward(c, 99);
  ASSERT_TRUE(f.s);
  const error_t e = build_and_run(f.s->g, f.s->buffers());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const NaiveForward want = naive_forward(f32_scale(c.p), c.qkv, f.q.real, f.k.real, f.v.real);
  expect_stored_close(*f.s->out[0], want.o, c.out, c.fp64, 0.02, "O");
  // Stats are stored as FLOAT: one FP32 step of their magnitude in the fp64 mode, FP32 noise otherwise.
  double stats_peak = 0;
  for (double x : want.stats) stats_peak = std::isfinite(x) ? std::max(stats_peak, std::fabs(x)) : stats_peak;
  EXPECT_CLOSE(f.s->out[1]->values(), want.stats, (c.fp64 ? 1.2e-7 : 2e-6) * (1 + stats_peak));
  EXPECT_NEAR(f.s->out[2]->get(0), amax(want.o), (c.fp64 ? 1e-6 : 0.02) * amax(want.o));
  EXPECT_GT(amax(want.o), 0.0);
}

std::vector<Case> forward_cases() {
  Fp64Twins<Case> cs;
  auto add = [&](std::string label, std::function<void(Case&)> tweak) { cs.add(std::move(label), tweak); };
  add("e4m3_partial_blocks", [](Case&) {});
  add("e5m2_causal_gqa_half", [](Case& c) {
    c.qkv = DT::FP8_E5M2, c.out = DT::HALF, c.p.h_q = 4, c.p.h_k = 2, c.p.h_v = 1, c.p.right_bound = 0;
  });
  add("padded_scales_window_bottom_right",
      [](Case& c) { c.scale_padding = 3, c.p.left_bound = 6, c.p.right_bound = 0, c.p.bottom_right = true; });
  add("padding_mask_float_out", [](Case& c) { c.out = DT::FLOAT, c.p.seq_len_q = {5, 17}, c.p.seq_len_kv = {0, 33}; });
  add("s_1", [](Case& c) { c.p.s_q = 1, c.p.s_kv = 1, c.p.d_qk = 1, c.p.d_v = 1, c.p.b = 1; });
  return cs.cases;
}

INSTANTIATE_TEST_SUITE_P(Sweep, SdpaMxfp8ForwardCases, ::testing::ValuesIn(forward_cases()),
                         [](const auto& info) { return info.param.label; });

TEST(SdpaMxfp8, CheckerDetectsMissingQuantizationOfP) {
  Case c;
  c.fp64 = true;
  Forward f = make_forward(c, 5);
  ASSERT_TRUE(f.s);
  ASSERT_TRUE(build_and_run(f.s->g, f.s->buffers()).is_good());
  // The dense attention of the same real operands differs from O by P's FP8 rounding.
  const SdpaNaiveResult dense = sdpa_naive(f32_scale(c.p), f.q.real, f.k.real, f.v.real);
  EXPECT_GT(compare(f.s->out[0]->values(), dense.o).max_abs, 1e-3);
}

TEST(SdpaMxfp8, BlockScaleQuantizeFeedsTheForward) {
  // Q, K quantized along d and V along s by block_scale_quantize in the same graph: its scale layout is
  // the one sdpa_mxfp8 reads. Its Y and SCALE outputs are kept to compute the expectation.
  Case c;
  c.fp64 = true;
  c.p.s_q = 7, c.p.s_kv = 64, c.p.d_qk = 64, c.p.d_v = 32;
  const SdpaProblem& p = c.p;
  graph::Graph g;
  g.set_compute_data_type(DT::DOUBLE);
  std::vector<std::unique_ptr<HostTensor>> bufs;
  std::mt19937_64 rng(11);
  auto quantized = [&](const char* name, std::vector<int64_t> dims, int64_t axis) {
    auto& x = *bufs.emplace_back(std::make_unique<HostTensor>(packed(g, name, dims, DT::FLOAT)));
    x.fill_random(rng, -20.0, 20.0);
    auto [y, scale] =
        g.block_scale_quantize(x.t, graph::Block_scale_quantize_attributes().set_block_size(32).set_axis(axis).set_name(
                                        std::string("quant_") + name));
    y->set_output(true);
    scale->set_output(true);
    return std::pair{y, scale};
  };
  auto [q, sq] = quantized("q", {p.b, p.h_q, p.s_q, p.d_qk}, 3);
  auto [k, sk] = quantized("k", {p.b, p.h_k, p.s_kv, p.d_qk}, 3);
  auto [v, sv] = quantized("v", {p.b, p.h_v, p.s_kv, p.d_v}, 2);
  auto [o, stats, amax_o] =
      g.sdpa_mxfp8(q, k, v, sq, sk, sv, SDPA_fp8_attributes().set_attn_scale(0.25f).set_generate_stats(false));
  o->set_output(true).set_data_type(DT::FLOAT);
  amax_o->set_output(true);
  EXPECT_EQ(stats, nullptr);
  const error_t e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (const auto& t : {q, sq, k, sk, v, sv, o, amax_o}) bufs.emplace_back(std::make_unique<HostTensor>(t));
  std::vector<HostTensor*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.get());
  bufs.back()->poison();
  bufs[bufs.size() - 2]->poison();
  ASSERT_TRUE(build_and_run(g, ptrs).is_good());
  auto real = [&](size_t codes, size_t scales, bool along_seq) {
    const std::vector<int64_t>& d = bufs[codes]->t->get_dim();
    std::vector<double> x = bufs[codes]->values();
    const std::vector<double> sc = bufs[scales]->values();
    const int64_t rows = bufs[scales]->t->get_dim()[2], cols = bufs[scales]->t->get_dim()[3];
    for (int64_t n = 0; n < static_cast<int64_t>(x.size()); ++n) {
      const int64_t j = n % d[3], i = (n / d[3]) % d[2], plane = n / (d[2] * d[3]);
      x[static_cast<size_t>(n)] *=
          sc[static_cast<size_t>((plane * rows + (along_seq ? i / 32 : i)) * cols + (along_seq ? j : j / 32))];
    }
    return x;
  };
  const NaiveForward want = naive_forward(p, DT::FP8_E4M3, real(3, 4, false), real(5, 6, false), real(7, 8, true));
  EXPECT_CLOSE(bufs[9]->values(), want.o, 1e-6 * (1 + amax(want.o)));
  // The quantized operands are close to the FLOAT inputs: the chain is the one a user means.
  EXPECT_LT(compare(real(3, 4, false), bufs[0]->values()).rel_l2, 0.1);
}

TEST(SdpaMxfp8, F8_128x4ScalesReadAsThePlainLayout) {
  Case c;
  c.fp64 = true;
  Forward plain = make_forward(c, 31);
  ASSERT_TRUE(plain.s);
  ASSERT_TRUE(build_and_run(plain.s->g, plain.s->buffers()).is_good());
  // The same operands with every scale tensor padded to F8_128x4's extents and stored in its tile order.
  const SdpaProblem& p = c.p;
  graph::Graph g;
  g.set_compute_data_type(DT::DOUBLE);
  std::vector<std::unique_ptr<HostTensor>> bufs;
  auto reordered = [&](const char* name, const HostTensor& logical, bool along_seq) {
    const auto& ld = logical.t->get_dim();
    const int64_t rows = (((along_seq ? ld[3] : ld[2]) + 127) / 128) * 128;
    const int64_t cols = (((along_seq ? ld[2] : ld[3]) + 3) / 4) * 4;
    graph::Tensor_attributes a;
    a.set_name(name).set_data_type(DT::FP8_E8M0).set_reordering_type(TensorReordering_t::F8_128x4);
    if (along_seq)
      a.set_dim({ld[0], ld[1], cols, rows}).set_stride({ld[1] * rows * cols, rows * cols, 1, cols});
    else
      a.set_dim({ld[0], ld[1], rows, cols}).set_stride({ld[1] * rows * cols, rows * cols, cols, 1});
    auto& h = *bufs.emplace_back(std::make_unique<HostTensor>(g.tensor(a)));
    for (int64_t pl = 0; pl < ld[0] * ld[1]; ++pl)
      for (int64_t i = 0; i < ld[2]; ++i)
        for (int64_t j = 0; j < ld[3]; ++j) {
          const int64_t r = along_seq ? j : i, col = along_seq ? i : j;
          detail::write_element(h.data(), DT::FP8_E8M0, pl * rows * cols + detail::f8_128x4_offset(r, col, cols),
                                logical.get((pl * ld[2] + i) * ld[3] + j));
        }
    return h.t;
  };
  auto same = [&](const HostTensor& from) {
    auto& h = *bufs.emplace_back(std::make_unique<HostTensor>(g.tensor(graph::Tensor_attributes()
                                                                           .set_name(from.t->get_name())
                                                                           .set_dim(from.t->get_dim())
                                                                           .set_stride(from.t->get_stride())
                                                                           .set_data_type(from.t->get_data_type()))));
    h.bytes = from.bytes;
    return h.t;
  };
  TensorPtr q = same(*plain.q.codes), k = same(*plain.k.codes), v = same(*plain.v.codes);
  TensorPtr sq = reordered("sf_q", *plain.q.scales, false), sk = reordered("sf_k", *plain.k.scales, false);
  TensorPtr sv = reordered("sf_v", *plain.v.scales, true);
  SDPA_fp8_attributes a;
  a.set_generate_stats(true).set_attn_scale(static_cast<float>(p.attn_scale));
  auto [o, stats, amax_o] = g.sdpa_mxfp8(q, k, v, sq, sk, sv, a);
  for (const auto& t : {o, stats, amax_o}) t->set_output(true);
  o->set_data_type(c.out);
  const error_t e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (const auto& t : {o, stats, amax_o}) bufs.emplace_back(std::make_unique<HostTensor>(t))->poison();
  std::vector<HostTensor*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.get());
  ASSERT_TRUE(build_and_run(g, ptrs).is_good());
  EXPECT_EQ(bufs[6]->bytes, plain.s->out[0]->bytes);
  EXPECT_EQ(bufs[7]->bytes, plain.s->out[1]->bytes);
  // The tile order matters: the plain bytes under an F8_128x4 declaration give another O.
  for (int i : {3, 4})
    std::fill(bufs[static_cast<size_t>(i)]->bytes.begin(), bufs[static_cast<size_t>(i)]->bytes.end(), 127);
  const HostTensor& plain_sq = *plain.q.scales;
  for (int64_t n = 0; n < plain_sq.volume(); ++n)
    detail::write_element(bufs[3]->data(), DT::FP8_E8M0, n, plain_sq.get(n));
  ASSERT_TRUE(build_and_run(g, ptrs).is_good());
  EXPECT_NE(bufs[6]->bytes, plain.s->out[0]->bytes);
}

TEST(SdpaMxfp8, JsonRoundTripIsBitwiseIdentical) {
  Case c = forward_cases()[4];  // padded scales, window, bottom right
  Forward f = make_forward(c, 12);
  ASSERT_TRUE(f.s);
  ASSERT_TRUE(build_and_run(f.s->g, f.s->buffers()).is_good());
  std::vector<std::vector<uint8_t>> first;
  for (auto& h : f.s->out) first.push_back(h->bytes);
  std::string text;
  ASSERT_TRUE(f.s->g.serialize(text).is_good());
  EXPECT_NE(text.find("\"SDPA_MXFP8\""), std::string::npos);
  graph::Graph replay;
  const error_t e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (auto& h : f.s->out) h->poison();
  ASSERT_TRUE(build_and_run(replay, f.s->buffers()).is_good());
  for (size_t i = 0; i < f.s->out.size(); ++i) EXPECT_EQ(f.s->out[i]->bytes, first[i]) << "output " << i;
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

TEST(SdpaMxfp8, FrontendOverloadBuildsTheSameNode) {
  graph::Graph g;
  auto t = [&](const char* name, std::vector<int64_t> d, DT dt) { return input(g, name, d, dt); };
  auto outs = g.sdpa_fp8(t("q", {1, 1, 4, 32}, DT::FP8_E4M3), t("k", {1, 1, 4, 32}, DT::FP8_E4M3),
                         t("v", {1, 1, 4, 32}, DT::FP8_E4M3), t("sq", {1, 1, 4, 1}, DT::FP8_E8M0),
                         t("sk", {1, 1, 4, 1}, DT::FP8_E8M0), t("sv", {1, 1, 1, 32}, DT::FP8_E8M0),
                         SDPA_fp8_attributes().set_name("fe_mx"));
  for (const auto& o : outs)
    if (o) o->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  EXPECT_EQ(g.state().nodes.back()->tag(), "SDPA_MXFP8");
  EXPECT_EQ(outs[0]->get_data_type(), DT::BFLOAT16);
}

}  // namespace
}  // namespace frost::test
