// sdpa_mxfp8 and sdpa_mxfp8_backward on the CPU reference: against naive FP64 formulas of
// frost/ops/sdpa_mxfp8.h on block-scaled operands (random codes and random per-block E8M0 scales, extents
// that are not multiples of 32), against central differences of the dense forward, with
// block_scale_quantize feeding the forward, and with cuDNN's F8_128x4 scale layout.
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
using graph::SDPA_fp8_attributes;
using graph::SDPA_fp8_backward_attributes;

int64_t blocks(int64_t n) { return (n + 31) / 32; }

// A graph input with packed strides, so a HostTensor can be sized before validate().
TensorPtr packed(graph::Graph& g, const std::string& name, const std::vector<int64_t>& dims, DT dt) {
  return input(g, name, dims, dt, detail::packed_strides(dims));
}

struct Case {
  std::string label;
  SdpaProblem p = base_problem();
  DT qkv = DT::FP8_E4M3, d_o = DT::FP8_E4M3, wide = DT::BFLOAT16, out = DT::BFLOAT16;
  bool fp64 = false;
  int64_t scale_padding = 0;    // extra rows and columns in every scale tensor (never read)
  bool uniform_scales = false;  // every block scale 0.5, so the transposed copies can equal the originals

  static SdpaProblem base_problem() {
    SdpaProblem p;
    p.b = 2, p.h_q = 2, p.h_k = 2, p.h_v = 2, p.s_q = 17, p.s_kv = 40, p.d_qk = 40, p.d_v = 24;
    p.attn_scale = 0.25;
    return p;
  }
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

// An FP8 operand with its block scales, and its real values.
struct Operand {
  HostTensor* codes = nullptr;
  HostTensor* scales = nullptr;
  std::vector<double> real;
};

struct Setup {
  graph::Graph g;
  std::vector<std::unique_ptr<HostTensor>> in, out;
  HostTensor& add(const TensorPtr& t) { return *in.emplace_back(std::make_unique<HostTensor>(t)); }
  std::vector<HostTensor*> buffers() {
    std::vector<HostTensor*> all;
    for (auto& h : in) all.push_back(h.get());
    for (auto& h : out) all.push_back(h.get());
    return all;
  }
  void mark_outputs(const std::vector<TensorPtr>& ts) {
    for (const auto& t : ts) {
      out.push_back(std::make_unique<HostTensor>(t));
      out.back()->poison();
    }
  }
};

// Declares codes [b, h, s, d] and scales with blocks along d (along_seq false) or s, fills both at random
// (scales 2^-2 .. 2^2) and computes the real values the op must see.
Operand block_scaled(Setup& s, const Case& c, std::mt19937_64& rng, const std::string& name, std::vector<int64_t> dims,
                     bool along_seq, const Operand* same_codes = nullptr) {
  Operand x;
  x.codes = &s.add(packed(s.g, name, dims, name.rfind("do", 0) == 0 ? c.d_o : c.qkv));
  std::vector<int64_t> sd = dims;
  sd[along_seq ? 2 : 3] = blocks(dims[along_seq ? 2 : 3]);
  sd[2] += c.scale_padding, sd[3] += c.scale_padding;
  x.scales = &s.add(packed(s.g, "sf_" + name, sd, DT::FP8_E8M0));
  if (same_codes) {
    x.codes->bytes = same_codes->codes->bytes;
  } else {
    x.codes->fill_random(rng, -3.0, 3.0);
  }
  std::uniform_int_distribution<int> e(-2, 2);
  for (int64_t n = 0; n < x.scales->volume(); ++n) x.scales->set(n, c.uniform_scales ? 0.5 : std::ldexp(1.0, e(rng)));
  const std::vector<double> codes = x.codes->values(), scales = x.scales->values();
  x.real.resize(codes.size());
  for (int64_t n = 0; n < static_cast<int64_t>(codes.size()); ++n) {
    const int64_t j = n % dims[3], i = (n / dims[3]) % dims[2], plane = n / (dims[2] * dims[3]);
    const int64_t si = along_seq ? i / 32 : i, sj = along_seq ? j : j / 32;
    x.real[static_cast<size_t>(n)] =
        codes[static_cast<size_t>(n)] * scales[static_cast<size_t>((plane * sd[2] + si) * sd[3] + sj)];
  }
  return x;
}

template <class Attr>
void set_mask(const Case& c, Setup& s, Attr& a) {
  const SdpaProblem& p = c.p;
  a.set_attn_scale(static_cast<float>(p.attn_scale));
  a.set_diagonal_alignment(p.bottom_right ? DiagonalAlignment_t::BOTTOM_RIGHT : DiagonalAlignment_t::TOP_LEFT);
  if (p.left_bound) a.set_diagonal_band_left_bound(*p.left_bound);
  if (p.right_bound) a.set_diagonal_band_right_bound(*p.right_bound);
  if (p.seq_len_q.empty()) return;
  HostTensor& lq = s.add(packed(s.g, "seq_q", {p.b, 1, 1, 1}, DT::INT32));
  HostTensor& lkv = s.add(packed(s.g, "seq_kv", {p.b, 1, 1, 1}, DT::INT32));
  for (int64_t b = 0; b < p.b; ++b) {
    lq.set(b, static_cast<double>(p.seq_len_q[static_cast<size_t>(b)]));
    lkv.set(b, static_cast<double>(p.seq_len_kv[static_cast<size_t>(b)]));
  }
  a.set_padding_mask(true).set_seq_len_q(lq.t).set_seq_len_kv(lkv.t);
}

SdpaProblem f32_scale(SdpaProblem p) {
  p.attn_scale = static_cast<float>(p.attn_scale);
  return p;
}

// ---- forward ----

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

double amax(const std::vector<double>& x) {
  double m = 0;
  for (double e : x) m = std::max(m, std::fabs(e));
  return m;
}

// got is stored in `type`; want exact. fp64: its stored value (one step of slack for FP64 noise at a
// midpoint); FP32: the same plus FP32 noise and a few flipped FP8 roundings of P or dS per element.
void expect_stored_close(const HostTensor& got, const std::vector<double>& want, DT type, bool fp64, double slack,
                         const char* what) {
  SCOPED_TRACE(what);
  const std::vector<double> g = got.values();
  ASSERT_EQ(g.size(), want.size());
  const double noise = (fp64 ? 1e-9 : slack) * amax(want) + 1e-9;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_FALSE(std::isnan(g[i])) << "element " << i << " not written";
    const double e = detail::round_to(type, want[i]);
    const double step =
        type == DT::BFLOAT16 ? std::fabs(e) / 128 : (type == DT::HALF ? std::fabs(e) / 1024 : 1e-6 * std::fabs(e));
    ASSERT_LE(std::fabs(g[i] - e), noise + step) << "element " << i << " want " << want[i];
  }
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
  std::vector<Case> cs;
  auto add = [&](std::string label, std::function<void(Case&)> tweak) {
    Case c;
    c.label = std::move(label);
    tweak(c);
    cs.push_back(c);
    c.label += "_fp64";
    c.fp64 = true;
    cs.push_back(c);
  };
  add("e4m3_partial_blocks", [](Case&) {});
  add("e5m2_causal_gqa_half", [](Case& c) {
    c.qkv = DT::FP8_E5M2, c.out = DT::HALF, c.p.h_q = 4, c.p.h_k = 2, c.p.h_v = 1, c.p.right_bound = 0;
  });
  add("padded_scales_window_bottom_right",
      [](Case& c) { c.scale_padding = 3, c.p.left_bound = 6, c.p.right_bound = 0, c.p.bottom_right = true; });
  add("padding_mask_float_out", [](Case& c) { c.out = DT::FLOAT, c.p.seq_len_q = {5, 17}, c.p.seq_len_kv = {0, 33}; });
  add("s_1", [](Case& c) { c.p.s_q = 1, c.p.s_kv = 1, c.p.d_qk = 1, c.p.d_v = 1, c.p.b = 1; });
  return cs;
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

// ---- backward ----

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
  std::vector<Case> cs;
  auto add = [&](std::string label, std::function<void(Case&)> tweak) {
    Case c;
    c.label = std::move(label);
    tweak(c);
    cs.push_back(c);
    c.label += "_fp64";
    c.fp64 = true;
    cs.push_back(c);
  };
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
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Sweep, SdpaMxfp8BackwardCases, ::testing::ValuesIn(backward_cases()),
                         [](const auto& info) { return info.param.label; });

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  return std::sqrt(num / den);
}

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
