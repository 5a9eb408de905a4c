#include <memory>

#include "test_util.h"

namespace frost::test {
namespace {

using DT = DataType_t;

const DT kStorageTypes[] = {DT::FLOAT, DT::HALF, DT::BFLOAT16, DT::FP8_E4M3, DT::FP8_E5M2};

std::vector<int64_t> unravel(int64_t n, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = n % dims[k];
    n /= dims[k];
  }
  return idx;
}

// (Appending rather than operator+ sidesteps a GCC 12 -Wrestrict false positive.)
std::string numbered(const char* prefix, size_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  int64_t n = 0;
  for (size_t k = 0; k < dims.size(); ++k) n = n * dims[k] + idx[k];
  return n;
}

void expect_error(graph::Graph& g, error_code_t code, const std::vector<std::string>& parts) {
  auto e = g.validate();
  EXPECT_EQ(e.get_code(), code) << e.get_message();
  for (const auto& p : parts)
    EXPECT_NE(e.get_message().find(p), std::string::npos) << "'" << p << "' not in: " << e.get_message();
}

// Builds one unary shape op on a fresh graph, runs it on random X and returns {X, Y} buffers.
struct UnaryRun {
  std::unique_ptr<graph::Graph> g;
  std::unique_ptr<HostTensor> x, y;
};
template <class Build>
UnaryRun run_unary(DT dt, std::vector<int64_t> xdims, std::vector<int64_t> xstrides, Build&& build, uint64_t seed) {
  UnaryRun r;
  r.g = std::make_unique<graph::Graph>();
  r.g->set_io_data_type(dt);
  auto x = input(*r.g, "x", std::move(xdims), dt, std::move(xstrides));
  auto y = build(*r.g, x);
  y->set_output(true);
  auto e = r.g->validate();
  EXPECT_TRUE(e.is_good()) << e.get_message();
  r.x = std::make_unique<HostTensor>(x);
  r.y = std::make_unique<HostTensor>(y);
  std::mt19937_64 rng(seed);
  r.x->fill_random(rng, -4, 4);
  r.y->poison();
  e = build_and_run(*r.g, {r.x.get(), r.y.get()});
  EXPECT_TRUE(e.is_good()) << e.get_message();
  return r;
}

TEST(Reshape, KeepsRowMajorOrderFromAttributeDims) {
  for (DT dt : kStorageTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    // X [3, 17, 5] stored column-major.
    UnaryRun r = run_unary(
        dt, {3, 17, 5}, {1, 3, 51},
        [](graph::Graph& g, TensorPtr x) {
          return g.reshape(x, graph::Reshape_attributes().set_dim({51, 5}));
        },
        1);
    ASSERT_EQ(r.y->t->get_dim(), (std::vector<int64_t>{51, 5}));
    EXPECT_EQ(r.y->t->get_stride(), (std::vector<int64_t>{5, 1}));
    EXPECT_EQ(r.y->values(), r.x->values());
  }
}

TEST(Reshape, DimsFromOutputTensorAndStridesFromAttributes) {
  UnaryRun r = run_unary(
      DT::FLOAT, {1, 17, 15}, {},
      [](graph::Graph& g, TensorPtr x) {
        auto y = g.reshape(x, graph::Reshape_attributes().set_stride({1, 5}));
        y->set_dim({5, 51});
        return y;
      },
      2);
  EXPECT_EQ(r.y->t->get_stride(), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(r.y->values(), r.x->values());
  // Strides the user put on Y itself are kept.
  UnaryRun s = run_unary(
      DT::BFLOAT16, {17, 3}, {},
      [](graph::Graph& g, TensorPtr x) {
        auto y = g.reshape(x, graph::Reshape_attributes().set_dim({3, 17}));
        y->set_stride({1, 3});
        return y;
      },
      3);
  EXPECT_EQ(s.y->t->get_stride(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(s.y->values(), s.x->values());
}

TEST(Transpose, PermutesDims) {
  const std::vector<int64_t> xdims = {17, 1, 5, 3}, perm = {2, 0, 3, 1};
  for (DT dt : kStorageTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    UnaryRun r = run_unary(
        dt, xdims, {1, 255, 17, 85},
        [&](graph::Graph& g, TensorPtr x) {
          return g.transpose(x, graph::Transpose_attributes().set_permutation(perm));
        },
        4);
    const std::vector<int64_t> ydims = {5, 17, 3, 1};
    ASSERT_EQ(r.y->t->get_dim(), ydims);
    for (int64_t n = 0; n < r.y->volume(); ++n) {
      const auto j = unravel(n, ydims);
      std::vector<int64_t> i(4);
      for (size_t k = 0; k < 4; ++k) i[static_cast<size_t>(perm[k])] = j[k];
      ASSERT_EQ(r.y->get(n), r.x->get(ravel(i, xdims))) << "element " << n;
    }
  }
}

TEST(Slice, HalfOpenRangesWithTrailingDimsFull) {
  const std::vector<int64_t> xdims = {17, 111, 3};
  for (DT dt : kStorageTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    UnaryRun r = run_unary(
        dt, xdims, {3, 17 * 3, 1},
        [](graph::Graph& g, TensorPtr x) {
          return g.slice(x, graph::Slice_attributes().set_slices({{2, 15}, {100, 111}}));
        },
        5);
    const std::vector<int64_t> ydims = {13, 11, 3};
    ASSERT_EQ(r.y->t->get_dim(), ydims);
    EXPECT_EQ(r.y->t->get_stride(), (std::vector<int64_t>{3, 39, 1}));  // X's axis order
    for (int64_t n = 0; n < r.y->volume(); ++n) {
      auto i = unravel(n, ydims);
      i[0] += 2;
      i[1] += 100;
      ASSERT_EQ(r.y->get(n), r.x->get(ravel(i, xdims))) << "element " << n;
    }
  }
}

TEST(Concatenate, JoinsAlongNegativeAxis) {
  const std::vector<std::vector<int64_t>> dims = {{4, 1, 3}, {4, 17, 3}, {4, 5, 3}};
  for (DT dt : kStorageTypes) {
    SCOPED_TRACE(std::string(to_string(dt)));
    graph::Graph g;
    g.set_io_data_type(dt);
    std::vector<TensorPtr> xs;
    for (size_t i = 0; i < dims.size(); ++i)
      xs.push_back(
          input(g, numbered("x", i), dims[i], dt, i == 1 ? std::vector<int64_t>{1, 12, 4} : std::vector<int64_t>{}));
    auto y = g.concatenate(xs, graph::Concatenate_attributes().set_axis(-2).set_in_place_index(1));
    y->set_output(true);
    ASSERT_TRUE(g.validate().is_good());
    const std::vector<int64_t> ydims = {4, 23, 3};
    ASSERT_EQ(y->get_dim(), ydims);
    std::vector<HostTensor> bufs(xs.begin(), xs.end());
    std::mt19937_64 rng(6);
    for (auto& b : bufs) b.fill_random(rng, -4, 4);
    HostTensor yb(y);
    yb.poison();
    ASSERT_TRUE(build_and_run(g, {&bufs[0], &bufs[1], &bufs[2], &yb}).is_good());
    for (int64_t n = 0; n < yb.volume(); ++n) {
      auto i = unravel(n, ydims);
      size_t which = 0;
      while (i[1] >= dims[which][1]) i[1] -= dims[which++][1];
      ASSERT_EQ(yb.get(n), bufs[which].get(ravel(i, dims[which]))) << "element " << n;
    }
  }
}

TEST(Concatenate, SingleInputIsACopy) {
  UnaryRun r = run_unary(
      DT::HALF, {2, 3}, {1, 2},
      [](graph::Graph& g, TensorPtr x) { return g.concatenate({x}, graph::Concatenate_attributes().set_axis(0)); }, 7);
  EXPECT_EQ(r.y->values(), r.x->values());
}

// X [6, 20] -> reshape [4, 30] -> transpose [30, 4] -> slice rows 5..24 -> concatenate with Z [3, 4].
struct Chain {
  graph::Graph g;
  TensorPtr x, z, y;
  explicit Chain(DT compute) {
    g.set_io_data_type(DT::INT32).set_intermediate_data_type(DT::INT64).set_compute_data_type(compute);
    x = input(g, "x", {6, 20}, DT::INT32, {1, 6});
    z = input(g, "z", {3, 4}, DT::INT32);
    auto r = g.reshape(x, graph::Reshape_attributes().set_name("reshape").set_dim({4, 30}));
    auto t = g.transpose(r, graph::Transpose_attributes().set_name("transpose").set_permutation({1, 0}));
    auto s = g.slice(t, graph::Slice_attributes().set_name("slice").set_slices({{5, 25}}));
    y = g.concatenate({s, z}, graph::Concatenate_attributes().set_name("concat").set_axis(0));
    y->set_output(true);
  }
};

TEST(ShapeOps, ChainKeepsLargeIntegersExactInBothModes) {
  for (DT compute : {DT::FLOAT, DT::DOUBLE}) {
    SCOPED_TRACE(std::string(to_string(compute)));
    Chain c(compute);
    ASSERT_TRUE(c.g.validate().is_good());
    HostTensor xb(c.x), zb(c.z), yb(c.y);
    std::mt19937_64 rng(8);
    std::uniform_int_distribution<int64_t> big(-(int64_t{1} << 30), int64_t{1} << 30);  // beyond FP32's 24 bits
    for (int64_t n = 0; n < xb.volume(); ++n) xb.set(n, static_cast<double>(big(rng)));
    for (int64_t n = 0; n < zb.volume(); ++n) zb.set(n, static_cast<double>(big(rng)));
    yb.poison();
    auto e = build_and_run(c.g, {&xb, &zb, &yb});
    ASSERT_TRUE(e.is_good()) << e.get_message();
    ASSERT_EQ(c.y->get_dim(), (std::vector<int64_t>{23, 4}));
    for (int64_t i = 0; i < 23; ++i)
      for (int64_t a = 0; a < 4; ++a) {
        const double want = i < 20 ? xb.get(a * 30 + i + 5) : zb.get((i - 20) * 4 + a);
        ASSERT_EQ(yb.get(i * 4 + a), want) << i << ", " << a;
      }
  }
}

TEST(ShapeOps, JsonRoundTripRunsBitwiseEqual) {
  Chain c(DT::FLOAT);
  ASSERT_TRUE(c.g.validate().is_good());
  std::string text;
  ASSERT_TRUE(c.g.serialize(text).is_good());
  graph::Graph g2;
  auto e = g2.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  HostTensor xb(c.x), zb(c.z), yb(c.y);
  std::mt19937_64 rng(9);
  xb.fill_random(rng, -1000, 1000);
  zb.fill_random(rng, -1000, 1000);
  yb.poison();
  ASSERT_TRUE(build_and_run(c.g, {&xb, &zb, &yb}).is_good());
  const std::vector<uint8_t> first = yb.bytes;
  yb.poison();
  e = build_and_run(g2, {&xb, &zb, &yb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(yb.bytes, first);
  std::string text2;
  ASSERT_TRUE(g2.serialize(text2).is_good());
  EXPECT_EQ(text2, text);
}

TEST(ShapeOps, MalformedJsonIsRejected) {
  Chain c(DT::FLOAT);
  ASSERT_TRUE(c.g.validate().is_good());
  std::string text;
  ASSERT_TRUE(c.g.serialize(text).is_good());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) t.replace(at, from.size(), to);
    return t;
  };
  for (const auto& [from, to, field] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"\"num_inputs\": 2", "\"num_inputs\": 0", "num_inputs"},
           {"\"num_inputs\": 2", "\"num_inputs\": \"2\"", "num_inputs"},
           {"\"num_inputs\": 2", "\"num_inputs\": 1", "X_1"},
           {"\"permutation\": [", "\"permutation\": [\"a\",", "permutation"},
           {"\"slices\": [", "\"slices\": [7,", "slices"}}) {
    graph::Graph g2;
    auto e = g2.deserialize(replaced(from, to));
    EXPECT_EQ(e.get_code(), error_code_t::UNSUPPORTED_GRAPH_FORMAT) << to << ": " << e.get_message();
    EXPECT_NE(e.get_message().find(field), std::string::npos) << e.get_message();
  }
}

template <class Build>
void expect_unary_error(std::vector<int64_t> xdims, Build&& build, error_code_t code,
                        const std::vector<std::string>& parts) {
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT);
  auto x = input(g, "x", std::move(xdims));
  build(g, x);
  expect_error(g, code, parts);
}

TEST(ShapeOps, ErrorsNameNodeAttributeAndValue) {
  using A = error_code_t;
  auto reshape = [](graph::Reshape_attributes a, std::vector<int64_t> ydims = {}, std::vector<int64_t> ystrides = {}) {
    return [=](graph::Graph& g, TensorPtr x) {
      auto y = g.reshape(x, graph::Reshape_attributes(a).set_name("rs"));
      if (!ydims.empty()) y->set_dim(ydims);
      if (!ystrides.empty()) y->set_stride(ystrides);
    };
  };
  const std::vector<int64_t> x3 = {3, 17, 5};
  expect_unary_error(x3, reshape({}), A::ATTRIBUTE_NOT_SET, {"'rs'", "'dim'", "unset"});
  expect_unary_error(x3, reshape(graph::Reshape_attributes().set_dim({50, 5})), A::SHAPE_DEDUCTION_FAILED,
                     {"'rs'", "'dim'", "[50, 5]", "255"});
  expect_unary_error(x3, reshape(graph::Reshape_attributes().set_dim({51, 5}), {5, 51}), A::SHAPE_DEDUCTION_FAILED,
                     {"'rs'", "'Y.dim'", "[5, 51]"});
  expect_unary_error(x3, reshape(graph::Reshape_attributes().set_dim({51, 5}).set_stride({1})), A::INVALID_VALUE,
                     {"'rs'", "'stride'", "[1]"});
  expect_unary_error(x3, reshape(graph::Reshape_attributes().set_dim({51, 5}).set_stride({1, 51}), {}, {5, 1}),
                     A::INVALID_VALUE, {"'rs'", "'Y.stride'", "[5, 1]", "[1, 51]"});

  auto transpose = [](std::vector<int64_t> perm, std::vector<int64_t> ydims = {}) {
    return [=](graph::Graph& g, TensorPtr x) {
      auto y = g.transpose(x, graph::Transpose_attributes().set_name("tp").set_permutation(perm));
      if (!ydims.empty()) y->set_dim(ydims);
    };
  };
  expect_unary_error(x3, transpose({0, 0, 1}), A::INVALID_VALUE, {"'tp'", "'permutation'", "[0, 0, 1]", "0..2"});
  expect_unary_error(x3, transpose({1, 0}), A::INVALID_VALUE, {"'tp'", "'permutation'", "[1, 0]"});
  expect_unary_error(x3, transpose({0, 1, 3}), A::INVALID_VALUE, {"'tp'", "'permutation'", "[0, 1, 3]"});
  expect_unary_error(x3, transpose({}), A::ATTRIBUTE_NOT_SET, {"'tp'", "'permutation'"});
  expect_unary_error(x3, transpose({2, 1, 0}, {3, 17, 5}), A::SHAPE_DEDUCTION_FAILED,
                     {"'tp'", "'Y.dim'", "[3, 17, 5]", "[5, 17, 3]"});

  auto slice = [](std::vector<std::pair<int64_t, int64_t>> s) {
    return [=](graph::Graph& g, TensorPtr x) { g.slice(x, graph::Slice_attributes().set_name("sl").set_slices(s)); };
  };
  expect_unary_error(x3, slice({{0, 3}, {0, 17}, {0, 5}, {0, 1}}), A::INVALID_VALUE, {"'sl'", "'slices'", "4 ranges"});
  expect_unary_error(x3, slice({{2, 2}}), A::INVALID_VALUE, {"'sl'", "'slices[0]'", "[2, 2)"});
  expect_unary_error(x3, slice({{0, 3}, {0, 18}}), A::INVALID_VALUE, {"'sl'", "'slices[1]'", "[0, 18)", "17"});
  expect_unary_error(x3, slice({{-1, 2}}), A::INVALID_VALUE, {"'sl'", "'slices[0]'", "[-1, 2)"});
  expect_unary_error({2, 3},
                     [](graph::Graph& g, TensorPtr) { g.slice(nullptr, graph::Slice_attributes().set_name("sl")); },
                     A::ATTRIBUTE_NOT_SET, {"'sl'", "X"});

  auto concat = [](std::vector<std::vector<int64_t>> dims, graph::Concatenate_attributes a, bool null_second = false,
                   std::vector<int64_t> ydims = {}) {
    return [=](graph::Graph& g, TensorPtr x) {
      std::vector<TensorPtr> xs = {x};
      for (size_t i = 0; i < dims.size(); ++i) xs.push_back(input(g, numbered("x", i + 1), dims[i]));
      if (null_second) xs[1] = nullptr;
      auto y = g.concatenate(xs, graph::Concatenate_attributes(a).set_name("cat"));
      if (!ydims.empty()) y->set_dim(ydims);
    };
  };
  const std::vector<int64_t> c0 = {4, 1, 3};
  expect_unary_error(
      c0, [](graph::Graph& g, TensorPtr) { g.concatenate({}, graph::Concatenate_attributes().set_name("cat")); },
      A::ATTRIBUTE_NOT_SET, {"'cat'", "'inputs'"});
  expect_unary_error(c0, concat({{4, 2, 3}}, graph::Concatenate_attributes(), true), A::ATTRIBUTE_NOT_SET,
                     {"'cat'", "X_1"});
  expect_unary_error(c0, concat({{4, 2, 3}}, graph::Concatenate_attributes().set_axis(3)), A::INVALID_VALUE,
                     {"'cat'", "'axis'", "= 3", "[-3, 3)"});
  expect_unary_error(c0, concat({{4, 2, 3}}, graph::Concatenate_attributes().set_axis(-4)), A::INVALID_VALUE,
                     {"'cat'", "'axis'", "= -4"});
  expect_unary_error(c0, concat({{4, 2, 4}}, graph::Concatenate_attributes().set_axis(1)), A::SHAPE_DEDUCTION_FAILED,
                     {"'cat'", "'X_1.dim'", "[4, 2, 4]", "[4, 1, 3]"});
  expect_unary_error(c0, concat({{4, 2}}, graph::Concatenate_attributes().set_axis(1)), A::SHAPE_DEDUCTION_FAILED,
                     {"'cat'", "'X_1.dim'", "[4, 2]"});
  expect_unary_error(c0,
                     concat({{4, 2, 3}, {4, 3, 3}}, graph::Concatenate_attributes().set_axis(1).set_in_place_index(3)),
                     A::INVALID_VALUE, {"'cat'", "'in_place_index'", "= 3"});
  expect_unary_error(c0, concat({{4, 2, 3}}, graph::Concatenate_attributes().set_axis(1), false, {4, 4, 3}),
                     A::SHAPE_DEDUCTION_FAILED, {"'cat'", "'Y.dim'", "[4, 4, 3]", "[4, 3, 3]"});
}

}  // namespace
}  // namespace frost::test
