// The harness of the sm90_sdpa_fwd GPU tests: cases, their graphs, the fp64 reference run and DESIGN.md's
// tolerance rule (frost's error within 2x that of a straightforward bf16/fp16 attention, plus a small floor).
// Every element the kernel must not read is NaN-poisoned in the inputs; outputs start poisoned too.
#pragma once
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

#include "gpu_util.h"
#include "graph/attr_node.h"

namespace frost::test::sdpa_fwd {

constexpr int64_t kSm90SdpaFwdEngineId = 10100;

// Where batch b's rows live. DENSE: [b, h, s, d] strides. RAGGED: token-major, batches packed behind
// gaps, found through ragged offsets (INT64 for Q/O, INT32 for K/V/Stats). CU: token-major, packed
// tight, found through cu_seq_len.
enum class Packing { DENSE, RAGGED, CU };

struct Case {
  int64_t b, h_q, h_kv, s_q, s_kv, d;
  bool causal, bottom_right, bshd, log2 = false;
  DataType_t dt = DataType_t::BFLOAT16;
  int64_t dv = 0;  // 0: d
  std::optional<int64_t> left, right;  // diagonal band (causal sets right = 0)
  std::vector<int64_t> len_q, len_kv;  // padding mask when set
  bool sink = false, scale_tensor = false;
  Packing packing = Packing::DENSE;
  bool max_total = false;  // set max_total_seq_len to the packed token counts

