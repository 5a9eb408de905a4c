#include <cmath>

#include "ops/common/philox.h"
#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;
using detail::philox4x32_10;

// The generator itself is checked against the published known answers in philox_test.cpp.

// ---- The op against the documented element -> (block, word) mapping ----

std::vector<double> naive_mask(int64_t count, uint64_t seed, uint64_t offset, double p) {
  std::vector<double> m(static_cast<size_t>(count));
  for (int64_t n = 0; n < count; ++n) {
    const uint64_t block = static_cast<uint64_t>(n) / 4;
    const auto words = philox4x32_10(
        {uint32_t(block & 0xffffffffu), uint32_t(block >> 32), uint32_t(offset & 0xffffffffu), uint32_t(offset >> 32)},
        {uint32_t(seed & 0xffffffffu), uint32_t(seed >> 32)});
    const double u = words[static_cast<size_t>(n % 4)] / 4294967296.0;
    m[static_cast<size_t>(n)] = u < p ? 1.0 : 0.0;
  }
  return m;
}

struct RngRun {
  std::vector<double> mask;
  std::string json;
};

// seed/offset as device INT64 buffers when `buffers`, else as pass-by-value scalars.
RngRun run_rng(const Dims& dims, const Dims& strides, DT out_type, DT compute, uint64_t seed, uint64_t offset, double p,
               bool buffers) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT).set_compute_data_type(compute);
  TensorPtr s, o;
  if (buffers) {
    s = input(g, "seed", {1}, DT::INT64);
    o = input(g, "offset", {1, 1}, DT::INT64);
  } else {
    s = g.tensor(static_cast<int64_t>(seed));
    o = g.tensor(static_cast<int64_t>(offset));
  }
  auto y =
      g.rng(s, o, graph::Rng_attributes().set_distribution(RngDistribution_t::BERNOULLI).set_bernoulli_probability(p));
  y->set_output(true).set_dim(dims).set_data_type(out_type);
  if (!strides.empty()) y->set_stride(strides);
  auto e = g.validate();
  EXPECT_TRUE(e.is_good()) << e.get_message();
  HostTensor yb(y);
  yb.poison();
  std::vector<HostTensor*> pack{&yb};
  std::unique_ptr<HostTensor> sb, ob;
  if (buffers) {
    sb = std::make_unique<HostTensor>(s);
    ob = std::make_unique<HostTensor>(o);
    sb->set(0, static_cast<double>(seed));
    ob->set(0, static_cast<double>(offset));
    pack.push_back(sb.get());
    pack.push_back(ob.get());
  }
  e = build_and_run(g, pack);
  EXPECT_TRUE(e.is_good()) << e.get_message();
  RngRun r{yb.values(), ""};
  EXPECT_TRUE(g.serialize(r.json).is_good());
  return r;
}

TEST(RngBernoulli, MatchesPhiloxMappingOnOddShapesAndTypes) {
  const double p = 0.37;
  for (DT out_type : {DT::FLOAT, DT::HALF, DT::BFLOAT16, DT::UINT8, DT::BOOLEAN})
    for (bool buffers : {false, true}) {
      const Dims dims = {3, 5, 17};
      const auto got = run_rng(dims, {}, out_type, DT::FLOAT, 987654321012ull, 77, p, buffers).mask;
      EXPECT_EQ(got, naive_mask(3 * 5 * 17, 987654321012ull, 77, p)) << to_string(out_type) << " " << buffers;
    }
}

TEST(RngBernoulli, StridedOutputAndFp64ModeAgree) {
  // Y [7, 1, 11] stored column-major with padding: the mask follows the logical row-major order.
  const Dims dims = {7, 1, 11};
  const auto want = naive_mask(77, 5, (1ull << 40) + 3, 0.5);
  EXPECT_EQ(run_rng(dims, {1, 200, 9}, DT::FLOAT, DT::FLOAT, 5, (1ull << 40) + 3, 0.5, true).mask, want);
  EXPECT_EQ(run_rng(dims, {}, DT::DOUBLE, DT::DOUBLE, 5, (1ull << 40) + 3, 0.5, false).mask, want);
}

TEST(RngBernoulli, StatisticsSeedsAndEndpoints) {
  const Dims dims = {111, 64};
  const double n = 111.0 * 64.0;
  const auto a = run_rng(dims, {}, DT::FLOAT, DT::FLOAT, 42, 0, 0.3, false).mask;
  double ones = 0;
  for (double v : a) ones += v;
  EXPECT_NEAR(ones / n, 0.3, 4 * std::sqrt(0.3 * 0.7 / n));  // 4 sigma
  EXPECT_EQ(a, run_rng(dims, {}, DT::FLOAT, DT::FLOAT, 42, 0, 0.3, false).mask) << "deterministic";
  EXPECT_NE(a, run_rng(dims, {}, DT::FLOAT, DT::FLOAT, 43, 0, 0.3, false).mask) << "the seed matters";
  EXPECT_NE(a, run_rng(dims, {}, DT::FLOAT, DT::FLOAT, 42, 1, 0.3, false).mask) << "the offset matters";
  for (double v : run_rng({17}, {}, DT::FLOAT, DT::FLOAT, 1, 2, 0.0, false).mask) EXPECT_EQ(v, 0.0);
  for (double v : run_rng({17}, {}, DT::FLOAT, DT::FLOAT, 1, 2, 1.0, false).mask) EXPECT_EQ(v, 1.0);
}

