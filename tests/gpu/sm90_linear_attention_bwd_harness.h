// What the GPU tests of the sm90_linear_attention engine's backward passes (GDN_BACKWARD, KDA_BACKWARD) share: a
// case's graph against the FP64 and FP32 CPU reference, inputs on a model's scale, outputs and workspace poisoned
// with NaN, a bitwise rerun, bad offsets that must leave the outputs untouched, declines, CUDA-graph replay.
// Tolerance: relative L2 error within twice that of the reference run in FP32 against FP64, with a floor for the
// 16-bit rounding of the outputs and of the intermediates the kernels round in the input type (floor_of); max abs
// error within 3x that floor times the largest reference value.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <future>

#include "delta_rule_inputs.h"
#include "gpu_util.h"
#include "graph/node.h"

namespace frost::test::linear_attention_bwd {

using DT = DataType_t;
using Dims = std::vector<int64_t>;

struct Case {
  bool kda = false;  // KDA_BACKWARD (g per key channel) or GDN_BACKWARD (g per head)
  DT dt = DT::BFLOAT16;
  DT gate_dt = DT::FLOAT;  // g and beta (and so dg and dbeta)
  int64_t b = 1, t = 64, h = 2, hv = 2;
  bool l2norm = true, init = true, d_final = true;
  Dims cu;  // cu_seqlens values; empty: none
  DT cu_dt = DT::INT32;
  Dims indices;  // state_indices; empty: none
  int64_t pool = 0;
  double g_lo = -0.2, g_hi = 0.0;
  float scale = 0.f;  // 0: the default K^-0.5
  // KERNEL_CFG and TILE_COLS asked for (the recording run's state pass; tile_cols 0: the engine's own plan), and
  // KERNEL_OVERLAP with them (-1: not asked for).
  int kernel_cfg = 0, tile_cols = 0, overlap = -1;
  size_t dqk_shift = 0;  // bytes DQ and DK start past a 256-byte boundary (8: rows 8-byte aligned, not 16)
};

inline std::string name_of(const Case& c) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "%s %s gates %s B%lld T%lld H%lld HV%lld g [%g, %g]%s%s%s%s%s%s KERNEL_CFG %d TILE_COLS %d KERNEL_OVERLAP %d%s",
      c.kda ? "KDA_BACKWARD" : "GDN_BACKWARD", std::string(to_string(c.dt)).c_str(),
      std::string(to_string(c.gate_dt)).c_str(), static_cast<long long>(c.b), static_cast<long long>(c.t),
      static_cast<long long>(c.h), static_cast<long long>(c.hv), c.g_lo, c.g_hi, c.l2norm ? " l2norm" : "",
      c.init ? " init" : "", c.d_final ? " d_final" : "", c.cu.empty() ? "" : " cu_seqlens",
      c.indices.empty() ? "" : " state_indices", c.scale != 0.f ? " scale" : "", c.kernel_cfg, c.tile_cols, c.overlap,
      c.dqk_shift ? " DQ/DK shifted" : "");
  return buf;
}

inline int64_t sequences(const Case& c) { return c.cu.empty() ? c.b : static_cast<int64_t>(c.cu.size()) - 1; }
inline int64_t state_rows(const Case& c) { return c.indices.empty() ? sequences(c) : c.pool; }

struct Built {
  graph::Graph g;
  std::vector<TensorPtr> inputs, outputs;  // outputs: DQ, DK, DV, DG, DBETA [, D_INITIAL_STATE]
};

