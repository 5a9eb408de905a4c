#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>

#include "graph/shape_util.h"
#include "test_util.h"

namespace frost::test {
namespace {

using graph::Moe_grouped_matmul_attributes;
using graph::Moe_grouped_matmul_backward_attributes;
using Mode = graph::MoeGroupedMatmulMode_t;

// A graph input with packed strides unless given, so a HostTensor can be sized before validate().
TensorPtr dense_input(graph::Graph& g, const std::string& name, std::vector<int64_t> dims, DataType_t dt,
                      std::vector<int64_t> strides = {}) {
  if (strides.empty()) strides = detail::packed_strides(dims);
  return input(g, name, std::move(dims), dt, std::move(strides));
}

// One routing problem: R routed rows over E experts, S token rows (GATHER: S unrouted tokens;
// SCATTER: R = S * top_k slots).
struct Problem {
  Mode mode = Mode::NONE;
  int64_t experts = 3, k = 17, n = 11, rows = 24, top_k = 2;
  std::vector<int64_t> offsets, index, ks;
  int64_t token_rows() const { return mode == Mode::GATHER ? rows / top_k : rows; }
};

// Random expert boundaries (empty experts and rows before the first expert included), random
// gather sources, and a random one-to-one scatter of rows onto (token, choice) slots.
Problem make_problem(Mode mode, std::mt19937_64& rng, int64_t experts = 3, int64_t rows = 24, int64_t top_k = 2) {
  Problem p;
  p.mode = mode, p.experts = experts, p.rows = rows, p.top_k = top_k;
  std::uniform_int_distribution<int64_t> cut(0, rows);
  for (int64_t e = 0; e < experts; ++e) p.offsets.push_back(cut(rng));
  std::sort(p.offsets.begin(), p.offsets.end());
  if (experts > 2) p.offsets[1] = p.offsets[2];  // an empty expert
  if (mode == Mode::GATHER) {
    std::uniform_int_distribution<int64_t> src(0, p.token_rows() - 1);
    for (int64_t r = 0; r < rows; ++r) p.index.push_back(src(rng));
  } else if (mode == Mode::SCATTER) {
    std::vector<int64_t> slots(static_cast<size_t>(rows));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    for (int64_t s : slots) p.index.push_back(s / top_k), p.ks.push_back(s % top_k);
  }
  return p;
}

// The expert of row r by a search of the offsets (-1 before the first expert).
int64_t expert_of(const Problem& p, int64_t r) {
  const auto it = std::upper_bound(p.offsets.begin(), p.offsets.end(), r);
  return static_cast<int64_t>(it - p.offsets.begin()) - 1;
}

// Output[slot] by slot: find the routed row that lands there, then its dot products.
std::vector<double> naive_forward(const Problem& p, const std::vector<double>& x, const std::vector<double>& w) {
  std::vector<double> y(static_cast<size_t>(p.rows * p.n), 0.0);
  for (int64_t slot = 0; slot < p.rows; ++slot) {
    int64_t r = slot;
    if (p.mode == Mode::SCATTER)
      for (r = 0; r < p.rows && p.index[r] * p.top_k + p.ks[r] != slot; ++r) {
      }
    const int64_t e = expert_of(p, r), src = p.mode == Mode::GATHER ? p.index[r] : r;
    if (e < 0) continue;
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t kk = 0; kk < p.k; ++kk) y[slot * p.n + j] += x[src * p.k + kk] * w[(e * p.k + kk) * p.n + j];
  }
  return y;
}

struct Options {
  DataType_t value_type = DataType_t::FLOAT, out_type = DataType_t::FLOAT, index_type = DataType_t::INT32;
  bool fp64 = false, strided_token = false;
};

// A forward graph with its buffers: inputs filled, the output poisoned.
struct Forward {
  graph::Graph g;
  std::unique_ptr<HostTensor> token, weight, offsets, index, ks, out;
  std::vector<HostTensor*> buffers() {
    std::vector<HostTensor*> all{token.get(), weight.get(), offsets.get(), out.get()};
    if (index) all.push_back(index.get());
    if (ks) all.push_back(ks.get());
    return all;
  }
};

std::unique_ptr<HostTensor> int_buffer(graph::Graph& g, const std::string& name, const std::vector<int64_t>& values,
                                       std::vector<int64_t> dims, DataType_t dt) {
  auto b = std::make_unique<HostTensor>(dense_input(g, name, std::move(dims), dt));
  for (size_t i = 0; i < values.size(); ++i) b->set(static_cast<int64_t>(i), static_cast<double>(values[i]));
  return b;
}

std::unique_ptr<Forward> make_forward(const Problem& p, const Options& o, std::mt19937_64& rng) {
  auto f = std::make_unique<Forward>();
  auto& g = f->g;
  g.set_compute_data_type(o.fp64 ? DataType_t::DOUBLE : DataType_t::FLOAT);
  const int64_t s = p.token_rows();
  // A strided token leaves a gap of 5 elements after each row.
  const std::vector<int64_t> token_strides =
      o.strided_token ? std::vector<int64_t>{s * (p.k + 5), p.k + 5, 1} : std::vector<int64_t>{};
  f->token = std::make_unique<HostTensor>(dense_input(g, "token", {1, s, p.k}, o.value_type, token_strides));
  f->weight = std::make_unique<HostTensor>(dense_input(g, "weight", {p.experts, p.k, p.n}, o.value_type));
  f->token->fill_random(rng);
  f->weight->fill_random(rng);
  f->offsets = int_buffer(g, "offsets", p.offsets, {p.experts, 1, 1}, o.index_type);
  if (!p.index.empty()) f->index = int_buffer(g, "index", p.index, {1, p.rows, 1}, o.index_type);
  if (!p.ks.empty()) f->ks = int_buffer(g, "ks", p.ks, {1, p.rows, 1}, o.index_type);
  Moe_grouped_matmul_attributes a;
  a.set_name("moe").set_mode(p.mode).set_top_k(static_cast<int32_t>(p.top_k));
  TensorPtr out = g.moe_grouped_matmul(f->token->t, f->weight->t, f->offsets->t, f->index ? f->index->t : nullptr,
                                       f->ks ? f->ks->t : nullptr, a);
  out->set_output(true).set_data_type(o.out_type);
  EXPECT_TRUE(g.validate().is_good());
  f->out = std::make_unique<HostTensor>(out);
  f->out->poison();
  return f;
}

double tolerance(const Options& o, int64_t k) {
  if (o.fp64) return 1e-12;
  switch (o.out_type) {
    case DataType_t::BFLOAT16:
      return 2e-2 * k / 4;
    case DataType_t::HALF:
      return 3e-3 * k / 4;
    default:
      return 1e-5 * k;
  }
}

struct SweepCase {
  const char* label;
  Mode mode;
  Options o;
};

TEST(MoeGroupedMatmul, MatchesNaiveInEveryModeAndType) {
  const DataType_t f32 = DataType_t::FLOAT, f16 = DataType_t::HALF, bf16 = DataType_t::BFLOAT16;
  const DataType_t e4m3 = DataType_t::FP8_E4M3, e5m2 = DataType_t::FP8_E5M2, f64 = DataType_t::DOUBLE;
  const std::vector<SweepCase> cases = {
      {"none f32", Mode::NONE, {f32, f32}},
      {"gather f32 int64", Mode::GATHER, {f32, f32, DataType_t::INT64}},
      {"scatter f32 strided", Mode::SCATTER, {f32, f32, DataType_t::INT32, false, true}},
      {"none bf16", Mode::NONE, {bf16, bf16}},
      {"gather f16 strided", Mode::GATHER, {f16, f16, DataType_t::INT32, false, true}},
      {"scatter e4m3 to f32", Mode::SCATTER, {e4m3, f32}},
      {"gather e5m2 to bf16", Mode::GATHER, {e5m2, bf16}},
      {"none fp64", Mode::NONE, {f64, f64, DataType_t::INT64, true}},
      {"scatter fp64", Mode::SCATTER, {f64, f64, DataType_t::INT32, true}},
  };
  std::mt19937_64 rng(7);
  for (const auto& c : cases)
    for (const auto& [experts, rows, top_k] : {std::tuple{3, 24, 2}, std::tuple{1, 1, 1}, std::tuple{5, 111, 3}}) {
      SCOPED_TRACE(std::string(c.label) + " E=" + std::to_string(experts) + " R=" + std::to_string(rows));
      const Problem p = make_problem(c.mode, rng, experts, rows, top_k);
      auto f = make_forward(p, c.o, rng);
      ASSERT_TRUE(build_and_run(f->g, f->buffers()).is_good());
      const auto want = naive_forward(p, f->token->values(), f->weight->values());
      EXPECT_CLOSE(f->out->values(), want, tolerance(c.o, p.k));
    }
}

TEST(MoeGroupedMatmul, CheckerDetectsAWrongExpertBoundary) {
  std::mt19937_64 rng(3);
  Problem p = make_problem(Mode::NONE, rng, 3, 24, 1);
  p.offsets = {0, 8, 16};
  auto f = make_forward(p, {}, rng);
  ASSERT_TRUE(build_and_run(f->g, f->buffers()).is_good());
  Problem shifted = p;
  shifted.offsets = {0, 9, 16};
  const auto wrong = naive_forward(shifted, f->token->values(), f->weight->values());
  EXPECT_GT(compare(f->out->values(), wrong).max_abs, 1e-2);
}

TEST(MoeGroupedMatmul, BadRoutingValuesFailAndLeaveOutputUntouched) {
  struct Bad {
    Mode mode;
    std::function<void(Problem&)> spoil;
    const char* port;
    const char* value;
  };
  const std::vector<Bad> cases = {
      {Mode::NONE,
       [](Problem& p) {
         p.offsets = {0, 30, 20};
       },
       "FIRST_TOKEN_OFFSET", "30 at expert 1"},
      {Mode::NONE,
       [](Problem& p) {
         p.offsets = {5, 2, 20};
       },
       "FIRST_TOKEN_OFFSET", "2 at expert 1"},
      {Mode::GATHER, [](Problem& p) { p.index[3] = 12; }, "TOKEN_INDEX", "12 at row 3"},
      {Mode::SCATTER, [](Problem& p) { p.ks[4] = 2; }, "TOKEN_KS", "2 at row 4"},
      {Mode::SCATTER, [](Problem& p) { p.index[1] = p.index[0], p.ks[1] = p.ks[0]; }, "TOKEN_INDEX", "again at row 1"},
  };
  std::mt19937_64 rng(5);
  for (const auto& c : cases) {
    Problem p = make_problem(c.mode, rng, 3, 24, 2);
    c.spoil(p);
    auto f = make_forward(p, {}, rng);
    const std::vector<uint8_t> before = f->out->bytes;
    const error_t e = build_and_run(f->g, f->buffers());
    EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE) << e.get_message();
    for (const char* m : {"'moe'", c.port, c.value})
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
    EXPECT_EQ(f->out->bytes, before);
  }
}

