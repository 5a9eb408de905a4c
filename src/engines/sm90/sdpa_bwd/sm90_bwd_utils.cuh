// Small device helpers of the attention backward: an accumulator layout view, named barriers, bulk (non-tensor)
// copies and reduce-adds, and the ordering primitives of the deterministic mode. The wgmma fragment helpers it
// shares with the other sm90 kernels are in sm90_wgmma_fragments.cuh.
#pragma once
#include <cute/tensor.hpp>

#include "engines/sm90/common/sm90_wgmma_fragments.cuh"

namespace frost::sm90::bwd {

using namespace cute;

// A wgmma 64xN fp32 accumulator fragment has per-thread layout ((2, 2, N/8), MMA_M, MMA_N): value mode 0 walks a
// column pair, mode 1 the row 8 below, mode 2 the 8-column blocks. As (rows, cols) = ((2, MMA_M), (2, N/8, MMA_N)).
template <class AccLayout>
__device__ __forceinline__ constexpr auto acc_rowcol(AccLayout const& acc) {
  static_assert(decltype(rank<0>(acc))::value == 3, "expects a wgmma accumulator layout");
  auto v = get<0>(acc);
  return make_layout(make_layout(get<1>(v), get<1>(acc)), make_layout(get<0>(v), get<2>(v), get<2>(acc)));
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ uint32_t smem_addr(void const* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Global -> shared bulk copy completing on an mbarrier's transaction count (16-byte aligned, size multiple of 16).
__device__ __forceinline__ void bulk_load(void* smem_dst, void const* gmem_src, uint32_t bytes, uint64_t* mbar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_addr(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(smem_addr(mbar))
      : "memory");
}

// Element-wise FP32 add of a shared-memory block into global memory, in the async proxy.
__device__ __forceinline__ void bulk_reduce_add_f32(float* gmem_dst, float const* smem_src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gmem_dst),
               "r"(smem_addr(smem_src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// The bulk operations of this thread have read their shared-memory sources.
__device__ __forceinline__ void bulk_wait_read_all() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// The bulk operations of this thread have completed (their global writes performed).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Deterministic mode: spin until the counter reaches `target` (acquire), then order later async-proxy operations
// after it; and publish a completed reduce-add (async proxy) before bumping the counter (release).
__device__ __forceinline__ void wait_counter(int const* counter, int target) {
  int v;
  while (true) {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(counter) : "memory");
    if (v == target) break;
    __nanosleep(32);
  }
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
// As wait_counter, for adds from registers (the split-d kernels' dQ turns): no proxy fence is needed after it.
__device__ __forceinline__ void wait_counter_at_least(int const* counter, int target) {
  int v;
  while (true) {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(counter) : "memory");
    if (v >= target) break;
    __nanosleep(32);
  }
}
__device__ __forceinline__ void bump_counter(int* counter) {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(counter) : "memory");
}

}  // namespace frost::sm90::bwd