inline void build_graph(Built& b, const Case& c) {
  auto& g = b.g;
  g.set_io_data_type(c.dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto q = input(g, "q", {c.b, c.t, c.h, 128}, c.dt), k = input(g, "k", {c.b, c.t, c.h, 128}, c.dt);
  auto v = input(g, "v", {c.b, c.t, c.hv, 128}, c.dt);
  const Dims g_dims = c.kda ? Dims{c.b, c.t, c.hv, 128} : Dims{c.b, c.t, c.hv};
  auto gt = input(g, "g", g_dims, c.gate_dt), beta = input(g, "beta", {c.b, c.t, c.hv}, c.gate_dt);
  auto d_o = input(g, "do", {c.b, c.t, c.hv, 128}, c.dt);
  b.inputs = {q, k, v, gt, beta, d_o};
  auto set_options = [&](auto& a) {
    a.set_use_qk_l2norm_in_kernel(c.l2norm);
    if (c.scale != 0.f) a.set_scale(c.scale);
    if (c.init) {
      auto init = input(g, "init", {state_rows(c), c.hv, 128, 128}, DT::FLOAT);
      a.set_initial_state(init);
      b.inputs.push_back(init);
    }
    if (c.d_final) {
      auto dht = input(g, "dht", {state_rows(c), c.hv, 128, 128}, DT::FLOAT);
      a.set_d_final_state(dht);
      b.inputs.push_back(dht);
    }
    if (!c.cu.empty()) {
      auto cu = input(g, "cu", {static_cast<int64_t>(c.cu.size())}, c.cu_dt);
      a.set_cu_seqlens(cu);
      b.inputs.push_back(cu);
    }
    if (!c.indices.empty()) {
      auto idx = input(g, "idx", {static_cast<int64_t>(c.indices.size())}, DT::INT32);
      a.set_state_indices(idx);
      b.inputs.push_back(idx);
    }
  };
  std::array<TensorPtr, 6> grads;
  if (c.kda) {
    graph::Kda_backward_attributes a;
    set_options(a);
    grads = g.kda_backward(q, k, v, gt, beta, d_o, a);
  } else {
    graph::Gdn_backward_attributes a;
    set_options(a);
    grads = g.gdn_backward(q, k, v, gt, beta, d_o, a);
  }
  const char* names[6] = {"dq", "dk", "dv", "dg", "dbeta", "dh0"};
  for (int i = 0; i < 6; ++i)
    if (grads[i]) {
      grads[i]->set_output(true).set_name(names[i]);
      if (i == 5) grads[i]->set_data_type(DT::FLOAT);
      b.outputs.push_back(grads[i]);
    }
}

inline void fill_inputs(const Case& c, std::vector<std::unique_ptr<DeviceTensor>>& in, std::mt19937_64& rng) {
  fill_delta_rule_inputs({c.l2norm, 128, c.g_lo, c.g_hi, c.cu, c.indices}, in, rng);
}

// The 16-bit floor of the bound (see the test files for how each was measured).
inline double floor_of(bool kda, DT dt) {
  if (kda) return dt == DT::HALF ? 1.5e-3 : 1e-2;
  return dt == DT::HALF ? 2.5e-3 : 1.5e-2;
}

// The bound on `got` against the FP64 reference `want`, given the FP32 reference's error `base`.
inline bool within(double floor, const ErrorStats& err, const ErrorStats& base, double scale) {
  const double rel = std::max(2 * base.rel_l2, floor);
  return !err.has_nan && err.rel_l2 <= rel && err.max_abs <= 3 * floor * std::max(scale, 1e-3);
}

inline void expect_close(const Case& c, const TensorPtr& t, const std::vector<double>& got,
                         const std::vector<double>& want, const std::vector<double>& want32) {
  SCOPED_TRACE(t->get_name());
  for (double v : got) ASSERT_FALSE(std::isnan(v)) << "an output element was not written (or is NaN)";
  const auto err = compare(got, want), base = compare(want32, want);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  std::printf("[ errors   ] %s %s: rel_l2 %.3g max_abs %.3g (max |want| %.3g; fp32 reference rel_l2 %.3g)\n",
              name_of(c).c_str(), t->get_name().c_str(), err.rel_l2, err.max_abs, scale, base.rel_l2);
  EXPECT_TRUE(within(floor_of(c.kda, c.dt), err, base, scale))
      << "rel l2 " << err.rel_l2 << ", max abs " << err.max_abs;
}

// Runs the reference (FP64 and FP32, at once: each reads the graph and the inputs and writes its own outputs) on the
// host copies of the inputs and compares every output.
inline void check_outputs(const Case& c, Built& b, std::vector<std::unique_ptr<DeviceTensor>>& in,
                          std::vector<std::unique_ptr<DeviceTensor>>& out) {
  std::unordered_map<int64_t, void*> pack64, pack32;
  for (auto& x : in) pack64[x->host.t->get_uid()] = pack32[x->host.t->get_uid()] = x->host.data();
  std::vector<std::unique_ptr<HostTensor>> want, want32;
  for (const auto& t : b.outputs) {
    want.push_back(std::make_unique<HostTensor>(t));
    want32.push_back(std::make_unique<HostTensor>(t));
    pack64[t->get_uid()] = want.back()->data();
    pack32[t->get_uid()] = want32.back()->data();
  }
  auto f32 = std::async(std::launch::async,
                        [&] { return detail::reference_execute(b.g.state(), pack32, detail::Precision::F32); });
  const error_t e64 = detail::reference_execute(b.g.state(), pack64, detail::Precision::F64);
  const error_t e32 = f32.get();
  ASSERT_TRUE(e64.is_good()) << e64.get_message();
  ASSERT_TRUE(e32.is_good()) << e32.get_message();
  for (size_t i = 0; i < out.size(); ++i) {
    out[i]->download();
    expect_close(c, b.outputs[i], out[i]->host.values(), want[i]->values(), want32[i]->values());
  }
}

inline void check_case(const Case& c) {
  SCOPED_TRACE(name_of(c));
  Built b;
  build_graph(b, c);
  Handle h(Device::cuda(0));
  if (c.tile_cols) {
    constexpr int64_t kSm90LinearAttention = 10500;
    graph::KnobMap knobs{{KnobType_t::TILE_COLS, c.tile_cols}, {KnobType_t::KERNEL_CFG, c.kernel_cfg}};
    if (c.overlap >= 0) knobs[KnobType_t::KERNEL_OVERLAP] = c.overlap;
    ASSERT_NO_FATAL_FAILURE(build_with_knobs(b.g, h, kSm90LinearAttention, knobs));
  } else {
    ASSERT_NO_FATAL_FAILURE(build_on(b.g, h, "sm90_linear_attention"));
  }
  std::vector<std::unique_ptr<DeviceTensor>> in, out;
  std::mt19937_64 rng(static_cast<uint64_t>(b.g.key()));
  std::unordered_map<int64_t, void*> pack;
  for (const auto& t : b.inputs) in.push_back(std::make_unique<DeviceTensor>(t));
  fill_inputs(c, in, rng);
  for (auto& x : in) pack[x->host.t->get_uid()] = x->dev;
  for (const auto& t : b.outputs) {
    const bool shifted = t->get_name() == "dq" || t->get_name() == "dk";
    out.push_back(std::make_unique<DeviceTensor>(t, shifted ? c.dqk_shift : 0));
    out.back()->host.poison();
    out.back()->upload();
    pack[t->get_uid()] = out.back()->dev;
  }
  int64_t ws_bytes = 0;
  ASSERT_TRUE(b.g.get_workspace_size(ws_bytes).is_good());
  void* ws = nullptr;
  if (ws_bytes > 0) {
    CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(ws_bytes)));
    CUDA_OK(cudaMemset(ws, 0xff, static_cast<size_t>(ws_bytes)));  // NaN: nothing may read it unwritten
  }
  std::vector<std::vector<uint8_t>> first;
  for (int round = 0; round < 2; ++round) {
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
  cudaFree(ws);
  check_outputs(c, b, in, out);
}

