// The harness of the sm90_sdpa_bwd GPU tests: cases, the fp64 reference backward and DESIGN.md's tolerance rule
// (the relative L2 error of each gradient within 2x that of a straightforward bf16/fp16 backward: FP32
// arithmetic, P and dS rounded to the input type before their products, outputs rounded once; plus a small floor).
#pragma once
#include <cmath>
#include <cstring>
#include <deque>

#include "gpu_util.h"
#include "graph/attr_node.h"
#include "ops/sdpa_backward_harness.h"

namespace frost::test::sdpa_bwd {

using namespace sdpa_backward;

// A device copy of every buffer of a bound graph.
struct Mirror {
  std::vector<std::pair<HostTensor*, void*>> bufs;
  explicit Mirror(Bound& s) {
    for (auto& b : s.buffers) {
      void* d = nullptr;
      if (cudaMalloc(&d, b->bytes.size()) != cudaSuccess) d = nullptr;
      bufs.push_back({b.get(), d});
    }
  }
  ~Mirror() {
    for (auto& [h, d] : bufs) cudaFree(d);
  }
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;
  void upload() {
    for (auto& [h, d] : bufs) cudaMemcpy(d, h->bytes.data(), h->bytes.size(), cudaMemcpyHostToDevice);
  }
  std::vector<uint8_t> download(const TensorPtr& t) {
    for (auto& [h, d] : bufs)
      if (h->t == t) {
        std::vector<uint8_t> bytes(h->bytes.size());
        cudaMemcpy(bytes.data(), d, bytes.size(), cudaMemcpyDeviceToHost);
        return bytes;
      }
    return {};
  }
  std::unordered_map<int64_t, void*> pack() const {
    std::unordered_map<int64_t, void*> p;
    for (auto& [h, d] : bufs) p[h->t->get_uid()] = d;
    return p;
  }
};

inline std::vector<double> values_of(const TensorPtr& t, const std::vector<uint8_t>& bytes) {
  HostTensor h(t);
  h.bytes = bytes;
  return h.values();
}

// Gradients of a straightforward low-precision backward from the operands as stored (dense logical order).
inline SdpaGradients straightforward(const Case& c, Backward& s) {
  const SdpaProblem& p = c.p;
  auto dense = [&](const TensorPtr& t) {
    const auto v = s.buffer(t).values();
    return std::vector<float>(v.begin(), v.end());
  };
  const std::vector<float> q = dense(s.q), k = dense(s.k), v = dense(s.v), o = dense(s.o), d_o = dense(s.d_o),
                           st = dense(s.stats);
  const float scale = static_cast<float>(s.scale ? s.buffer(s.scale).values()[0] : p.attn_scale);
  const int64_t dq_ = p.d_qk, dv_ = p.d_v, group = p.h_q / p.h_k;
  std::vector<float> dq(q.size(), 0.f), dk(k.size(), 0.f), dv(v.size(), 0.f);
  std::vector<float> prob(static_cast<size_t>(p.s_kv)), ds(static_cast<size_t>(p.s_kv));
  const double natural = p.stats_use_log2 ? std::log(2.0) : 1.0;
  for (int64_t b = 0; b < p.b; ++b) {
    const int64_t len_q = p.seq_len_q.empty() ? p.s_q : p.seq_len_q[static_cast<size_t>(b)];
    const int64_t len_kv = p.seq_len_kv.empty() ? p.s_kv : p.seq_len_kv[static_cast<size_t>(b)];
    const int64_t off = p.bottom_right ? len_kv - len_q : 0;
    for (int64_t h = 0; h < p.h_q; ++h) {
      const int64_t kh = b * p.h_k + h / group;
      for (int64_t i = 0; i < len_q; ++i) {
        const int64_t row = (b * p.h_q + h) * p.s_q + i;
        const float lse = static_cast<float>(st[static_cast<size_t>(row)] * natural);
        if (lse == -INFINITY) continue;
        float delta = 0;
        for (int64_t e = 0; e < dv_; ++e) delta += d_o[row * dv_ + e] * o[row * dv_ + e];
        for (int64_t j = 0; j < p.s_kv; ++j) {
          const bool vis = j < len_kv && (!p.right_bound || j <= i + off + *p.right_bound) &&
                           (!p.left_bound || j > i + off - *p.left_bound);
          prob[j] = ds[j] = 0;
          if (!vis) continue;
          float sc = 0, dp = 0;
          for (int64_t e = 0; e < dq_; ++e) sc += q[row * dq_ + e] * k[(kh * p.s_kv + j) * dq_ + e];
          for (int64_t e = 0; e < dv_; ++e) dp += d_o[row * dv_ + e] * v[(kh * p.s_kv + j) * dv_ + e];
          const float pr = std::exp(sc * scale - lse);
          prob[j] = static_cast<float>(detail::round_to(c.io, pr));
          ds[j] = static_cast<float>(detail::round_to(c.io, pr * (dp - delta)));
        }
        for (int64_t j = 0; j < p.s_kv; ++j) {
          if (prob[j] == 0 && ds[j] == 0) continue;
          for (int64_t e = 0; e < dq_; ++e) {
            dq[row * dq_ + e] += ds[j] * k[(kh * p.s_kv + j) * dq_ + e];
            dk[(kh * p.s_kv + j) * dq_ + e] += ds[j] * q[row * dq_ + e];
          }
          for (int64_t e = 0; e < dv_; ++e) dv[(kh * p.s_kv + j) * dv_ + e] += prob[j] * d_o[row * dv_ + e];
        }
      }
    }
  }
  SdpaGradients g;
  auto out = [&](const std::vector<float>& x, float f) {
    std::vector<double> r(x.size());
    for (size_t i = 0; i < x.size(); ++i) r[i] = detail::round_to(c.io, x[i] * f);
    return r;
  };
  g.dq = out(dq, scale), g.dk = out(dk, scale), g.dv = out(dv, 1.f);
  return g;
}

struct GpuCase {
  Case c;
  bool deterministic = false;
};

inline GpuCase make(std::string label, SdpaProblem p, const std::function<void(GpuCase&)>& tweak = {}) {
  GpuCase g;
  g.c.label = std::move(label);
  g.c.p = std::move(p);
  g.c.io = DataType_t::BFLOAT16;
  g.c.layout = Layout::BSHD;
  if (tweak) tweak(g);
  return g;
}

inline SdpaProblem problem(int64_t b, int64_t h_q, int64_t h_kv, int64_t s_q, int64_t s_kv, int64_t d, int64_t d_v = 0) {
  SdpaProblem p;
  p.b = b, p.h_q = h_q, p.h_k = h_kv, p.h_v = h_kv, p.s_q = s_q, p.s_kv = s_kv, p.d_qk = d, p.d_v = d_v ? d_v : d;
  p.attn_scale = 1.0 / std::sqrt(static_cast<double>(d));
  return p;
}

inline void set_deterministic(Backward& s, bool on) {
  dynamic_cast<detail::AttrNode<graph::SDPA_backward_attributes>&>(*s.g.state().nodes[0]).attr.deterministic_algorithm =
      on;
}

// DESIGN.md's rule on root-mean-square errors: within 2x the straightforward implementation's, plus a floor (a
// small fraction of the gradient's own size: where a gradient is nearly 0, e.g. a row with one visible key, both
// errors are rounding noise). NaN (an unwritten, poisoned element) fails.
struct Checked {
  bool ok = true;
  std::string report;
};

inline Checked check(const char* what, const std::vector<double>& got, const std::vector<double>& want,
              const std::vector<double>& base) {
  double e = 0, eb = 0, w = 0;
  bool nan = false;
  for (size_t i = 0; i < got.size(); ++i) {
    nan |= std::isnan(got[i]);
    e += (got[i] - want[i]) * (got[i] - want[i]);
    eb += (base[i] - want[i]) * (base[i] - want[i]);
    w += want[i] * want[i];
  }
  const double n = std::max<double>(1.0, static_cast<double>(got.size()));
  e = std::sqrt(e / n), eb = std::sqrt(eb / n), w = std::sqrt(w / n);
  Checked r;
  r.ok = !nan && e <= 2 * eb + 1e-3 * w + 1e-6;
  r.report = std::string(what) + ": rms error " + std::to_string(e) + " (straightforward " + std::to_string(eb) +
             ", gradient rms " + std::to_string(w) + ")" + (nan ? " NaN" : "");
  return r;
}

// Rows of dQ, and rows of dK/dV, that no visible pair of a live query row touches: exactly zero by construction.
struct Zeros {
  std::vector<bool> q_rows, kv_rows;  // [b][h_q][s_q], [b][h_kv][s_kv]
};

inline Zeros structural_zeros(const SdpaProblem& p, Backward& s) {
  const std::vector<double> st = s.buffer(s.stats).values();
  Zeros z;
  z.q_rows.assign(static_cast<size_t>(p.b * p.h_q * p.s_q), true);
  std::vector<bool> touched(static_cast<size_t>(p.b * p.h_k * p.s_kv), false);
  for (int64_t b = 0; b < p.b; ++b) {
    const int64_t len_q = p.seq_len_q.empty() ? p.s_q : p.seq_len_q[static_cast<size_t>(b)];
    const int64_t len_kv = p.seq_len_kv.empty() ? p.s_kv : p.seq_len_kv[static_cast<size_t>(b)];
    const int64_t off = p.bottom_right ? len_kv - len_q : 0;
    for (int64_t h = 0; h < p.h_q; ++h)
      for (int64_t i = 0; i < len_q; ++i) {
        const int64_t row = (b * p.h_q + h) * p.s_q + i;
        if (st[static_cast<size_t>(row)] == -INFINITY) continue;
        for (int64_t j = 0; j < len_kv; ++j) {
          if ((p.right_bound && j > i + off + *p.right_bound) || (p.left_bound && j <= i + off - *p.left_bound))
            continue;
          z.q_rows[static_cast<size_t>(row)] = false;
          touched[static_cast<size_t>((b * p.h_k + h / (p.h_q / p.h_k)) * p.s_kv + j)] = true;
        }
      }
  }
  z.kv_rows.resize(touched.size());
  for (size_t i = 0; i < touched.size(); ++i) z.kv_rows[i] = !touched[i];
  return z;
}

// knobs: a plan of sm90_sdpa_bwd (engine id 10300) with exactly these knobs; else the planner's choice.
inline void run_case(const GpuCase& gc, const graph::KnobMap* knobs = nullptr) {
  const Case& c = gc.c;
  SCOPED_TRACE(c.label);
  const Data d = random_data(c, std::hash<std::string>{}(c.label));
  const SdpaNaiveResult fwd = sdpa_naive(naive_problem(c, d), d.q, d.k, d.v, d.bias, d.sink);
  auto s = make_backward(c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  set_deterministic(*s, gc.deterministic);
  Handle h(Device::cuda(0));
  if (knobs) {
    ASSERT_TRUE(s->g.build_operation_graph(h).is_good());
    auto e = s->g.create_execution_plan(10300, *knobs);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    e = s->g.build_plans(h);
    ASSERT_TRUE(e.is_good()) << e.get_message();
  } else {
    ASSERT_NO_FATAL_FAILURE(build_on(s->g, h, "sm90_sdpa_bwd"));
  }
  int64_t ws_bytes = 0;
  ASSERT_TRUE(s->g.get_workspace_size(ws_bytes).is_good());
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(std::max<int64_t>(ws_bytes, 1))));
  Mirror m(*s);
  m.upload();  // gradients arrive poisoned (NaN) from make_backward
  const auto pack = m.pack();
  ASSERT_TRUE(s->g.execute(h, pack, ws).is_good());
  CUDA_OK(cudaDeviceSynchronize());
  SdpaGradients got;
  std::vector<std::vector<uint8_t>> first;
  for (const TensorPtr& t : {s->dq, s->dk, s->dv, s->dsink}) {
    if (!t) continue;
    first.push_back(m.download(t));
  }
  got.dq = values_of(s->dq, first[0]), got.dk = values_of(s->dk, first[1]), got.dv = values_of(s->dv, first[2]);
  if (s->dsink) got.dsink = values_of(s->dsink, first[3]);

