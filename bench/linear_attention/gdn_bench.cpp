// Times the sm90_linear_attention engine on GDN forward graphs (TARGETS.md's linear-attention cases)
// through frost's C++ API: CUDA events around execute(), L2 flushed before every timed launch, median
// of the runs. Inputs are synthetic (unit-scale q/k with the in-kernel l2norm, except the backward's "no l2norm"
// cases, beta in (0, 1), small negative log decay); correctness is the GPU test's business, this program only checks
// that the output holds no NaN.
//
// Usage: gdn_bench [--quick | --kda | --bwd | --kda --bwd] [--json FILE] [--cases N]
//   Each case runs with the heuristic's state pass and with each pass asked for (mma.sync with 32 and 64 value
//   columns per CTA; for GDN also the wgmma pass, KERNEL_CFG 1, with 64 and 128); then, calling the engine's
//   kernel interface (sm90_gdn.h) directly, the time splits into prologue, chunk kernel and state pass (events
//   between the launches).
//   --cases N: the first N cases only.
//   --kda: KDA forward instead (per-key-channel decay, g FP32 [B, T, HV, 128]), phase split only.
//   --bwd: the backward instead (with --kda KDA's), through the kernel interface, whole and split by events into the
//   recording run, the reverse pass, the chunk gradient kernels and the epilogue (a second series of runs, the events
//   between the launches keeping the gradient kernel from starting beside the reverse pass); GDN's with the
//   heuristic's plan (the wgmma recording and reverse passes), with that plan's gradient kernel after the reverse
//   pass ("gradient after"), with its reverse pass on 64 value columns per CTA ("reverse 64") and with the mma.sync
//   recording and reverse passes ("mma.sync 0": slices by heuristic).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engines/sm90/linear_attention/sm90_gdn.h"
#include "frost/frost.h"

namespace {

using frost::DataType_t;
using frost::graph::Graph;
using frost::graph::TensorPtr;

struct Case {
  const char* name;
  int64_t b, t, h, hv;
  double fla_ms;  // FLA 0.6.0 on the H200 in the harness (bench/results); 0: not measured
  bool l2norm = true;
};

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

TensorPtr tensor(Graph& g, const char* name, std::vector<int64_t> dims, DataType_t dt) {
  frost::graph::Tensor_attributes a;
  a.set_name(name).set_dim(std::move(dims)).set_data_type(dt);
  return g.tensor(a);
}

// Fills a device buffer with a repeating host pattern of uniform values in [lo, hi).
void fill(void* dev, size_t count, bool bf16, float lo, float hi, uint32_t seed) {
  const size_t pattern = std::min<size_t>(count, size_t{1} << 22);
  std::vector<uint16_t> h16(bf16 ? pattern : 0);
  std::vector<float> h32(bf16 ? 0 : pattern);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < pattern; ++i) {
    x = x * 1664525u + 1013904223u;
    const float v = lo + (hi - lo) * static_cast<float>(x >> 8) / 16777216.f;
    if (bf16) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      h16[i] = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
    } else {
      h32[i] = v;
    }
  }
  const size_t elem = bf16 ? 2 : 4;
  for (size_t at = 0; at < count; at += pattern) {
    const size_t n = std::min(pattern, count - at);
    CHECK_CUDA(cudaMemcpy(static_cast<char*>(dev) + at * elem, bf16 ? static_cast<const void*>(h16.data()) : h32.data(),
                          n * elem, cudaMemcpyHostToDevice));
  }
}

// Which state pass runs: kernel 0 (mma.sync) or 1 (wgmma, GDN only), value columns per CTA (0: the heuristic's).
struct Pass {
  int kernel = frost::sm90::kPassAuto, slice = 0;  // kPassAuto: the engine's heuristic chooses both
  bool gradient_after = false;                     // the GDN backward's gradient kernel not beside the reverse pass
  int reverse_slice = 0;                           // its wgmma reverse pass's value columns per CTA (0: the plan's)
};

struct Result {
  std::string label;
  double ms = 0;
  int slice = 0;
  double phase_ms[3] = {};  // prologue, chunk kernel, state pass (phase runs only)
  // The backward's steps (--bwd): recording run, reverse pass, chunk gradient kernels, epilogue.
  double step_ms[4] = {};
};

