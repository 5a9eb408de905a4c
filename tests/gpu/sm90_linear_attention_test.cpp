// The sm90_linear_attention engine (GDN and KDA forward) against the FP64 CPU reference: odd lengths
// around the 64-token chunk, several packed sequences with cu_seqlens (INT32 and INT64, an empty one),
// GVA, l2norm on and off, initial state on and off, state pools with state_indices (also in place),
// BF16 and FP16 with FLOAT or 16-bit gates, strong per-channel decay for KDA (log decay near -5 per
// token, where exp(-G) over a chunk overflows), outputs poisoned with NaN, bitwise determinism, bad
// offsets that must leave every output untouched, declines by name, CUDA-graph capture, and both state passes of
// the GDN forward (KERNEL_CFG 1, wgmma, 64 and 128 value columns per CTA, the default; KERNEL_CFG 0, mma.sync, 32
// and 64) on the GDN cases.
// Tolerance: the kernels round T, W, U, P, the state entering each chunk and U - W S to the 16-bit
// input type before the tensor-core products (as FLA's kernels do); the state itself stays FP32.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "delta_rule_inputs.h"
#include "gpu_util.h"
#include "graph/node.h"

namespace frost::test {
namespace {

using DT = DataType_t;
using Dims = std::vector<int64_t>;

struct Case {
  DT dt = DT::BFLOAT16;
  DT gate_dt = DT::FLOAT;  // g and beta
  int64_t b = 1, t = 64, h = 2, hv = 2, kd = 128, vd = 128;
  bool l2norm = true, init = true, final_state = true;
  Dims cu;  // cu_seqlens values; empty: none
  DT cu_dt = DT::INT32;
  Dims indices;                       // state_indices; empty: none
  int64_t pool = 0;                   // pool rows with indices
  bool in_place = false;              // final state bound to the initial state's buffer
  double g_lo = -0.2, g_hi = 0.0;     // log decay drawn from [g_lo, g_hi]
  bool kda = false;                   // KDA: g [B, T, HV, K], one decay per key channel
  int kernel_cfg = 0, tile_cols = 0;  // KERNEL_CFG and TILE_COLS asked for (tile_cols 0: the engine's own plan)
  int overlap = -1;                   // KERNEL_OVERLAP asked for (-1: not)
};

constexpr int64_t kSm90LinearAttentionEngineId = 10500;

std::string name_of(const Case& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s %s gates %s B%lld T%lld H%lld HV%lld g [%g, %g]%s%s%s%s%s%s KERNEL_CFG %d TILE_COLS %d"
                " KERNEL_OVERLAP %d",
                c.kda ? "KDA" : "GDN", std::string(to_string(c.dt)).c_str(), std::string(to_string(c.gate_dt)).c_str(),
                static_cast<long long>(c.b), static_cast<long long>(c.t), static_cast<long long>(c.h),
                static_cast<long long>(c.hv), c.g_lo, c.g_hi, c.l2norm ? " l2norm" : "", c.init ? " init" : "",
                c.final_state ? " final" : "", c.cu.empty() ? "" : " cu_seqlens",
                c.indices.empty() ? "" : " state_indices", c.in_place ? " in-place" : "", c.kernel_cfg, c.tile_cols,
                c.overlap);
  return buf;
}

int64_t sequences(const Case& c) { return c.cu.empty() ? c.b : static_cast<int64_t>(c.cu.size()) - 1; }
int64_t state_rows(const Case& c) { return c.indices.empty() ? sequences(c) : c.pool; }

struct Built {
  graph::Graph g;
  std::vector<TensorPtr> inputs, outputs;  // outputs: O [, FINAL_STATE]
  TensorPtr cu, indices, init;
};

// The flags and optional ports both ops' attributes share.
template <class A>
A attributes_of(Built& b, const Case& c, A a) {
  a.set_use_qk_l2norm_in_kernel(c.l2norm).set_output_final_state(c.final_state);
  if (c.init) {
    b.init = input(b.g, "init", {state_rows(c), c.hv, c.kd, c.vd}, DT::FLOAT);
    a.set_initial_state(b.init);
    b.inputs.push_back(b.init);
  }
  if (!c.cu.empty()) {
    b.cu = input(b.g, "cu", {static_cast<int64_t>(c.cu.size())}, c.cu_dt);
    a.set_cu_seqlens(b.cu);
    b.inputs.push_back(b.cu);
  }
  if (!c.indices.empty()) {
    b.indices = input(b.g, "idx", {static_cast<int64_t>(c.indices.size())}, DT::INT32);
    a.set_state_indices(b.indices);
    b.inputs.push_back(b.indices);
  }
  return a;
}

void build_graph(Built& b, const Case& c) {
  auto& g = b.g;
  g.set_io_data_type(c.dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto q = input(g, "q", {c.b, c.t, c.h, c.kd}, c.dt), k = input(g, "k", {c.b, c.t, c.h, c.kd}, c.dt);
  auto v = input(g, "v", {c.b, c.t, c.hv, c.vd}, c.dt);
  auto gt = c.kda ? input(g, "g", {c.b, c.t, c.hv, c.kd}, c.gate_dt) : input(g, "g", {c.b, c.t, c.hv}, c.gate_dt);
  auto beta = input(g, "beta", {c.b, c.t, c.hv}, c.gate_dt);
  b.inputs = {q, k, v, gt, beta};
  const auto [o, fs] = c.kda ? g.kda(q, k, v, gt, beta, attributes_of(b, c, graph::Kda_attributes()))
                             : g.gdn(q, k, v, gt, beta, attributes_of(b, c, graph::Gdn_attributes()));
  o->set_output(true);
  b.outputs = {o};
  if (fs) {
    fs->set_output(true).set_data_type(DT::FLOAT);
    b.outputs.push_back(fs);
  }
}

void fill_inputs(const Case& c, std::vector<std::unique_ptr<DeviceTensor>>& in, std::mt19937_64& rng) {
  fill_delta_rule_inputs({c.l2norm, c.kd, c.g_lo, c.g_hi, c.cu, c.indices}, in, rng);
}

void expect_close(const Case& c, const TensorPtr& t, const std::vector<double>& got, const std::vector<double>& want) {
  SCOPED_TRACE(t->get_name());
  for (double v : got) ASSERT_FALSE(std::isnan(v)) << "an output element was not written (or is NaN)";
  const auto err = compare(got, want);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  const double rel = c.dt == DT::HALF ? 4e-3 : 2e-2;
  std::printf("[ errors   ] %s %s: rel_l2 %.3g max_abs %.3g (max |want| %.3g)\n", name_of(c).c_str(),
              t->get_name().c_str(), err.rel_l2, err.max_abs, scale);
  EXPECT_LE(err.rel_l2, rel) << "max abs " << err.max_abs;
  EXPECT_LE(err.max_abs, 8 * rel * std::max(scale, 1e-3)) << "rel l2 " << err.rel_l2;
}

// The knobs a case asks for (none: the engine's own plan).
graph::KnobMap knobs_of(const Case& c) {
  graph::KnobMap knobs;
  if (c.tile_cols) knobs = {{KnobType_t::TILE_COLS, c.tile_cols}, {KnobType_t::KERNEL_CFG, c.kernel_cfg}};
  if (c.overlap >= 0) knobs[KnobType_t::KERNEL_OVERLAP] = c.overlap;
  return knobs;
}

void check_case(const Case& c) {
  SCOPED_TRACE(name_of(c));
  Built b;
  build_graph(b, c);
  Handle h(Device::cuda(0));
  if (const graph::KnobMap knobs = knobs_of(c); !knobs.empty())
    ASSERT_NO_FATAL_FAILURE(build_with_knobs(b.g, h, kSm90LinearAttentionEngineId, knobs));
  else
    ASSERT_NO_FATAL_FAILURE(build_on(b.g, h, "sm90_linear_attention"));
  std::vector<std::unique_ptr<DeviceTensor>> in, out;
  std::mt19937_64 rng(static_cast<uint64_t>(b.g.key()));
  std::unordered_map<int64_t, void*> pack, host_pack;
  for (const auto& t : b.inputs) in.push_back(std::make_unique<DeviceTensor>(t));
  fill_inputs(c, in, rng);
  for (auto& x : in) pack[x->host.t->get_uid()] = x->dev, host_pack[x->host.t->get_uid()] = x->host.data();
  for (const auto& t : b.outputs) {
    out.push_back(std::make_unique<DeviceTensor>(t));
    out.back()->host.poison();
    out.back()->upload();
    pack[t->get_uid()] = out.back()->dev;
  }
  DeviceTensor* init = nullptr;
  for (auto& x : in)
    if (x->host.t == b.init) init = x.get();
  if (c.in_place) pack[b.outputs[1]->get_uid()] = init->dev;
  int64_t ws_bytes = 0;
  ASSERT_TRUE(b.g.get_workspace_size(ws_bytes).is_good());
  void* ws = nullptr;
  if (ws_bytes > 0) {
    CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(ws_bytes)));
    CUDA_OK(cudaMemset(ws, 0xff, static_cast<size_t>(ws_bytes)));  // NaN: nothing may read it unwritten
  }
  std::vector<std::vector<uint8_t>> first;
  for (int round = 0; round < (c.in_place ? 1 : 2); ++round) {
    const error_t e = b.g.execute(h, pack, ws);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<std::vector<uint8_t>> r;
    for (auto& o : out) {
      o->download();
      r.push_back(o->host.bytes);
    }
    if (round == 0)
      first = r;
    else
      EXPECT_EQ(r, first) << "a second run gave other bits";
  }
  if (c.in_place) {  // the pool, updated in place; init->host keeps the values it started from
    CUDA_OK(cudaMemcpy(out[1]->host.bytes.data(), init->dev, out[1]->host.bytes.size(), cudaMemcpyDeviceToHost));
  }
  cudaFree(ws);
  std::vector<std::unique_ptr<HostTensor>> want;
  for (const auto& t : b.outputs) {
    want.push_back(std::make_unique<HostTensor>(t));
    host_pack[t->get_uid()] = want.back()->data();
  }
  ASSERT_TRUE(detail::reference_execute(b.g.state(), host_pack, detail::Precision::F64).is_good());
  for (size_t i = 0; i < out.size(); ++i) expect_close(c, b.outputs[i], out[i]->host.values(), want[i]->values());
  if (!c.indices.empty() && c.final_state) {  // rows no sequence names: copied bit for bit
    const auto got = out[1]->host.values(), from = init->host.values();
    const int64_t per_row = c.hv * c.kd * c.vd;
    for (int64_t row = 0; row < c.pool; ++row) {
      if (std::find(c.indices.begin(), c.indices.end(), row) != c.indices.end()) continue;
      for (int64_t x = 0; x < per_row; x += 97)
        ASSERT_EQ(got[static_cast<size_t>(row * per_row + x)], from[static_cast<size_t>(row * per_row + x)])
            << "pool row " << row;
    }
  }
}

