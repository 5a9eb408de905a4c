// The harness of the sdpa_backward tests on the forward's training features: ragged (THD) and
// packed layouts, cumulative lengths, packed Stats, dropout and block masks. A case runs the
// forward reference, then the backward on the buffers the forward wrote, each tensor stored in its
// own layout; the logical [b, h, s, d] values are what the naive formulas see.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "ops/common/philox.h"
#include "ops/sdpa_backward_naive.h"
#include "ops/sdpa_naive.h"
#include "test_util.h"

namespace frost::test::varlen {

using graph::SDPA_attributes;
using graph::SDPA_backward_attributes;
constexpr DataType_t kI32 = DataType_t::INT32, kI64 = DataType_t::INT64;

// Where a logical [b, h, s, d] tensor's elements live. DENSE: BHSD, padded to s. RAGGED: each
// batch's tokens token-major (THD) after a gap of unused tokens, found through a ragged offset. CU:
// tokens packed tight, found through the side's cumulative lengths. HEAD_MAJOR (Stats only): [h,
// tokens] behind a ragged offset.
enum class Place { DENSE, RAGGED, CU, HEAD_MAJOR };

// One tensor's storage, bound by pointer in the forward and the backward graph alike.
struct Stored {
  std::vector<int64_t> dim;
  Place place = Place::DENSE;
  DataType_t dt = DataType_t::FLOAT;
  std::vector<int64_t> start_token;
  int64_t total_tokens = 0;
  std::vector<uint8_t> bytes;
  std::vector<int64_t> offsets;  // INT64 [b + 1] ragged offsets, element units