// The last 4096 BF16 values of an output of `count` elements: exits naming the case if one is not finite.
void exit_unless_finite_tail(const void* out, size_t count, const char* name) {
  std::vector<uint16_t> sample(4096);
  CHECK_CUDA(cudaMemcpy(sample.data(), static_cast<const char*>(out) + (count - sample.size()) * 2, sample.size() * 2,
                        cudaMemcpyDeviceToHost));
  for (uint16_t s : sample)
    if ((s & 0x7f80) == 0x7f80) {
      std::fprintf(stderr, "%s: non-finite output\n", name);
      std::exit(1);
    }
}

// Forward parameters of a case on packed [B, T, H(V), 128] BF16 buffers with FP32 g and beta (l2norm on).
frost::sm90::GdnFwdParams fwd_params(const Case& c, void* dq, void* dk, void* dv, void* dg, void* dbeta, void* dout,
                                     bool kda) {
  frost::sm90::GdnFwdParams p;
  p.io = frost::sm90::GdnDtype::BF16;
  p.q = dq, p.k = dk, p.v = dv, p.g = dg, p.beta = dbeta, p.o = dout;
  p.batch = c.b, p.len = c.t, p.heads = c.h, p.value_heads = c.hv, p.sequences = c.b, p.state_rows = c.b;
  const int64_t qs[3] = {c.t * c.h * 128, c.h * 128, 128}, vs[3] = {c.t * c.hv * 128, c.hv * 128, 128};
  const int64_t gs[3] = {c.t * c.hv, c.hv, 1};
  for (int i = 0; i < 3; ++i) {
    p.q_stride[i] = p.k_stride[i] = qs[i];
    p.v_stride[i] = p.o_stride[i] = vs[i];
    p.g_stride[i] = p.beta_stride[i] = gs[i];
    if (kda) p.g_stride[i] = gs[i] * 128;
  }
  p.g_stride[3] = 1;
  p.per_key_decay = kda;
  p.scale = 1.f / std::sqrt(128.f);
  p.l2norm = c.l2norm;
  return p;
}

// The kernel interface directly: median split of one forward into its three phases.
Result phases(const Case& c, Pass pass, void* dq, void* dk, void* dv, void* dg, void* dbeta, void* dout, void* flush,
              size_t flush_bytes, bool kda = false) {
  const frost::sm90::GdnFwdParams p = fwd_params(c, dq, dk, dv, dg, dbeta, dout, kda);
  frost::sm90::GdnPlan plan;
  int sm_count = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  CHECK_CUDA(frost::sm90::gdn_fwd_plan(p, pass.slice, plan, pass.kernel, sm_count));
  void* ws;
  CHECK_CUDA(cudaMalloc(&ws, static_cast<size_t>(plan.workspace_bytes)));
  cudaEvent_t ev[4];
  for (auto& e : ev) CHECK_CUDA(cudaEventCreate(&e));
  std::vector<std::array<float, 3>> runs;
  for (int i = 0; i < 12; ++i) {
    CHECK_CUDA(cudaMemsetAsync(flush, i, flush_bytes));
    CHECK_CUDA(cudaEventRecord(ev[0]));
    CHECK_CUDA(frost::sm90::gdn_fwd(p, plan, ws, nullptr, &ev[1]));
    CHECK_CUDA(cudaEventRecord(ev[3]));
    CHECK_CUDA(cudaEventSynchronize(ev[3]));
    std::array<float, 3> r{};
    for (int k = 0; k < 3; ++k) CHECK_CUDA(cudaEventElapsedTime(&r[k], ev[k], ev[k + 1]));
    if (i >= 2) runs.push_back(r);
  }
  Result out;
  out.slice = plan.value_slice;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> v;
    for (const auto& r : runs) v.push_back(r[k]);
    std::sort(v.begin(), v.end());
    out.phase_ms[k] = v[v.size() / 2];
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaFree(ws);
  return out;
}