TEST(MoeGroupedMatmul, JsonRoundTripIsBitwiseIdentical) {
  std::mt19937_64 rng(9);
  for (Mode mode : {Mode::NONE, Mode::GATHER, Mode::SCATTER}) {
    const Problem p = make_problem(mode, rng, 4, 30, 3);
    auto f = make_forward(p, {DataType_t::BFLOAT16, DataType_t::FLOAT}, rng);
    ASSERT_TRUE(build_and_run(f->g, f->buffers()).is_good());
    const std::vector<uint8_t> first = f->out->bytes;
    std::string text;
    ASSERT_TRUE(f->g.serialize(text).is_good());
    graph::Graph replay;
    const error_t e = replay.deserialize(text);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    f->out->poison();
    ASSERT_TRUE(build_and_run(replay, f->buffers()).is_good());
    EXPECT_EQ(f->out->bytes, first);
    std::string again;
    ASSERT_TRUE(replay.serialize(again).is_good());
    EXPECT_EQ(again, text);
    if (mode == Mode::SCATTER) {
      auto j = nlohmann::json::parse(text);
      EXPECT_EQ(j["nodes"][0]["tag"], "MOE_GROUPED_MATMUL");
      EXPECT_EQ(j["nodes"][0]["mode"], "SCATTER");
      j["nodes"][0]["mode"] = "COMBINE";
      graph::Graph bad;
      const error_t be = bad.deserialize(j.dump());
      EXPECT_EQ(be.get_code(), error_code_t::UNSUPPORTED_GRAPH_FORMAT);
      EXPECT_NE(be.get_message().find("COMBINE"), std::string::npos) << be.get_message();
    }
  }
}