  int64_t offset(int64_t b, int64_t h, int64_t s, int64_t d) const {
    const int64_t H = dim[1], S = dim[2], D = dim[3];
    if (place == Place::DENSE) return ((b * H + h) * S + s) * D + d;
    if (place == Place::HEAD_MAJOR) return h * total_tokens + start_token[static_cast<size_t>(b)] + s;
    return (start_token[static_cast<size_t>(b)] + s) * H * D + h * D + d;
  }
  std::vector<int64_t> strides() const {
    const int64_t H = dim[1], S = dim[2], D = dim[3];
    if (place == Place::RAGGED || place == Place::CU) return {S * H * D, D, H * D, 1};
    if (place == Place::HEAD_MAJOR) return {S, total_tokens, 1, 1};
    return {H * S * D, S * D, D, 1};
  }
  int64_t elements() const {
    return place == Place::DENSE ? dim[0] * dim[1] * dim[2] * dim[3] : total_tokens * dim[1] * dim[3];
  }
  bool ragged() const { return place == Place::RAGGED || place == Place::HEAD_MAJOR; }
  double get(int64_t n) const { return detail::read_element(bytes.data(), dt, n); }
  void set(int64_t n, double v) { detail::write_element(bytes.data(), dt, n, v); }
  void fill(double v) {
    for (int64_t n = 0; n < elements(); ++n) set(n, v);
  }
};

// Batch b's rows start after the previous batch's rows plus `gap` unused tokens (none for CU).
inline std::unique_ptr<Stored> store(std::vector<int64_t> dim, DataType_t dt, Place place,
                                     const std::vector<int64_t>& lens, int64_t gap) {
  auto s = std::make_unique<Stored>();
  s->dim = std::move(dim), s->place = place, s->dt = dt;
  if (place == Place::CU) gap = 0;
  for (int64_t len : lens) {
    s->start_token.push_back(s->total_tokens);
    s->total_tokens += len + gap;
  }
  const int64_t unit = place == Place::HEAD_MAJOR ? 1 : s->dim[1] * s->dim[3];
  for (int64_t start : s->start_token) s->offsets.push_back(start * unit);
  s->offsets.push_back(s->total_tokens * unit);
  s->bytes.assign(static_cast<size_t>((s->elements() * element_bits(dt) + 7) / 8 + 8), 0);
  return s;
}

// The logical [b, h, s, d] values; rows at s >= the batch's length read as 0.
inline std::vector<double> logical(const Stored& t, const std::vector<int64_t>& lens) {
  std::vector<double> v;
  for (int64_t b = 0; b < t.dim[0]; ++b)
    for (int64_t h = 0; h < t.dim[1]; ++h)
      for (int64_t s = 0; s < t.dim[2]; ++s)
        for (int64_t d = 0; d < t.dim[3]; ++d)
          v.push_back(s < lens[static_cast<size_t>(b)] ? t.get(t.offset(b, h, s, d)) : 0.0);
  return v;
}

struct Case {
  std::string label;
  DataType_t io = DataType_t::FLOAT;
  bool fp64 = false;
  Place q = Place::RAGGED, kv = Place::RAGGED, o = Place::RAGGED, d_o = Place::RAGGED, stats = Place::RAGGED;
  Place dq = Place::RAGGED, dkv = Place::RAGGED;
  bool padding = true, cu_q = false, cu_kv = false;
  bool causal_bottom_right = false;
  enum class Drop { NONE, PHILOX, MASK } drop = Drop::NONE;
  bool block_mask = false;
  bool finite_differences = false;  // fp64 cases: also against central differences of the forward
};
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

// One problem's logical operands, lengths and masks.
struct Problem {
  SdpaProblem p;
  float drop_p = 0.3f;
  uint64_t seed = 0xfedcba9876543210ull, drop_offset = 3;
  std::vector<double> drop_mask;  // [1, h_q, s_q, s_kv] explicit mask (0 or 1)
  double drop_scale = 1.25;
};

// b = 2 with ragged lengths 1 and 17 queries, 17 and 5 keys; GQA 2:1; odd head dims.
inline Problem make_problem(const Case& c) {
  Problem pr;
  SdpaProblem& p = pr.p;
  p.b = 2, p.h_q = 2, p.h_k = 1, p.h_v = 1, p.s_q = 17, p.s_kv = 17, p.d_qk = 3, p.d_v = 2, p.attn_scale = 0.625;
  if (c.padding) p.seq_len_q = {1, 17}, p.seq_len_kv = {17, 5};
  if (c.causal_bottom_right) p.bottom_right = true, p.right_bound = 0;
  p.tile_q = 4, p.tile_kv = 4;
  std::mt19937_64 rng(std::hash<std::string>{}(c.label));
  if (c.block_mask) {
    p.block_mask_dim = {p.b, 1, 5, 5};
    std::bernoulli_distribution on(0.7);
    for (int n = 0; n < 50; ++n) p.block_mask.push_back(on(rng) ? 1 : 0);
    for (int n = 0; n < 5; ++n) p.block_mask[static_cast<size_t>(25 + n)] = 0;  // batch 1's first 4 rows see no key
    p.block_mask[0] = 1;                                                        // batch 0's one row sees keys 0..3
  }
  const double keep_scale = 1.0 / (1.0 - static_cast<double>(pr.drop_p));
  if (c.drop == Case::Drop::MASK) {
    std::bernoulli_distribution keep(0.7);
    for (int64_t n = 0; n < p.h_q * p.s_q * p.s_kv; ++n) pr.drop_mask.push_back(keep(rng) ? 1 : 0);
  }
  if (c.drop != Case::Drop::NONE)
    for (int64_t b = 0; b < p.b; ++b)
      for (int64_t h = 0; h < p.h_q; ++h)
        for (int64_t i = 0; i < p.s_q; ++i)
          for (int64_t j = 0; j < p.s_kv; ++j) {
            const int64_t e = ((b * p.h_q + h) * p.s_q + i) * p.s_kv + j;
            if (c.drop == Case::Drop::MASK) {
              p.drop_factor.push_back(pr.drop_mask[static_cast<size_t>(e % (p.h_q * p.s_q * p.s_kv))] * pr.drop_scale);
            } else {
              // The documented counter: word e of the stream keyed by the seed, at the offset.
              const bool kept =
                  detail::philox_uniform(pr.seed, pr.drop_offset, static_cast<uint64_t>(e)) >= double{pr.drop_p};
              p.drop_factor.push_back(kept ? keep_scale : 0.0);
            }
          }
  return pr;
}

// Scalar and index buffers bound by pointer.
struct Scalars {
  std::vector<int32_t> len_q, len_kv;
  std::vector<uint8_t> block, mask;
  int64_t seed = 0, offset = 0;
  float scale = 0, scale_inv = 0;
};

// The graphs' tensors and the buffers behind them.
struct Trial {
  Case c;
  Problem pr;
  std::unique_ptr<Stored> q, k, v, o, d_o, stats, dq, dk, dv;
  Scalars fwd_scalars, bwd_scalars;
  graph::Graph fwd, bwd;
  std::unordered_map<int64_t, void*> fwd_pack, bwd_pack;
  TensorPtr q_fwd, k_fwd, v_fwd, o_fwd;  // the forward's operands, for finite differences
  TensorPtr dq_t, dk_t, dv_t;
  // Elements per token of Q's token-major rows.
  int64_t p_unit() const { return pr.p.h_q * pr.p.d_qk; }
  std::vector<int64_t> lens_q() const {
    return c.padding ? pr.p.seq_len_q : std::vector<int64_t>(static_cast<size_t>(pr.p.b), pr.p.s_q);
  }
  std::vector<int64_t> lens_kv() const {
    return c.padding ? pr.p.seq_len_kv : std::vector<int64_t>(static_cast<size_t>(pr.p.b), pr.p.s_kv);
  }
};

inline error_t execute(graph::Graph& g, const std::unordered_map<int64_t, void*>& pack) {
  Handle h = cpu_handle();
  int64_t ws = 0;
  FROST_CHECK(g.get_workspace_size(ws));
  std::vector<uint8_t> workspace(static_cast<size_t>(ws) + 1);
  return g.execute(h, pack, workspace.data());
}

// Declares `s` in g as a new input, or gives the output tensor `as_output` its layout; either way
// with its ragged offset when it has one.
inline TensorPtr declare(graph::Graph& g, const std::string& name, Stored& s, TensorPtr as_output = nullptr) {
  TensorPtr t = as_output;
  if (!t)
    t = input(g, name, s.dim, s.dt, s.strides());
  else
    t->set_dim(s.dim).set_stride(s.strides()).set_data_type(s.dt).set_output(true);
  if (s.ragged()) t->set_ragged_offset(input(g, name + "_offsets", {s.dim[0] + 1, 1, 1, 1}, kI64, {1, 1, 1, 1}));
  return t;
}

// Buffers to bind once validate has given every tensor its uid.
using Binds = std::vector<std::pair<TensorPtr, void*>>;
inline void add(Binds& binds, const TensorPtr& t, Stored& s) {
  binds.emplace_back(t, s.bytes.data());
  if (s.ragged()) binds.emplace_back(t->get_ragged_offset(), s.offsets.data());
}
inline std::unordered_map<int64_t, void*> pack_of(const Binds& binds) {
  std::unordered_map<int64_t, void*> pack;
  for (const auto& [t, data] : binds) pack[t->get_uid()] = data;
  return pack;
}

// Declares the attributes both passes share (lengths, mask, band, dropout, block mask).
template <class Attr>
void declare_shared(graph::Graph& g, const Trial& r, Scalars& sc, Attr& a, Binds& binds) {
  const SdpaProblem& p = r.pr.p;
  a.set_name("attn").set_attn_scale(static_cast<float>(p.attn_scale));
  if (r.c.causal_bottom_right) a.set_causal_mask_bottom_right(true);
  if (r.c.padding) {
    a.set_padding_mask(true);
    auto lengths = [&](bool cu, std::vector<int32_t>& buf, const std::vector<int64_t>& lens, const char* name) {
      buf.clear();
      if (cu) buf.push_back(0);
      for (int64_t len : lens) buf.push_back(static_cast<int32_t>(cu ? buf.back() + len : len));
      TensorPtr t = cu ? input(g, name, {p.b + 1}, kI32, {1}) : input(g, name, {p.b, 1, 1, 1}, kI32);
      binds.emplace_back(t, buf.data());
      return t;
    };
    if (r.c.cu_q)
      a.set_cu_seq_len_q(lengths(true, sc.len_q, p.seq_len_q, "cu_q"));
    else
      a.set_seq_len_q(lengths(false, sc.len_q, p.seq_len_q, "len_q"));
    if (r.c.cu_kv)
      a.set_cu_seq_len_kv(lengths(true, sc.len_kv, p.seq_len_kv, "cu_kv"));
    else
      a.set_seq_len_kv(lengths(false, sc.len_kv, p.seq_len_kv, "len_kv"));
  }
  if (r.c.block_mask) {
    sc.block.assign(p.block_mask.begin(), p.block_mask.end());
    TensorPtr t = input(g, "blocks", p.block_mask_dim, DataType_t::UINT8);
    a.set_block_mask(t).set_block_mask_tile_size(p.tile_q, p.tile_kv);
    binds.emplace_back(t, sc.block.data());
  }
  if (r.c.drop == Case::Drop::PHILOX) {
    sc.seed = static_cast<int64_t>(r.pr.seed), sc.offset = static_cast<int64_t>(r.pr.drop_offset);
    TensorPtr seed = input(g, "seed", {1, 1, 1, 1}, kI64), offset = input(g, "offset", {1, 1, 1, 1}, kI64);
    a.set_dropout(r.pr.drop_p, seed, offset);
    binds.emplace_back(seed, &sc.seed);
    binds.emplace_back(offset, &sc.offset);
  }
  if (r.c.drop == Case::Drop::MASK) {
    sc.mask.assign(r.pr.drop_mask.begin(), r.pr.drop_mask.end());
    sc.scale = static_cast<float>(r.pr.drop_scale), sc.scale_inv = static_cast<float>(1.0 / r.pr.drop_scale);
    TensorPtr mask = input(g, "drop_mask", {1, p.h_q, p.s_q, p.s_kv}, DataType_t::UINT8);
    TensorPtr scale = input(g, "drop_scale", {1, 1, 1, 1});
    binds.emplace_back(mask, sc.mask.data());
    binds.emplace_back(scale, &sc.scale);
    if constexpr (std::is_same_v<Attr, SDPA_attributes>) {
      a.set_dropout(mask, scale);
    } else {  // the backward also takes cuDNN Frontend's 1 / scale
      TensorPtr scale_inv = input(g, "drop_scale_inv", {1, 1, 1, 1});
      a.set_dropout(mask, scale, scale_inv);
      binds.emplace_back(scale_inv, &sc.scale_inv);
    }
  }
}

// Runs the forward (O and Stats into their layouts) and then the backward on fresh operands; the
// gradients start poisoned (NaN). Failures are reported and leave `ok` false.
struct Ran {
  std::unique_ptr<Trial> r;
  bool ok = false;
};

inline Ran run_case(const Case& c) {
  Ran out{std::make_unique<Trial>(), false};
  Trial& r = *out.r;
  r.c = c;
  r.pr = make_problem(c);
  const SdpaProblem& p = r.pr.p;
  const std::vector<int64_t> lq = r.lens_q(), lkv = r.lens_kv();
  r.q = store({p.b, p.h_q, p.s_q, p.d_qk}, c.io, c.q, lq, 2);
  r.k = store({p.b, p.h_k, p.s_kv, p.d_qk}, c.io, c.kv, lkv, 3);
  r.v = store({p.b, p.h_v, p.s_kv, p.d_v}, c.io, c.kv, lkv, 1);
  r.o = store({p.b, p.h_q, p.s_q, p.d_v}, c.io, c.o, lq, 1);
  r.d_o = store({p.b, p.h_q, p.s_q, p.d_v}, c.io, c.d_o, lq, 2);
  r.stats = store({p.b, p.h_q, p.s_q, 1}, DataType_t::FLOAT, c.stats, lq, 1);
  r.dq = store({p.b, p.h_q, p.s_q, p.d_qk}, c.io, c.dq, lq, 3);
  r.dk = store({p.b, p.h_k, p.s_kv, p.d_qk}, c.io, c.dkv, lkv, 2);
  r.dv = store({p.b, p.h_v, p.s_kv, p.d_v}, c.io, c.dkv, lkv, 1);
  std::mt19937_64 rng(std::hash<std::string>{}(c.label) + 1);
  std::uniform_real_distribution<double> u(-1, 1);
  for (Stored* t : {r.q.get(), r.k.get(), r.v.get(), r.d_o.get()})
    for (int64_t n = 0; n < t->elements(); ++n) t->set(n, u(rng));
  for (Stored* t : {r.o.get(), r.stats.get(), r.dq.get(), r.dk.get(), r.dv.get()}) t->fill(NAN);
  const DataType_t compute = c.fp64 ? DataType_t::DOUBLE : DataType_t::FLOAT;

  // The forward: Q, K, V -> O, Stats.
  Binds fb;
  r.fwd.set_io_data_type(c.io).set_compute_data_type(compute);
  r.q_fwd = declare(r.fwd, "q", *r.q), r.k_fwd = declare(r.fwd, "k", *r.k), r.v_fwd = declare(r.fwd, "v", *r.v);
  SDPA_attributes fa;
  fa.set_generate_stats(true);
  declare_shared(r.fwd, r, r.fwd_scalars, fa, fb);
  if (c.padding) {
    fa.set_max_total_seq_len_q(std::max({r.q->total_tokens, r.o->total_tokens, r.stats->total_tokens}));
    fa.set_max_total_seq_len_kv(std::max(r.k->total_tokens, r.v->total_tokens));
  }
  auto [o_t, stats_t] = r.fwd.sdpa(r.q_fwd, r.k_fwd, r.v_fwd, fa);
  r.o_fwd = declare(r.fwd, "o", *r.o, o_t);
  declare(r.fwd, "stats", *r.stats, stats_t);
  if (auto e = r.fwd.validate(); e.is_bad()) {
    ADD_FAILURE() << "forward: " << e.get_message();
    return out;
  }
  add(fb, r.q_fwd, *r.q), add(fb, r.k_fwd, *r.k), add(fb, r.v_fwd, *r.v), add(fb, o_t, *r.o),
      add(fb, stats_t, *r.stats);
  r.fwd_pack = pack_of(fb);
  Handle h = cpu_handle();
  if (auto e = r.fwd.build(h, {HeurMode_t::A}); e.is_bad() || (e = execute(r.fwd, r.fwd_pack)).is_bad()) {
    ADD_FAILURE() << "forward: " << e.get_message();
    return out;
  }

  // The backward on the forward's O and Stats as stored.
  Binds bb;
  r.bwd.set_io_data_type(c.io).set_compute_data_type(compute);
  TensorPtr q = declare(r.bwd, "q", *r.q), k = declare(r.bwd, "k", *r.k), v = declare(r.bwd, "v", *r.v);
  TensorPtr o = declare(r.bwd, "o", *r.o), d_o = declare(r.bwd, "dO", *r.d_o),
            stats = declare(r.bwd, "stats", *r.stats);
  SDPA_backward_attributes ba;
  ba.set_deterministic_algorithm(true);
  declare_shared(r.bwd, r, r.bwd_scalars, ba, bb);
  if (c.padding) {
    ba.set_max_total_seq_len_q(std::max(
        {r.q->total_tokens, r.o->total_tokens, r.d_o->total_tokens, r.stats->total_tokens, r.dq->total_tokens}));
    ba.set_max_total_seq_len_kv(
        std::max({r.k->total_tokens, r.v->total_tokens, r.dk->total_tokens, r.dv->total_tokens}));
  }
  auto [dq, dk, dv] = r.bwd.sdpa_backward(q, k, v, o, d_o, stats, ba);
  r.dq_t = declare(r.bwd, "dq", *r.dq, dq), r.dk_t = declare(r.bwd, "dk", *r.dk, dk);
  r.dv_t = declare(r.bwd, "dv", *r.dv, dv);
  if (auto e = r.bwd.validate(); e.is_bad()) {
    ADD_FAILURE() << "backward: " << e.get_message();
    return out;
  }
  add(bb, q, *r.q), add(bb, k, *r.k), add(bb, v, *r.v), add(bb, o, *r.o), add(bb, d_o, *r.d_o);
  add(bb, stats, *r.stats), add(bb, dq, *r.dq), add(bb, dk, *r.dk), add(bb, dv, *r.dv);
  r.bwd_pack = pack_of(bb);
  if (auto e = r.bwd.build(h, {HeurMode_t::A}); e.is_bad() || (e = execute(r.bwd, r.bwd_pack)).is_bad()) {
    ADD_FAILURE() << "backward: " << e.get_message();
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace frost::test::varlen
