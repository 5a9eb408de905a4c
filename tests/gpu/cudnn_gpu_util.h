// Running one graph on the cudnn engine and checking every output against the CPU reference under
// DESIGN.md's rule: the engine's relative L2 error against the fp64 reference stays within twice
// that of the reference's own fp32 evaluation (values rounded to their declared types), plus a floor
// per output type. Outputs are poisoned before the run; rows a ragged output leaves unwritten are
// poisoned on both sides.
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <memory>

#include "engines/cudnn/cudnn_library.h"
#include "gpu_util.h"

namespace frost::test {

struct CudnnCase {
  std::string name;
  graph::Graph g;
  // Inputs that need particular values (lengths, offsets, page tables); the rest are uniform in [-1, 1].
  // Keyed by tensor: uids are assigned only at validate.
  std::map<const graph::Tensor_attributes*, std::function<void(HostTensor&)>> fills;
  // Host values for inputs computed beforehand (the forward's O and Stats for a backward).
  std::map<const graph::Tensor_attributes*, std::vector<uint8_t>> preset;
  // A decline whose reason contains this text passes (an honest "cannot"); empty: the engine must serve.
  std::string acceptable_decline;
};

inline bool have_cuda() { return cuda_device_count() > 0; }

#define REQUIRE_CUDA_DEVICE() \
  if (!::frost::test::have_cuda()) GTEST_SKIP() << "needs a CUDA device"

inline double floor_for(DataType_t dt) {
  switch (dt) {
    case DataType_t::BFLOAT16:
      return 8e-3;
    case DataType_t::HALF:
      return 1e-3;
    case DataType_t::FLOAT:
      return 1e-5;
    default:
      return 0.0;
  }
}

inline std::vector<TensorPtr> graph_outputs(const graph::Graph& g) {
  std::vector<TensorPtr> r;
  for (const auto& n : g.state().nodes)
    for (auto& p : const_cast<detail::Node&>(*n).outputs())
      if (*p.slot && !(*p.slot)->get_is_virtual()) r.push_back(*p.slot);
  return r;
}

// Index of the first cudnn candidate, or -1.
inline int64_t first_cudnn_plan(const graph::Graph& g, int64_t from = 0) {
  for (int64_t i = from; i < g.get_execution_plan_count(); ++i) {
    std::string n;
    g.get_plan_name_at_index(i, n);
    if (n.rfind("cudnn", 0) == 0) return i;
  }
  return -1;
}

struct CudnnRun {
  std::string plan;
  int64_t index = -1;
  std::vector<std::unique_ptr<DeviceTensor>> buffers;
  std::unordered_map<int64_t, void*> pack, host_pack;
  void* workspace = nullptr;
  ~CudnnRun() { cudaFree(workspace); }
};

// Builds the first cudnn plan that builds (trying up to 8) and runs it once. False with a message on failure;
// `declined` is set when no cudnn plan exists at all.
inline bool run_cudnn(CudnnCase& c, CudnnRun& r, std::string& message, bool& declined) {
  declined = false;
  auto fail = [&](const std::string& m) {
    message = m;
    return false;
  };
  Handle h(Device::cuda(0));
  auto& g = c.g;
  if (auto e = g.validate(); e.is_bad()) return fail("validate: " + e.get_message());
  if (auto e = g.build_operation_graph(h); e.is_bad()) return fail(e.get_message());
  g.create_execution_plans({HeurMode_t::A, HeurMode_t::B});
  std::string failures;
  for (int64_t i = first_cudnn_plan(g), tries = 0; i >= 0 && tries < 8; i = first_cudnn_plan(g, i + 1), ++tries) {
    auto e = g.build_plan_at_index(h, i);
    if (e.is_good()) {
      r.index = i;
      break;
    }
    failures += "\n    " + e.get_message();
  }
  if (r.index < 0) {
    declined = failures.empty();
    for (const auto& d : g.get_decline_reasons())
      if (d.rfind("cudnn", 0) == 0) message += d;
    message += failures;
    return false;
  }
  g.get_plan_name_at_index(r.index, r.plan);
  int64_t ws = 0;
  g.get_workspace_size_plan_at_index(r.index, ws);
  if (ws > 0 && cudaMalloc(&r.workspace, static_cast<size_t>(ws)) != cudaSuccess) return fail("cudaMalloc");
  std::mt19937_64 rng(std::hash<std::string>{}(c.name));
  const auto outs = graph_outputs(g);
  for (const auto& t : g.state().bound_tensors) {
    r.buffers.push_back(std::make_unique<DeviceTensor>(t));
    auto& b = *r.buffers.back();
    const bool is_out = std::count(outs.begin(), outs.end(), t) > 0;
    if (is_out) {
      b.host.poison();
    } else if (auto it = c.preset.find(t.get()); it != c.preset.end()) {
      b.host.bytes = it->second;
    } else if (auto f = c.fills.find(t.get()); f != c.fills.end()) {
      f->second(b.host);
    } else if (t->get_data_type() == DataType_t::BOOLEAN) {
      std::bernoulli_distribution keep(0.8);
      for (int64_t n = 0; n < b.host.volume(); ++n) b.host.set(n, keep(rng) ? 1.0 : 0.0);
    } else {
      b.host.fill_random(rng, -1, 1);
    }
    b.upload();
    r.pack[t->get_uid()] = b.dev;
    r.host_pack[t->get_uid()] = b.host.data();
  }
  auto e = g.execute_plan_at_index(h, r.pack, r.workspace, r.index);
  if (e.is_bad()) return fail("execute " + r.plan + ": " + e.get_message());
  if (cudaDeviceSynchronize() != cudaSuccess) return fail("cudaDeviceSynchronize after " + r.plan);
  for (auto& b : r.buffers)
    if (std::count(outs.begin(), outs.end(), b->host.t) > 0) b->download();
  return true;
}

// Compares the downloaded outputs of run r with the reference evaluated on r's host inputs.
inline void check_outputs(CudnnCase& c, CudnnRun& r) {
  // The reference on copies of the inputs, in fp64 and in fp32.
  const auto outs = graph_outputs(c.g);
  std::vector<std::unique_ptr<HostTensor>> r64, r32;
  auto run_ref = [&](detail::Precision p, std::vector<std::unique_ptr<HostTensor>>& store) {
    auto pack = r.host_pack;
    for (const auto& t : outs) {
      store.push_back(std::make_unique<HostTensor>(t));
      store.back()->poison();
      pack[t->get_uid()] = store.back()->data();
    }
    return detail::reference_execute(c.g.state(), pack, p);
  };
  ASSERT_TRUE(run_ref(detail::Precision::F64, r64).is_good());
  ASSERT_TRUE(run_ref(detail::Precision::F32, r32).is_good());
  for (size_t i = 0; i < outs.size(); ++i) {
    const HostTensor* got = nullptr;
    for (const auto& b : r.buffers)
      if (b->host.t == outs[i]) got = &b->host;
    ASSERT_NE(got, nullptr);
    const auto err = compare(got->values(), r64[i]->values());
    const auto base = compare(r32[i]->values(), r64[i]->values());
    const double limit = 2 * base.rel_l2 + floor_for(outs[i]->get_data_type());
    const bool ok = !err.has_nan && err.rel_l2 <= limit;
    std::printf("[cudnn] %-44s %-8s %-40s rel_l2 %.2e (fp32 reference %.2e, limit %.2e) max_abs %.2e %s\n",
                c.name.c_str(), outs[i]->get_name().c_str(), r.plan.c_str(), err.rel_l2, base.rel_l2, limit,
                err.max_abs, ok ? "ok" : (err.has_nan ? "NaN/unwritten MISMATCH" : "MISMATCH"));
    EXPECT_FALSE(err.has_nan) << outs[i]->get_name() << ": NaN or unwritten elements where the reference has values";
    EXPECT_LE(err.rel_l2, limit) << outs[i]->get_name();
  }
}

inline void check_case(CudnnCase& c) {
  SCOPED_TRACE(c.name);
  CudnnRun r;
  std::string message;
  bool declined = false;
  if (!run_cudnn(c, r, message, declined)) {
    if (!c.acceptable_decline.empty() && message.find(c.acceptable_decline) != std::string::npos) {
      std::printf("[cudnn] %-44s declined as expected: %s\n", c.name.c_str(), message.c_str());
      return;
    }
    ADD_FAILURE() << (declined ? "declined: " : "failed: ") << message;
    std::printf("[cudnn] %-44s FAILED %s\n", c.name.c_str(), message.c_str());
    return;
  }
  check_outputs(c, r);
}

}  // namespace frost::test
