// matmul_fp8 on the CPU reference against a naive FP64 formula of frost/ops/matmul_fp8.h.
#include <cmath>
#include <functional>
#include <memory>
#include <optional>

#include "graph/shape_util.h"
#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using graph::Matmul_fp8_attributes;

// The distance between neighbouring values of `t` around |x| (normal or subnormal): a store's rounding
// is at most half of it, so results agree within one step whatever the accumulation order.
double step(DT t, double x) {
  int mant = 23, min_exp = -126;
  if (t == DT::HALF) mant = 10, min_exp = -14;
  if (t == DT::BFLOAT16) mant = 7, min_exp = -126;
  if (t == DT::FP8_E4M3) mant = 3, min_exp = -6;
  if (t == DT::FP8_E5M2) mant = 2, min_exp = -14;
  const int e = x == 0 ? min_exp : std::max(std::ilogb(x), min_exp);
  return std::ldexp(1.0, e - mant);
}

struct Case {
  std::string label;
  std::vector<int64_t> a, b;       // dims
  std::vector<int64_t> b_strides;  // empty: packed
  std::vector<int64_t> c;          // declared C dims; empty: inferred
  DT a_type = DT::FP8_E4M3, b_type = DT::FP8_E4M3, c_type = DT::BFLOAT16;
  double descale_a = 0.5, descale_b = 0.25, scale_c = 3.0;
  bool fp64 = false;
  std::optional<int64_t> m_override;  // one value for every batch
  double padding = 0;
  double lo = -4, hi = 4;  // range of the stored operand values
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

struct Naive {
  std::vector<double> c_unscaled;  // C' = (A @ B) * descale_a * descale_b, dims of C
  double amax = 0;
};

// C' from the stored values: broadcast batches, the head-group sum when C has fewer heads, the overridden
// rows holding the padding value before the descales.
Naive naive(const Case& cs, const HostTensor& a, const HostTensor& b, const std::vector<int64_t>& c_dims) {
  const auto& ad = a.t->get_dim();
  const auto& bd = b.t->get_dim();
  const size_t rank = c_dims.size();
  const int64_t m = c_dims[rank - 2], n = c_dims[rank - 1], k = ad.back();
  const bool grouped = rank == 4 && ad.size() == 4 && bd.size() == 4 && ad[1] == bd[1] && ad[1] != c_dims[1];
  const int64_t group = grouped ? ad[1] / c_dims[1] : 1;
  std::vector<int64_t> full = c_dims;
  if (group > 1) full[1] *= group;
  auto index = [&](const std::vector<int64_t>& dims, const std::vector<int64_t>& batch, int64_t r, int64_t col) {
    const size_t pad = batch.size() - (dims.size() - 2);
    int64_t idx = 0;
    for (size_t i = 0; i + 2 < dims.size(); ++i) idx = idx * dims[i] + (dims[i] == 1 ? 0 : batch[pad + i]);
    return (idx * dims[dims.size() - 2] + r) * dims.back() + col;
  };
  int64_t batches = 1;
  for (size_t i = 0; i + 2 < rank; ++i) batches *= full[i];
  std::vector<double> product(static_cast<size_t>(batches * m * n), cs.padding);
  std::vector<int64_t> batch(rank - 2);
  for (int64_t bt = 0; bt < batches; ++bt) {
    for (int64_t rest = bt, i = static_cast<int64_t>(rank) - 3; i >= 0; --i) {
      batch[static_cast<size_t>(i)] = rest % full[static_cast<size_t>(i)];
      rest /= full[static_cast<size_t>(i)];
    }
    const int64_t rows = cs.m_override ? *cs.m_override : m;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk) s += a.get(index(ad, batch, i, kk)) * b.get(index(bd, batch, kk, j));
        product[static_cast<size_t>((bt * m + i) * n + j)] = s;
      }
  }
  Naive r;
  r.c_unscaled.assign(static_cast<size_t>(batches / group * m * n), 0.0);
  for (size_t e = 0; e < product.size(); ++e) {
    // Heads g * hc + t of the product sum into head hc of C.
    const size_t plane = static_cast<size_t>(m * n), bt = e / plane;
    const size_t heads = group > 1 ? static_cast<size_t>(c_dims[1] * group) : 1;
    const size_t out_bt = group > 1 ? (bt / heads) * static_cast<size_t>(c_dims[1]) + (bt % heads) / group : bt;
    r.c_unscaled[out_bt * plane + e % plane] += product[e];
  }
  const double descale = static_cast<float>(cs.descale_a) * static_cast<double>(static_cast<float>(cs.descale_b));
  for (double& x : r.c_unscaled) {
    x *= descale;
    r.amax = std::max(r.amax, std::fabs(x));
  }
  return r;
}