  // fp64 oracle on the host buffers (the same stored operands).
  std::unordered_map<int64_t, void*> hp;
  for (auto& b : s->buffers) hp[b->t->get_uid()] = b->data();
  ASSERT_TRUE(detail::reference_execute(s->g.state(), hp, detail::Precision::F64).is_good());
  const SdpaGradients want = read_gradients(*s);
  const SdpaGradients base = straightforward(c, *s);
  const Zeros zeros = structural_zeros(c.p, *s);
  for (auto [what, g, w, b, z, dim] : {std::tuple{"dQ", &got.dq, &want.dq, &base.dq, &zeros.q_rows, c.p.d_qk},
                                       {"dK", &got.dk, &want.dk, &base.dk, &zeros.kv_rows, c.p.d_qk},
                                       {"dV", &got.dv, &want.dv, &base.dv, &zeros.kv_rows, c.p.d_v}}) {
    const Checked r = check(what, *g, *w, *b);
    EXPECT_TRUE(r.ok) << r.report;
    // Rows no visible pair touches (masked, padded, empty softmax) are exactly zero.
    const size_t d = static_cast<size_t>(dim);
    for (size_t i = 0; i < g->size(); ++i)
      if ((*z)[i / d] && (*g)[i] != 0.0) {
        ADD_FAILURE() << what << " element " << i << " is " << (*g)[i] << " in a row no visible pair touches";
        break;
      }
  }
  if (s->dsink) {
    const ErrorStats es = compare(got.dsink, want.dsink);
    double largest = 0;
    for (double x : want.dsink) largest = std::max(largest, std::fabs(x));
    EXPECT_FALSE(es.has_nan);
    EXPECT_LE(es.max_abs, 2e-3 * (1 + largest)) << "dSink";
  }
  // Deterministic mode: a second run gives the same bits.
  if (gc.deterministic) {
    m.upload();
    ASSERT_TRUE(s->g.execute(h, pack, ws).is_good());
    CUDA_OK(cudaDeviceSynchronize());
    size_t i = 0;
    for (const TensorPtr& t : {s->dq, s->dk, s->dv, s->dsink})
      if (t) {
        EXPECT_EQ(m.download(t), first[i++]) << t->get_name() << " differs between two runs";
      }
  }
  cudaFree(ws);
}

}  // namespace frost::test::sdpa_bwd