TEST(Sm90LinearAttention, GdnOddLengthsAroundTheChunk) {
  REQUIRE_SM90();
  for (int64_t t : {1, 17, 63, 64, 65, 1000}) {
    Case c;
    c.b = 2, c.t = t;
    check_case(c);
  }
}

TEST(Sm90LinearAttention, GdnTypesNormsStatesAndGva) {
  REQUIRE_SM90();
  Case c;
  c.t = 333;
  c.dt = DT::HALF;
  check_case(c);
  c.gate_dt = DT::HALF;
  check_case(c);
  c = Case{};
  c.t = 333, c.gate_dt = DT::BFLOAT16;
  check_case(c);
  c = Case{};
  c.t = 200, c.l2norm = false;
  check_case(c);
  c.init = false;
  check_case(c);
  c.final_state = false;
  check_case(c);
  c = Case{};
  c.b = 3, c.t = 150, c.h = 2, c.hv = 8;  // GVA: four value heads per q/k head
  check_case(c);
  c = Case{};
  c.t = 700, c.h = 1, c.hv = 1, c.g_lo = -3.0;  // strong decay: exp(G) spans many decades in a chunk
  check_case(c);
}

// Packed sequences (an empty one among them, int32 and int64 offsets, GVA) and state pools, in place too.
void check_packed_sequences_and_pools(bool kda) {
  Case c;
  c.kda = kda, c.t = 1 + 100 + 64 + 129 + 3;
  c.cu = {0, 1, 101, 101, 165, 294, 297};
  check_case(c);
  c.cu_dt = DT::INT64;
  c.hv = 4;
  check_case(c);
  c = Case{};
  c.kda = kda, c.t = 300;
  c.cu = {0, 70, 71, 300};
  c.indices = {5, 0, 3}, c.pool = 7;
  check_case(c);
  c.in_place = true;
  check_case(c);
}

