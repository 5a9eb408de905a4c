#include <cmath>
#include <cstring>

#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;

// ---- Independent naive formulas, in double, on row-major values ----

double max_finite(DT values) { return values == DT::FP8_E4M3 ? 448.0 : values == DT::FP8_E5M2 ? 57344.0 : 6.0; }
int emax(DT values) { return values == DT::FP8_E4M3 ? 8 : values == DT::FP8_E5M2 ? 15 : 2; }

double to_element(DT values, double v) {
  if (std::isnan(v)) return detail::round_to(values, v);
  return detail::round_to(values, std::max(-max_finite(values), std::min(max_finite(values), v)));
}

struct Quantized {
  std::vector<double> values, scales;
};

// Blocks of `block` consecutive row-major elements (blocks along the last axis).
Quantized naive_quantize(const std::vector<double>& x, int64_t block, DT values, DT scale_type, double global = 1.0) {
  Quantized q{std::vector<double>(x.size()), {}};
  for (size_t start = 0; start < x.size(); start += static_cast<size_t>(block)) {
    double amax = 0;
    bool finite = true;
    for (int64_t t = 0; t < block; ++t) {
      finite = finite && std::isfinite(x[start + t]);
      amax = std::max(amax, std::fabs(x[start + t]));
    }
    double scale;
    if (!finite) {
      scale = NAN;
    } else if (scale_type == DT::FP8_E8M0) {
      const double e = amax == 0 ? -127.0 : std::floor(std::log2(amax)) - emax(values);
      scale = std::pow(2.0, std::max(-127.0, std::min(127.0, e)));
    } else {
      scale = detail::round_to(DT::FP8_E4M3, amax / (6.0 * global));
    }
    q.scales.push_back(scale);
    for (int64_t t = 0; t < block; ++t) {
      const double v = x[start + t];
      q.values[start + t] = !finite      ? to_element(values, NAN)
                            : scale == 0 ? 0.0
                                         : to_element(values, v / (scale * global));
    }
  }
  return q;
}

void put(HostTensor& h, std::vector<double>& v) {
  for (int64_t n = 0; n < h.volume(); ++n) h.set(n, v[static_cast<size_t>(n)]);
  v = h.values();
}

std::vector<double> random_values(size_t n, std::mt19937_64& rng) {
  // Magnitudes spread over several binades, so blocks get different scales.
  std::uniform_real_distribution<double> u(-1.0, 1.0), e(-6.0, 6.0);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng) * std::exp2(e(rng));
  return v;
}

struct Recipe {
  const char* label;
  DT values, scales;
  int32_t block;
};
const Recipe kRecipes[] = {{"MXFP8_E4M3", DT::FP8_E4M3, DT::FP8_E8M0, 32},
                           {"MXFP8_E5M2", DT::FP8_E5M2, DT::FP8_E8M0, 32},
                           {"MXFP4", DT::FP4_E2M1, DT::FP8_E8M0, 32},
                           {"NVFP4", DT::FP4_E2M1, DT::FP8_E4M3, 16}};

// ---- Quantize and dequantize chained, against the naive rule ----

using Param = std::tuple<int, DT>;

class BlockScale : public ::testing::TestWithParam<Param> {};

