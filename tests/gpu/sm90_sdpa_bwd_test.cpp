// The sm90_sdpa_bwd engine against the fp64 reference backward, under DESIGN.md's tolerance rule: the relative L2
// error of each gradient stays within 2x that of a straightforward bf16/fp16 backward (FP32 arithmetic, P and dS
// rounded to the input type before their products, outputs rounded once), plus a small floor.
#include <cmath>
#include <cstring>
#include <deque>

#include "gpu_util.h"
#include "graph/attr_node.h"
#include "ops/sdpa_backward_harness.h"

namespace frost::test {
namespace {

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

std::vector<double> values_of(const TensorPtr& t, const std::vector<uint8_t>& bytes) {
  HostTensor h(t);
  h.bytes = bytes;
  return h.values();
}

// Gradients of a straightforward low-precision backward from the operands as stored (dense logical order).
SdpaGradients straightforward(const Case& c, Backward& s) {
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

GpuCase make(std::string label, SdpaProblem p, const std::function<void(GpuCase&)>& tweak = {}) {
  GpuCase g;
  g.c.label = std::move(label);
  g.c.p = std::move(p);
  g.c.io = DataType_t::BFLOAT16;
  g.c.layout = Layout::BSHD;
  if (tweak) tweak(g);
  return g;
}

SdpaProblem problem(int64_t b, int64_t h_q, int64_t h_kv, int64_t s_q, int64_t s_kv, int64_t d, int64_t d_v = 0) {
  SdpaProblem p;
  p.b = b, p.h_q = h_q, p.h_k = h_kv, p.h_v = h_kv, p.s_q = s_q, p.s_kv = s_kv, p.d_qk = d, p.d_v = d_v ? d_v : d;
  p.attn_scale = 1.0 / std::sqrt(static_cast<double>(d));
  return p;
}

void set_deterministic(Backward& s, bool on) {
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

Checked check(const char* what, const std::vector<double>& got, const std::vector<double>& want,
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

Zeros structural_zeros(const SdpaProblem& p, Backward& s) {
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
void run_case(const GpuCase& gc, const graph::KnobMap* knobs = nullptr) {
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

TEST(Sm90SdpaBwd, OddShapesLayoutsAndMasks) {
  REQUIRE_SM90();
  auto causal = [](bool br) { return [br](GpuCase& g) { g.c.p.right_bound = 0, g.c.p.bottom_right = br; }; };
  const GpuCase cases[] = {
      make("s1 d128", problem(1, 2, 2, 1, 1, 128)),
      make("s17 causal d128", problem(1, 2, 2, 17, 17, 128), causal(false)),
      make("s111x1000 d128 bhsd", problem(2, 2, 2, 111, 1000, 128), [](GpuCase& g) { g.c.layout = Layout::BHSD; }),
      make("s1000x111 causal-br d128 (first rows see no key)", problem(1, 2, 2, 1000, 111, 128), causal(true)),
      make("s111x17 causal-tl d128", problem(1, 2, 2, 111, 17, 128), causal(false)),
      make("gqa 8/2 s257x300 causal d128", problem(2, 8, 2, 257, 300, 128), causal(false)),
      make("mqa 4/1 s300 d64", problem(1, 4, 1, 300, 300, 64)),
      make("s111x1000 d64 fp16", problem(1, 2, 2, 111, 1000, 64), [](GpuCase& g) { g.c.io = DataType_t::HALF; }),
      make("s1000 causal d128 fp16", problem(1, 2, 2, 1000, 1000, 128),
           [](GpuCase& g) { g.c.io = DataType_t::HALF, g.c.p.right_bound = 0; }),
      make("sliding window 64 s300 d128", problem(1, 2, 2, 300, 300, 128),
           [](GpuCase& g) { g.c.p.left_bound = 64, g.c.p.right_bound = 0; }),
      make("band 40/10 br s200x333 d64", problem(1, 2, 1, 200, 333, 64),
           [](GpuCase& g) { g.c.p.left_bound = 40, g.c.p.right_bound = 10, g.c.p.bottom_right = true; }),
      make("padding b3 d128 causal-br", problem(3, 2, 2, 200, 260, 128),
           [](GpuCase& g) {
             g.c.p.seq_len_q = {200, 17, 0}, g.c.p.seq_len_kv = {260, 100, 5}, g.c.p.right_bound = 0,
             g.c.p.bottom_right = true;
           }),
      make("sink + dsink s150 d128, log2 stats", problem(2, 4, 2, 150, 190, 128),
           [](GpuCase& g) { g.c.p.sink = true, g.c.p.stats_use_log2 = true; }),
      make("scale pass-by-value s100 d64", problem(1, 2, 2, 100, 100, 64),
           [](GpuCase& g) { g.c.scale_as = ScaleAs::PASS_BY_VALUE, g.c.p.attn_scale = 0.3; }),
      make("deterministic gqa 4/2 s400 d128", problem(1, 4, 2, 400, 400, 128),
           [](GpuCase& g) { g.deterministic = true; }),
      make("deterministic causal s700 d64", problem(1, 2, 2, 700, 700, 64),
           [](GpuCase& g) { g.deterministic = true, g.c.p.right_bound = 0; }),
      make("deterministic window+padding d128", problem(2, 2, 1, 300, 333, 128),
           [](GpuCase& g) {
             g.deterministic = true, g.c.p.left_bound = 50, g.c.p.seq_len_q = {300, 123}, g.c.p.seq_len_kv = {333, 77};
           }),
  };
  for (const auto& c : cases) run_case(c);
}

// d_qk = d_v = 256 and d_qk 192 with d_v 128: the split-d kernels (64 keys per CTA, dQ added from registers).
TEST(Sm90SdpaBwd, LargeHeadDims) {
  REQUIRE_SM90();
  auto causal = [](bool br) { return [br](GpuCase& g) { g.c.p.right_bound = 0, g.c.p.bottom_right = br; }; };
  auto fp16 = [](GpuCase& g) { g.c.io = DataType_t::HALF; };
  const GpuCase cases[] = {
      make("d256 s1", problem(1, 2, 2, 1, 1, 256)),
      make("d256 s17 causal", problem(1, 2, 2, 17, 17, 256), causal(false)),
      make("d256 s111x1000 bhsd", problem(1, 2, 2, 111, 1000, 256), [](GpuCase& g) { g.c.layout = Layout::BHSD; }),
      make("d256 s1000x111 causal-br (first rows see no key)", problem(1, 2, 2, 1000, 111, 256), causal(true)),
      make("d256 gqa 8/2 s257x300 causal", problem(1, 8, 2, 257, 300, 256), causal(false)),
      make("d256 fp16 s300x200", problem(1, 2, 1, 300, 200, 256), fp16),
      make("d256 padding b3 causal-br", problem(3, 2, 2, 150, 170, 256),
           [](GpuCase& g) {
             g.c.p.seq_len_q = {150, 17, 0}, g.c.p.seq_len_kv = {170, 65, 5}, g.c.p.right_bound = 0,
             g.c.p.bottom_right = true;
           }),
      make("d256 window 40 + sink, log2 stats", problem(1, 4, 2, 200, 200, 256),
           [](GpuCase& g) {
             g.c.p.left_bound = 40, g.c.p.right_bound = 0, g.c.p.sink = true, g.c.p.stats_use_log2 = true;
           }),
      make("d192/128 s1", problem(1, 2, 2, 1, 1, 192, 128)),
      make("d192/128 s17 causal", problem(1, 2, 2, 17, 17, 192, 128), causal(false)),
      make("d192/128 s111x1000", problem(1, 2, 2, 111, 1000, 192, 128)),
      make("d192/128 s1000x111 causal-br bhsd", problem(1, 2, 2, 1000, 111, 192, 128),
           [causal](GpuCase& g) { causal(true)(g), g.c.layout = Layout::BHSD; }),
      make("d192/128 gqa 8/2 s300 causal fp16", problem(1, 8, 2, 300, 300, 192, 128),
           [causal, fp16](GpuCase& g) { causal(false)(g), fp16(g); }),
      make("d192/128 padding b2", problem(2, 2, 1, 200, 260, 192, 128),
           [](GpuCase& g) {
             g.c.p.seq_len_q = {200, 1}, g.c.p.seq_len_kv = {33, 260};
           }),
  };
  for (const auto& c : cases) run_case(c);
}

// d256 under each WARP_SPEC_CFG (1: the warpgroups split the queries of S^T and dP^T; 2: one computes S^T, the
// other dP^T, P^T crossing through smem).
TEST(Sm90SdpaBwd, LargeHeadDimWarpSpecs) {
  REQUIRE_SM90();
  const GpuCase cases[] = {
      make("d256 s17x1000", problem(1, 2, 2, 17, 1000, 256)),
      make("d256 gqa 4/2 s300 causal fp16", problem(1, 4, 2, 300, 300, 256),
           [](GpuCase& g) { g.c.io = DataType_t::HALF, g.c.p.right_bound = 0; }),
      make("d256 padding b2 causal-br", problem(2, 2, 1, 129, 200, 256),
           [](GpuCase& g) {
             g.c.p.seq_len_q = {129, 1}, g.c.p.seq_len_kv = {64, 200}, g.c.p.right_bound = 0, g.c.p.bottom_right = true;
           }),
  };
  for (int64_t ws : {1, 2}) {
    SCOPED_TRACE("WARP_SPEC_CFG " + std::to_string(ws));
    const graph::KnobMap knobs{{KnobType_t::TILE_M, 64}, {KnobType_t::TILE_N, 64}, {KnobType_t::WARP_SPEC_CFG, ws}};
    for (const auto& c : cases) run_case(c, &knobs);
  }
}

// ---------------------------------------------------------------- THD (packed) layouts
// A packed tensor's storage: batch b's tokens start at token start[b], token-major ([token][h][d]), with `gap`
// unused tokens after each batch; head-major Stats are [h][token]. Offsets are INT64 element offsets [b + 1].
struct PackedBuf {
  std::vector<int64_t> dim;  // logical [b, h, s, d]
  DataType_t dt = DataType_t::FLOAT;
  bool head_major = false;  // Stats only
  std::vector<int64_t> start, offsets;
  int64_t tokens = 0;
  std::vector<uint8_t> bytes;
  void* dev = nullptr;

  int64_t at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    if (head_major) return h * tokens + start[static_cast<size_t>(b)] + s;
    return (start[static_cast<size_t>(b)] + s) * dim[1] * dim[3] + h * dim[3] + d;
  }
  std::vector<int64_t> strides() const {
    if (head_major) return {dim[2], tokens, 1, 1};
    return {dim[2] * dim[1] * dim[3], dim[3], dim[1] * dim[3], 1};
  }
  int64_t elements() const { return tokens * dim[1] * dim[3]; }
};

PackedBuf packed(std::vector<int64_t> dim, DataType_t dt, const std::vector<int64_t>& lens, int64_t gap,
                 bool head_major = false) {
  PackedBuf t;
  t.dim = std::move(dim), t.dt = dt, t.head_major = head_major;
  for (int64_t len : lens) t.start.push_back(t.tokens), t.tokens += len + gap;
  const int64_t unit = head_major ? 1 : t.dim[1] * t.dim[3];
  for (int64_t st : t.start) t.offsets.push_back(st * unit);
  t.offsets.push_back(t.tokens * unit);
  t.bytes.assign(static_cast<size_t>(t.elements() * element_bits(dt) / 8 + 16), 0);
  return t;
}

// Dense logical values [b, h, s, d] into the packed buffer (rows s < len[b]); `fill` everywhere else.
void pack(PackedBuf& t, const std::vector<double>& dense, const std::vector<int64_t>& lens, double fill) {
  for (int64_t n = 0; n < t.elements(); ++n) detail::write_element(t.bytes.data(), t.dt, n, fill);
  const int64_t H = t.dim[1], S = t.dim[2], D = t.dim[3];
  for (int64_t b = 0; b < t.dim[0]; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < lens[static_cast<size_t>(b)]; ++i)
        for (int64_t e = 0; e < D; ++e)
          detail::write_element(t.bytes.data(), t.dt, t.at(b, h, i, e),
                                dense[static_cast<size_t>(((b * H + h) * S + i) * D + e)]);
}

// The packed buffer as dense logical values (rows past a batch's length read 0), and whether every element outside
// the batches' rows still holds `fill` (NaN: untouched).
std::vector<double> unpack(const PackedBuf& t, const std::vector<int64_t>& lens, bool& outside_untouched) {
  const int64_t H = t.dim[1], S = t.dim[2], D = t.dim[3];
  std::vector<double> v(static_cast<size_t>(t.dim[0] * H * S * D), 0.0);
  std::vector<bool> inside(static_cast<size_t>(t.elements()), false);
  for (int64_t b = 0; b < t.dim[0]; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < lens[static_cast<size_t>(b)]; ++i)
        for (int64_t e = 0; e < D; ++e) {
          const int64_t n = t.at(b, h, i, e);
          inside[static_cast<size_t>(n)] = true;
          v[static_cast<size_t>(((b * H + h) * S + i) * D + e)] = detail::read_element(t.bytes.data(), t.dt, n);
        }
  outside_untouched = true;
  for (int64_t n = 0; n < t.elements(); ++n)
    if (!inside[static_cast<size_t>(n)] && !std::isnan(detail::read_element(t.bytes.data(), t.dt, n)))
      outside_untouched = false;
  return v;
}

struct ThdCase {
  GpuCase dense;       // the same problem with dense BHSD operands and a padding mask: reference and yardstick
  bool cu_kv = false;  // K, V, dK, dV packed tight and found through cu_seq_len_kv (no ragged offsets)
  bool head_major_stats = false;
};

// The backward on packed Q, K, V, O, dO, Stats and gradients (ragged offsets, gaps between batches, or
// cu_seq_len_kv), against the fp64 reference and the straightforward yardstick of the same problem stored densely.
// The gradients start poisoned; their rows outside the sequences must stay so.
void run_thd(const ThdCase& tc) {
  const Case& c = tc.dense.c;
  const SdpaProblem& p = c.p;
  SCOPED_TRACE(c.label);
  const Data d = random_data(c, std::hash<std::string>{}(c.label));
  const SdpaNaiveResult fwd = sdpa_naive(naive_problem(c, d), d.q, d.k, d.v, d.bias, d.sink);
  auto s = make_backward(c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  std::unordered_map<int64_t, void*> hp;
  for (auto& b : s->buffers) hp[b->t->get_uid()] = b->data();
  ASSERT_TRUE(detail::reference_execute(s->g.state(), hp, detail::Precision::F64).is_good());
  const SdpaGradients want = read_gradients(*s);
  const SdpaGradients base = straightforward(c, *s);

  const std::vector<int64_t>& lq = p.seq_len_q;
  const std::vector<int64_t>& lkv = p.seq_len_kv;
  const int64_t gap_kv = tc.cu_kv ? 0 : 3;
  PackedBuf q = packed({p.b, p.h_q, p.s_q, p.d_qk}, c.io, lq, 2), o = packed({p.b, p.h_q, p.s_q, p.d_v}, c.io, lq, 1);
  PackedBuf d_o = packed({p.b, p.h_q, p.s_q, p.d_v}, c.io, lq, 5),
            dq = packed({p.b, p.h_q, p.s_q, p.d_qk}, c.io, lq, 3);
  PackedBuf st = packed({p.b, p.h_q, p.s_q, 1}, DataType_t::FLOAT, lq, 1, tc.head_major_stats);
  PackedBuf k = packed({p.b, p.h_k, p.s_kv, p.d_qk}, c.io, lkv, gap_kv);
  PackedBuf v = packed({p.b, p.h_v, p.s_kv, p.d_v}, c.io, lkv, gap_kv);
  PackedBuf dk = packed({p.b, p.h_k, p.s_kv, p.d_qk}, c.io, lkv, gap_kv);
  PackedBuf dv = packed({p.b, p.h_v, p.s_kv, p.d_v}, c.io, lkv, gap_kv);
  // Tokens outside the sequences hold finite values in the inputs (docs/ops/sdpa_backward.md), NaN in the outputs.
  pack(q, s->buffer(s->q).values(), lq, 0.5), pack(k, s->buffer(s->k).values(), lkv, 0.25);
  pack(v, s->buffer(s->v).values(), lkv, -0.5), pack(o, s->buffer(s->o).values(), lq, 0.125);
  pack(d_o, s->buffer(s->d_o).values(), lq, 0.75), pack(st, s->buffer(s->stats).values(), lq, 1.0);
  for (PackedBuf* t : {&dq, &dk, &dv})
    for (int64_t n = 0; n < t->elements(); ++n) detail::write_element(t->bytes.data(), t->dt, n, NAN);
  // max_total_seq_len bounds every packed tensor of a side; the kernels read Q, dO, K and V through views of that
  // many tokens, so those buffers hold that many (finite) tokens.
  const int64_t total_q = std::max({q.tokens, o.tokens, d_o.tokens, st.tokens, dq.tokens});
  const int64_t total_kv = std::max({k.tokens, v.tokens, dk.tokens, dv.tokens});
  for (auto [t, total] : {std::pair{&q, total_q}, {&d_o, total_q}, {&k, total_kv}, {&v, total_kv}}) {
    const size_t used = t->bytes.size();
    t->bytes.resize(static_cast<size_t>(total * t->dim[1] * t->dim[3] * element_bits(t->dt) / 8 + 16));
    for (size_t n = used; n < t->bytes.size(); ++n) t->bytes[n] = 0;
  }
  std::vector<int32_t> len_q(lq.begin(), lq.end()), len_kv(lkv.begin(), lkv.end()), cu_kv{0};
  for (int64_t len : lkv) cu_kv.push_back(cu_kv.back() + static_cast<int32_t>(len));

  graph::Graph g;
  with_types(g, c);
  auto declare = [&](const std::string& name, PackedBuf& t, bool ragged, TensorPtr as_output = nullptr) {
    TensorPtr x = as_output ? as_output : input(g, name, t.dim, t.dt, t.strides());
    if (as_output) x->set_dim(t.dim).set_stride(t.strides()).set_data_type(t.dt).set_output(true);
    if (ragged) x->set_ragged_offset(input(g, name + "_offsets", {p.b + 1, 1, 1, 1}, DataType_t::INT64, {1, 1, 1, 1}));
    return x;
  };
  const bool kv_ragged = !tc.cu_kv;
  TensorPtr tq = declare("q", q, true), tk = declare("k", k, kv_ragged), tv = declare("v", v, kv_ragged);
  TensorPtr to = declare("o", o, true), tdo = declare("dO", d_o, true), tst = declare("stats", st, true);
  SDPA_backward_attributes a;
  a.set_name("attn").set_attn_scale(static_cast<float>(d.scale)).set_padding_mask(true);
  a.set_diagonal_alignment(p.bottom_right ? DiagonalAlignment_t::BOTTOM_RIGHT : DiagonalAlignment_t::TOP_LEFT);
  if (p.right_bound) a.set_diagonal_band_right_bound(*p.right_bound);
  if (p.left_bound) a.set_diagonal_band_left_bound(*p.left_bound);
  TensorPtr t_len_q = input(g, "len_q", {p.b, 1, 1, 1}, DataType_t::INT32), t_len_kv, t_cu_kv;
  a.set_seq_len_q(t_len_q);
  if (tc.cu_kv)
    a.set_cu_seq_len_kv(t_cu_kv = input(g, "cu_kv", {p.b + 1}, DataType_t::INT32, {1}));
  else
    a.set_seq_len_kv(t_len_kv = input(g, "len_kv", {p.b, 1, 1, 1}, DataType_t::INT32));
  a.set_max_total_seq_len_q(total_q).set_max_total_seq_len_kv(total_kv);
  auto [gdq, gdk, gdv] = g.sdpa_backward(tq, tk, tv, to, tdo, tst, a);
  declare("dq", dq, true, gdq), declare("dk", dk, kv_ragged, gdk), declare("dv", dv, kv_ragged, gdv);
  ASSERT_TRUE(g.validate().is_good());

  // Device copies of every buffer, bound by uid.
  std::vector<std::pair<void*, std::vector<uint8_t>*>> owned;
  std::unordered_map<int64_t, void*> pack_map;
  std::deque<std::vector<uint8_t>> index_bytes;  // stable addresses
  auto bind = [&](const TensorPtr& t, std::vector<uint8_t>& host) {
    void* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, host.size()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
    owned.push_back({dev, &host});
    pack_map[t->get_uid()] = dev;
  };
  auto bytes_of = [&](const void* src, size_t n) -> std::vector<uint8_t>& {
    auto& v = index_bytes.emplace_back(n);
    std::memcpy(v.data(), src, n);
    return v;
  };
  for (auto [t, buf] :
       {std::pair{tq, &q}, {tk, &k}, {tv, &v}, {to, &o}, {tdo, &d_o}, {tst, &st}, {gdq, &dq}, {gdk, &dk}, {gdv, &dv}}) {
    ASSERT_NO_FATAL_FAILURE(bind(t, buf->bytes));
    if (const TensorPtr ro = t->get_ragged_offset()) {
      ASSERT_NO_FATAL_FAILURE(bind(ro, bytes_of(buf->offsets.data(), buf->offsets.size() * sizeof(int64_t))));
    }
  }
  ASSERT_NO_FATAL_FAILURE(bind(t_len_q, bytes_of(len_q.data(), len_q.size() * 4)));
  if (t_len_kv) {
    ASSERT_NO_FATAL_FAILURE(bind(t_len_kv, bytes_of(len_kv.data(), len_kv.size() * 4)));
  }
  if (t_cu_kv) {
    ASSERT_NO_FATAL_FAILURE(bind(t_cu_kv, bytes_of(cu_kv.data(), cu_kv.size() * 4)));
  }

  Handle h(Device::cuda(0));
  ASSERT_NO_FATAL_FAILURE(build_on(g, h, "sm90_sdpa_bwd"));
  int64_t ws_bytes = 0;
  ASSERT_TRUE(g.get_workspace_size(ws_bytes).is_good());
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(std::max<int64_t>(ws_bytes, 1))));
  const error_t e = g.execute(h, pack_map, ws);
  CUDA_OK(cudaDeviceSynchronize());
  for (PackedBuf* t : {&dq, &dk, &dv})
    for (auto& [dev, host] : owned)
      if (host == &t->bytes) {
        CUDA_OK(cudaMemcpy(host->data(), dev, host->size(), cudaMemcpyDeviceToHost));
      }
  for (auto& [dev, host] : owned) cudaFree(dev);
  cudaFree(ws);
  ASSERT_TRUE(e.is_good()) << e.get_message();

  for (auto [what, t, w, b, lens] : {std::tuple{"dQ", &dq, &want.dq, &base.dq, &lq},
                                     {"dK", &dk, &want.dk, &base.dk, &lkv},
                                     {"dV", &dv, &want.dv, &base.dv, &lkv}}) {
    bool untouched = false;
    const std::vector<double> got = unpack(*t, *lens, untouched);
    const Checked r = check(what, got, *w, *b);
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_TRUE(untouched) << what << ": an element outside the sequences was written";
  }
}

TEST(Sm90SdpaBwdThd, PackedOperandsAndGradients) {
  REQUIRE_SM90();
  auto lens = [](std::vector<int64_t> q, std::vector<int64_t> kv) {
    return [q, kv](GpuCase& g) { g.c.p.seq_len_q = q, g.c.p.seq_len_kv = kv; };
  };
  auto thd = [](GpuCase g, bool cu_kv, bool head_major) { return ThdCase{std::move(g), cu_kv, head_major}; };
  const ThdCase cases[] = {
      thd(make("thd d128 gqa 4/2 b3 causal-br", problem(3, 4, 2, 200, 300, 128),
               [&](GpuCase& g) {
                 lens({200, 17, 1}, {150, 300, 64})(g), g.c.p.right_bound = 0, g.c.p.bottom_right = true;
               }),
          false, false),
      thd(make("thd d64 fp16 b2 cu_seq_len_kv head-major stats", problem(2, 2, 2, 111, 1000, 64),
               [&](GpuCase& g) {
                 lens({111, 40}, {1000, 77})(g), g.c.io = DataType_t::HALF;
               }),
          true, true),
      thd(make("thd d256 b2 causal", problem(2, 2, 1, 130, 129, 256),
               [&](GpuCase& g) {
                 lens({130, 65}, {129, 70})(g), g.c.p.right_bound = 0;
               }),
          false, false),
      thd(make("thd d192/128 b2", problem(2, 4, 2, 100, 140, 192, 128), lens({100, 3}, {17, 140})), false, true),
  };
  for (const auto& c : cases) run_thd(c);
}

TEST(Sm90SdpaBwd, CheckerCatchesOneWrongElement) {
  const std::vector<double> want{0.5, -0.25, 0.125, 1.0}, base{0.5, -0.25, 0.125, 1.0};
  EXPECT_TRUE(check("exact", want, want, base).ok);
  EXPECT_FALSE(check("one element off", {0.5, -0.25, 0.625, 1.0}, want, base).ok);
  EXPECT_FALSE(check("unwritten", {0.5, NAN, 0.125, 1.0}, want, base).ok);
}

TEST(Sm90SdpaBwd, DeclinesWhatItCannotServe) {
  REQUIRE_SM90();
  auto declined = [](const GpuCase& gc, const std::string& expect) {
    const Data d = random_data(gc.c, 1);
    const SdpaNaiveResult fwd = sdpa_naive(naive_problem(gc.c, d), d.q, d.k, d.v, d.bias, d.sink);
    auto s = make_backward(gc.c, d, fwd.o, fwd.stats);
    ASSERT_TRUE(s);
    set_deterministic(*s, gc.deterministic);
    Handle h(Device::cuda(0));
    ASSERT_TRUE(s->g.build_operation_graph(h).is_good());
    auto e = s->g.create_execution_plans({HeurMode_t::OPENSOURCE});
    EXPECT_EQ(e.get_code(), error_code_t::GRAPH_NOT_SUPPORTED) << e.get_message();
    EXPECT_NE(e.get_message().find(expect), std::string::npos) << e.get_message();
  };
  declined(make("d96", problem(1, 2, 2, 17, 17, 96)), "d_qk=96");
  declined(make("bias", problem(1, 2, 2, 17, 17, 64),
                [](GpuCase& g) {
                  g.c.p.bias_dim = {1, 2, 17, 17};
                }),
           "sm90_sdpa_bwd: bias");
  declined(make("alibi", problem(1, 2, 2, 17, 17, 64), [](GpuCase& g) { g.c.p.alibi = true; }),
           "sm90_sdpa_bwd: alibi_mask");
  declined(make("d128/64", problem(1, 2, 2, 17, 17, 128, 64)), "d_qk=128 d_v=64");
  declined(make("deterministic d256", problem(1, 2, 2, 17, 17, 256), [](GpuCase& g) { g.deterministic = true; }),
           "deterministic_algorithm with d_qk=256");
}

TEST(Sm90SdpaBwd, CudaGraphCaptureAndReplayWithNewInputs) {
  REQUIRE_SM90();
  const GpuCase gc = make("graph gqa 4/2 s256 causal d128", problem(1, 4, 2, 256, 256, 128),
                          [](GpuCase& g) { g.c.p.right_bound = 0; });
  const Case& c = gc.c;
  Data d = random_data(c, 5);
  SdpaNaiveResult fwd = sdpa_naive(naive_problem(c, d), d.q, d.k, d.v);
  auto s = make_backward(c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  set_deterministic(*s, false);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(s->g.build(h, {HeurMode_t::A}).is_good());
  int64_t ws_bytes = 0;
  ASSERT_TRUE(s->g.get_workspace_size(ws_bytes).is_good());
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(ws_bytes)));
  Mirror m(*s);
  const auto pack = m.pack();
  auto refill = [&](int round) {
    d = random_data(c, 100 + static_cast<uint64_t>(round));
    fwd = sdpa_naive(naive_problem(c, d), d.q, d.k, d.v);
    s->set(s->q, d.q), s->set(s->k, d.k), s->set(s->v, d.v), s->set(s->o, fwd.o), s->set(s->d_o, d.d_o);
    s->set(s->stats, fwd.stats);
    for (const TensorPtr& t : {s->dq, s->dk, s->dv}) s->buffer(t).poison();
    m.upload();
  };
  auto check_round = [&](int round) {
    const std::vector<double> got_dq = values_of(s->dq, m.download(s->dq));
    const std::vector<double> got_dk = values_of(s->dk, m.download(s->dk));
    const std::vector<double> got_dv = values_of(s->dv, m.download(s->dv));
    std::unordered_map<int64_t, void*> hp;
    for (auto& b : s->buffers) hp[b->t->get_uid()] = b->data();
    ASSERT_TRUE(detail::reference_execute(s->g.state(), hp, detail::Precision::F64).is_good());
    const SdpaGradients want = read_gradients(*s), base = straightforward(c, *s);
    EXPECT_TRUE(check("dQ", got_dq, want.dq, base.dq).ok) << "round " << round;
    EXPECT_TRUE(check("dK", got_dk, want.dk, base.dk).ok) << "round " << round;
    EXPECT_TRUE(check("dV", got_dv, want.dv, base.dv).ok) << "round " << round;
  };
  EXPECT_NO_FATAL_FAILURE(capture_and_replay(h, [&] { return s->g.execute(h, pack, ws); }, 2, refill, check_round));
  cudaFree(ws);
}

}  // namespace
}  // namespace frost::test