TEST(Sm90LinearAttention, GdnPackedSequencesAndStatePools) {
  REQUIRE_SM90();
  check_packed_sequences_and_pools(false);
}

TEST(Sm90LinearAttention, GdnManyChunksOneSequence) {
  REQUIRE_SM90();
  Case c;
  c.t = 4096 + 5, c.h = 2, c.hv = 2;
  check_case(c);
}

// One state pass, asked for by KERNEL_CFG and TILE_COLS, on the GDN cases: odd lengths, FP16, no initial state,
// GVA, strong decay, many chunks, packed sequences with a pool.
void check_state_pass(int kernel_cfg, int cols) {
  auto with_pass = [&](Case c) {
    c.kernel_cfg = kernel_cfg, c.tile_cols = cols;
    check_case(c);
  };
  for (int64_t t : {1, 63, 64, 65, 1000}) {
    Case c;
    c.b = 2, c.t = t;
    with_pass(c);
  }
  Case c;
  c.t = 333, c.dt = DT::HALF;
  with_pass(c);
  c = Case{};
  c.t = 200, c.init = false;
  with_pass(c);
  c = Case{};
  c.b = 3, c.t = 150, c.h = 2, c.hv = 8;  // GVA
  with_pass(c);
  c = Case{};
  c.t = 700, c.h = 1, c.hv = 1, c.g_lo = -3.0;
  with_pass(c);
  c = Case{};
  c.t = 4096 + 5;
  with_pass(c);
  c = Case{};
  c.t = 300, c.cu = {0, 70, 71, 300}, c.indices = {5, 0, 3}, c.pool = 7;
  with_pass(c);
}