Result run(const Case& c, Pass pass, void* flush, size_t flush_bytes, bool split) {
  Graph g;
  g.set_io_data_type(DataType_t::BFLOAT16)
      .set_intermediate_data_type(DataType_t::FLOAT)
      .set_compute_data_type(DataType_t::FLOAT);
  auto q = tensor(g, "q", {c.b, c.t, c.h, 128}, DataType_t::BFLOAT16);
  auto k = tensor(g, "k", {c.b, c.t, c.h, 128}, DataType_t::BFLOAT16);
  auto v = tensor(g, "v", {c.b, c.t, c.hv, 128}, DataType_t::BFLOAT16);
  auto gt = tensor(g, "g", {c.b, c.t, c.hv}, DataType_t::FLOAT);
  auto beta = tensor(g, "beta", {c.b, c.t, c.hv}, DataType_t::FLOAT);
  auto o = g.gdn(q, k, v, gt, beta, frost::graph::Gdn_attributes().set_use_qk_l2norm_in_kernel(true))[0];
  o->set_output(true);
  frost::Handle handle(frost::Device::cuda(0));
  auto ok = [&](const frost::error_t& e, const char* what) {
    if (e.is_bad()) {
      std::fprintf(stderr, "%s %s: %s\n", c.name, what, e.get_message().c_str());
      std::exit(1);
    }
  };
  ok(g.validate(), "validate");
  ok(g.build_operation_graph(handle), "build_operation_graph");
  frost::graph::KnobMap knobs;
  if (pass.slice) knobs[frost::KnobType_t::TILE_COLS] = pass.slice;
  if (pass.kernel != frost::sm90::kPassAuto) knobs[frost::KnobType_t::KERNEL_CFG] = pass.kernel;
  ok(g.create_execution_plan(10500, knobs), "create_execution_plan");
  ok(g.check_support(handle), "check_support");
  ok(g.build_plans(handle), "build_plans");
  int64_t ws_bytes = 0;
  ok(g.get_workspace_size(ws_bytes), "workspace");
  const size_t qk = static_cast<size_t>(c.b * c.t * c.h * 128), vv = static_cast<size_t>(c.b * c.t * c.hv * 128);
  const size_t gates = static_cast<size_t>(c.b * c.t * c.hv);
  void *dq, *dk, *dv, *dg, *dbeta, *dout, *ws;
  CHECK_CUDA(cudaMalloc(&dq, qk * 2));
  CHECK_CUDA(cudaMalloc(&dk, qk * 2));
  CHECK_CUDA(cudaMalloc(&dv, vv * 2));
  CHECK_CUDA(cudaMalloc(&dout, vv * 2));
  CHECK_CUDA(cudaMalloc(&dg, gates * 4));
  CHECK_CUDA(cudaMalloc(&dbeta, gates * 4));
  CHECK_CUDA(cudaMalloc(&ws, static_cast<size_t>(std::max<int64_t>(ws_bytes, 256))));
  fill(dq, qk, true, -1, 1, 1);
  fill(dk, qk, true, -1, 1, 2);
  fill(dv, vv, true, -1, 1, 3);
  fill(dg, gates, false, -0.1f, -0.001f, 4);
  fill(dbeta, gates, false, 0.1f, 0.9f, 5);
  std::unordered_map<int64_t, void*> pack{{q->get_uid(), dq},  {k->get_uid(), dk},       {v->get_uid(), dv},
                                          {gt->get_uid(), dg}, {beta->get_uid(), dbeta}, {o->get_uid(), dout}};
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) ok(g.execute(handle, pack, ws), "execute");
  std::vector<float> times;
  for (int i = 0; i < 15; ++i) {
    CHECK_CUDA(cudaMemsetAsync(flush, i, flush_bytes));
    CHECK_CUDA(cudaEventRecord(start));
    ok(g.execute(handle, pack, ws), "execute");
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  Result split_result;
  if (split) split_result = phases(c, pass, dq, dk, dv, dg, dbeta, dout, flush, flush_bytes);
  exit_unless_finite_tail(dout, vv, c.name);
  for (void* p : {dq, dk, dv, dg, dbeta, dout, ws}) cudaFree(p);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  std::string plan;
  g.get_plan_name(plan);
  Result r = split_result;
  r.label = plan;
  r.ms = times[times.size() / 2];
  return r;
}

// KDA through the kernel interface: g per key channel in (-0.1, -0.001), like FLA's benchmark inputs.
Result kda(const Case& c, Pass pass, void* flush, size_t flush_bytes) {
  const size_t qk = static_cast<size_t>(c.b * c.t * c.h * 128), vv = static_cast<size_t>(c.b * c.t * c.hv * 128);
  const size_t gates = static_cast<size_t>(c.b * c.t * c.hv);
  void *dq, *dk, *dv, *dg, *dbeta, *dout;
  CHECK_CUDA(cudaMalloc(&dq, qk * 2));
  CHECK_CUDA(cudaMalloc(&dk, qk * 2));
  CHECK_CUDA(cudaMalloc(&dv, vv * 2));
  CHECK_CUDA(cudaMalloc(&dout, vv * 2));
  CHECK_CUDA(cudaMalloc(&dg, gates * 128 * 4));
  CHECK_CUDA(cudaMalloc(&dbeta, gates * 4));
  fill(dq, qk, true, -1, 1, 1);
  fill(dk, qk, true, -1, 1, 2);
  fill(dv, vv, true, -1, 1, 3);
  fill(dg, gates * 128, false, -0.1f, -0.001f, 4);
  fill(dbeta, gates, false, 0.1f, 0.9f, 5);
  Result r = phases(c, pass, dq, dk, dv, dg, dbeta, dout, flush, flush_bytes, true);
  r.label = "kernel interface";
  r.ms = r.phase_ms[0] + r.phase_ms[1] + r.phase_ms[2];
  exit_unless_finite_tail(dout, vv, c.name);
  for (void* p : {dq, dk, dv, dg, dbeta, dout}) cudaFree(p);
  return r;
}

