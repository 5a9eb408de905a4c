#include <cmath>
#include <functional>
#include <memory>
#include <tuple>

#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;

// Half the relative spacing of a type's values: the rounding error of one store.
double store_eps(DT t) {
  switch (t) {
    case DT::HALF:
      return std::ldexp(1.0, -11);
    case DT::BFLOAT16:
      return std::ldexp(1.0, -8);
    case DT::FP8_E4M3:
      return std::ldexp(1.0, -4);
    case DT::FP8_E5M2:
      return std::ldexp(1.0, -3);
    default:
      return std::ldexp(1.0, -24);
  }
}

// Row-major index into `dims` of the element that the broadcast batch index `out_batch` reads (the
// last two dims of `dims` are the matrix, taken at (row, col)).
int64_t operand_index(const std::vector<int64_t>& out_batch, const std::vector<int64_t>& dims, int64_t row,
                      int64_t col) {
  const size_t batch_rank = dims.size() - 2;
  const size_t pad = out_batch.size() - batch_rank;
  int64_t idx = 0;
  for (size_t i = 0; i < batch_rank; ++i) idx = idx * dims[i] + (dims[i] == 1 ? 0 : out_batch[pad + i]);
  return (idx * dims[batch_rank] + row) * dims[batch_rank + 1] + col;
}

// C = A @ B in double from the stored values, with optional per-batch effective extents.
struct Naive {
  std::vector<double> c;
  std::vector<int64_t> c_dims;
};
Naive naive_matmul(const HostTensor& a, const HostTensor& b, double padding = 0,
                   const std::function<int64_t(int64_t batch, char which)>& eff = nullptr) {
  const auto& ad = a.t->get_dim();
  const auto& bd = b.t->get_dim();
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  const size_t rank = std::max(ad.size(), bd.size());
  std::vector<int64_t> batch(rank - 2, 1);
  for (size_t i = 0; i + 2 < rank; ++i) {
    const int64_t ea = i + ad.size() >= rank ? ad[i + ad.size() - rank] : 1;
    const int64_t eb = i + bd.size() >= rank ? bd[i + bd.size() - rank] : 1;
    batch[i] = std::max(ea, eb);
  }
  int64_t batches = 1;
  for (int64_t e : batch) batches *= e;
  Naive r;
  r.c_dims = batch;
  r.c_dims.push_back(m);
  r.c_dims.push_back(n);
  r.c.assign(static_cast<size_t>(batches * m * n), padding);
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t bt = 0; bt < batches; ++bt) {
    int64_t rest = bt;
    for (size_t i = batch.size(); i-- > 0;) {
      idx[i] = rest % batch[i];
      rest /= batch[i];
    }
    const int64_t me = eff ? eff(bt, 'M') : m, ne = eff ? eff(bt, 'N') : n, ke = eff ? eff(bt, 'K') : k;
    for (int64_t i = 0; i < me; ++i)
      for (int64_t j = 0; j < ne; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < ke; ++kk)
          s += a.get(operand_index(idx, ad, i, kk)) * b.get(operand_index(idx, bd, kk, j));
        r.c[static_cast<size_t>((bt * m + i) * n + j)] = s;
      }
  }
  return r;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

void expect_error(graph::Graph& g, error_code_t code, const std::vector<std::string>& parts) {
  auto e = g.validate();
  EXPECT_EQ(e.get_code(), code) << e.get_message();
  for (const auto& p : parts)
    EXPECT_NE(e.get_message().find(p), std::string::npos) << "'" << p << "' not in: " << e.get_message();
}

struct TypeCase {
  DT a, b, c;
};

class MatmulTypes : public ::testing::TestWithParam<TypeCase> {};