// The wgmma state pass (KERNEL_CFG 1): 128 value columns per CTA (two warpgroups) and 64 (one, with a loading
// warpgroup); without knobs every GDN forward takes it, so the other tests run it too.
TEST(Sm90LinearAttention, GdnWgmmaStatePass) {
  REQUIRE_SM90();
  for (int cols : {128, 64}) check_state_pass(1, cols);
  // No knobs: 72 sequences x value heads (more than 132 / 2) take whole heads, 40 halves.
  Case c;
  c.b = 9, c.t = 100, c.h = 4, c.hv = 8;
  check_case(c);
  c.b = 5;
  check_case(c);
}

// Few sequences x heads: the chunk kernel and the state pass run at once by default (KERNEL_OVERLAP 1) and one
// after the other with KERNEL_OVERLAP 0; both against the reference (packed sequences, odd lengths, a pool).
TEST(Sm90LinearAttention, GdnChunkKernelBesideTheStatePass) {
  REQUIRE_SM90();
  for (int overlap : {1, 0}) {
    Case c;
    c.overlap = overlap, c.b = 2, c.t = 1000;
    check_case(c);
    c = Case{};
    c.overlap = overlap, c.t = 300, c.cu = {0, 70, 71, 300}, c.indices = {5, 0, 3}, c.pool = 7;
    check_case(c);
  }
}