TEST_P(BlockScale, QuantizeDequantizeMatchNaive) {
  const auto [ri, dt] = GetParam();
  const Recipe& r = kRecipes[ri];
  const bool fp64 = dt == DT::DOUBLE;
  std::mt19937_64 rng(100 + static_cast<uint64_t>(ri) * 13 + static_cast<uint64_t>(dt));
  const Dims xd = {3, 1, 5, 2 * r.block};
  const int64_t cols = xd[3];
  const bool nvfp4 = r.scales == DT::FP8_E4M3;
  const double global = nvfp4 ? 0.37 : 1.0;
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(fp64 ? DT::DOUBLE : DT::FLOAT);
  // X stored with padded rows and batches (not packed).
  auto x = input(g, "x", xd, dt, {cols * 8 + 3, cols, cols + 1, 1});
  auto qa = graph::Block_scale_quantize_attributes().set_block_size(r.block);
  auto da = graph::Block_scale_dequantize_attributes().set_block_size(r.block);
  TensorPtr gs;
  if (nvfp4) {
    gs = g.tensor(static_cast<float>(global));
    qa.set_global_scale(gs);
    da.set_global_scale(gs);
  }
  auto [q, s] = g.block_scale_quantize(x, qa);
  q->set_data_type(r.values);
  s->set_data_type(r.scales);
  auto y = g.block_scale_dequantize(q, s, da);
  // The quantized pair is also written out, so the stored bytes are checked as well.
  auto q_out = g.block_scale_quantize(x, qa);
  q_out[0]->set_output(true).set_data_type(r.values);
  q_out[1]->set_output(true).set_data_type(r.scales);
  y->set_output(true).set_data_type(fp64 ? DT::DOUBLE : DT::FLOAT);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(q_out[1]->get_dim(), (Dims{3, 1, 5, 2}));
  HostTensor xb(x), yb(y), qb(q_out[0]), sb(q_out[1]);
  std::vector<double> xv = random_values(static_cast<size_t>(xb.volume()), rng);
  put(xb, xv);
  for (HostTensor* h : {&yb, &qb, &sb}) h->poison();
  e = build_and_run(g, {&xb, &yb, &qb, &sb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  // fp32 global scale as the graph holds it.
  const Quantized want = naive_quantize(xv, r.block, r.values, r.scales, static_cast<float>(global));
  EXPECT_EQ(qb.values(), want.values);
  EXPECT_EQ(sb.values(), want.scales);
  std::vector<double> deq(xv.size());
  for (size_t n = 0; n < deq.size(); ++n)
    deq[n] = want.values[n] * want.scales[n / static_cast<size_t>(r.block)] * static_cast<float>(global);
  EXPECT_CLOSE(yb.values(), deq, 1e-6 * 64);
  // And quantization is close to the input. The top binade of a block spans [2^emax, 2^(emax+1)) after
  // scaling; rounding there, or saturating past the largest value, costs at most 1/8 of amax for FP8
  // and 1/4 for FP4 (NVFP4 adds the E4M3 rounding of its scale).
  const double step = r.values == DT::FP4_E2M1 ? 0.25 : 0.125;
  for (size_t b = 0; b < want.scales.size(); ++b) {
    double amax = 0, err = 0;
    for (size_t t = 0; t < static_cast<size_t>(r.block); ++t) {
      const size_t n = b * static_cast<size_t>(r.block) + t;
      amax = std::max(amax, std::fabs(xv[n]));
      err = std::max(err, std::fabs(yb.values()[n] - xv[n]));
    }
    EXPECT_LE(err, amax * step * (nvfp4 ? 1.2 : 1.0) + 1e-6) << "block " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, BlockScale,
                         ::testing::Combine(::testing::Range(0, 4),
                                            ::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF, DT::DOUBLE)),
                         [](const auto& info) {
                           return std::string(kRecipes[std::get<0>(info.param)].label) + "_" +
                                  std::string(to_string(std::get<1>(info.param)));
                         });

// ---- Known answers for edge cases (one block each) ----

struct OneBlock {
  std::vector<double> values, scales;
  std::vector<uint8_t> scale_bytes;
};

OneBlock quantize_one(const std::vector<double>& x, DT values, DT scales, int32_t block, double global = 0,
                      int64_t axis = -1) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const Dims xd = axis == 0 ? Dims{static_cast<int64_t>(x.size()), 1} : Dims{1, static_cast<int64_t>(x.size())};
  auto xt = input(g, "x", xd);
  auto a = graph::Block_scale_quantize_attributes().set_block_size(block).set_axis(axis);
  if (global != 0) a.set_global_scale(g.tensor(static_cast<float>(global)));
  auto [q, s] = g.block_scale_quantize(xt, a);
  q->set_output(true).set_data_type(values);
  s->set_output(true).set_data_type(scales);
  auto e = g.validate();
  EXPECT_TRUE(e.is_good()) << e.get_message();
  HostTensor xb(xt), qb(q), sb(s);
  for (size_t n = 0; n < x.size(); ++n) xb.set(static_cast<int64_t>(n), x[n]);
  qb.poison();
  sb.poison();
  e = build_and_run(g, {&xb, &qb, &sb});
  EXPECT_TRUE(e.is_good()) << e.get_message();
  return {qb.values(), sb.values(), std::vector<uint8_t>(sb.bytes.begin(), sb.bytes.begin() + sb.volume())};
}

TEST(BlockScaleKnownAnswers, ZerosGetTheSmallestScale) {
  const auto r = quantize_one(std::vector<double>(32, 0.0), DT::FP8_E4M3, DT::FP8_E8M0, 32);
  EXPECT_EQ(r.scale_bytes, std::vector<uint8_t>{0x00});  // 2^-127
  for (double v : r.values) EXPECT_EQ(v, 0.0);
  const auto nv = quantize_one(std::vector<double>(16, 0.0), DT::FP4_E2M1, DT::FP8_E4M3, 16);
  EXPECT_EQ(nv.scales, std::vector<double>{0.0});
  for (double v : nv.values) EXPECT_EQ(v, 0.0);
}

TEST(BlockScaleKnownAnswers, OneLargeValueSaturates) {
  std::vector<double> x(32, 1.0);
  x[7] = 1000.0;
  x[8] = -0.01;
  // floor(log2(1000)) = 9. E4M3 (emax 8): scale 2, 1000 / 2 = 500 saturates to 448, 1 -> 0.5,
  // -0.01 / 2 = -0.005 rounds to the nearest subnormal, -3 * 2^-9.
  auto r = quantize_one(x, DT::FP8_E4M3, DT::FP8_E8M0, 32);
  EXPECT_EQ(r.scale_bytes, std::vector<uint8_t>{128});
  EXPECT_EQ(r.values[7], 448.0);
  EXPECT_EQ(r.values[0], 0.5);
  EXPECT_EQ(r.values[8], -0.005859375);
  // E5M2 (emax 15): scale 2^-6, 1000 * 64 = 64000 saturates to 57344; 1 -> 64.
  r = quantize_one(x, DT::FP8_E5M2, DT::FP8_E8M0, 32);
  EXPECT_EQ(r.scale_bytes, std::vector<uint8_t>{121});
  EXPECT_EQ(r.values[7], 57344.0);
  EXPECT_EQ(r.values[0], 64.0);
  // The same block along axis 0 (a column) gives the same answer.
  EXPECT_EQ(quantize_one(x, DT::FP8_E5M2, DT::FP8_E8M0, 32, 0, 0).values, r.values);
}

TEST(BlockScaleKnownAnswers, Nvfp4ScalesAndGlobalScale) {
  std::vector<double> x(16, 0.0);
  x[0] = 6.0, x[1] = 3.0, x[2] = -1.5, x[3] = 0.5, x[4] = 0.3;
  auto r = quantize_one(x, DT::FP4_E2M1, DT::FP8_E4M3, 16);
  EXPECT_EQ(r.scales, std::vector<double>{1.0});  // amax 6 / 6
  EXPECT_EQ(std::vector<double>(r.values.begin(), r.values.begin() + 5), (std::vector<double>{6, 3, -1.5, 0.5, 0.5}));
  // A global scale of 0.5: the block scale becomes e4m3(6 / 3) = 2 and the values are unchanged.
  r = quantize_one(x, DT::FP4_E2M1, DT::FP8_E4M3, 16, 0.5);
  EXPECT_EQ(r.scales, std::vector<double>{2.0});
  EXPECT_EQ(r.values[1], 3.0);
  // Saturation of the scale: amax 6000 wants 1000, E4M3 holds at most 448; 6000 / 448 saturates to 6.
  x[0] = 6000.0;
  r = quantize_one(x, DT::FP4_E2M1, DT::FP8_E4M3, 16);
  EXPECT_EQ(r.scales, std::vector<double>{448.0});
  EXPECT_EQ(r.values[0], 6.0);
  EXPECT_EQ(r.values[1], 0.0);  // 3 / 448 rounds to 0
}

TEST(BlockScaleKnownAnswers, NanAndInfinityPolicy) {
  std::vector<double> x(32, 1.0);
  x[3] = NAN;
  auto r = quantize_one(x, DT::FP8_E4M3, DT::FP8_E8M0, 32);
  EXPECT_EQ(r.scale_bytes, std::vector<uint8_t>{0xFF});  // the E8M0 NaN
  for (double v : r.values) EXPECT_TRUE(std::isnan(v));
  x[3] = INFINITY;
  r = quantize_one(x, DT::FP8_E4M3, DT::FP8_E8M0, 32);
  EXPECT_EQ(r.scale_bytes, std::vector<uint8_t>{0xFF});
  // NVFP4: E2M1 has no NaN, so the values are 0 and the NaN scale carries the mark.
  std::vector<double> y(16, 1.0);
  y[0] = -INFINITY;
  r = quantize_one(y, DT::FP4_E2M1, DT::FP8_E4M3, 16);
  EXPECT_TRUE(std::isnan(r.scales[0]));
  for (double v : r.values) EXPECT_EQ(v, 0.0);
}

// ---- JSON ----

TEST(BlockScaleJson, RoundTripRunsBitwiseEqual) {
  graph::Graph g;
  g.set_io_data_type(DT::BFLOAT16).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", {32, 6}, DT::BFLOAT16);
  auto gs = input(g, "global", {1}, DT::FLOAT);
  auto mx = g.block_scale_quantize(x, graph::Block_scale_quantize_attributes().set_block_size(32).set_axis(0));
  auto nv = g.block_scale_quantize(
      x, graph::Block_scale_quantize_attributes().set_block_size(16).set_axis(0).set_global_scale(gs));
  auto y = g.block_scale_dequantize(
      nv[0], nv[1], graph::Block_scale_dequantize_attributes().set_block_size(16).set_axis(0).set_global_scale(gs));
  const std::vector<TensorPtr> outputs = {mx[0], mx[1], y};
  for (const auto& t : outputs) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(mx[0]->get_data_type(), DT::FP8_E4M3);
  EXPECT_EQ(mx[1]->get_data_type(), DT::FP8_E8M0);
  EXPECT_EQ(nv[0]->get_data_type(), DT::FP4_E2M1);
  EXPECT_EQ(nv[1]->get_data_type(), DT::FP8_E4M3);
  EXPECT_EQ(y->get_data_type(), DT::FLOAT);
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  for (const char* needle :
       {"\"BLOCK_SCALE_QUANTIZE\"", "\"BLOCK_SCALE_DEQUANTIZE\"", "\"block_size\"", "\"GLOBAL_SCALE\""})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  std::mt19937_64 rng(5);
  HostTensor xb(x), gb(gs), b0(outputs[0]), b1(outputs[1]), b2(outputs[2]);
  xb.fill_random(rng, -3, 3);
  gb.set(0, 0.01);
  std::vector<HostTensor*> outs{&b0, &b1, &b2};
  for (auto* h : outs) h->poison();
  ASSERT_TRUE(build_and_run(g, {&xb, &gb, &b0, &b1, &b2}).is_good());
  std::vector<std::vector<uint8_t>> first;
  for (auto* h : outs) {
    first.push_back(h->bytes);
    h->poison();
  }
  graph::Graph replay;
  e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  ASSERT_TRUE(build_and_run(replay, {&xb, &gb, &b0, &b1, &b2}).is_good());
  for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(outs[i]->bytes, first[i]) << i;
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

graph::Block_scale_quantize_attributes qattr(int32_t block) {
  return graph::Block_scale_quantize_attributes().set_name("q0").set_block_size(block);
}

TEST(BlockScaleErrors, BlockGeometry) {
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 32}), qattr(0));
    expect_error(g, error_code_t::ATTRIBUTE_NOT_SET, {"q0", "BLOCK_SCALE_QUANTIZE", "'block_size'", "0"});
  }
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 48}), qattr(32));
    expect_error(g, error_code_t::SHAPE_DEDUCTION_FAILED, {"q0", "'block_size'", "32", "48"});
  }
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 32}), qattr(32).set_axis(2));
    expect_error(g, error_code_t::INVALID_VALUE, {"q0", "'axis'", "2"});
  }
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 32}), qattr(32).set_transpose(true));
    expect_error(g, error_code_t::GRAPH_NOT_SUPPORTED, {"q0", "'transpose'", "true"});
  }
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 24}), qattr(8));
    expect_error(g, error_code_t::ATTRIBUTE_NOT_SET, {"q0", "'Y.data_type'", "NOT_SET"});
  }
}