  int64_t d_v() const { return dv ? dv : d; }
  bool packed() const { return packing != Packing::DENSE; }
  int64_t lq(int64_t bi) const { return len_q.empty() ? s_q : len_q[static_cast<size_t>(bi)]; }
  int64_t lkv(int64_t bi) const { return len_kv.empty() ? s_kv : len_kv[static_cast<size_t>(bi)]; }
};

inline std::string name_of(const Case& c) {
  std::string n = "b" + std::to_string(c.b) + " h" + std::to_string(c.h_q) + "/" + std::to_string(c.h_kv) + " s" +
                  std::to_string(c.s_q) + "x" + std::to_string(c.s_kv) + " d" + std::to_string(c.d) +
                  (c.dv ? "/" + std::to_string(c.dv) : "") +
                  (c.causal ? (c.bottom_right ? " causal-br" : " causal") : "") + (c.bshd ? " bshd" : " bhsd") +
                  (c.dt == DataType_t::HALF ? " fp16" : " bf16");
  if (c.left) n += " left" + std::to_string(*c.left);
  if (c.right) n += " right" + std::to_string(*c.right);
  if (!c.len_q.empty()) n += " padded";
  if (c.sink) n += " sink";
  if (c.scale_tensor) n += " scale-tensor";
  if (c.packing == Packing::RAGGED) n += " ragged";
  if (c.packing == Packing::CU) n += " cu_seq_len";
  return n;
}

// Token where each batch starts in a packed buffer (gaps of 3 tokens when ragged).
inline std::vector<int64_t> token_starts(const Case& c, bool q_side) {
  std::vector<int64_t> starts;
  int64_t t = 0;
  for (int64_t bi = 0; bi < c.b; ++bi) {
    starts.push_back(t);
    t += (q_side ? c.lq(bi) : c.lkv(bi)) + (c.packing == Packing::RAGGED ? 3 : 0);
  }
  starts.push_back(t);
  return starts;
}

// Element (b, h, s, e) of a tensor with `dim` [b, h, s, d] placed as the case says.
struct Place {
  std::vector<int64_t> stride, start;  // start: packed token of each batch (empty when dense)
  int64_t at(int64_t bi, int64_t h, int64_t s, int64_t e) const {
    const int64_t base = start.empty() ? bi * stride[0] : start[static_cast<size_t>(bi)] * stride[2];
    return base + h * stride[1] + s * stride[2] + e * stride[3];
  }
};

inline Place place_of(const Case& c, int64_t h, int64_t s, int64_t d, bool q_side) {
  Place p;
  if (c.packed()) {
    p.stride = {s * h * d, d, h * d, 1};
    p.start = token_starts(c, q_side);
  } else {
    p.stride = c.bshd ? std::vector<int64_t>{s * h * d, d, h * d, 1} : std::vector<int64_t>{h * s * d, s * d, d, 1};
  }
  return p;
}

inline Place stats_place(const Case& c) {
  Place p;
  if (c.packed()) {
    p.stride = {c.s_q * c.h_q, 1, c.h_q, 1};
    p.start = token_starts(c, true);
  } else {
    p.stride = {c.h_q * c.s_q, c.s_q, 1, 1};
  }
  return p;
}

struct Built {
  graph::Graph g;
  TensorPtr q, k, v, o, stats, scale, sink, len_q, len_kv, cu_q, cu_kv;
  std::vector<std::pair<TensorPtr, std::vector<int64_t>>> offsets;  // ragged offset tensors and their values
  Place pq, pk, pv, po, ps;
};

inline void build_graph(Built& x, const Case& c) {
  const auto dt = c.dt;
  x.g.set_io_data_type(dt).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  x.pq = place_of(c, c.h_q, c.s_q, c.d, true);
  x.pk = place_of(c, c.h_kv, c.s_kv, c.d, false);
  x.pv = place_of(c, c.h_kv, c.s_kv, c.d_v(), false);
  x.po = place_of(c, c.h_q, c.s_q, c.d_v(), true);
  x.ps = stats_place(c);
  x.q = input(x.g, "q", {c.b, c.h_q, c.s_q, c.d}, dt, x.pq.stride);
  x.k = input(x.g, "k", {c.b, c.h_kv, c.s_kv, c.d}, dt, x.pk.stride);
  x.v = input(x.g, "v", {c.b, c.h_kv, c.s_kv, c.d_v()}, dt, x.pv.stride);
  graph::SDPA_attributes a;
  a.set_generate_stats(true).set_stats_use_log2(c.log2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  if (c.scale_tensor) {
    x.scale = input(x.g, "scale", {1, 1, 1, 1}, DataType_t::FLOAT, {1, 1, 1, 1});
    a.set_attn_scale(x.scale);
  } else {
    a.set_attn_scale(scale);
  }
  if (c.causal) c.bottom_right ? a.set_causal_mask_bottom_right(true) : a.set_causal_mask(true);
  if (c.bottom_right) a.set_diagonal_alignment(DiagonalAlignment_t::BOTTOM_RIGHT);
  if (c.left) a.set_diagonal_band_left_bound(*c.left);
  if (c.right) a.set_diagonal_band_right_bound(*c.right);
  if (c.sink) {
    x.sink = input(x.g, "sink", {1, c.h_q, 1, 1}, DataType_t::FLOAT, {c.h_q, 1, 1, 1});
    a.set_sink_token(x.sink);
  }
  if (!c.len_q.empty()) {
    a.set_padding_mask(true);
    if (c.packing == Packing::CU) {
      x.cu_q = input(x.g, "cu_q", {c.b + 1, 1, 1, 1}, DataType_t::INT32, {1, 1, 1, 1});
      x.cu_kv = input(x.g, "cu_kv", {c.b + 1, 1, 1, 1}, DataType_t::INT32, {1, 1, 1, 1});
      a.set_cu_seq_len_q(x.cu_q).set_cu_seq_len_kv(x.cu_kv);
    } else {
      x.len_q = input(x.g, "len_q", {c.b, 1, 1, 1}, DataType_t::INT32, {1, 1, 1, 1});
      x.len_kv = input(x.g, "len_kv", {c.b, 1, 1, 1}, DataType_t::INT32, {1, 1, 1, 1});
      a.set_seq_len_q(x.len_q).set_seq_len_kv(x.len_kv);
    }
    if (c.max_total) {
      a.set_max_total_seq_len_q(token_starts(c, true).back());
      a.set_max_total_seq_len_kv(token_starts(c, false).back());
    }
  }
  auto [o, st] = x.g.sdpa(x.q, x.k, x.v, a);
  x.o = o;
  x.stats = st;
  o->set_output(true).set_stride(x.po.stride);
  st->set_output(true).set_data_type(DataType_t::FLOAT).set_stride(x.ps.stride);
  if (c.packing == Packing::RAGGED) {
    auto ragged = [&](const TensorPtr& t, const Place& p, int64_t row_elems, DataType_t idx, const char* name) {
      auto ro = input(x.g, name, {c.b + 1, 1, 1, 1}, idx, {1, 1, 1, 1});
      t->set_ragged_offset(ro);
      std::vector<int64_t> v;
      for (int64_t s : p.start) v.push_back(s * row_elems);
      x.offsets.push_back({ro, v});
    };
    ragged(x.q, x.pq, c.h_q * c.d, DataType_t::INT64, "q_off");
    ragged(x.k, x.pk, c.h_kv * c.d, DataType_t::INT32, "k_off");
    ragged(x.v, x.pv, c.h_kv * c.d_v(), DataType_t::INT32, "v_off");
    ragged(x.o, x.po, c.h_q * c.d_v(), DataType_t::INT64, "o_off");
    ragged(x.stats, x.ps, c.h_q, DataType_t::INT32, "stats_off");
  }
}

// Builds c's graph under heuristics A and returns the name of its first plan ("" when the build fails).
inline std::string first_plan_name(Built& x, Handle& h, const Case& c) {
  build_graph(x, c);
  std::string plan;
  EXPECT_TRUE(x.g.build(h, {HeurMode_t::A}).is_good()) << name_of(c);
  x.g.get_plan_name(plan);
  return plan;
}

// Straightforward low-precision attention: fp32 scores and softmax, P rounded to the input type,
// fp32 accumulation of P V, output rounded. Its error against fp64 is the yardstick. Returns
// O[b][h][i][e] for valid rows in a dense array (0 elsewhere).
inline std::vector<double> straightforward(const Case& c, const Built& x, const HostTensor& qt, const HostTensor& kt,
                                    const HostTensor& vt, const std::vector<float>& sink) {
  // Each buffer decoded once into floats at the same element offsets: the loops below read every K and V
  // element once per query row, and decoding on every read made this yardstick run over a minute.
  auto decoded = [](const HostTensor& t) {
    const int64_t n = static_cast<int64_t>(t.bytes.size() - 8) * 8 / element_bits(t.t->get_data_type());
    std::vector<float> f(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      f[static_cast<size_t>(i)] = static_cast<float>(detail::read_element(t.bytes.data(), t.t->get_data_type(), i));
    return f;
  };
  const std::vector<float> q = decoded(qt), k = decoded(kt), v = decoded(vt);
  const int64_t ke = x.pk.stride[3];
  const int64_t g = c.h_q / c.h_kv, dv = c.d_v();
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  std::vector<double> o(static_cast<size_t>(c.b * c.h_q * c.s_q * dv), 0.0);
  std::vector<float> s(static_cast<size_t>(c.s_kv)), qrow(static_cast<size_t>(c.d));
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h_q; ++h)
      for (int64_t i = 0; i < c.lq(b); ++i) {
        const int64_t keys = c.lkv(b), diag = i + (c.bottom_right ? keys - c.lq(b) : 0);
        int64_t first = 0, last = keys;
        if (c.left) first = std::max(first, diag - *c.left + 1);
        const std::optional<int64_t> right = c.causal ? std::optional<int64_t>(0) : c.right;
        if (right) last = std::min(last, diag + *right + 1);
        for (int64_t e = 0; e < c.d; ++e) qrow[static_cast<size_t>(e)] = q[static_cast<size_t>(x.pq.at(b, h, i, e))];
        float mx = c.sink ? sink[static_cast<size_t>(h)] : -INFINITY;
        for (int64_t j = first; j < last; ++j) {
          const float* kj = k.data() + x.pk.at(b, h / g, j, 0);
          float acc = 0;
          for (int64_t e = 0; e < c.d; ++e) acc += qrow[static_cast<size_t>(e)] * kj[e * ke];
          s[static_cast<size_t>(j)] = acc * scale;
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        if (mx == -INFINITY || first >= last) continue;
        float sum = c.sink ? std::exp(sink[static_cast<size_t>(h)] - mx) : 0.f;
        for (int64_t j = first; j < last; ++j) {
          const float p = std::exp(s[static_cast<size_t>(j)] - mx);
          sum += p;
          s[static_cast<size_t>(j)] = static_cast<float>(detail::round_to(c.dt, p));
        }
        for (int64_t e = 0; e < dv; ++e) {
          const float* ve0 = v.data() + x.pv.at(b, h / g, 0, e);
          const int64_t vs = x.pv.stride[2];
          float acc = 0;
          for (int64_t j = first; j < last; ++j) acc += s[static_cast<size_t>(j)] * ve0[j * vs];
          o[static_cast<size_t>(((b * c.h_q + h) * c.s_q + i) * dv + e)] = detail::round_to(c.dt, acc / sum);
        }
      }
  return o;
}

// Values of O (or Stats) at every row a correct engine writes: dense outputs all rows, packed ones
// only the rows below the batch's length.
inline std::vector<double> written_rows(const Case& c, const HostTensor& t, const Place& p, int64_t h, int64_t width) {
  std::vector<double> v;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t i = 0; i < (c.packed() ? c.lq(b) : c.s_q); ++i)
        for (int64_t e = 0; e < width; ++e)
          v.push_back(detail::read_element(t.bytes.data(), t.t->get_data_type(), p.at(b, hh, i, e)));
  return v;
}

// Elements of a buffer that are not NaN (a packed output must write exactly its rows).
inline int64_t non_nan(const HostTensor& t) {
  int64_t n = 0;
  const int64_t bits = element_bits(t.t->get_data_type());
  const int64_t elems = static_cast<int64_t>(t.bytes.size() - 8) * 8 / bits;
  for (int64_t i = 0; i < elems; ++i) n += !std::isnan(detail::read_element(t.bytes.data(), t.t->get_data_type(), i));
  return n;
}

// Fills Q/K/V with random values where a batch has rows, NaN everywhere else (padding rows, gaps
// between packed batches, unused capacity): a correct kernel never lets them reach a written value.
inline void fill_input(HostTensor& t, const Case& c, const Place& p, int64_t h, int64_t d, bool q_side,
                std::mt19937_64& rng) {
  t.poison();
  std::uniform_real_distribution<double> u(-2, 2);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t s = 0; s < (q_side ? c.lq(b) : c.lkv(b)); ++s)
        for (int64_t e = 0; e < d; ++e)
          detail::write_element(t.bytes.data(), t.t->get_data_type(), p.at(b, hh, s, e), u(rng));
}

struct Buffers {
  std::vector<std::unique_ptr<DeviceTensor>> all;
  std::unordered_map<int64_t, void*> dev, host;
  DeviceTensor& add(const TensorPtr& t) {
    all.push_back(std::make_unique<DeviceTensor>(t));
    dev[t->get_uid()] = all.back()->dev;
    host[t->get_uid()] = all.back()->host.data();
    return *all.back();
  }
};

inline void run_case(const Case& c, const graph::KnobMap* knobs = nullptr) {
  SCOPED_TRACE(name_of(c));
  Built x;
  build_graph(x, c);
  Handle h(Device::cuda(0));
  if (knobs) {
    ASSERT_TRUE(x.g.validate().is_good());
    ASSERT_TRUE(x.g.build_operation_graph(h).is_good());
    auto e = x.g.create_execution_plan(kSm90SdpaFwdEngineId, *knobs);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    e = x.g.build_plans(h);
    ASSERT_TRUE(e.is_good()) << e.get_message();
  } else {
    auto e = x.g.build(h, {HeurMode_t::A});
    ASSERT_TRUE(e.is_good()) << e.get_message();
  }
  std::string plan;
  x.g.get_plan_name(plan);
  ASSERT_EQ(plan.rfind("sm90_sdpa_fwd", 0), 0u) << plan;
  Buffers buf;
  std::mt19937_64 rng(c.s_q * 131 + c.s_kv * 7 + c.d);
  DeviceTensor &q = buf.add(x.q), &k = buf.add(x.k), &v = buf.add(x.v), &o = buf.add(x.o), &st = buf.add(x.stats);
  fill_input(q.host, c, x.pq, c.h_q, c.d, true, rng);
  fill_input(k.host, c, x.pk, c.h_kv, c.d, false, rng);
  fill_input(v.host, c, x.pv, c.h_kv, c.d_v(), false, rng);
  std::vector<float> sink;
  if (x.sink) {
    DeviceTensor& t = buf.add(x.sink);
    for (int64_t h2 = 0; h2 < c.h_q; ++h2) {
      sink.push_back(static_cast<float>(h2 % 3) - 1.0f + 0.25f * static_cast<float>(h2));
      t.host.set(h2, sink.back());
    }
  }
  if (x.scale) buf.add(x.scale).host.set(0, 1.0 / std::sqrt(static_cast<double>(c.d)));
  if (x.len_q) {
    DeviceTensor &lq = buf.add(x.len_q), &lkv = buf.add(x.len_kv);
    for (int64_t b = 0; b < c.b; ++b) lq.host.set(b, static_cast<double>(c.lq(b))), lkv.host.set(b, static_cast<double>(c.lkv(b)));
  }
  if (x.cu_q) {
    DeviceTensor &cq = buf.add(x.cu_q), &ckv = buf.add(x.cu_kv);
    const auto sq = token_starts(c, true), skv = token_starts(c, false);
    for (int64_t b = 0; b <= c.b; ++b) cq.host.set(b, static_cast<double>(sq[b])), ckv.host.set(b, static_cast<double>(skv[b]));
  }
  for (auto& [t, vals] : x.offsets) {
    DeviceTensor& d = buf.add(t);
    for (size_t i = 0; i < vals.size(); ++i) d.host.set(static_cast<int64_t>(i), static_cast<double>(vals[i]));
  }
  o.host.poison();
  st.host.poison();
  for (auto& t : buf.all) t->upload();
  DeviceWorkspace ws(x.g);
  ASSERT_TRUE(ws.ok);
  ASSERT_TRUE(x.g.execute(h, buf.dev, ws.ptr).is_good());
  CUDA_OK(cudaDeviceSynchronize());
  o.download();
  st.download();
  // fp64 oracle on host copies; its outputs start from the same poison, so packed rows compare alike.
  HostTensor ro(x.o), rs(x.stats);
  ro.poison();
  rs.poison();
  auto hp = buf.host;
  hp[x.o->get_uid()] = ro.data();
  hp[x.stats->get_uid()] = rs.data();
  ASSERT_TRUE(detail::reference_execute(x.g.state(), hp, detail::Precision::F64).is_good());
  const auto want = written_rows(c, ro, x.po, c.h_q, c.d_v());
  const auto got = written_rows(c, o.host, x.po, c.h_q, c.d_v());
  for (double g : got) ASSERT_FALSE(std::isnan(g)) << "an output element was not written";
  if (c.packed()) {
    EXPECT_EQ(non_nan(o.host), static_cast<int64_t>(got.size())) << "O written outside its rows";
    EXPECT_EQ(non_nan(st.host), non_nan(rs)) << "Stats written outside its rows";
  }
  const auto frost_err = compare(got, want);
  // The yardstick in the same row order as `want`.
  const auto base_dense = straightforward(c, x, q.host, k.host, v.host, sink);
  std::vector<double> base;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t hh = 0; hh < c.h_q; ++hh)
      for (int64_t i = 0; i < (c.packed() ? c.lq(b) : c.s_q); ++i)
        for (int64_t e = 0; e < c.d_v(); ++e)
          base.push_back(base_dense[static_cast<size_t>(((b * c.h_q + hh) * c.s_q + i) * c.d_v() + e)]);
  const auto base_err = compare(base, want);
  EXPECT_LE(frost_err.rel_l2, 2 * base_err.rel_l2 + 1e-3) << "frost " << frost_err.rel_l2 << " straightforward " << base_err.rel_l2;
  const auto stats_err = compare(written_rows(c, st.host, x.ps, c.h_q, 1), written_rows(c, rs, x.ps, c.h_q, 1));
  EXPECT_FALSE(stats_err.has_nan);
  EXPECT_LE(stats_err.max_abs, 1e-3);
  // Determinism: a second run gives the same bits.
  auto first = o.host.bytes;
  ASSERT_TRUE(x.g.execute(h, buf.dev, ws.ptr).is_good());
  CUDA_OK(cudaDeviceSynchronize());
  o.download();
  EXPECT_EQ(o.host.bytes, first);
}