TEST_P(MatmulTypes, MatchesNaiveWithBatchBroadcast) {
  const TypeCase tc = GetParam();
  // Right-aligned batch broadcast with odd extents, a vector-times-vector case and a rank-3 B against a rank-3 A.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 1, 17, 33}, {3, 33, 5}}, {{1, 111}, {111, 1}}, {{1, 1, 17}, {4, 17, 111}}};
  std::mt19937_64 rng(static_cast<uint64_t>(tc.a) * 131 + static_cast<uint64_t>(tc.b) * 7 +
                      static_cast<uint64_t>(tc.c));
  for (const auto& [adims, bdims] : shapes) {
    graph::Graph g;
    g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
    auto a = input(g, "a", adims, tc.a);
    auto b = input(g, "b", bdims, tc.b);
    auto c = g.matmul(a, b, graph::Matmul_attributes().set_name("mm"));
    c->set_output(true).set_data_type(tc.c);
    ASSERT_TRUE(g.validate().is_good());
    HostTensor ab(a), bb(b), cb(c);
    ab.fill_random(rng);
    bb.fill_random(rng);
    cb.poison();
    auto e = build_and_run(g, {&ab, &bb, &cb});
    ASSERT_TRUE(e.is_good()) << e.get_message();
    const Naive want = naive_matmul(ab, bb);
    ASSERT_EQ(c->get_dim(), want.c_dims);
    const int64_t k = adims.back();
    // One rounding on store plus FP32 accumulation over K terms of magnitude <= 1.
    EXPECT_CLOSE(cb.values(), want.c, max_abs(want.c) * store_eps(tc.c) + static_cast<double>(k) * 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatmulTypes,
                         ::testing::Values(TypeCase{DT::FLOAT, DT::FLOAT, DT::FLOAT},
                                           TypeCase{DT::HALF, DT::HALF, DT::HALF},
                                           TypeCase{DT::BFLOAT16, DT::BFLOAT16, DT::BFLOAT16},
                                           TypeCase{DT::FP8_E4M3, DT::FP8_E4M3, DT::FLOAT},
                                           TypeCase{DT::FP8_E5M2, DT::FP8_E5M2, DT::BFLOAT16},
                                           TypeCase{DT::BFLOAT16, DT::FP8_E4M3, DT::FLOAT},
                                           TypeCase{DT::HALF, DT::FLOAT, DT::HALF}),
                         [](const auto& info) {
                           return std::string(to_string(info.param.a)) + "_" + std::string(to_string(info.param.b)) +
                                  "_" + std::string(to_string(info.param.c));
                         });

TEST(Matmul, TransposedLayoutsAndStridedOutput) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT);
  // A stored K-major (each matrix transposed in memory), B column-major and broadcast over the batch,
  // C column-major: every element is addressed through its strides.
  auto a = input(g, "a", {3, 17, 33}, DT::FLOAT, {17 * 33, 1, 17});
  auto b = input(g, "b", {1, 33, 5}, DT::FLOAT, {165, 1, 33});
  auto c = g.matmul(a, b, graph::Matmul_attributes());
  c->set_output(true).set_stride({85, 1, 17});
  ASSERT_TRUE(g.validate().is_good());
  HostTensor ab(a), bb(b), cb(c);
  std::mt19937_64 rng(11);
  ab.fill_random(rng);
  bb.fill_random(rng);
  cb.poison();
  ASSERT_TRUE(build_and_run(g, {&ab, &bb, &cb}).is_good());
  EXPECT_CLOSE(cb.values(), naive_matmul(ab, bb).c, 1e-5);
}

TEST(Matmul, Fp64ModeAccumulatesInDouble) {
  // DOUBLE operands and output: the fp64 mode keeps them exact to rounding in double; the fp32 mode
  // cannot, which shows the mode is what decides.
  std::vector<double> errors;
  for (DT compute : {DT::DOUBLE, DT::FLOAT}) {
    graph::Graph g;
    g.set_io_data_type(DT::DOUBLE).set_compute_data_type(compute);
    auto a = input(g, "a", {2, 1000}, DT::DOUBLE);
    auto b = input(g, "b", {1000, 3}, DT::DOUBLE);
    auto c = g.matmul(a, b, graph::Matmul_attributes());
    c->set_output(true);
    ASSERT_TRUE(g.validate().is_good());
    HostTensor ab(a), bb(b), cb(c);
    std::mt19937_64 rng(5);
    ab.fill_random(rng);
    bb.fill_random(rng);
    cb.poison();
    ASSERT_TRUE(build_and_run(g, {&ab, &bb, &cb}).is_good());
    auto s = compare(cb.values(), naive_matmul(ab, bb).c);
    errors.push_back(s.max_abs);
  }
  EXPECT_LE(errors[0], 1e-12);
  EXPECT_GT(errors[1], 1e-9);
}

