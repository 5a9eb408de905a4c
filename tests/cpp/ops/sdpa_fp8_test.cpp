#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "graph/shape_util.h"
#include "test_util.h"

namespace frost::test {
namespace {

using graph::SDPA_fp8_attributes;
constexpr double kInf = std::numeric_limits<double>::infinity();

// A graph input with packed strides unless given, so a HostTensor can be sized before validate().
TensorPtr dense_input(graph::Graph& g, const std::string& name, std::vector<int64_t> dims, DataType_t dt,
                      std::vector<int64_t> strides = {}) {
  if (strides.empty()) strides = detail::packed_strides(dims);
  return input(g, name, std::move(dims), dt, std::move(strides));
}

struct Fp8Case {
  std::string label;
  int64_t b = 2, h_q = 4, h_k = 4, h_v = 4, s_q = 17, s_kv = 111, d_qk = 24, d_v = 16;
  DataType_t qkv_type = DataType_t::FP8_E4M3, o_type = DataType_t::FLOAT;
  bool fp64 = false, bshd = false, stats = true, scale_as_tensor = false;
  std::optional<int64_t> left, right;
  bool bottom_right = false;
  std::vector<int64_t> seq_q, seq_kv;  // padding mask when set
  // Per-tensor scales as an FP8 recipe sets them: P in [0, 1] maps to the FP8 range through scale_s.
  double attn_scale = 0.2, descale_q = 0.5, descale_k = 0.25, descale_v = 1.5, scale_s = 200, scale_o = 0.7;
};

void PrintTo(const Fp8Case& c, std::ostream* os) { *os << c.label; }

struct Naive {
  std::vector<double> o, stats;
  double amax_s = 0, amax_o = 0;
};

// The formula of frost/ops/sdpa_fp8.h on decoded values, straight from its definition, one row at a time.
Naive naive(const Fp8Case& c, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
            bool quantize_p = true) {
  Naive r;
  r.o.assign(static_cast<size_t>(c.b * c.h_q * c.s_q * c.d_v), 0.0);
  r.stats.assign(static_cast<size_t>(c.b * c.h_q * c.s_q), -kInf);
  // The scales reach the op as FLOAT values.
  auto f32 = [](double x) { return static_cast<double>(static_cast<float>(x)); };
  const double descale_s = f32(1.0 / c.scale_s), descale_q = f32(c.descale_q), descale_k = f32(c.descale_k);
  const double descale_v = f32(c.descale_v), scale_s = f32(c.scale_s), attn_scale = f32(c.attn_scale);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h_q; ++h)
      for (int64_t i = 0; i < c.s_q; ++i) {
        const int64_t lq = c.seq_q.empty() ? c.s_q : c.seq_q[b], lkv = c.seq_kv.empty() ? c.s_kv : c.seq_kv[b];
        if (i >= lq) continue;
        const int64_t diag = c.bottom_right ? i + lkv - lq : i;
        const int64_t hk = h / (c.h_q / c.h_k), hv = h / (c.h_q / c.h_v), row = (b * c.h_q + h) * c.s_q + i;
        std::vector<double> s(static_cast<size_t>(c.s_kv), -kInf);
        double mx = -kInf;
        for (int64_t j = 0; j < lkv; ++j) {
          if ((c.right && j > diag + *c.right) || (c.left && j <= diag - *c.left)) continue;
          double dot = 0;
          for (int64_t d = 0; d < c.d_qk; ++d)
            dot += (q[row * c.d_qk + d] * descale_q) * (k[((b * c.h_k + hk) * c.s_kv + j) * c.d_qk + d] * descale_k);
          s[j] = attn_scale * dot;
          mx = std::max(mx, s[j]);
        }
        if (mx == -kInf) continue;
        double sum = 0;
        for (double x : s) sum += std::exp(x - mx);
        r.stats[row] = mx + std::log(sum);
        for (int64_t j = 0; j < c.s_kv; ++j) {
          const double p = std::exp(s[j] - mx) / sum;
          r.amax_s = std::max(r.amax_s, p);
          const double p8 = quantize_p ? detail::round_to(c.qkv_type, p * scale_s) : p * scale_s;
          for (int64_t d = 0; d < c.d_v; ++d)
            r.o[row * c.d_v + d] += (p8 * descale_s) * (v[((b * c.h_v + hv) * c.s_kv + j) * c.d_v + d] * descale_v);
        }
        for (int64_t d = 0; d < c.d_v; ++d) r.amax_o = std::max(r.amax_o, std::fabs(r.o[row * c.d_v + d]));
      }
  for (double& x : r.o) x = detail::round_to(c.o_type, x * f32(c.scale_o));
  return r;
}

std::vector<int64_t> strides(const Fp8Case& c, const std::vector<int64_t>& d) {
  if (c.bshd) return {d[2] * d[1] * d[3], d[3], d[1] * d[3], 1};
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

struct Setup {
  graph::Graph g;
  std::vector<std::unique_ptr<HostTensor>> in;
  std::unique_ptr<HostTensor> o, stats, amax_s, amax_o;
  HostTensor& add(const TensorPtr& t) { return *in.emplace_back(std::make_unique<HostTensor>(t)); }
  std::vector<HostTensor*> buffers() {
    std::vector<HostTensor*> all{o.get(), amax_s.get(), amax_o.get()};
    if (stats) all.push_back(stats.get());
    for (auto& b : in) all.push_back(b.get());
    return all;
  }
};

std::unique_ptr<Setup> make_setup(const Fp8Case& c, uint64_t seed) {
  auto s = std::make_unique<Setup>();
  auto& g = s->g;
  g.set_compute_data_type(c.fp64 ? DataType_t::DOUBLE : DataType_t::FLOAT);
  std::mt19937_64 rng(seed);
  auto qkv = [&](const char* name, std::vector<int64_t> d) {
    auto& h = s->add(input(g, name, d, c.qkv_type, strides(c, d)));
    h.fill_random(rng, -3.0, 3.0);
    return h.t;
  };
  auto scalar = [&](const char* name, double value) {
    auto& h = s->add(dense_input(g, name, {1, 1, 1, 1}, DataType_t::FLOAT));
    h.set(0, value);
    return h.t;
  };
  TensorPtr q = qkv("q", {c.b, c.h_q, c.s_q, c.d_qk}), k = qkv("k", {c.b, c.h_k, c.s_kv, c.d_qk});
  TensorPtr v = qkv("v", {c.b, c.h_v, c.s_kv, c.d_v});
  SDPA_fp8_attributes a;
  a.set_name("attn8").set_generate_stats(c.stats).set_diagonal_alignment(
      c.bottom_right ? DiagonalAlignment_t::BOTTOM_RIGHT : DiagonalAlignment_t::TOP_LEFT);
  if (c.left) a.set_diagonal_band_left_bound(*c.left);
  if (c.right) a.set_diagonal_band_right_bound(*c.right);
  if (c.scale_as_tensor)
    a.set_attn_scale(scalar("attn_scale", c.attn_scale));
  else
    a.set_attn_scale(static_cast<float>(c.attn_scale));
  if (!c.seq_q.empty()) {
    auto& lq = s->add(dense_input(g, "seq_q", {c.b, 1, 1, 1}, DataType_t::INT32));
    auto& lkv = s->add(dense_input(g, "seq_kv", {c.b, 1, 1, 1}, DataType_t::INT32));
    for (int64_t b = 0; b < c.b; ++b)
      lq.set(b, static_cast<double>(c.seq_q[b])), lkv.set(b, static_cast<double>(c.seq_kv[b]));
    a.set_padding_mask(true).set_seq_len_q(lq.t).set_seq_len_kv(lkv.t);
  }
  auto [o, stats, amax_s, amax_o] = g.sdpa_fp8(
      q, k, v, scalar("descale_q", c.descale_q), scalar("descale_k", c.descale_k), scalar("descale_v", c.descale_v),
      scalar("descale_s", 1.0 / c.scale_s), scalar("scale_s", c.scale_s), scalar("scale_o", c.scale_o), a);
  o->set_output(true).set_data_type(c.o_type);
  amax_s->set_output(true);
  amax_o->set_output(true);
  if (stats) stats->set_output(true);
  const error_t e = g.validate();
  EXPECT_TRUE(e.is_good()) << e.get_message();
  if (e.is_bad()) return nullptr;
  s->o = std::make_unique<HostTensor>(o);
  s->amax_s = std::make_unique<HostTensor>(amax_s);
  s->amax_o = std::make_unique<HostTensor>(amax_o);
  if (stats) s->stats = std::make_unique<HostTensor>(stats);
  for (HostTensor* out : {s->o.get(), s->amax_s.get(), s->amax_o.get(), s->stats.get()})
    if (out) out->poison();
  return s;
}

class SdpaFp8Cases : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(SdpaFp8Cases, MatchesNaiveWithQuantizedP) {
  const Fp8Case& c = GetParam();
  auto s = make_setup(c, 1234);
  ASSERT_TRUE(s);
  const error_t e = build_and_run(s->g, s->buffers());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Naive want = naive(c, s->in[0]->values(), s->in[1]->values(), s->in[2]->values());
  // In the fp64 mode the reference and the formula agree to rounding. In FP32 a P*scale_s landing
  // within FP32 rounding of an FP8 midpoint may round the other way: one FP8 step of P (at most
  // scale_s/16 here) times |V| * descales, so the bound allows a few such steps per element.
  double o_tol = c.fp64 ? 1e-9 : 0.05;
  if (c.o_type != DataType_t::FLOAT) o_tol += 0.13 * want.amax_o * c.scale_o;  // one step of O's own rounding
  EXPECT_CLOSE(s->o->values(), want.o, o_tol);
  // Stats is stored as FLOAT, so even the fp64 mode carries its rounding.
  if (s->stats) EXPECT_CLOSE(s->stats->values(), want.stats, c.fp64 ? 1e-6 : 1e-4);
  EXPECT_NEAR(s->amax_s->get(0), want.amax_s, c.fp64 ? 1e-7 : 1e-6);  // amax is stored as FLOAT
  EXPECT_NEAR(s->amax_o->get(0), want.amax_o, (c.fp64 ? 1e-7 : 0.05) * (1 + want.amax_o));
  EXPECT_GT(want.amax_o, 0.0);
}

std::vector<Fp8Case> all_cases() {
  Fp64Twins<Fp8Case> cs;
  auto add = [&](std::string label, std::function<void(Fp8Case&)> tweak) { cs.add(std::move(label), tweak); };
  add("e4m3_plain", [](Fp8Case&) {});
  add("e5m2_bshd", [](Fp8Case& c) { c.qkv_type = DataType_t::FP8_E5M2, c.bshd = true; });
  add("e4m3_out_e4m3", [](Fp8Case& c) { c.o_type = DataType_t::FP8_E4M3, c.scale_as_tensor = true; });
  add("e5m2_out_bf16_causal",
      [](Fp8Case& c) { c.qkv_type = DataType_t::FP8_E5M2, c.o_type = DataType_t::BFLOAT16, c.right = 0; });
  add("causal_bottom_right_gqa", [](Fp8Case& c) { c.right = 0, c.bottom_right = true, c.h_k = 2, c.h_v = 1; });
  add("sliding_window_s_q_longer", [](Fp8Case& c) { c.s_q = 111, c.s_kv = 17, c.left = 5, c.right = 0; });
  add("padding_half", [](Fp8Case& c) { c.seq_q = {9, 17}, c.seq_kv = {0, 50}, c.o_type = DataType_t::HALF; });
  add("ones", [](Fp8Case& c) { c.b = 1, c.h_q = c.h_k = c.h_v = 1, c.s_q = 1, c.s_kv = 1, c.d_qk = 1, c.d_v = 1; });
  add("no_stats", [](Fp8Case& c) { c.stats = false, c.s_q = 1; });
  return cs.cases;
}

INSTANTIATE_TEST_SUITE_P(Sweep, SdpaFp8Cases, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.label; });

TEST(SdpaFp8, CheckerDetectsMissingQuantizationOfP) {
  Fp8Case c;
  c.fp64 = true;
  auto s = make_setup(c, 5);
  ASSERT_TRUE(s);
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  const Naive unquantized = naive(c, s->in[0]->values(), s->in[1]->values(), s->in[2]->values(), false);
  EXPECT_GT(compare(s->o->values(), unquantized.o).max_abs, 1e-4);
}

TEST(SdpaFp8, PaddingRowsAreZeroAndStatsMinusInfinity) {
  Fp8Case c;
  c.seq_q = {3, 17}, c.seq_kv = {0, 40};
  auto s = make_setup(c, 8);
  ASSERT_TRUE(s);
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  // Batch 0 has no visible key at all; batch 1 rows are valid.
  for (int64_t n = 0; n < c.h_q * c.s_q; ++n) EXPECT_EQ(s->stats->get(n), -kInf);
  for (int64_t n = 0; n < c.h_q * c.s_q * c.d_v; ++n) EXPECT_EQ(s->o->get(n), 0.0);
  EXPECT_TRUE(std::isfinite(s->stats->get(c.h_q * c.s_q)));
}

TEST(SdpaFp8, SequenceLengthOutOfRangeFailsAndLeavesOutputsUntouched) {
  Fp8Case c;
  c.seq_q = {17, 18}, c.seq_kv = {5, 5};
  auto s = make_setup(c, 2);
  ASSERT_TRUE(s);
  const std::vector<uint8_t> before = s->o->bytes;
  const error_t e = build_and_run(s->g, s->buffers());
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("SEQ_LEN_Q"), std::string::npos) << e.get_message();
  EXPECT_NE(e.get_message().find("18 at batch 1"), std::string::npos) << e.get_message();
  EXPECT_EQ(s->o->bytes, before);
}