// The declaration of one error case: a valid NONE graph (E=3, R=24, K=17, N=11) unless tweaked.
struct Decl {
  Mode mode = Mode::NONE;
  int32_t top_k = 2;
  std::vector<int64_t> token{1, 24, 17}, weight{3, 17, 11}, offsets{3, 1, 1}, index, ks, out_dim;
  DataType_t token_type = DataType_t::FLOAT, offsets_type = DataType_t::INT32, index_type = DataType_t::INT32;
  bool null_weight = false, backward = false;
  std::vector<int64_t> dout{1, 24, 11};
};

error_t validate_decl(const Decl& d) {
  graph::Graph g;
  TensorPtr token = input(g, "token", d.token, d.token_type);
  TensorPtr weight = d.null_weight ? nullptr : input(g, "weight", d.weight);
  TensorPtr offsets = input(g, "offsets", d.offsets, d.offsets_type);
  TensorPtr index = d.index.empty() ? nullptr : input(g, "index", d.index, d.index_type);
  TensorPtr ks = d.ks.empty() ? nullptr : input(g, "ks", d.ks, d.index_type);
  if (d.backward) {
    Moe_grouped_matmul_backward_attributes a;
    a.set_name("moe").set_mode(d.mode).set_top_k(d.top_k);
    auto [dx, dw] = g.moe_grouped_matmul_backward(input(g, "dout", d.dout), token, weight, offsets, index, ks, a);
    dx->set_output(true);
    dw->set_output(true);
  } else {
    Moe_grouped_matmul_attributes a;
    a.set_name("moe").set_mode(d.mode).set_top_k(d.top_k);
    TensorPtr out = g.moe_grouped_matmul(token, weight, offsets, index, ks, a);
    out->set_output(true);
    if (!d.out_dim.empty()) out->set_dim(d.out_dim);
  }
  return g.validate();
}