// The mma.sync state pass (KERNEL_CFG 0), which KDA and the backward use, on the GDN forward: 32 and 64 columns.
TEST(Sm90LinearAttention, GdnMmaSyncStatePass) {
  REQUIRE_SM90();
  for (int cols : {32, 64}) check_state_pass(0, cols);
}

TEST(Sm90LinearAttention, KdaOddLengthsAroundTheChunk) {
  REQUIRE_SM90();
  for (int64_t t : {1, 63, 64, 65, 1000}) {
    Case c;
    c.kda = true, c.b = 2, c.t = t;
    check_case(c);
  }
}

TEST(Sm90LinearAttention, KdaTypesNormsStatesAndGva) {
  REQUIRE_SM90();
  Case c;
  c.kda = true, c.t = 333, c.dt = DT::HALF;
  check_case(c);
  c.gate_dt = DT::HALF;
  check_case(c);
  c = Case{};
  c.kda = true, c.t = 333, c.gate_dt = DT::BFLOAT16;
  check_case(c);
  c = Case{};
  c.kda = true, c.t = 200, c.l2norm = false;
  check_case(c);
  c.init = false;
  check_case(c);
  c.final_state = false;
  check_case(c);
  c = Case{};
  c.kda = true, c.b = 3, c.t = 150, c.h = 2, c.hv = 8;  // GVA
  check_case(c);
}

// Log decay near -5 per token and channel: exp(-G) reaches exp(320) within a chunk, far past FP32 (and
// exp(+-40) around a mid-block anchor is past FP16). Below -20 the kernels raise g to -20, far under rounding.
TEST(Sm90LinearAttention, KdaStrongDecay) {
  REQUIRE_SM90();
  Case c;
  c.kda = true, c.t = 300, c.g_lo = -5.5, c.g_hi = -4.5;
  check_case(c);
  c.dt = DT::HALF;
  check_case(c);
  c = Case{};
  c.kda = true, c.t = 200, c.dt = DT::HALF, c.g_lo = -5.0;  // strong and weak channels side by side
  check_case(c);
  c = Case{};
  c.kda = true, c.t = 130, c.g_lo = -30.0;
  check_case(c);
}

TEST(Sm90LinearAttention, KdaPackedSequencesAndStatePools) {
  REQUIRE_SM90();
  check_packed_sequences_and_pools(true);
}

// Bad offsets are found on the device: the launch reports nothing, and nothing is written.
TEST(Sm90LinearAttention, BadOffsetsLeaveOutputsUntouched) {
  REQUIRE_SM90();
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    Case c;
    c.kda = variant == 3;
    c.t = 100;
    c.cu = variant % 3 == 0 ? Dims{0, 60, 40, 100} : Dims{0, 50, variant == 1 ? 99 : 100};
    if (variant == 2) c.indices = {1, 1}, c.pool = 3;  // repeated pool row
    Built b;
    build_graph(b, c);
    Handle h(Device::cuda(0));
    ASSERT_TRUE(b.g.build(h, {HeurMode_t::A}).is_good());
    std::vector<std::unique_ptr<DeviceTensor>> in, out;
    std::mt19937_64 rng(7);
    for (const auto& t : b.inputs) in.push_back(std::make_unique<DeviceTensor>(t));
    fill_inputs(c, in, rng);
    std::unordered_map<int64_t, void*> pack;
    for (auto& x : in) pack[x->host.t->get_uid()] = x->dev;
    for (const auto& t : b.outputs) {
      out.push_back(std::make_unique<DeviceTensor>(t));
      out.back()->host.poison();
      out.back()->upload();
      pack[t->get_uid()] = out.back()->dev;
    }
    int64_t ws_bytes = 0;
    b.g.get_workspace_size(ws_bytes);
    void* ws = nullptr;
    CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(std::max<int64_t>(ws_bytes, 256))));
    ASSERT_TRUE(b.g.execute(h, pack, ws).is_good());
    CUDA_OK(cudaDeviceSynchronize());
    for (auto& o : out) {
      o->download();
      for (double v : o->host.values()) ASSERT_TRUE(std::isnan(v)) << o->host.t->get_name() << " was written";
    }
    cudaFree(ws);
  }
}