// Bad offsets or pool indices are found on the device: the launch reports nothing, and nothing is written.
inline void check_bad_offsets(bool kda) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    Case c;
    c.kda = kda, c.t = 100;
    c.cu = variant == 0 ? Dims{0, 60, 40, 100} : Dims{0, 50, variant == 1 ? 99 : 100};
    if (variant == 2) c.indices = {1, 1}, c.pool = 3;  // repeated pool row
    c.l2norm = variant != 1;                           // GDN: dQ and dK written by the gradient kernel itself
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
    DeviceWorkspace ws(b.g);
    ASSERT_TRUE(ws.ok);
    ASSERT_TRUE(b.g.execute(h, pack, ws.ptr).is_good());
    CUDA_OK(cudaDeviceSynchronize());
    for (auto& o : out) {
      o->download();
      for (double v : o->host.values()) ASSERT_TRUE(std::isnan(v)) << o->host.t->get_name() << " was written";
    }
  }
}

inline void expect_decline(graph::Graph& g, const std::string& needle) {
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

// Captures one execute() and replays it with new inputs each time (packed sequences, GVA).
inline void check_graph_replay(bool kda) {
  Case c;
  c.kda = kda, c.t = 300, c.hv = 4;
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
  DeviceWorkspace ws(b.g);
  ASSERT_TRUE(ws.ok);
  auto refill = [&](int round) {
    std::mt19937_64 rng(300 + static_cast<uint64_t>(round));
    fill_inputs(c, in, rng);
    for (auto& o : out) {
      o->host.poison();
      o->upload();
    }
  };
  auto check = [&](int) { check_outputs(c, b, in, out); };
  EXPECT_NO_FATAL_FAILURE(capture_and_replay(
      h, [&] { return b.g.execute(h, pack, ws.ptr); }, 2, refill, check));
}

}  // namespace frost::test::linear_attention_bwd