TEST(SdpaFp8, JsonRoundTripIsBitwiseIdentical) {
  Fp8Case c;
  c.o_type = DataType_t::FP8_E4M3, c.right = 1, c.left = 9, c.bottom_right = true, c.h_k = 2;
  c.seq_q = {11, 17}, c.seq_kv = {100, 60}, c.scale_as_tensor = true;
  auto s = make_setup(c, 77);
  ASSERT_TRUE(s);
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  const auto o_first = s->o->bytes, stats_first = s->stats->bytes, amax_first = s->amax_o->bytes;
  std::string text;
  ASSERT_TRUE(s->g.serialize(text).is_good());
  EXPECT_NE(text.find("\"SDPA_FP8\""), std::string::npos);
  graph::Graph replay;
  const error_t e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (HostTensor* out : {s->o.get(), s->stats.get(), s->amax_s.get(), s->amax_o.get()}) out->poison();
  ASSERT_TRUE(build_and_run(replay, s->buffers()).is_good());
  EXPECT_EQ(s->o->bytes, o_first);
  EXPECT_EQ(s->stats->bytes, stats_first);
  EXPECT_EQ(s->amax_o->bytes, amax_first);
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

TEST(SdpaFp8, ErrorsNameNodeAttributeAndValue) {
  using E = error_code_t;
  // What each case changes in a valid declaration.
  struct Decl {
    std::vector<int64_t> q{1, 2, 5, 8}, k{1, 2, 7, 8}, v{1, 2, 7, 4}, descale_k{1, 1, 1, 1};
    DataType_t q_type = DataType_t::FP8_E4M3, scale_o_type = DataType_t::FLOAT, o_type = DataType_t::FP8_E4M3;
    bool null_descale_q = false, both_scales = false, padding_without_lengths = false;
    std::optional<int64_t> left;
  };
  struct ErrorCase {
    const char* what;
    std::function<void(Decl&)> tweak;
    E code;
    std::vector<std::string> mentions;
  };
  const std::vector<ErrorCase> cases = {
      {"q type", [](Decl& d) { d.q_type = DataType_t::BFLOAT16; }, E::INVALID_VALUE, {"Q.data_type", "BFLOAT16"}},
      {"q rank",
       [](Decl& d) {
         d.q = {1, 2, 5};
       },
       E::INVALID_VALUE,
       {"Q.dim", "[1, 2, 5]"}},
      {"k head dim",
       [](Decl& d) {
         d.k = {1, 2, 7, 6};
       },
       E::INVALID_VALUE,
       {"K.dim", "[1, 2, 7, 6]"}},
      {"v length",
       [](Decl& d) {
         d.v = {1, 2, 6, 4};
       },
       E::INVALID_VALUE,
       {"V.dim", "[1, 2, 6, 4]"}},
      {"heads",
       [](Decl& d) {
         d.k = {1, 3, 7, 8};
       },
       E::INVALID_VALUE,
       {"K.dim", "[1, 3, 7, 8]"}},
      {"null descale", [](Decl& d) { d.null_descale_q = true; }, E::ATTRIBUTE_NOT_SET, {"DESCALE_Q"}},
      {"descale dims", [](Decl& d) { d.descale_k = {2}; }, E::INVALID_VALUE, {"DESCALE_K", "[2]"}},
      {"scale type", [](Decl& d) { d.scale_o_type = DataType_t::HALF; }, E::INVALID_VALUE, {"SCALE_O", "HALF"}},
      {"two scales", [](Decl& d) { d.both_scales = true; }, E::INVALID_VALUE, {"attn_scale", "0.5"}},
      {"padding", [](Decl& d) { d.padding_without_lengths = true; }, E::ATTRIBUTE_NOT_SET, {"SEQ_LEN_Q", "null"}},
      {"band", [](Decl& d) { d.left = -2; }, E::INVALID_VALUE, {"diagonal_band_left_bound", "-2"}},
      {"o type", [](Decl& d) { d.o_type = DataType_t::INT8; }, E::INVALID_VALUE, {"O.data_type", "INT8"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Decl d;
    c.tweak(d);
    graph::Graph g;
    auto one = [&](const char* name, DataType_t dt = DataType_t::FLOAT) { return input(g, name, {1, 1, 1, 1}, dt); };
    SDPA_fp8_attributes a;
    a.set_name("attn8").set_attn_scale(0.5f).set_padding_mask(d.padding_without_lengths);
    if (d.both_scales) a.set_attn_scale(one("attn_scale"));
    if (d.left) a.set_diagonal_band_left_bound(*d.left);
    auto outs = g.sdpa_fp8(input(g, "q", d.q, d.q_type), input(g, "k", d.k, DataType_t::FP8_E4M3),
                           input(g, "v", d.v, DataType_t::FP8_E4M3), d.null_descale_q ? nullptr : one("dq"),
                           input(g, "dk", d.descale_k), one("dv"), one("ds"), one("ss"), one("so", d.scale_o_type), a);
    outs[0]->set_output(true).set_data_type(d.o_type);
    const error_t e = g.validate();
    EXPECT_EQ(e.get_code(), c.code) << e.get_message();
    EXPECT_NE(e.get_message().find("'attn8'"), std::string::npos) << e.get_message();
    for (const auto& m : c.mentions)
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  }
}

}  // namespace
}  // namespace frost::test