// The stored value of x in `t`, saturating for FP8 as the op stores.
double stored(DT t, double x) {
  return t == DT::FP8_E4M3 || t == DT::FP8_E5M2 ? detail::round_to_saturated(t, x) : detail::round_to(t, x);
}

struct Setup {
  graph::Graph g;
  std::unique_ptr<HostTensor> a, b, descale_a, descale_b, scale_c, m_override, c, amax;
  std::vector<HostTensor*> buffers() {
    std::vector<HostTensor*> v{a.get(), b.get(), descale_a.get(), descale_b.get(), scale_c.get(), c.get(), amax.get()};
    if (m_override) v.push_back(m_override.get());
    return v;
  }
};

std::unique_ptr<Setup> make_setup(const Case& cs, uint64_t seed) {
  auto s = std::make_unique<Setup>();
  s->g.set_compute_data_type(cs.fp64 ? DT::DOUBLE : DT::FLOAT);
  std::mt19937_64 rng(seed);
  s->a = std::make_unique<HostTensor>(input(s->g, "a", cs.a, cs.a_type, detail::packed_strides(cs.a)));
  s->b = std::make_unique<HostTensor>(
      input(s->g, "b", cs.b, cs.b_type, cs.b_strides.empty() ? detail::packed_strides(cs.b) : cs.b_strides));
  s->a->fill_random(rng, cs.lo, cs.hi);
  s->b->fill_random(rng, cs.lo, cs.hi);
  auto scalar = [&](const char* name, double v) {
    auto h = std::make_unique<HostTensor>(input(s->g, name, {1, 1, 1, 1}, DT::FLOAT, {1, 1, 1, 1}));
    h->set(0, v);
    return h;
  };
  s->descale_a = scalar("descale_a", cs.descale_a);
  s->descale_b = scalar("descale_b", cs.descale_b);
  s->scale_c = scalar("scale_c", cs.scale_c);
  Matmul_fp8_attributes attr;
  attr.set_name("mm8").set_padding(cs.padding);
  if (cs.m_override) {
    std::vector<int64_t> d(std::max(cs.a.size(), cs.b.size()), 1);
    s->m_override = std::make_unique<HostTensor>(input(s->g, "m", d, DT::INT32, detail::packed_strides(d)));
    s->m_override->set(0, static_cast<double>(*cs.m_override));
    attr.set_m_override(s->m_override->t);
  }
  auto [c, amax] = s->g.matmul_fp8(s->a->t, s->b->t, s->descale_a->t, s->descale_b->t, s->scale_c->t, attr);
  c->set_output(true).set_data_type(cs.c_type);
  if (!cs.c.empty()) c->set_dim(cs.c);
  amax->set_output(true);
  const error_t e = s->g.validate();
  EXPECT_TRUE(e.is_good()) << e.get_message();
  if (e.is_bad()) return nullptr;
  s->c = std::make_unique<HostTensor>(c);
  s->amax = std::make_unique<HostTensor>(amax);
  s->c->poison();
  s->amax->poison();
  return s;
}

class MatmulFp8Cases : public ::testing::TestWithParam<Case> {};