TEST(BlockScaleErrors, Recipes) {
  {
    graph::Graph g;
    auto out = g.block_scale_quantize(input(g, "x", {4, 32}), qattr(32));
    out[0]->set_data_type(DT::HALF);
    expect_error(g, error_code_t::INVALID_VALUE, {"q0", "'values.data_type'", "HALF"});
  }
  {
    graph::Graph g;
    auto out = g.block_scale_quantize(input(g, "x", {4, 32}), qattr(32));
    out[1]->set_data_type(DT::FP8_E4M3);
    expect_error(g, error_code_t::INVALID_VALUE, {"q0", "'SCALE.data_type'", "FP8_E4M3", "FP4_E2M1"});
  }
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 32}), qattr(32).set_global_scale(g.tensor(1.0f)));
    expect_error(g, error_code_t::INVALID_VALUE, {"q0", "'GLOBAL_SCALE'", "NVFP4"});
  }
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 32}, DT::INT32), qattr(32));
    expect_error(g, error_code_t::INVALID_VALUE, {"q0", "'X.data_type'", "INT32"});
  }
}

TEST(BlockScaleErrors, ScaleTypesAndGlobalScaleOperand) {
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 32}), qattr(32))[1]->set_data_type(DT::HALF);
    expect_error(g, error_code_t::INVALID_VALUE, {"q0", "'SCALE.data_type'", "HALF"});
  }
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 32}), qattr(16).set_global_scale(input(g, "gs", {2})));
    expect_error(g, error_code_t::INVALID_VALUE, {"q0", "'GLOBAL_SCALE.dim'", "[2]"});
  }
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 32}), qattr(16).set_global_scale(g.tensor(int32_t{1})));
    expect_error(g, error_code_t::INVALID_VALUE, {"q0", "'GLOBAL_SCALE.data_type'", "INT32"});
  }
  {
    graph::Graph g;
    g.block_scale_quantize(input(g, "x", {4, 32}), qattr(-16));
    expect_error(g, error_code_t::INVALID_VALUE, {"q0", "'block_size'", "-16"});
  }
  {
    graph::Graph g;
    auto y = g.block_scale_dequantize(input(g, "x", {4, 64}, DT::FP8_E4M3), input(g, "s", {4, 2}, DT::FP8_E8M0),
                                      graph::Block_scale_dequantize_attributes().set_name("dq0").set_block_size(32));
    y->set_dim({4, 32});
    expect_error(g, error_code_t::SHAPE_DEDUCTION_FAILED, {"dq0", "'Y.dim'", "[4, 32]", "[4, 64]"});
  }
}