TEST(MoeGroupedMatmul, ErrorsNameNodeAttributeAndValue) {
  using E = error_code_t;
  struct ErrorCase {
    const char* what;
    std::function<void(Decl&)> tweak;
    E code;
    std::vector<std::string> mentions;
  };
  const std::vector<ErrorCase> cases = {
      {"token rank",
       [](Decl& d) {
         d.token = {24, 17};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"TOKEN.dim", "[24, 17]"}},
      {"token batch",
       [](Decl& d) {
         d.token = {2, 24, 17};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"TOKEN.dim", "[2, 24, 17]"}},
      {"token type", [](Decl& d) { d.token_type = DataType_t::INT32; }, E::INVALID_VALUE, {"TOKEN.data_type", "INT32"}},
      {"k mismatch",
       [](Decl& d) {
         d.weight = {3, 16, 11};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"WEIGHT.dim", "[3, 16, 11]"}},
      {"null weight", [](Decl& d) { d.null_weight = true; }, E::ATTRIBUTE_NOT_SET, {"WEIGHT"}},
      {"offsets dims",
       [](Decl& d) {
         d.offsets = {4, 1, 1};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"FIRST_TOKEN_OFFSET.dim", "[4, 1, 1]", "[3, 1, 1]"}},
      {"offsets type",
       [](Decl& d) { d.offsets_type = DataType_t::FLOAT; },
       E::INVALID_VALUE,
       {"FIRST_TOKEN_OFFSET.data_type", "FLOAT"}},
      {"index in NONE",
       [](Decl& d) {
         d.index = {1, 24, 1};
       },
       E::INVALID_VALUE,
       {"TOKEN_INDEX", "'index'"}},
      {"gather without index", [](Decl& d) { d.mode = Mode::GATHER; }, E::ATTRIBUTE_NOT_SET, {"TOKEN_INDEX", "null"}},
      {"ks in GATHER",
       [](Decl& d) {
         d.mode = Mode::GATHER, d.index = {1, 40, 1}, d.ks = {1, 40, 1};
       },
       E::INVALID_VALUE,
       {"TOKEN_KS", "'ks'"}},
      {"scatter without ks",
       [](Decl& d) {
         d.mode = Mode::SCATTER, d.index = {1, 24, 1};
       },
       E::ATTRIBUTE_NOT_SET,
       {"TOKEN_KS", "null"}},
      {"index dims",
       [](Decl& d) {
         d.mode = Mode::SCATTER, d.index = {1, 23, 1}, d.ks = {1, 24, 1};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"TOKEN_INDEX.dim", "[1, 23, 1]"}},
      {"index type",
       [](Decl& d) {
         d.mode = Mode::GATHER, d.index = {1, 9, 1}, d.index_type = DataType_t::HALF;
       },
       E::INVALID_VALUE,
       {"TOKEN_INDEX.data_type", "HALF"}},
      {"top_k",
       [](Decl& d) {
         d.mode = Mode::SCATTER, d.index = {1, 24, 1}, d.ks = {1, 24, 1}, d.top_k = 5;
       },
       E::INVALID_VALUE,
       {"top_k", "5"}},
      {"output dims",
       [](Decl& d) {
         d.out_dim = {1, 24, 12};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"OUTPUT.dim", "[1, 24, 12]"}},
      {"doutput dims",
       [](Decl& d) {
         d.backward = true, d.dout = {1, 24, 10};
       },
       E::SHAPE_DEDUCTION_FAILED,
       {"DOUTPUT.dim", "[1, 24, 10]"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Decl d;
    c.tweak(d);
    const error_t e = validate_decl(d);
    EXPECT_EQ(e.get_code(), c.code) << e.get_message();
    EXPECT_NE(e.get_message().find("'moe'"), std::string::npos) << e.get_message();
    for (const auto& m : c.mentions)
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  }
  Decl good;
  EXPECT_TRUE(validate_decl(good).is_good());
}

// The backward graph over the forward's buffers plus dOutput; gradients poisoned.
struct Backward {
  graph::Graph g;
  std::unique_ptr<HostTensor> dout, dtoken, dweight;
};

std::unique_ptr<Backward> make_backward(Forward& f, const Problem& p, const Options& o, std::mt19937_64& rng) {
  auto b = std::make_unique<Backward>();
  auto& g = b->g;
  g.set_compute_data_type(o.fp64 ? DataType_t::DOUBLE : DataType_t::FLOAT);
  // The forward's tensors are redeclared here with the same uids, so one variant pack serves both.
  auto like = [&](const HostTensor& h) {
    graph::Tensor_attributes a = *h.t;
    return g.tensor(a);
  };
  b->dout = std::make_unique<HostTensor>(dense_input(g, "dout", {1, p.rows, p.n}, o.out_type));
  b->dout->fill_random(rng);
  Moe_grouped_matmul_backward_attributes a;
  a.set_name("moe_bwd").set_mode(p.mode).set_top_k(static_cast<int32_t>(p.top_k));
  auto [dx, dw] = g.moe_grouped_matmul_backward(b->dout->t, like(*f.token), like(*f.weight), like(*f.offsets),
                                                f.index ? like(*f.index) : nullptr, f.ks ? like(*f.ks) : nullptr, a);
  dx->set_output(true).set_data_type(o.value_type == DataType_t::DOUBLE ? DataType_t::DOUBLE : DataType_t::FLOAT);
  dw->set_output(true).set_data_type(dx->get_data_type());
  EXPECT_TRUE(g.validate().is_good());
  b->dtoken = std::make_unique<HostTensor>(dx);
  b->dweight = std::make_unique<HostTensor>(dw);
  b->dtoken->poison();
  b->dweight->poison();
  return b;
}

error_t run_backward(Backward& b, Forward& f) {
  std::vector<HostTensor*> all{b.dout.get(),  b.dtoken.get(), b.dweight.get(),
                               f.token.get(), f.weight.get(), f.offsets.get()};
  if (f.index) all.push_back(f.index.get());
  if (f.ks) all.push_back(f.ks.get());
  return build_and_run(b.g, all);
}

// Central differences of L = sum(Output * dOutput) through the forward reference in fp64.
TEST(MoeGroupedMatmulBackward, MatchesFiniteDifferencesInFp64) {
  std::mt19937_64 rng(21);
  const Options o{DataType_t::DOUBLE, DataType_t::DOUBLE, DataType_t::INT64, true};
  for (Mode mode : {Mode::NONE, Mode::GATHER, Mode::SCATTER}) {
    SCOPED_TRACE(static_cast<int>(mode));
    Problem p = make_problem(mode, rng, 3, 12, 2);
    p.k = 5, p.n = 3;
    auto f = make_forward(p, o, rng);
    auto b = make_backward(*f, p, o, rng);
    ASSERT_TRUE(run_backward(*b, *f).is_good());
    const std::vector<double> dout = b->dout->values();
    auto loss = [&] {
      f->out->poison();
      EXPECT_TRUE(build_and_run(f->g, f->buffers()).is_good());
      const std::vector<double> y = f->out->values();
      return std::inner_product(y.begin(), y.end(), dout.begin(), 0.0);
    };
    const double h = 1e-5;
    for (auto [x, grad] : {std::pair{f->token.get(), b->dtoken.get()}, std::pair{f->weight.get(), b->dweight.get()}}) {
      std::vector<double> numeric;
      for (int64_t i = 0; i < x->volume(); ++i) {
        const double v = x->get(i);
        x->set(i, v + h);
        const double up = loss();
        x->set(i, v - h);
        const double down = loss();
        x->set(i, v);
        numeric.push_back((up - down) / (2 * h));
      }
      EXPECT_CLOSE(grad->values(), numeric, 1e-8);
      // A gradient of all zeros would pass a weak checker; this one has real content.
      EXPECT_GT(compare(numeric, std::vector<double>(numeric.size(), 0.0)).max_abs, 1e-2);
    }
  }
}

TEST(MoeGroupedMatmulBackward, StorageTypesAndJsonRoundTrip) {
  std::mt19937_64 rng(4);
  for (Mode mode : {Mode::NONE, Mode::GATHER, Mode::SCATTER}) {
    const Problem p = make_problem(mode, rng, 4, 111, 3);
    const Options o{DataType_t::BFLOAT16, DataType_t::BFLOAT16, DataType_t::INT32, false, true};
    auto f = make_forward(p, o, rng);
    auto b = make_backward(*f, p, o, rng);
    ASSERT_TRUE(run_backward(*b, *f).is_good());
    // The fp64 reference on the same stored values is the oracle for the FP32 run.
    const Options o64{DataType_t::BFLOAT16, DataType_t::BFLOAT16, DataType_t::INT32, true, true};
    auto b64 = make_backward(*f, p, o64, rng);
    b64->dout->bytes = b->dout->bytes;
    ASSERT_TRUE(run_backward(*b64, *f).is_good());
    EXPECT_CLOSE(b->dtoken->values(), b64->dtoken->values(), 1e-4);
    EXPECT_CLOSE(b->dweight->values(), b64->dweight->values(), 1e-4);
    const std::vector<uint8_t> dx_first = b->dtoken->bytes, dw_first = b->dweight->bytes;
    std::string text;
    ASSERT_TRUE(b->g.serialize(text).is_good());
    EXPECT_NE(text.find("MOE_GROUPED_MATMUL_BWD"), std::string::npos);
    graph::Graph replay;
    ASSERT_TRUE(replay.deserialize(text).is_good());
    b->g = std::move(replay);
    b->dtoken->poison();
    b->dweight->poison();
    ASSERT_TRUE(run_backward(*b, *f).is_good());
    EXPECT_EQ(b->dtoken->bytes, dx_first);
    EXPECT_EQ(b->dweight->bytes, dw_first);
  }
}

}  // namespace
}  // namespace frost::test