void expect_decline(graph::Graph& g, const std::string& needle) {
  Handle h(Device::cuda(0));
  ASSERT_TRUE(g.validate().is_good());
  ASSERT_TRUE(g.build_operation_graph(h).is_good());
  g.create_execution_plans({HeurMode_t::OPENSOURCE});
  bool found = false;
  std::string all;
  for (const auto& r : g.get_decline_reasons()) {
    found = found || (r.rfind("sm90_linear_attention", 0) == 0 && r.find(needle) != std::string::npos);
    all += r + "\n";
  }
  EXPECT_TRUE(found) << "expected a decline naming '" << needle << "', got:\n" << all;
}

TEST(Sm90LinearAttention, DeclinesWhatItCannotServe) {
  REQUIRE_SM90();
  auto gdn_graph = [](graph::Graph& g, DT dt, int64_t kd, int64_t vd) {
    g.set_io_data_type(dt).set_compute_data_type(DT::FLOAT);
    auto q = input(g, "q", {1, 8, 1, kd}, dt), k = input(g, "k", {1, 8, 1, kd}, dt);
    auto v = input(g, "v", {1, 8, 1, vd}, dt);
    g.gdn(q, k, v, input(g, "g", {1, 8, 1}), input(g, "beta", {1, 8, 1}), graph::Gdn_attributes())[0]->set_output(true);
  };
  {
    graph::Graph g;
    gdn_graph(g, DT::BFLOAT16, 64, 128);
    expect_decline(g, "key head dim K 64");
  }
  {
    graph::Graph g;
    gdn_graph(g, DT::BFLOAT16, 128, 256);
    expect_decline(g, "value head dim V 256");
  }
  {
    graph::Graph g;
    gdn_graph(g, DT::FLOAT, 128, 128);
    expect_decline(g, "Q data type FLOAT");
  }
  {
    graph::Graph g;
    g.set_io_data_type(DT::BFLOAT16).set_compute_data_type(DT::FLOAT);
    auto q = input(g, "q", {1, 8, 1, 64}, DT::BFLOAT16), k = input(g, "k", {1, 8, 1, 64}, DT::BFLOAT16);
    auto v = input(g, "v", {1, 8, 1, 128}, DT::BFLOAT16);
    g.kda(q, k, v, input(g, "g", {1, 8, 1, 64}), input(g, "beta", {1, 8, 1}), graph::Kda_attributes())[0]->set_output(
        true);
    expect_decline(g, "key head dim K 64");
  }
  {
    graph::Graph g;
    g.set_io_data_type(DT::BFLOAT16).set_compute_data_type(DT::FLOAT);
    auto q = input(g, "q", {1, 8, 1, 128}, DT::BFLOAT16), k = input(g, "k", {1, 8, 1, 128}, DT::BFLOAT16);
    auto v = input(g, "v", {1, 8, 1, 64}, DT::BFLOAT16), d_o = input(g, "do", {1, 8, 1, 64}, DT::BFLOAT16);
    for (auto& t : g.kda_backward(q, k, v, input(g, "g", {1, 8, 1, 128}), input(g, "beta", {1, 8, 1}), d_o,
                                  graph::Kda_backward_attributes()))
      if (t) t->set_output(true);
    expect_decline(g, "value head dim V 64");
  }
}