TEST_P(MatmulFp8Cases, MatchesNaiveFormula) {
  const Case& cs = GetParam();
  auto s = make_setup(cs, 42);
  ASSERT_TRUE(s);
  const error_t e = build_and_run(s->g, s->buffers());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const Naive want = naive(cs, *s->a, *s->b, s->c->t->get_dim());
  ASSERT_GT(want.amax, 0.0);
  const double scale_c = static_cast<float>(cs.scale_c);
  const std::vector<double> got = s->c->values();
  ASSERT_EQ(got.size(), want.c_unscaled.size());
  // FP32 accumulation noise scales with the largest result, not with each (possibly cancelling) sum.
  const double noise = 1e-6 * want.amax * scale_c;
  for (size_t i = 0; i < got.size(); ++i) {
    const double exact = want.c_unscaled[i] * scale_c;
    const double expect = stored(cs.c_type, exact);
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " was not written";
    // fp64: the stored value of the exact result; FP32: within one step of the type (accumulation order).
    if (cs.fp64)
      ASSERT_EQ(got[i], expect) << "element " << i << " exact " << exact;
    else
      ASSERT_LE(std::fabs(got[i] - expect), step(cs.c_type, expect) * 1.0001 + noise)
          << "element " << i << " exact " << exact;
  }
  // The amax is of C' before scale_c, stored as FLOAT.
  EXPECT_NEAR(s->amax->get(0), want.amax, want.amax * (cs.fp64 ? 1e-7 : 1e-5));
}

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  auto add = [&](Case c) {
    cs.push_back(c);
    c.label += "_fp64";
    c.fp64 = true;
    cs.push_back(c);
  };
  add({.label = "e4m3_bf16_batched", .a = {2, 17, 33}, .b = {2, 33, 5}});
  // |C'| is ~30 here; scale_c 32 sends much of it past 448: FP8 outputs saturate instead of going to NaN.
  add({.label = "e5m2_e4m3_to_e4m3_saturating",
       .a = {17, 33},
       .b = {33, 9},
       .a_type = DT::FP8_E5M2,
       .c_type = DT::FP8_E4M3,
       .descale_a = 1,
       .descale_b = 1,
       .scale_c = 32});
  add({.label = "e5m2_out_saturating",
       .a = {5, 64},
       .b = {64, 3},
       .a_type = DT::FP8_E5M2,
       .b_type = DT::FP8_E5M2,
       .c_type = DT::FP8_E5M2,
       .descale_a = 64,
       .descale_b = 64,
       .scale_c = 4,
       .lo = 8,
       .hi = 12});
  add({.label = "half_broadcast_n1_float",
       .a = {3, 1, 7, 9},
       .b = {1, 2, 9, 1},
       .a_type = DT::HALF,
       .b_type = DT::HALF,
       .c_type = DT::FLOAT});
  add({.label = "bf16_b_transposed_half_out",
       .a = {1, 17},
       .b = {17, 11},
       .b_strides = {1, 17},
       .a_type = DT::BFLOAT16,
       .b_type = DT::BFLOAT16,
       .c_type = DT::HALF});
  add({.label = "ones", .a = {1, 1}, .b = {1, 1}, .c_type = DT::FLOAT});
  add({.label = "gqa_heads_sum", .a = {2, 4, 5, 6}, .b = {2, 4, 6, 3}, .c = {2, 2, 5, 3}, .c_type = DT::FLOAT});
  add({.label = "m_override_padding_scaled",
       .a = {2, 9, 8},
       .b = {2, 8, 4},
       .c_type = DT::FLOAT,
       .m_override = 5,
       .padding = 1.5});
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Sweep, MatmulFp8Cases, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.label; });

TEST(MatmulFp8, SaturatedCasesDoSaturateAndTheCheckerSeesAmaxBeforeScale) {
  const Case cs = all_cases()[2];  // e4m3 output, scale_c 32, fp32
  ASSERT_EQ(cs.c_type, DT::FP8_E4M3);
  auto s = make_setup(cs, 42);
  ASSERT_TRUE(s);
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  const Naive want = naive(cs, *s->a, *s->b, s->c->t->get_dim());
  int saturated = 0;
  for (double x : s->c->values()) saturated += std::fabs(x) == 448.0;
  EXPECT_GT(saturated, 10);
  EXPECT_NEAR(s->amax->get(0), want.amax, want.amax * 1e-5);
  // An amax taken after scale_c would be 32x larger: the check can tell them apart.
  EXPECT_GT(std::fabs(s->amax->get(0) - want.amax * cs.scale_c), want.amax);
}

TEST(MatmulFp8, E5m2OutputSaturatesInsteadOfInfinity) {
  const Case cs = all_cases()[4];
  ASSERT_EQ(cs.c_type, DT::FP8_E5M2);
  auto s = make_setup(cs, 3);
  ASSERT_TRUE(s);
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  int at_max = 0;
  for (double x : s->c->values()) {
    EXPECT_TRUE(std::isfinite(x));
    at_max += std::fabs(x) == 57344.0;
  }
  EXPECT_GT(at_max, 0);
  // A plain store would have given infinity for these: the naive without saturation disagrees.
  EXPECT_TRUE(std::isinf(detail::round_to(DT::FP8_E5M2, s->amax->get(0) * 4)));
}