TEST(RngJson, RoundTripRunsBitwiseEqual) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto s = input(g, "seed", {1}, DT::INT64);
  auto o = input(g, "offset", {1}, DT::INT32);
  auto y = g.rng(s, o,
                 graph::Rng_attributes()
                     .set_distribution(RngDistribution_t::BERNOULLI)
                     .set_bernoulli_probability(0.25)
                     .set_dim({4, 9}));
  y->set_output(true).set_data_type(DT::HALF);
  ASSERT_TRUE(g.validate().is_good());
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  for (const char* needle : {"\"RNG\"", "\"BERNOULLI\"", "\"bernoulli_probability\"", "\"SEED\"", "\"OFFSET\""})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  HostTensor sb(s), ob(o), yb(y);
  sb.set(0, 123456789);
  ob.set(0, 5);
  yb.poison();
  ASSERT_TRUE(build_and_run(g, {&sb, &ob, &yb}).is_good());
  const auto first = yb.bytes;
  yb.poison();
  graph::Graph replay;
  auto e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  ASSERT_TRUE(build_and_run(replay, {&sb, &ob, &yb}).is_good());
  EXPECT_EQ(yb.bytes, first);
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

struct RngDecl {
  graph::Graph g;
  TensorPtr seed, offset;
  RngDecl() {
    g.set_io_data_type(DT::FLOAT);
    seed = g.tensor(int64_t{1});
    offset = g.tensor(int64_t{2});
  }
  static graph::Rng_attributes bernoulli() {
    return graph::Rng_attributes()
        .set_name("rng0")
        .set_distribution(RngDistribution_t::BERNOULLI)
        .set_bernoulli_probability(0.5)
        .set_dim({4});
  }
};

TEST(RngErrors, Distribution) {
  {
    RngDecl d;
    d.g.rng(d.seed, d.offset, RngDecl::bernoulli().set_distribution(RngDistribution_t::NOT_SET));
    expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"rng0", "RNG", "'distribution'", "NOT_SET"});
  }
  {
    RngDecl d;
    d.g.rng(d.seed, d.offset, RngDecl::bernoulli().set_distribution(RngDistribution_t::NORMAL));
    expect_error(d.g, error_code_t::GRAPH_NOT_SUPPORTED, {"rng0", "'distribution'", "NORMAL"});
  }
  {
    RngDecl d;
    d.g.rng(d.seed, d.offset,
            graph::Rng_attributes().set_name("rng0").set_distribution(RngDistribution_t::BERNOULLI).set_dim({4}));
    expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"rng0", "'bernoulli_probability'", "unset"});
  }
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    RngDecl d;
    d.g.rng(d.seed, d.offset, RngDecl::bernoulli().set_bernoulli_probability(bad));
    expect_error(d.g, error_code_t::INVALID_VALUE, {"rng0", "'bernoulli_probability'"});
  }
}

TEST(RngErrors, SeedOffsetAndDims) {
  {
    RngDecl d;
    d.g.rng(input(d.g, "seed", {2}, DT::INT64), d.offset, RngDecl::bernoulli());
    expect_error(d.g, error_code_t::INVALID_VALUE, {"rng0", "'SEED.dim'", "[2]"});
  }
  {
    RngDecl d;
    d.g.rng(d.seed, d.g.tensor(1.5f), RngDecl::bernoulli());
    expect_error(d.g, error_code_t::INVALID_VALUE, {"rng0", "'OFFSET.data_type'", "FLOAT"});
  }
  {
    RngDecl d;
    d.g.rng(d.g.tensor(int64_t{-3}), d.offset, RngDecl::bernoulli());
    expect_error(d.g, error_code_t::INVALID_VALUE, {"rng0", "'SEED'", "-3"});
  }
  {
    RngDecl d;
    d.g.rng(d.seed, d.offset, RngDecl::bernoulli().set_dim({}));
    expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"rng0", "'dim'"});
  }
  {
    RngDecl d;
    d.g.rng(d.seed, d.offset, RngDecl::bernoulli())->set_dim({5});
    expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"rng0", "'Y.dim'", "[5]", "[4]"});
  }
  {
    RngDecl d;
    d.g.rng(d.seed, d.g.tensor(0.5), RngDecl::bernoulli());
    expect_error(d.g, error_code_t::INVALID_VALUE, {"rng0", "'OFFSET.data_type'", "DOUBLE"});
  }
  {
    RngDecl d;
    d.g.rng(nullptr, d.offset, RngDecl::bernoulli());
    expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"rng0", "SEED"});
  }
}

}  // namespace
}  // namespace frost::test
