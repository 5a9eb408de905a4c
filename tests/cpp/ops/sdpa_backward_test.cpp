#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "ops/sdpa_backward_naive.h"
#include "ops/sdpa_naive.h"
#include "test_util.h"

namespace frost::test {
namespace {

using graph::SDPA_attributes;
using graph::SDPA_backward_attributes;

enum class Layout { BHSD, BSHD };
enum class ScaleAs { ATTRIBUTE, TENSOR, PASS_BY_VALUE, OMITTED };

struct Case {
  std::string label;
  SdpaProblem p;
  DataType_t io = DataType_t::FLOAT;
  Layout layout = Layout::BHSD;
  ScaleAs scale_as = ScaleAs::ATTRIBUTE;
  bool fp64 = false;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

// Odd extents, s_q != s_kv and d_qk != d_v; cases change what they test.
SdpaProblem base(int64_t s_q = 17, int64_t s_kv = 33) {
  SdpaProblem p;
  p.b = 2, p.h_q = 4, p.h_k = 4, p.h_v = 4, p.s_q = s_q, p.s_kv = s_kv, p.d_qk = 12, p.d_v = 8;
  p.attn_scale = 0.4;
  return p;
}

std::vector<int64_t> strides_for(Layout l, const std::vector<int64_t>& d) {
  if (l == Layout::BSHD) return {d[2] * d[1] * d[3], d[3], d[1] * d[3], 1};
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

double stored(DataType_t dt, double x) {
  uint64_t scratch = 0;
  detail::write_element(&scratch, dt, 0, x);
  return detail::read_element(&scratch, dt, 0);
}

// The operands of one problem as their buffers hold them (already rounded to the storage types).
struct Data {
  std::vector<double> q, k, v, d_o, bias, sink;
  double scale = 1.0;
};

Data random_data(const Case& c, uint64_t seed) {
  const SdpaProblem& p = c.p;
  std::mt19937_64 rng(seed);
  auto draw = [&](int64_t n, DataType_t dt, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> x(static_cast<size_t>(n));
    for (double& e : x) e = stored(dt, u(rng));
    return x;
  };
  Data d;
  d.q = draw(p.b * p.h_q * p.s_q * p.d_qk, c.io, -1, 1);
  d.k = draw(p.b * p.h_k * p.s_kv * p.d_qk, c.io, -1, 1);
  d.v = draw(p.b * p.h_v * p.s_kv * p.d_v, c.io, -1, 1);
  d.d_o = draw(p.b * p.h_q * p.s_q * p.d_v, c.io, -1, 1);
  if (!p.bias_dim.empty()) d.bias = draw(p.bias_dim[0] * p.bias_dim[1] * p.s_q * p.s_kv, c.io, -2, 2);
  // Multiples of 2^-8: finite differences step the sink exactly in its FLOAT storage.
  if (p.sink)
    for (double x : draw(p.h_q, DataType_t::DOUBLE, -1, 3)) d.sink.push_back(std::round(x * 256) / 256);
  d.scale = c.scale_as == ScaleAs::OMITTED ? 1.0 : stored(DataType_t::FLOAT, p.attn_scale);
  return d;
}

// A graph's operand tensors and the host buffers bound to them.
struct Bound {
  graph::Graph g;
  TensorPtr q, k, v, scale, bias, len_q, len_kv, sink;
  std::vector<std::unique_ptr<HostTensor>> buffers;

  HostTensor& buffer(const TensorPtr& t) {
    for (auto& b : buffers)
      if (b->t == t) return *b;
    return *buffers.emplace_back(std::make_unique<HostTensor>(t));
  }
  void set(const TensorPtr& t, const std::vector<double>& values) {
    HostTensor& b = buffer(t);
    for (size_t n = 0; n < values.size(); ++n) b.set(static_cast<int64_t>(n), values[n]);
  }
  std::vector<HostTensor*> all() {
    std::vector<HostTensor*> v;
    for (auto& b : buffers) v.push_back(b.get());
    return v;
  }
};

// Declares Q, K, V and the optional inputs of the case on the forward or backward attributes
// (their setters share names).
template <class Attr>
void declare_inputs(Bound& s, const Case& c, const Data& d, Attr& a) {
  const SdpaProblem& p = c.p;
  graph::Graph& g = s.g;
  auto dense = [&](const char* name, std::vector<int64_t> dim) {
    return input(g, name, dim, c.io, strides_for(c.layout, dim));
  };
  s.q = dense("q", {p.b, p.h_q, p.s_q, p.d_qk});
  s.k = dense("k", {p.b, p.h_k, p.s_kv, p.d_qk});
  s.v = dense("v", {p.b, p.h_v, p.s_kv, p.d_v});
  a.set_name("attn").set_stats_use_log2(p.stats_use_log2).set_alibi_mask(p.alibi);
  a.set_diagonal_alignment(p.bottom_right ? DiagonalAlignment_t::BOTTOM_RIGHT : DiagonalAlignment_t::TOP_LEFT);
  if (p.left_bound) a.set_diagonal_band_left_bound(*p.left_bound);
  if (p.right_bound) a.set_diagonal_band_right_bound(*p.right_bound);
  if (c.scale_as == ScaleAs::ATTRIBUTE) a.set_attn_scale(static_cast<float>(d.scale));
  if (c.scale_as == ScaleAs::TENSOR) a.set_attn_scale(s.scale = input(g, "scale", {1, 1, 1, 1}));
  if (c.scale_as == ScaleAs::PASS_BY_VALUE) a.set_attn_scale(g.tensor(static_cast<float>(d.scale)));
  if (!p.bias_dim.empty()) a.set_bias(s.bias = input(g, "bias", p.bias_dim, c.io));
  if (!p.seq_len_q.empty()) {
    a.set_padding_mask(true);
    a.set_seq_len_q(s.len_q = input(g, "len_q", {p.b, 1, 1, 1}, DataType_t::INT32));
    a.set_seq_len_kv(s.len_kv = input(g, "len_kv", {p.b, 1, 1, 1}, DataType_t::INT32));
  }
  if (p.sink) a.set_sink_token(s.sink = input(g, "sink", {1, p.h_q, 1, 1}));
}

// Fills the input buffers; after validate, which gives every declared tensor its strides.
void bind_inputs(Bound& s, const SdpaProblem& p, const Data& d) {
  s.set(s.q, d.q), s.set(s.k, d.k), s.set(s.v, d.v);
  if (s.scale) s.set(s.scale, {d.scale});
  if (s.bias) s.set(s.bias, d.bias);
  if (s.len_q) {
    s.set(s.len_q, std::vector<double>(p.seq_len_q.begin(), p.seq_len_q.end()));
    s.set(s.len_kv, std::vector<double>(p.seq_len_kv.begin(), p.seq_len_kv.end()));
  }
  if (s.sink) s.set(s.sink, d.sink);
}

graph::Graph& with_types(graph::Graph& g, const Case& c) {
  return g.set_io_data_type(c.io).set_compute_data_type(c.fp64 ? DataType_t::DOUBLE : DataType_t::FLOAT);
}

// The backward graph with every gradient bound (dBias and dSink where the case has bias and sink),
// its outputs poisoned. O and Stats are given as the forward saved them.
struct Backward : Bound {
  TensorPtr o, d_o, stats, dq, dk, dv, dbias, dsink;
};

std::unique_ptr<Backward> make_backward(const Case& c, const Data& d, const std::vector<double>& o,
                                        const std::vector<double>& stats) {
  const SdpaProblem& p = c.p;
  auto s = std::make_unique<Backward>();
  with_types(s->g, c);
  SDPA_backward_attributes a;
  declare_inputs(*s, c, d, a);
  const std::vector<int64_t> o_dim{p.b, p.h_q, p.s_q, p.d_v};
  s->o = input(s->g, "o", o_dim, c.io, strides_for(c.layout, o_dim));
  s->d_o = input(s->g, "dO", o_dim, c.io, strides_for(c.layout, o_dim));
  s->stats = input(s->g, "stats", {p.b, p.h_q, p.s_q, 1});
  // Declared by name only: their dims, strides and types are inferred.
  if (s->bias) a.set_dbias(s->dbias = s->g.tensor(graph::Tensor_attributes().set_name("dbias")));
  if (s->sink) a.set_dsink_token(s->dsink = s->g.tensor(graph::Tensor_attributes().set_name("dsink")));
  a.set_deterministic_algorithm(true);
  auto [dq, dk, dv] = s->g.sdpa_backward(s->q, s->k, s->v, s->o, s->d_o, s->stats, a);
  s->dq = dq, s->dk = dk, s->dv = dv;
  for (const TensorPtr& t : {dq, dk, dv}) t->set_output(true);
  if (auto e = s->g.validate(); e.is_bad()) {
    ADD_FAILURE() << c.label << ": " << e.get_message();
    return nullptr;
  }
  bind_inputs(*s, p, d);
  s->set(s->o, o), s->set(s->d_o, d.d_o), s->set(s->stats, stats);
  for (const TensorPtr& t : {s->dq, s->dk, s->dv, s->dbias, s->dsink})
    if (t) s->buffer(t).poison();
  return s;
}

SdpaProblem naive_problem(const Case& c, const Data& d) {
  SdpaProblem p = c.p;
  p.attn_scale = d.scale;
  return p;
}

// Gradients of the fixed-loss sum(dO * O) with respect to each operand, read back from the buffers.
SdpaGradients read_gradients(Backward& s) {
  SdpaGradients got;
  got.dq = s.buffer(s.dq).values(), got.dk = s.buffer(s.dk).values(), got.dv = s.buffer(s.dv).values();
  if (s.dbias) got.dbias = s.buffer(s.dbias).values();
  if (s.dsink) got.dsink = s.buffer(s.dsink).values();
  return got;
}

// Each gradient within `rel` of its largest magnitude (plus one): storage rounding of 16-bit
// outputs, FP32 Stats and FP32 accumulation are all relative to the size of the values.
void expect_gradients_close(const SdpaGradients& got, const SdpaGradients& want, double rel) {
  auto check = [&](const char* what, const std::vector<double>& g, const std::vector<double>& w) {
    ASSERT_EQ(g.size(), w.size()) << what;
    double largest = 0;
    for (double x : w) largest = std::max(largest, std::fabs(x));
    SCOPED_TRACE(what);
    EXPECT_CLOSE(g, w, rel * (1 + largest));
  };
  check("dQ", got.dq, want.dq);
  check("dK", got.dk, want.dk);
  check("dV", got.dv, want.dv);
  check("dBias", got.dbias, want.dbias);
  check("dSink", got.dsink, want.dsink);
}

double tolerance(const Case& c) {
  if (c.fp64) return 1e-6;  // Stats stay FP32 even in the fp64 mode
  if (c.io == DataType_t::BFLOAT16) return 2e-2;
  if (c.io == DataType_t::HALF) return 3e-3;
  return 2e-5;
}

class SdpaBackwardCases : public ::testing::TestWithParam<Case> {};

TEST_P(SdpaBackwardCases, MatchesNaiveGradients) {
  const Case& c = GetParam();
  const Data d = random_data(c, std::hash<std::string>{}(c.label));
  const SdpaProblem p = naive_problem(c, d);
  const SdpaNaiveResult fwd = sdpa_naive(p, d.q, d.k, d.v, d.bias, d.sink);
  auto s = make_backward(c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  auto e = build_and_run(s->g, s->all());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  // The naive side recomputes the softmax from Q, K, V; the graph reads O and Stats as stored.
  expect_gradients_close(read_gradients(*s), sdpa_backward_naive(p, d.q, d.k, d.v, d.d_o, d.bias, d.sink),
                         tolerance(c));
}

Case make_case(std::string label, SdpaProblem p, const std::function<void(Case&)>& tweak) {
  Case c;
  c.label = std::move(label);
  c.p = std::move(p);
  tweak(c);
  return c;
}

std::vector<Case> sweep_cases() {
  auto none = [](Case&) {};
  auto causal = [](bool bottom_right) {
    return [bottom_right](Case& c) { c.p.right_bound = 0, c.p.bottom_right = bottom_right; };
  };
  return {
      make_case("plain_17x33", base(), none),
      make_case("plain_33x17", base(33, 17), none),
      make_case("single_query_and_key", base(1, 1), none),
      make_case("decode_1x33", base(1, 33), none),
      make_case("equal_head_dims", base(), [](Case& c) { c.p.d_v = 12; }),
      make_case("causal_top_left_33x17", base(33, 17), causal(false)),
      make_case("causal_bottom_right_17x33", base(), causal(true)),
      make_case("causal_bottom_right_33x17_masked_rows", base(33, 17), causal(true)),
      make_case("sliding_window_bottom_right", base(),
                [](Case& c) { c.p.left_bound = 5, c.p.right_bound = 0, c.p.bottom_right = true; }),
      make_case("band_both_bounds", base(33, 17), [](Case& c) { c.p.left_bound = 5, c.p.right_bound = 3; }),
      make_case("padding", base(),
                [](Case& c) {
                  c.p.seq_len_q = {17, 5}, c.p.seq_len_kv = {33, 9};
                }),
      make_case("padding_empty", base(),
                [](Case& c) {
                  c.p.seq_len_q = {0, 17}, c.p.seq_len_kv = {0, 1};
                }),
      make_case("padding_causal_bottom_right", base(),
                [](Case& c) {
                  c.p.seq_len_q = {9, 17}, c.p.seq_len_kv = {20, 12}, c.p.right_bound = 0, c.p.bottom_right = true;
                }),
      make_case("gqa_4_2_bshd", base(), [](Case& c) { c.p.h_k = 2, c.p.h_v = 2, c.layout = Layout::BSHD; }),
      make_case("mqa_bshd_causal", base(),
                [](Case& c) {
                  c.p.h_k = 1, c.p.h_v = 1, c.layout = Layout::BSHD, c.p.right_bound = 0, c.p.bottom_right = true;
                }),
      make_case("gqa_k2_v1", base(), [](Case& c) { c.p.h_k = 2, c.p.h_v = 1; }),
      make_case("bias_per_head", base(),
                [](Case& c) {
                  c.p.bias_dim = {1, 4, 17, 33};
                }),
      make_case("bias_per_batch_causal", base(33, 17),
                [](Case& c) {
                  c.p.bias_dim = {2, 1, 33, 17}, c.p.right_bound = 0;
                }),
      make_case("bias_shared_bshd", base(),
                [](Case& c) {
                  c.p.bias_dim = {1, 1, 17, 33}, c.layout = Layout::BSHD;
                }),
      make_case("bias_full", base(),
                [](Case& c) {
                  c.p.bias_dim = {2, 4, 17, 33};
                }),
      make_case("alibi_causal", base(),
                [](Case& c) { c.p.alibi = true, c.p.right_bound = 0, c.p.bottom_right = true; }),
      make_case("alibi_3_heads", base(33, 17), [](Case& c) { c.p.alibi = true, c.p.h_q = c.p.h_k = c.p.h_v = 3; }),
      make_case("sink", base(), [](Case& c) { c.p.sink = true; }),
      make_case("sink_masked_rows", base(33, 17),
                [](Case& c) { c.p.sink = true, c.p.right_bound = 0, c.p.bottom_right = true; }),
      make_case("scale_tensor", base(), [](Case& c) { c.scale_as = ScaleAs::TENSOR; }),
      make_case("scale_pass_by_value", base(), [](Case& c) { c.scale_as = ScaleAs::PASS_BY_VALUE; }),
      make_case("scale_omitted", base(), [](Case& c) { c.scale_as = ScaleAs::OMITTED; }),
      make_case("stats_log2_sink", base(), [](Case& c) { c.p.stats_use_log2 = true, c.p.sink = true; }),
      make_case("bf16_bshd_causal", base(),
                [](Case& c) { c.io = DataType_t::BFLOAT16, c.layout = Layout::BSHD, c.p.right_bound = 0; }),
      make_case("bf16_gqa_bias", base(33, 17),
                [](Case& c) {
                  c.io = DataType_t::BFLOAT16, c.p.h_k = 2, c.p.h_v = 2, c.p.bias_dim = {1, 4, 33, 17};
                }),
      make_case("fp16_padding_sink", base(),
                [](Case& c) {
                  c.io = DataType_t::HALF, c.p.seq_len_q = {17, 3}, c.p.seq_len_kv = {20, 33}, c.p.sink = true;
                }),
      make_case("fp64_everything", base(33, 17),
                [](Case& c) {
                  c.io = DataType_t::DOUBLE, c.fp64 = true, c.p.h_k = 2, c.p.h_v = 1, c.p.bias_dim = {2, 1, 33, 17};
                  c.p.seq_len_q = {30, 33}, c.p.seq_len_kv = {17, 9}, c.p.left_bound = 6, c.p.right_bound = 2;
                  c.p.bottom_right = true, c.p.sink = true, c.p.stats_use_log2 = true, c.p.alibi = true;
                  c.scale_as = ScaleAs::TENSOR;
                }),
  };
}

INSTANTIATE_TEST_SUITE_P(Sweep, SdpaBackwardCases, ::testing::ValuesIn(sweep_cases()),
                         [](const auto& info) { return info.param.label; });

// ---- fp64: gradients against central differences of the forward reference ----

// The forward graph in fp64, built once and run on changed operands to give the loss sum(dO * O).
struct Forward : Bound {
  TensorPtr o, stats;
  Handle handle = cpu_handle();
  std::unordered_map<int64_t, void*> pack;
  std::vector<uint8_t> workspace;
};

std::unique_ptr<Forward> make_forward(const Case& c, const Data& d) {
  auto f = std::make_unique<Forward>();
  with_types(f->g, c);
  SDPA_attributes a;
  a.set_generate_stats(true);
  declare_inputs(*f, c, d, a);
  auto [o, stats] = f->g.sdpa(f->q, f->k, f->v, a);
  f->o = o, f->stats = stats;
  o->set_output(true);
  stats->set_output(true);
  if (auto e = f->g.build(f->handle, {HeurMode_t::A}); e.is_bad()) {
    ADD_FAILURE() << e.get_message();
    return nullptr;
  }
  bind_inputs(*f, c.p, d);
  f->buffer(o), f->buffer(stats);
  for (auto& b : f->buffers) f->pack[b->t->get_uid()] = b->data();
  int64_t ws = 0;
  EXPECT_TRUE(f->g.get_workspace_size(ws).is_good());
  f->workspace.resize(static_cast<size_t>(ws) + 1);
  return f;
}

double loss(Forward& f, const Data& d) {
  f.set(f.q, d.q), f.set(f.k, d.k), f.set(f.v, d.v);
  if (f.bias) f.set(f.bias, d.bias);
  if (f.sink) f.set(f.sink, d.sink);
  EXPECT_TRUE(f.g.execute(f.handle, f.pack, f.workspace.data()).is_good());
  const std::vector<double> o = f.buffer(f.o).values();
  double sum = 0;
  for (size_t n = 0; n < o.size(); ++n) sum += o[n] * d.d_o[n];
  return sum;
}

// Central differences with a step of 2^-12: exact in DOUBLE and, for the sink's multiples of 2^-8,
// in FLOAT; the truncation error (step^2 / 6 times a third derivative) stays near 1e-8.
std::vector<double> central_differences(Forward& f, Data d, std::vector<double> Data::*operand) {
  constexpr double kStep = 1.0 / 4096;
  std::vector<double>& x = d.*operand;
  std::vector<double> grad(x.size());
  for (size_t n = 0; n < x.size(); ++n) {
    const double x0 = x[n];
    x[n] = x0 + kStep;
    const double up = loss(f, d);
    x[n] = x0 - kStep;
    const double down = loss(f, d);
    x[n] = x0;
    grad[n] = (up - down) / (2 * kStep);
  }
  return grad;
}

class SdpaBackwardFp64 : public ::testing::TestWithParam<Case> {};

TEST_P(SdpaBackwardFp64, MatchesFiniteDifferences) {
  const Case& c = GetParam();
  const Data d = random_data(c, std::hash<std::string>{}(c.label) + 1);
  auto f = make_forward(c, d);
  ASSERT_TRUE(f);
  loss(*f, d);
  auto s = make_backward(c, d, f->buffer(f->o).values(), f->buffer(f->stats).values());
  ASSERT_TRUE(s);
  auto e = build_and_run(s->g, s->all());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  SdpaGradients fd;
  fd.dq = central_differences(*f, d, &Data::q);
  fd.dk = central_differences(*f, d, &Data::k);
  fd.dv = central_differences(*f, d, &Data::v);
  fd.dbias = central_differences(*f, d, &Data::bias);
  fd.dsink = central_differences(*f, d, &Data::sink);
  {
    SCOPED_TRACE("graph");
    expect_gradients_close(read_gradients(*s), fd, tolerance(c));
  }
  {
    SCOPED_TRACE("naive");
    expect_gradients_close(sdpa_backward_naive(naive_problem(c, d), d.q, d.k, d.v, d.d_o, d.bias, d.sink), fd, 1e-7);
  }
}

SdpaProblem tiny(int64_t s_q = 3, int64_t s_kv = 5) {
  SdpaProblem p;
  p.b = 2, p.h_q = 2, p.h_k = 2, p.h_v = 2, p.s_q = s_q, p.s_kv = s_kv, p.d_qk = 3, p.d_v = 2;
  p.attn_scale = 0.7;
  return p;
}

std::vector<Case> finite_difference_cases() {
  auto fp64 = [](std::function<void(Case&)> tweak) {
    return [tweak](Case& c) { c.io = DataType_t::DOUBLE, c.fp64 = true, tweak(c); };
  };
  return {
      make_case("plain", tiny(), fp64([](Case&) {})),
      make_case("single_query", tiny(1, 5), fp64([](Case&) {})),
      make_case("causal_top_left", tiny(5, 3), fp64([](Case& c) { c.p.right_bound = 0; })),
      make_case("causal_bottom_right_masked_rows", tiny(5, 3),
                fp64([](Case& c) { c.p.right_bound = 0, c.p.bottom_right = true; })),
      make_case("band", tiny(4, 5), fp64([](Case& c) { c.p.left_bound = 2, c.p.right_bound = 1; })),
      make_case("padding", tiny(), fp64([](Case& c) {
                  c.p.seq_len_q = {3, 2}, c.p.seq_len_kv = {4, 0};
                })),
      make_case("gqa_k2_v1_bshd", tiny(),
                fp64([](Case& c) { c.p.h_q = 4, c.p.h_k = 2, c.p.h_v = 1, c.layout = Layout::BSHD; })),
      make_case("bias_per_head", tiny(), fp64([](Case& c) {
                  c.p.bias_dim = {1, 2, 3, 5};
                })),
      make_case("bias_per_batch_causal", tiny(), fp64([](Case& c) {
                  c.p.bias_dim = {2, 1, 3, 5}, c.p.right_bound = 0;
                })),
      make_case("alibi_3_heads", tiny(), fp64([](Case& c) { c.p.alibi = true, c.p.h_q = c.p.h_k = c.p.h_v = 3; })),
      make_case("sink", tiny(), fp64([](Case& c) { c.p.sink = true; })),
      make_case("sink_masked_rows", tiny(5, 3),
                fp64([](Case& c) { c.p.sink = true, c.p.right_bound = 0, c.p.bottom_right = true; })),
      make_case("scale_tensor_log2", tiny(),
                fp64([](Case& c) { c.scale_as = ScaleAs::TENSOR, c.p.stats_use_log2 = true; })),
      make_case("everything", tiny(4, 5), fp64([](Case& c) {
                  c.p.h_q = 4, c.p.h_k = 2, c.p.h_v = 1, c.p.bias_dim = {2, 1, 4, 5}, c.p.alibi = true;
                  c.p.seq_len_q = {4, 3}, c.p.seq_len_kv = {5, 2}, c.p.left_bound = 3, c.p.right_bound = 1;
                  c.p.bottom_right = true, c.p.sink = true, c.scale_as = ScaleAs::PASS_BY_VALUE;
                })),
  };
}

INSTANTIATE_TEST_SUITE_P(SmallShapes, SdpaBackwardFp64, ::testing::ValuesIn(finite_difference_cases()),
                         [](const auto& info) { return info.param.label; });

// ---- rules that the sweeps only imply ----

struct Ran {
  Data d;
  std::unique_ptr<Backward> s;
};

Ran run_case(const Case& c, uint64_t seed) {
  Ran r{random_data(c, seed), nullptr};
  const SdpaNaiveResult fwd = sdpa_naive(naive_problem(c, r.d), r.d.q, r.d.k, r.d.v, r.d.bias, r.d.sink);
  r.s = make_backward(c, r.d, fwd.o, fwd.stats);
  if (r.s) {
    EXPECT_TRUE(build_and_run(r.s->g, r.s->all()).is_good());
  }
  return r;
}

// Padding rows, rows with no visible key and keys that no row sees get exactly zero gradient, never
// NaN (Stats is -inf on those rows), with and without a sink.
TEST(SdpaBackward, MaskedRowsAndKeysGetExactZeros) {
  for (bool with_sink : {false, true}) {
    SCOPED_TRACE(with_sink ? "sink" : "no sink");
    Case c = make_case("masked", base(33, 17), [&](Case& k) {
      k.p.right_bound = 0, k.p.bottom_right = true, k.p.sink = with_sink;
      k.p.seq_len_q = {33, 20}, k.p.seq_len_kv = {17, 12}, k.p.bias_dim = {2, 4, 33, 17};
    });
    Ran r = run_case(c, 9);
    ASSERT_TRUE(r.s);
    const SdpaGradients got = read_gradients(*r.s);
    const SdpaProblem& p = c.p;
    for (int64_t b = 0; b < p.b; ++b)
      for (int64_t h = 0; h < p.h_q; ++h)
        for (int64_t i = 0; i < p.s_q; ++i) {
          const int64_t rows = p.seq_len_q[static_cast<size_t>(b)], keys = p.seq_len_kv[static_cast<size_t>(b)];
          const int64_t row = (b * p.h_q + h) * p.s_q + i;
          const bool dead = i >= rows || i + keys - rows < 0;
          for (int64_t d = 0; d < p.d_qk; ++d) {
            const double x = got.dq[static_cast<size_t>(row * p.d_qk + d)];
            ASSERT_TRUE(!std::isnan(x) && (!dead || x == 0.0)) << "row " << row << ": " << x;
          }
          for (int64_t j = 0; j < p.s_kv; ++j) {
            const bool masked = dead || j >= keys || j > i + keys - rows;
            const double x = got.dbias[static_cast<size_t>(row * p.s_kv + j)];
            ASSERT_TRUE(!masked || x == 0.0) << "row " << row << " key " << j << ": " << x;
          }
        }
    for (int64_t n = 0; n < static_cast<int64_t>(got.dk.size()); ++n) {
      const int64_t b = n / (p.h_k * p.s_kv * p.d_qk), j = n / p.d_qk % p.s_kv;
      ASSERT_TRUE(j < p.seq_len_kv[static_cast<size_t>(b)] || got.dk[static_cast<size_t>(n)] == 0.0) << n;
    }
    for (int64_t n = 0; n < static_cast<int64_t>(got.dv.size()); ++n) {
      const int64_t b = n / (p.h_v * p.s_kv * p.d_v), j = n / p.d_v % p.s_kv;
      ASSERT_TRUE(j < p.seq_len_kv[static_cast<size_t>(b)] || got.dv[static_cast<size_t>(n)] == 0.0) << n;
    }
    expect_gradients_close(got,
                           sdpa_backward_naive(naive_problem(c, r.d), r.d.q, r.d.k, r.d.v, r.d.d_o, r.d.bias, r.d.sink),
                           tolerance(c));
  }
}

// The reductions over GQA groups, broadcast bias dims and rows run in one fixed order.
TEST(SdpaBackward, RunsAreBitwiseReproducible) {
  Case c = make_case("repeat", base(), [](Case& k) {
    k.p.h_k = 1, k.p.h_v = 2, k.p.bias_dim = {1, 1, 17, 33}, k.p.sink = true, k.io = DataType_t::BFLOAT16;
  });
  Ran r = run_case(c, 4);
  ASSERT_TRUE(r.s);
  std::vector<std::vector<uint8_t>> first;
  for (const TensorPtr& t : {r.s->dq, r.s->dk, r.s->dv, r.s->dbias, r.s->dsink}) {
    first.push_back(r.s->buffer(t).bytes);
    r.s->buffer(t).poison();
  }
  ASSERT_TRUE(build_and_run(r.s->g, r.s->all()).is_good());
  size_t n = 0;
  for (const TensorPtr& t : {r.s->dq, r.s->dk, r.s->dv, r.s->dbias, r.s->dsink})
    EXPECT_EQ(r.s->buffer(t).bytes, first[n++]);
}

TEST(SdpaBackward, JsonRoundTripIsBitwiseIdentical) {
  for (ScaleAs scale_as : {ScaleAs::ATTRIBUTE, ScaleAs::TENSOR, ScaleAs::PASS_BY_VALUE}) {
    Case c = make_case("json", base(33, 17), [&](Case& k) {
      k.p.h_k = 2, k.p.h_v = 1, k.p.bias_dim = {1, 4, 33, 17}, k.p.seq_len_q = {30, 33}, k.p.seq_len_kv = {17, 9};
      k.p.left_bound = 6, k.p.right_bound = 2, k.p.bottom_right = true, k.p.sink = true, k.p.alibi = true;
      k.p.stats_use_log2 = true, k.layout = Layout::BSHD, k.scale_as = scale_as;
    });
    Ran r = run_case(c, 11);
    ASSERT_TRUE(r.s);
    const std::vector<TensorPtr> outs{r.s->dq, r.s->dk, r.s->dv, r.s->dbias, r.s->dsink};
    std::vector<std::vector<uint8_t>> first;
    for (const TensorPtr& t : outs) first.push_back(r.s->buffer(t).bytes);
    std::string text;
    ASSERT_TRUE(r.s->g.serialize(text).is_good());
    const nlohmann::json doc = nlohmann::json::parse(text);
    ASSERT_EQ(doc["nodes"][0]["tag"], "SDPA_BACKWARD");
    EXPECT_EQ(doc["nodes"][0]["deterministic_algorithm"], true);
    graph::Graph replay;
    auto e = replay.deserialize(text);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    for (const TensorPtr& t : outs) r.s->buffer(t).poison();
    e = build_and_run(replay, r.s->all());
    ASSERT_TRUE(e.is_good()) << e.get_message();
    for (size_t n = 0; n < outs.size(); ++n) EXPECT_EQ(r.s->buffer(outs[n]).bytes, first[n]) << n;
    std::string again;
    ASSERT_TRUE(replay.serialize(again).is_good());
    EXPECT_EQ(again, text);

    nlohmann::json bad = doc;
    bad["nodes"][0]["implementation"] = "FASTEST";
    e = graph::Graph().deserialize(bad.dump());
    EXPECT_EQ(e.get_code(), error_code_t::UNSUPPORTED_GRAPH_FORMAT);
    EXPECT_NE(e.get_message().find("FASTEST"), std::string::npos) << e.get_message();
  }
}

TEST(SdpaBackward, SequenceLengthOutOfRangeFailsAndLeavesOutputsUntouched) {
  Case c = make_case("bad_len", base(), [](Case& k) { k.p.seq_len_q = {17, 17}, k.p.seq_len_kv = {33, 33}; });
  const Data d = random_data(c, 3);
  const SdpaNaiveResult fwd = sdpa_naive(naive_problem(c, d), d.q, d.k, d.v);
  auto s = make_backward(c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  s->buffer(s->len_kv).set(0, 34);
  const std::vector<uint8_t> poisoned = s->buffer(s->dk).bytes;
  auto e = build_and_run(s->g, s->all());
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("SEQ_LEN_KV"), std::string::npos) << e.get_message();
  EXPECT_NE(e.get_message().find("34 at batch 0"), std::string::npos) << e.get_message();
  EXPECT_EQ(s->buffer(s->dk).bytes, poisoned);
}

// The comparison can fail: the causal gradients are far from those of the unmasked formula.
TEST(SdpaBackward, CheckerDetectsAWrongMask) {
  Case c = make_case("checker", base(), [](Case& k) { k.p.right_bound = 0; });
  Ran r = run_case(c, 5);
  ASSERT_TRUE(r.s);
  SdpaProblem unmasked = naive_problem(c, r.d);
  unmasked.right_bound.reset();
  const SdpaGradients wrong = sdpa_backward_naive(unmasked, r.d.q, r.d.k, r.d.v, r.d.d_o);
  EXPECT_GT(compare(read_gradients(*r.s).dq, wrong.dq).max_abs, 0.05);
  EXPECT_GT(compare(read_gradients(*r.s).dk, wrong.dk).max_abs, 0.05);
}

}  // namespace
}  // namespace frost::test