TEST(Matmul, OverridesLimitRowsColsAndTermsPerBatch) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT);
  auto a = input(g, "a", {2, 3, 17, 33});
  auto b = input(g, "b", {33, 5});
  auto m_ov = input(g, "m_override", {2, 3, 1, 1}, DT::INT32);
  auto n_ov = input(g, "n_override", {1, 3, 1, 1}, DT::INT64);  // shared along the first batch dim
  auto k_ov = input(g, "k_override", {2, 3, 1, 1}, DT::INT32);
  auto c = g.matmul(
      a, b,
      graph::Matmul_attributes().set_m_override(m_ov).set_n_override(n_ov).set_k_override(k_ov).set_padding(-7.5));
  c->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor ab(a), bb(b), mb(m_ov), nb(n_ov), kb(k_ov), cb(c);
  std::mt19937_64 rng(17);
  ab.fill_random(rng);
  bb.fill_random(rng);
  const std::vector<int64_t> ms = {17, 0, 9, 1, 16, 17}, ns = {5, 2, 0}, ks = {33, 1, 20, 0, 33, 7};
  for (int64_t i = 0; i < 6; ++i) {
    mb.set(i, static_cast<double>(ms[static_cast<size_t>(i)]));
    kb.set(i, static_cast<double>(ks[static_cast<size_t>(i)]));
  }
  for (int64_t i = 0; i < 3; ++i) nb.set(i, static_cast<double>(ns[static_cast<size_t>(i)]));
  cb.poison();
  auto e = build_and_run(g, {&ab, &bb, &mb, &nb, &kb, &cb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  auto eff = [&](int64_t bt, char which) {
    const size_t i = static_cast<size_t>(bt);
    return which == 'M' ? ms[i] : which == 'N' ? ns[i % 3] : ks[i];
  };
  EXPECT_CLOSE(cb.values(), naive_matmul(ab, bb, -7.5, eff).c, 1e-5);
}

TEST(Matmul, OverrideBeyondExtentFailsAndLeavesOutputUntouched) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT);
  auto a = input(g, "a", {2, 4, 6});
  auto b = input(g, "b", {2, 6, 3});
  auto m_ov = input(g, "m_override", {2, 1, 1}, DT::INT32);
  auto c = g.matmul(a, b, graph::Matmul_attributes().set_name("mm_over").set_m_override(m_ov));
  c->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor ab(a), bb(b), mb(m_ov), cb(c);
  std::mt19937_64 rng(2);
  ab.fill_random(rng);
  bb.fill_random(rng);
  mb.set(0, 4);
  mb.set(1, 5);
  cb.poison();
  auto e = build_and_run(g, {&ab, &bb, &mb, &cb});
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("mm_over"), std::string::npos) << e.get_message();
  EXPECT_NE(e.get_message().find("M_OVERRIDE"), std::string::npos) << e.get_message();
  EXPECT_NE(e.get_message().find("= 5"), std::string::npos) << e.get_message();
  for (double v : cb.values()) EXPECT_TRUE(std::isnan(v));
}