// A plan asked for by knobs the engine cannot run fails to build, and its message names the knob.
void expect_knobs_declined(const Case& c, const std::string& needle) {
  SCOPED_TRACE(name_of(c));
  Built b;
  build_graph(b, c);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(b.g.validate().is_good());
  ASSERT_TRUE(b.g.build_operation_graph(h).is_good());
  error_t e = b.g.create_execution_plan(kSm90LinearAttentionEngineId, knobs_of(c));
  if (e.is_good()) e = b.g.build_plans(h);
  ASSERT_FALSE(e.is_good());
  EXPECT_NE(e.get_message().find(needle), std::string::npos) << e.get_message();
}

TEST(Sm90LinearAttention, DeclinesStatePassKnobsByName) {
  REQUIRE_SM90();
  Case c;
  c.kernel_cfg = 0, c.tile_cols = 128;
  expect_knobs_declined(c, "TILE_COLS 128 with KERNEL_CFG 0");
  c.kernel_cfg = 1, c.tile_cols = 32;
  expect_knobs_declined(c, "TILE_COLS 32 with KERNEL_CFG 1");
  c.kda = true, c.tile_cols = 64;
  expect_knobs_declined(c, "KERNEL_CFG 1 (the wgmma state pass) serves GDN only");
  c = Case{};
  c.kernel_cfg = 2, c.tile_cols = 64;
  expect_knobs_declined(c, "KERNEL_CFG 2 (the wgmma reverse pass) serves the GDN backward only");
  c = Case{};
  c.overlap = 2;  // outside the range the engine declares for the knob
  expect_knobs_declined(c, "KERNEL_OVERLAP=2 is outside [0, 1]");
}

void check_graph_replay(bool kda) {
  Case c;
  c.kda = kda;
  c.t = 300;
  c.cu = {0, 130, 300};
  Built b;
  build_graph(b, c);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(b.g.build(h, {HeurMode_t::A}).is_good());
  std::vector<std::unique_ptr<DeviceTensor>> in, out;
  std::unordered_map<int64_t, void*> pack;
  for (const auto& t : b.inputs) in.push_back(std::make_unique<DeviceTensor>(t)), pack[t->get_uid()] = in.back()->dev;
  for (const auto& t : b.outputs)
    out.push_back(std::make_unique<DeviceTensor>(t)), pack[t->get_uid()] = out.back()->dev;
  int64_t ws_bytes = 0;
  b.g.get_workspace_size(ws_bytes);
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(std::max<int64_t>(ws_bytes, 256))));
  auto refill = [&](int round) {
    std::mt19937_64 rng(300 + static_cast<uint64_t>(round));
    fill_inputs(c, in, rng);
    for (auto& o : out) {
      o->host.poison();
      o->upload();
    }
  };
  auto check = [&](int) {
    std::unordered_map<int64_t, void*> hp;
    for (auto& x : in) hp[x->host.t->get_uid()] = x->host.data();
    std::vector<std::unique_ptr<HostTensor>> want;
    for (const auto& t : b.outputs)
      want.push_back(std::make_unique<HostTensor>(t)), hp[t->get_uid()] = want.back()->data();
    ASSERT_TRUE(detail::reference_execute(b.g.state(), hp, detail::Precision::F64).is_good());
    for (size_t i = 0; i < out.size(); ++i) {
      out[i]->download();
      expect_close(c, b.outputs[i], out[i]->host.values(), want[i]->values());
    }
  };
  EXPECT_NO_FATAL_FAILURE(capture_and_replay(
      h, [&] { return b.g.execute(h, pack, ws); }, 2, refill, check));
  cudaFree(ws);
}

TEST(Sm90LinearAttention, CudaGraphCaptureAndReplayWithNewInputs) {
  REQUIRE_SM90();
  for (bool kda : {false, true}) {
    SCOPED_TRACE(kda ? "KDA" : "GDN");
    check_graph_replay(kda);
  }
}

}  // namespace
}  // namespace frost::test
