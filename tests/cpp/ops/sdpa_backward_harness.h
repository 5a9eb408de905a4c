// The harness of the sdpa_backward tests: a case (problem, storage type, layout, how attn_scale is
// given), its random operands as stored, and the backward graph with its buffers bound and outputs
// poisoned. O and Stats come from the naive forward (or the forward reference) of the same operands.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "ops/sdpa_backward_naive.h"
#include "ops/sdpa_naive.h"
#include "test_util.h"

namespace frost::test::sdpa_backward {

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

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

// Odd extents, s_q != s_kv and d_qk != d_v; cases change what they test.
inline SdpaProblem base(int64_t s_q = 17, int64_t s_kv = 33) {
  SdpaProblem p;
  p.b = 2, p.h_q = 4, p.h_k = 4, p.h_v = 4, p.s_q = s_q, p.s_kv = s_kv, p.d_qk = 12, p.d_v = 8;
  p.attn_scale = 0.4;
  return p;
}

inline std::vector<int64_t> strides_for(Layout l, const std::vector<int64_t>& d) {
  if (l == Layout::BSHD) return {d[2] * d[1] * d[3], d[3], d[1] * d[3], 1};
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

inline double stored(DataType_t dt, double x) {
  uint64_t scratch = 0;
  detail::write_element(&scratch, dt, 0, x);
  return detail::read_element(&scratch, dt, 0);
}

// The operands of one problem as their buffers hold them (already rounded to the storage types).
struct Data {
  std::vector<double> q, k, v, d_o, bias, sink;
  double scale = 1.0;
};

inline Data random_data(const Case& c, uint64_t seed) {
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
inline void declare_inputs(Bound& s, const Case& c, const Data& d, Attr& a) {
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
inline void bind_inputs(Bound& s, const SdpaProblem& p, const Data& d) {
  s.set(s.q, d.q), s.set(s.k, d.k), s.set(s.v, d.v);
  if (s.scale) s.set(s.scale, {d.scale});
  if (s.bias) s.set(s.bias, d.bias);
  if (s.len_q) {
    s.set(s.len_q, std::vector<double>(p.seq_len_q.begin(), p.seq_len_q.end()));
    s.set(s.len_kv, std::vector<double>(p.seq_len_kv.begin(), p.seq_len_kv.end()));
  }
  if (s.sink) s.set(s.sink, d.sink);
}

inline graph::Graph& with_types(graph::Graph& g, const Case& c) {
  return g.set_io_data_type(c.io).set_compute_data_type(c.fp64 ? DataType_t::DOUBLE : DataType_t::FLOAT);
}

// The backward graph with every gradient bound (dBias and dSink where the case has bias and sink),
// its outputs poisoned. O and Stats are given as the forward saved them.
struct Backward : Bound {
  TensorPtr o, d_o, stats, dq, dk, dv, dbias, dsink;
};

inline std::unique_ptr<Backward> make_backward(const Case& c, const Data& d, const std::vector<double>& o,
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

// The problem the naive formulas see: attn_scale as the graph holds it (FLOAT, or 1 when omitted).
inline SdpaProblem naive_problem(const Case& c, const Data& d) {
  SdpaProblem p = c.p;
  p.attn_scale = d.scale;
  return p;
}

// Gradients of the fixed-loss sum(dO * O) with respect to each operand, read back from the buffers.
inline SdpaGradients read_gradients(Backward& s) {
  SdpaGradients got;
  got.dq = s.buffer(s.dq).values(), got.dk = s.buffer(s.dk).values(), got.dv = s.buffer(s.dv).values();
  if (s.dbias) got.dbias = s.buffer(s.dbias).values();
  if (s.dsink) got.dsink = s.buffer(s.dsink).values();
  return got;
}

// Each gradient within `rel` of its largest magnitude (plus one): storage rounding of 16-bit
// outputs, FP32 Stats and FP32 accumulation are all relative to the size of the values.
inline void expect_gradients_close(const SdpaGradients& got, const SdpaGradients& want, double rel) {
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

// A few times the largest error measured on these cases: 16-bit storage of O and the gradients,
// FP32 Stats (which bound even the fp64 mode) and FP32 accumulation.
inline double tolerance(const Case& c) {
  if (c.fp64) return 1e-6;  // Stats stay FP32 even in the fp64 mode
  if (c.io == DataType_t::BFLOAT16) return 8e-3;
  if (c.io == DataType_t::HALF) return 5e-4;
  return 2e-6;
}

inline Case make_case(std::string label, SdpaProblem p, const std::function<void(Case&)>& tweak) {
  Case c;
  c.label = std::move(label);
  c.p = std::move(p);
  tweak(c);
  return c;
}

struct Ran {
  Data d;
  std::unique_ptr<Backward> s;
};

// The case's backward graph on fresh operands, O and Stats from the naive forward, run once.
inline Ran run_case(const Case& c, uint64_t seed) {
  Ran r{random_data(c, seed), nullptr};
  const SdpaNaiveResult fwd = sdpa_naive(naive_problem(c, r.d), r.d.q, r.d.k, r.d.v, r.d.bias, r.d.sink);
  r.s = make_backward(c, r.d, fwd.o, fwd.stats);
  if (r.s) {
    EXPECT_TRUE(build_and_run(r.s->g, r.s->all()).is_good());
  }
  return r;
}

}  // namespace frost::test::sdpa_backward