// c's graph with the sm90_sdpa_fwd plan of these knobs: build_plans must fail with a message that names `what`.
inline void expect_decline(Handle& h, const Case& c, const graph::KnobMap& knobs, const char* what) {
  Built x;
  build_graph(x, c);
  ASSERT_TRUE(x.g.validate().is_good());
  ASSERT_TRUE(x.g.build_operation_graph(h).is_good());
  ASSERT_TRUE(x.g.create_execution_plan(kSm90SdpaFwdEngineId, knobs).is_good());
  const auto e = x.g.build_plans(h);
  EXPECT_FALSE(e.is_good()) << what;
  EXPECT_NE(e.get_message().find(what), std::string::npos) << e.get_message();
}

// c's graph on a plan of these knobs that needs workspace, executed without one: the call fails with a message that
// names the workspace, and O stays untouched.
inline void expect_workspace_error(const Case& c, const graph::KnobMap& knobs) {
  Built x;
  build_graph(x, c);
  Handle h(Device::cuda(0));
  ASSERT_NO_FATAL_FAILURE(build_with_knobs(x.g, h, kSm90SdpaFwdEngineId, knobs));
  DeviceTensor q(x.q), k(x.k), v(x.v), o(x.o), st(x.stats);
  o.host.poison();
  o.upload();
  const std::unordered_map<int64_t, void*> pack{{x.q->get_uid(), q.dev},
                                                {x.k->get_uid(), k.dev},
                                                {x.v->get_uid(), v.dev},
                                                {x.o->get_uid(), o.dev},
                                                {x.stats->get_uid(), st.dev}};
  const auto e = x.g.execute(h, pack, nullptr);
  EXPECT_FALSE(e.is_good());
  EXPECT_NE(e.get_message().find("workspace"), std::string::npos) << e.get_message();
  CUDA_OK(cudaDeviceSynchronize());
  o.download();
  EXPECT_EQ(non_nan(o.host), 0) << "O was written by a launch that should not have happened";
}