TEST(Matmul, ErrorsNameNodeAttributeAndValue) {
  auto make = [](std::vector<int64_t> ad, std::vector<int64_t> bd, DT at = DT::FLOAT) {
    auto g = std::make_unique<graph::Graph>();
    g->set_io_data_type(DT::FLOAT);
    auto a = input(*g, "a", std::move(ad), at);
    auto b = input(*g, "b", std::move(bd));
    return std::make_tuple(std::move(g), a, b);
  };
  {
    auto [g, a, b] = make({4, 5}, {6, 7});
    g->matmul(a, b, graph::Matmul_attributes().set_name("mm"));
    expect_error(*g, error_code_t::SHAPE_DEDUCTION_FAILED, {"'mm'", "B.dim", "[6, 7]", "K = 5"});
  }
  {
    auto [g, a, b] = make({2, 4, 5}, {3, 5, 7});
    g->matmul(a, b, graph::Matmul_attributes().set_name("mm"));
    expect_error(*g, error_code_t::SHAPE_DEDUCTION_FAILED, {"'mm'", "batch", "[2, 4, 5] and [3, 5, 7]"});
  }
  {
    auto [g, a, b] = make({5}, {5, 7});
    g->matmul(a, b, graph::Matmul_attributes().set_name("mm"));
    expect_error(*g, error_code_t::SHAPE_DEDUCTION_FAILED, {"'mm'", "A.dim", "[5]"});
  }
  {
    auto [g, a, b] = make({4, 5}, {5, 7}, DT::INT32);
    g->matmul(a, b, graph::Matmul_attributes().set_name("mm"));
    expect_error(*g, error_code_t::INVALID_VALUE, {"'mm'", "A.data_type", "INT32"});
  }
  {
    auto [g, a, b] = make({2, 4, 5}, {5, 7});
    auto ov = input(*g, "ov", {2, 1, 1}, DT::FLOAT);
    g->matmul(a, b, graph::Matmul_attributes().set_name("mm").set_m_override(ov));
    expect_error(*g, error_code_t::INVALID_VALUE, {"'mm'", "M_OVERRIDE.data_type", "FLOAT"});
  }
  {
    auto [g, a, b] = make({2, 4, 5}, {5, 7});
    auto ov = input(*g, "ov", {2, 1}, DT::INT32);
    g->matmul(a, b, graph::Matmul_attributes().set_name("mm").set_n_override(ov));
    expect_error(*g, error_code_t::SHAPE_DEDUCTION_FAILED, {"'mm'", "N_OVERRIDE.dim", "[2, 1]", "[2, 1, 1]"});
  }
  {
    auto [g, a, b] = make({2, 4, 5}, {5, 7});
    auto ov = input(*g, "ov", {3, 1, 1}, DT::INT64);
    g->matmul(a, b, graph::Matmul_attributes().set_name("mm").set_k_override(ov));
    expect_error(*g, error_code_t::SHAPE_DEDUCTION_FAILED, {"'mm'", "K_OVERRIDE.dim", "[3, 1, 1]"});
  }
  {
    auto [g, a, b] = make({4, 5}, {5, 7});
    auto c = g->matmul(a, b, graph::Matmul_attributes().set_name("mm"));
    c->set_dim({4, 8});
    expect_error(*g, error_code_t::SHAPE_DEDUCTION_FAILED, {"'mm'", "C.dim", "[4, 8]", "[4, 7]"});
  }
  {
    auto [g, a, b] = make({4, 5}, {5, 7});
    g->matmul(a, nullptr, graph::Matmul_attributes().set_name("mm"));
    expect_error(*g, error_code_t::ATTRIBUTE_NOT_SET, {"'mm'", "B"});
  }
}

TEST(Matmul, JsonRoundTripRunsBitwiseEqual) {
  graph::Graph g;
  g.set_io_data_type(DT::BFLOAT16).set_compute_data_type(DT::FLOAT);
  auto a = input(g, "a", {2, 17, 33}, DT::BFLOAT16, {17 * 33, 1, 17});
  auto b = input(g, "b", {33, 5}, DT::FP8_E4M3);
  auto k_ov = input(g, "k_override", {2, 1, 1}, DT::INT64);
  auto c = g.matmul(a, b, graph::Matmul_attributes().set_name("mm").set_k_override(k_ov).set_padding(3.0));
  c->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  graph::Graph g2;
  auto e = g2.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  HostTensor ab(a), bb(b), kb(k_ov), cb(c);
  std::mt19937_64 rng(23);
  ab.fill_random(rng);
  bb.fill_random(rng);
  kb.set(0, 33);
  kb.set(1, 12);
  cb.poison();
  ASSERT_TRUE(build_and_run(g, {&ab, &bb, &kb, &cb}).is_good());
  const std::vector<uint8_t> first = cb.bytes;
  cb.poison();
  e = build_and_run(g2, {&ab, &bb, &kb, &cb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(cb.bytes, first);
  std::string text2;
  ASSERT_TRUE(g2.serialize(text2).is_good());
  EXPECT_EQ(text2, text);
}

}  // namespace
}  // namespace frost::test
