// Device buffers for GPU tests: a HostTensor mirrored on the device.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

#include "test_util.h"

namespace frost::test {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

struct DeviceTensor {
  HostTensor host;
  void* dev = nullptr;
  void* allocation = nullptr;  // dev is `shift` bytes into it

  // shift: bytes past the allocation's (256-byte aligned) start, for tensors whose base is less aligned.
  explicit DeviceTensor(const TensorPtr& t, size_t shift = 0) : host(t) {
    if (cudaMalloc(&allocation, host.bytes.size() + shift) == cudaSuccess) dev = static_cast<char*>(allocation) + shift;
  }
  ~DeviceTensor() { cudaFree(allocation); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  void upload() { cudaMemcpy(dev, host.bytes.data(), host.bytes.size(), cudaMemcpyHostToDevice); }
  void download() { cudaMemcpy(host.bytes.data(), dev, host.bytes.size(), cudaMemcpyDeviceToHost); }
};

// The caller's workspace of a built graph on the device (null when the plan needs none), freed with it.
struct DeviceWorkspace {
  void* ptr = nullptr;
  bool ok = true;  // false: the size query or the allocation failed
  explicit DeviceWorkspace(const graph::Graph& g) {
    int64_t bytes = 0;
    ok = g.get_workspace_size(bytes).is_good() &&
         (bytes == 0 || cudaMalloc(&ptr, static_cast<size_t>(bytes)) == cudaSuccess);
  }
  ~DeviceWorkspace() { cudaFree(ptr); }
  DeviceWorkspace(const DeviceWorkspace&) = delete;
  DeviceWorkspace& operator=(const DeviceWorkspace&) = delete;
};

// The device output `out` of tensor `y` in graph `g`, downloaded, against the reference run of `g` on `host_pack`
// (the inputs' host copies): every element written, and an error within 2x that of the fp32 reference against
// the fp64 one (plus 2e-3). Call through ASSERT_NO_FATAL_FAILURE or EXPECT_NO_FATAL_FAILURE.
inline void expect_within_reference_error(graph::Graph& g, const TensorPtr& y,
                                          std::unordered_map<int64_t, void*>& host_pack, DeviceTensor& out) {
  out.download();
  HostTensor r64(y), r32(y);
  host_pack[y->get_uid()] = r64.data();
  ASSERT_TRUE(detail::reference_execute(g.state(), host_pack, detail::Precision::F64).is_good());
  host_pack[y->get_uid()] = r32.data();
  ASSERT_TRUE(detail::reference_execute(g.state(), host_pack, detail::Precision::F32).is_good());
  const auto got = out.host.values();
  for (double v : got) ASSERT_FALSE(std::isnan(v)) << "an output element was not written";
  const auto err = compare(got, r64.values());
  const auto base = compare(r32.values(), r64.values());
  EXPECT_LE(err.rel_l2, 2 * base.rel_l2 + 2e-3) << "frost " << err.rel_l2 << " straightforward " << base.rel_l2;
}

inline bool have_sm90() {
  if (cuda_device_count() == 0) return false;
  cudaDeviceProp p{};
  return cudaGetDeviceProperties(&p, 0) == cudaSuccess && p.major == 9 && p.minor == 0;
}

// Builds `g` for the handle's device with heuristics mode A and checks that `engine` serves it.
// Call through ASSERT_NO_FATAL_FAILURE so a failed build stops the test.
inline void build_on(graph::Graph& g, const Handle& h, const std::string& engine) {
  const error_t e = g.build(h, {HeurMode_t::A});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::string plan;
  g.get_plan_name(plan);
  ASSERT_EQ(plan.rfind(engine, 0), 0u) << plan;
}

// Builds `g` as engine `engine_id`'s plan with `knobs` (no heuristics). Call through ASSERT_NO_FATAL_FAILURE.
inline void build_with_knobs(graph::Graph& g, const Handle& h, int64_t engine_id, const graph::KnobMap& knobs) {
  ASSERT_TRUE(g.validate().is_good());
  ASSERT_TRUE(g.build_operation_graph(h).is_good());
  ASSERT_TRUE(g.create_execution_plan(engine_id, knobs).is_good());
  const error_t e = g.build_plans(h);
  ASSERT_TRUE(e.is_good()) << e.get_message();
}

// Captures `execute` (one call on the handle's stream: a fresh non-blocking stream, the handle's own restored at
// the end) into a CUDA graph and replays it `rounds` times: before each replay `refill(round)` writes new input
// contents and poisons the outputs, after it `check(round)` compares them with the reference. So the captured
// call must not allocate or sync (capture fails), and the replays must read the buffers, not baked-in values.
// Call through ASSERT_NO_FATAL_FAILURE.
inline void capture_and_replay(Handle& h, const std::function<error_t()>& execute, int rounds,
                               const std::function<void(int)>& refill, const std::function<void(int)>& check) {
  void* const previous = h.stream();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  h.set_stream(stream);
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const error_t e = execute();
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  h.set_stream(previous);
  ASSERT_TRUE(e.is_good()) << "execute under capture: " << e.get_message();
  ASSERT_EQ(end, cudaSuccess) << cudaGetErrorString(end);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("replay " + std::to_string(round));
    refill(round);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    check(round);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

#define REQUIRE_SM90() \
  if (!::frost::test::have_sm90()) GTEST_SKIP() << "needs an sm_90 GPU"

}  // namespace frost::test