// GDN (or KDA) backward through the kernel interface: median ms of the whole backward (no state in or out).
Result bwd(const Case& c, Pass pass, void* flush, size_t flush_bytes, bool kda) {
  const size_t qk = static_cast<size_t>(c.b * c.t * c.h * 128), vv = static_cast<size_t>(c.b * c.t * c.hv * 128);
  const size_t gates = static_cast<size_t>(c.b * c.t * c.hv);
  void *q, *k, *v, *g, *beta, *d_o, *dq, *dk, *dv, *dg, *dbeta;
  for (void** x : {&q, &k, &dq, &dk}) CHECK_CUDA(cudaMalloc(x, qk * 2));
  for (void** x : {&v, &d_o, &dv}) CHECK_CUDA(cudaMalloc(x, vv * 2));
  const size_t decays = kda ? gates * 128 : gates;  // KDA: one log decay per key channel
  for (void** x : {&g, &dg}) CHECK_CUDA(cudaMalloc(x, decays * 4));
  for (void** x : {&beta, &dbeta}) CHECK_CUDA(cudaMalloc(x, gates * 4));
  // Without the in-kernel norm, keys of about unit norm (uniform in +-sqrt(3 / 128)) keep the recurrence stable.
  const float qk_range = c.l2norm ? 1.f : std::sqrt(3.f / 128.f);
  fill(q, qk, true, -qk_range, qk_range, 1);
  fill(k, qk, true, -qk_range, qk_range, 2);
  fill(v, vv, true, -1, 1, 3);
  fill(d_o, vv, true, -1, 1, 6);
  fill(g, decays, false, -0.1f, -0.001f, 4);
  fill(beta, gates, false, 0.1f, 0.9f, 5);
  frost::sm90::GdnBwdParams bp;
  bp.fwd = fwd_params(c, q, k, v, g, beta, nullptr, kda);
  bp.d_o = d_o, bp.dq = dq, bp.dk = dk, bp.dv = dv, bp.dg = dg, bp.dbeta = dbeta;
  for (int i = 0; i < 3; ++i) {
    bp.do_stride[i] = bp.dv_stride[i] = bp.fwd.v_stride[i];
    bp.dq_stride[i] = bp.dk_stride[i] = bp.fwd.q_stride[i];
    bp.dbeta_stride[i] = bp.fwd.beta_stride[i];
    bp.dg_stride[i] = bp.fwd.g_stride[i];
  }
  bp.dg_stride[3] = 1;
  frost::sm90::GdnPlan plan;
  int sm_count = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  CHECK_CUDA(frost::sm90::gdn_bwd_plan(bp, pass.slice, plan, pass.kernel, sm_count));
  if (pass.gradient_after) plan.grad_overlap = false;  // a smaller workspace than the plan's: a prefix of it
  if (pass.reverse_slice) plan.reverse_slice = pass.reverse_slice;
  void* ws;
  CHECK_CUDA(cudaMalloc(&ws, static_cast<size_t>(plan.workspace_bytes)));
  frost::sm90::GdnOverlap overlap;  // as the engine makes it for a plan that overlaps
  if (plan.overlap) {
    int least = 0, greatest = 0;
    CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK_CUDA(cudaStreamCreateWithPriority(&overlap.pass_stream, cudaStreamNonBlocking, greatest));
    CHECK_CUDA(cudaEventCreateWithFlags(&overlap.fork, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&overlap.join, cudaEventDisableTiming));
  }
  cudaEvent_t ev[5];  // start, the three step marks, stop
  for (auto& e : ev) CHECK_CUDA(cudaEventCreate(&e));
  std::vector<float> times, steps[4];
  // Runs 0-11 whole, 12-23 split by the step marks (two of each series warm-up).
  for (int i = 0; i < 24; ++i) {
    const bool split = i >= 12;
    CHECK_CUDA(cudaMemsetAsync(flush, i, flush_bytes));
    CHECK_CUDA(cudaEventRecord(ev[0]));
    CHECK_CUDA(
        frost::sm90::gdn_bwd(bp, plan, ws, nullptr, plan.overlap ? &overlap : nullptr, split ? &ev[1] : nullptr));
    CHECK_CUDA(cudaEventRecord(ev[4]));
    CHECK_CUDA(cudaEventSynchronize(ev[4]));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, ev[0], ev[4]));
    if (i % 12 < 2) continue;
    if (!split) {
      times.push_back(ms);
      continue;
    }
    for (int k = 0; k < 4; ++k) {
      CHECK_CUDA(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]));
      steps[k].push_back(ms);
    }
  }
  exit_unless_finite_tail(dq, qk, c.name);
  exit_unless_finite_tail(dk, qk, c.name);
  exit_unless_finite_tail(dv, vv, c.name);
  for (void* x : {q, k, v, g, beta, d_o, dq, dk, dv, dg, dbeta, ws}) cudaFree(x);
  for (auto& e : ev) cudaEventDestroy(e);
  if (plan.overlap) {
    cudaStreamDestroy(overlap.pass_stream);
    cudaEventDestroy(overlap.fork);
    cudaEventDestroy(overlap.join);
  }
  std::sort(times.begin(), times.end());
  Result r;
  r.label = std::string(plan.overlap ? "kernel interface, overlapped" : "kernel interface") +
            (plan.grad_overlap ? ", gradient beside the reverse pass" : "");
  r.ms = times[times.size() / 2];
  for (int k = 0; k < 4; ++k) {
    std::sort(steps[k].begin(), steps[k].end());
    r.step_ms[k] = steps[k][steps[k].size() / 2];
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, kda_only = false, bwd_only = false;
  const char* json_path = nullptr;
  size_t case_limit = SIZE_MAX;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--kda")) kda_only = true;
    if (!std::strcmp(argv[i], "--bwd")) bwd_only = true;
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    if (!std::strcmp(argv[i], "--cases") && i + 1 < argc) case_limit = std::atoi(argv[++i]);
  }
  // FLA's times: FLA 0.6.0 in the harness's run of 2026-12-01
  // (bench/results/2026-12-01-h200-linear_attention_gdn.json).
  const std::vector<Case> gdn_cases = {{"GDN fwd B1 T32768 H32", 1, 32768, 32, 32, 1.930},
                                       {"GDN fwd B4 T8192 H32", 4, 8192, 32, 32, 1.882},
                                       {"GDN fwd B8 T8192 H16", 8, 8192, 16, 16, 1.665},
                                       {"GDN fwd B1 T65536 H32", 1, 65536, 32, 32, 3.823},
                                       {"GDN fwd B4 T8192 H16 HV32 (GVA)", 4, 8192, 16, 32, 1.650},
                                       {"GDN fwd B1 T4096 H16", 1, 4096, 16, 16, 0.467},
                                       {"GDN fwd B2 T16384 H16", 2, 16384, 16, 16, 1.040},
                                       {"GDN fwd B4 T8192 H16 (heuristic probe)", 4, 8192, 16, 16, 0},
                                       {"GDN fwd B8 T4096 H32", 8, 4096, 32, 32, 1.882}};
  const std::vector<Case> kda_cases = {{"KDA fwd B1 T8192 H64", 1, 8192, 64, 64, 1.843},
                                       {"KDA fwd B2 T4096 H64", 2, 4096, 64, 64, 1.843},
                                       {"KDA fwd B4 T8192 H32", 4, 8192, 32, 32, 3.514}};
  // FLA 0.6.0 on Triton 3.7.1 (bench/results/2026-12-03-h200-la_bwd_staged_fla.json), on the harness's inputs (keys
  // normalized beforehand, no l2norm, bf16 beta): beside the no-l2norm cases (fp32 beta), a guide.
  const std::vector<Case> bwd_cases = {{"GDN bwd B1 T32768 H32 no l2norm", 1, 32768, 32, 32, 5.206, false},
                                       {"GDN bwd B1 T32768 H32", 1, 32768, 32, 32, 0},
                                       {"GDN bwd B4 T8192 H32 no l2norm", 4, 8192, 32, 32, 5.140, false},
                                       {"GDN bwd B4 T8192 H32", 4, 8192, 32, 32, 0},
                                       {"GDN bwd B8 T8192 H16 no l2norm", 8, 8192, 16, 16, 4.731, false},
                                       {"GDN bwd B8 T8192 H16", 8, 8192, 16, 16, 0},
                                       {"GDN bwd B4 T8192 H16 HV32 (GVA)", 4, 8192, 16, 32, 0}};
  const std::vector<Case> kda_bwd_cases = {{"KDA bwd B1 T8192 H64", 1, 8192, 64, 64, 0},
                                           {"KDA bwd B4 T8192 H32", 4, 8192, 32, 32, 0}};
  std::vector<Case> cases = bwd_only ? (kda_only ? kda_bwd_cases : bwd_cases) : kda_only ? kda_cases : gdn_cases;
  cases.resize(std::min(cases.size(), case_limit));
  const size_t flush_bytes = size_t{256} << 20;
  void* flush;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  FILE* js = json_path ? std::fopen(json_path, "w") : nullptr;
  if (js) std::fprintf(js, "{\"engine\": \"sm90_linear_attention\", \"unit\": \"ms\", \"cases\": [\n");
  bool first = true;
  for (const Case& c : cases) {
    const std::vector<Pass> passes =
        quick ? std::vector<Pass>{{}}
        : bwd_only && !kda_only
            ? std::vector<Pass>{{}, {frost::sm90::kPassAuto, 0, true}, {frost::sm90::kPassAuto, 0, false, 64}, {0, 0}}
        : bwd_only ? std::vector<Pass>{{}}
        : kda_only ? std::vector<Pass>{{}, {0, 32}, {0, 64}}
                   : std::vector<Pass>{{}, {0, 32}, {0, 64}, {1, 64}, {1, 128}};
    for (const Pass& pass : passes) {
      const Result r = bwd_only   ? bwd(c, pass, flush, flush_bytes, kda_only)
                       : kda_only ? kda(c, pass, flush, flush_bytes)
                                  : run(c, pass, flush, flush_bytes, pass.kernel != frost::sm90::kPassAuto || quick);
      const std::string which = pass.gradient_after  ? std::string("gradient after")
                                : pass.reverse_slice ? "reverse " + std::to_string(pass.reverse_slice)
                                : pass.kernel == frost::sm90::kPassAuto
                                    ? "heuristic"
                                    : (pass.kernel ? "wgmma " : "mma.sync ") + std::to_string(pass.slice);
      if (c.fla_ms > 0)
        std::printf("%-38s %-13s %8.3f ms  (FLA %.3f ms, %.2fx)  plan %s\n", c.name, which.c_str(), r.ms, c.fla_ms,
                    c.fla_ms / r.ms, r.label.c_str());
      else
        std::printf("%-38s %-13s %8.3f ms  plan %s\n", c.name, which.c_str(), r.ms, r.label.c_str());
      if (r.slice)
        std::printf("%-34s   phases (slice %d): prologue %.3f ms, chunk kernel %.3f ms, state pass %.3f ms\n", "",
                    r.slice, r.phase_ms[0], r.phase_ms[1], r.phase_ms[2]);
      if (bwd_only)
        std::printf(
            "%-34s   steps (medians): recording run %.3f ms, reverse pass %.3f, gradient kernels %.3f, "
            "epilogue %.3f\n",
            "", r.step_ms[0], r.step_ms[1], r.step_ms[2], r.step_ms[3]);
      std::fflush(stdout);
      if (js) {
        std::fprintf(js, "%s  {\"case\": \"%s\", \"pass_kernel\": %d, \"tile_cols\": %d, \"ms\": %.4f",
                     first ? "" : ",\n", c.name, pass.kernel, pass.slice, r.ms);
        if (c.fla_ms > 0) std::fprintf(js, ", \"fla_ms\": %.3f", c.fla_ms);
        if (r.slice)
          std::fprintf(js, ", \"prologue_ms\": %.4f, \"chunk_ms\": %.4f, \"pass_ms\": %.4f", r.phase_ms[0],
                       r.phase_ms[1], r.phase_ms[2]);
        if (bwd_only)
          std::fprintf(js,
                       ", \"recording_ms\": %.4f, \"reverse_ms\": %.4f, \"gradient_ms\": %.4f, \"epilogue_ms\": %.4f",
                       r.step_ms[0], r.step_ms[1], r.step_ms[2], r.step_ms[3]);
        std::fprintf(js, "}");
      }
      first = false;
    }
  }
  if (js) {
    std::fprintf(js, "\n]}\n");
    std::fclose(js);
  }
  cudaFree(flush);
  return 0;
}