TEST(MatmulFp8, OverrideOutOfRangeFailsAndLeavesOutputsUntouched) {
  Case cs{.label = "bad", .a = {2, 9, 8}, .b = {2, 8, 4}, .c_type = DT::FLOAT, .m_override = 5};
  auto s = make_setup(cs, 1);
  ASSERT_TRUE(s);
  s->m_override->set(0, 10);
  const auto before = s->c->bytes, amax_before = s->amax->bytes;
  const error_t e = build_and_run(s->g, s->buffers());
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("M_OVERRIDE"), std::string::npos) << e.get_message();
  EXPECT_EQ(s->c->bytes, before);
  EXPECT_EQ(s->amax->bytes, amax_before);
}

TEST(MatmulFp8, JsonRoundTripIsBitwiseIdentical) {
  const Case cs = all_cases()[12];  // GQA
  auto s = make_setup(cs, 9);
  ASSERT_TRUE(s);
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  const auto c_first = s->c->bytes, amax_first = s->amax->bytes;
  std::string text;
  ASSERT_TRUE(s->g.serialize(text).is_good());
  EXPECT_NE(text.find("\"MATMUL_FP8\""), std::string::npos);
  graph::Graph replay;
  const error_t e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  s->c->poison();
  s->amax->poison();
  ASSERT_TRUE(build_and_run(replay, s->buffers()).is_good());
  EXPECT_EQ(s->c->bytes, c_first);
  EXPECT_EQ(s->amax->bytes, amax_first);
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

TEST(MatmulFp8, ErrorsNameNodeAttributeAndValue) {
  using E = error_code_t;
  struct Decl {
    std::vector<int64_t> a{2, 5, 8}, b{2, 8, 3}, descale_b{1, 1, 1, 1}, c;
    DT a_type = DT::FP8_E4M3, scale_type = DT::FLOAT, c_type = DT::BFLOAT16, amax_type = DT::FLOAT;
    bool null_descale_a = false;
  };
  struct ErrorCase {
    const char* what;
    std::function<void(Decl&)> tweak;
    E code;
    std::vector<std::string> mentions;
  };
  const std::vector<ErrorCase> cases = {
      {"a type", [](Decl& d) { d.a_type = DT::INT8; }, E::INVALID_VALUE, {"A.data_type", "INT8"}},
      {"k",
       [](Decl& d) {
         d.b = {2, 7, 3};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"B.dim", "[2, 7, 3]"}},
      {"batch",
       [](Decl& d) {
         d.b = {3, 8, 3};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"batch dims"}},
      {"null descale", [](Decl& d) { d.null_descale_a = true; }, E::ATTRIBUTE_NOT_SET, {"DESCALE_A"}},
      {"descale dims", [](Decl& d) { d.descale_b = {2}; }, E::INVALID_VALUE, {"DESCALE_B", "[2]"}},
      {"scale type", [](Decl& d) { d.scale_type = DT::HALF; }, E::INVALID_VALUE, {"SCALE_C", "HALF"}},
      {"c dims",
       [](Decl& d) {
         d.c = {2, 5, 4};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"C.dim", "[2, 5, 4]"}},
      {"c type", [](Decl& d) { d.c_type = DT::INT32; }, E::INVALID_VALUE, {"C.data_type", "INT32"}},
      {"amax type", [](Decl& d) { d.amax_type = DT::HALF; }, E::SHAPE_DEDUCTION_FAILED, {"AMAX_C", "HALF"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Decl d;
    c.tweak(d);
    graph::Graph g;
    auto one = [&](const char* name, std::vector<int64_t> dims = {1, 1, 1, 1}, DT dt = DT::FLOAT) {
      return input(g, name, dims, dt);
    };
    auto [out, amax] = g.matmul_fp8(input(g, "a", d.a, d.a_type), input(g, "b", d.b, DT::FP8_E4M3),
                                    d.null_descale_a ? nullptr : one("da"), one("db", d.descale_b),
                                    one("sc", {1, 1, 1, 1}, d.scale_type), Matmul_fp8_attributes().set_name("mm8"));
    out->set_output(true).set_data_type(d.c_type);
    if (!d.c.empty()) out->set_dim(d.c);
    amax->set_output(true).set_data_type(d.amax_type);
    const error_t e = g.validate();
    EXPECT_EQ(e.get_code(), c.code) << e.get_message();
    EXPECT_NE(e.get_message().find("mm8"), std::string::npos) << e.get_message();
    for (const auto& m : c.mentions)
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  }
}

}  // namespace
}  // namespace frost::test