// Captures one execute of a dense graph built by build_graph (plan already built) and replays it `rounds` times.
// Before round r, Q/K/V are refilled from seed(r) and O is poisoned; a round is checked against the fp64 reference,
// or, when its seed equals the previous round's, against that round's bits.
inline void replay_and_check(Built& x, Handle& h, int rounds, const std::function<uint64_t(int)>& seed) {
  DeviceWorkspace ws(x.g);
  ASSERT_TRUE(ws.ok);
  DeviceTensor q(x.q), k(x.k), v(x.v), o(x.o), st(x.stats);
  const std::unordered_map<int64_t, void*> pack{{x.q->get_uid(), q.dev}, {x.k->get_uid(), k.dev},
                                                {x.v->get_uid(), v.dev}, {x.o->get_uid(), o.dev},
                                                {x.stats->get_uid(), st.dev}};
  std::vector<uint8_t> previous;
  auto refill = [&](int round) {
    std::mt19937_64 rng(seed(round));
    for (auto* t : {&q, &k, &v}) {
      t->host.fill_random(rng, -2, 2);
      t->upload();
    }
    o.host.poison();
    o.upload();
  };
  auto check = [&](int round) {
    o.download();
    if (round > 0 && seed(round) == seed(round - 1)) {
      EXPECT_EQ(o.host.bytes, previous) << "a replay on the same inputs changed the bits";
      return;
    }
    previous = o.host.bytes;
    HostTensor ro(x.o), rs(x.stats);
    std::unordered_map<int64_t, void*> hp{{x.q->get_uid(), q.host.data()}, {x.k->get_uid(), k.host.data()},
                                          {x.v->get_uid(), v.host.data()}, {x.o->get_uid(), ro.data()},
                                          {x.stats->get_uid(), rs.data()}};
    ASSERT_TRUE(detail::reference_execute(x.g.state(), hp, detail::Precision::F64).is_good());
    const auto err = compare(o.host.values(), ro.values());
    EXPECT_FALSE(err.has_nan);
    EXPECT_LE(err.rel_l2, 1e-2) << "round " << round;
  };
  EXPECT_NO_FATAL_FAILURE(capture_and_replay(h, [&] { return x.g.execute(h, pack, ws.ptr); }, rounds, refill, check));
}

// c's graph on the sm90_sdpa_fwd plan of these knobs, captured once and replayed four times: rounds 2i and 2i + 1
// see the same inputs (seeds seed_base + i), so the first of a pair is checked against the reference and the second
// against the first's bits.
inline void replay_pairs_with_knobs(const Case& c, const graph::KnobMap& knobs, uint64_t seed_base) {
  Built x;
  build_graph(x, c);
  Handle h(Device::cuda(0));
  ASSERT_NO_FATAL_FAILURE(build_with_knobs(x.g, h, kSm90SdpaFwdEngineId, knobs));
  replay_and_check(x, h, 4, [seed_base](int round) { return seed_base + static_cast<uint64_t>(round / 2); });
}

}  // namespace frost::test::sdpa_fwd