TEST(BlockScaleErrors, DequantizeOperands) {
  const auto da = graph::Block_scale_dequantize_attributes().set_name("dq0").set_block_size(32);
  {
    graph::Graph g;
    g.block_scale_dequantize(input(g, "x", {4, 64}, DT::FP8_E4M3), input(g, "s", {4, 3}, DT::FP8_E8M0), da);
    expect_error(g, error_code_t::SHAPE_DEDUCTION_FAILED,
                 {"dq0", "BLOCK_SCALE_DEQUANTIZE", "'SCALE.dim'", "[4, 3]", "[4, 2]"});
  }
  {
    graph::Graph g;
    g.block_scale_dequantize(input(g, "x", {4, 64}, DT::FLOAT), input(g, "s", {4, 2}, DT::FP8_E8M0), da);
    expect_error(g, error_code_t::INVALID_VALUE, {"dq0", "'values.data_type'", "FLOAT"});
  }
  {
    graph::Graph g;
    g.block_scale_dequantize(input(g, "x", {4, 64}, DT::FP8_E4M3), nullptr, da);
    expect_error(g, error_code_t::ATTRIBUTE_NOT_SET, {"dq0", "SCALE"});
  }
}

TEST(BlockScaleErrors, NonPositiveGlobalScaleFailsAtExecution) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", {1, 16});
  auto gs = input(g, "gs", {1});
  auto [q, s] = g.block_scale_quantize(x, qattr(16).set_global_scale(gs));
  q->set_output(true);
  s->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor xb(x), gb(gs), qb(q), sb(s);
  gb.set(0, 0.0);
  const auto e = build_and_run(g, {&xb, &gb, &qb, &sb});
  EXPECT_TRUE(e.is_bad());
  EXPECT_NE(e.get_message().find("'GLOBAL_SCALE'"), std::string::npos) << e.get_message();
}

}  // namespace
}  // namespace frost::test
