// Small device helpers of the attention backward: accumulator layout views, warpgroup gemm issue, named barriers,
// bulk (non-tensor) copies and reduce-adds, and the ordering primitives of the deterministic mode.
#pragma once
#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

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

// The A fragment of a register-sourced wgmma over a 64x16 k-block is ((2, 2, 2), MMA_M, MMA_K): a k pair, the row
// 8 below, the k block 8 to the right; those are the accumulator values of two neighbouring 8-column blocks, so an
// accumulator converted to 16 bits serves as A (its N becoming K) without moving data.
template <class AccLayout>
__device__ __forceinline__ constexpr auto acc_as_a_operand(AccLayout const& acc) {
  auto v = get<0>(acc);
  auto cols = logical_divide(get<2>(v), Layout<_2>{});
  return make_layout(make_layout(get<0>(v), get<1>(v), get<0>(cols)), get<1>(acc),
                     coalesce(make_layout(get<1>(cols), get<2>(acc))));
}

// fp32 fragment -> 16-bit fragment with the same storage order.
template <class TensorF, class TensorH>
__device__ __forceinline__ void convert_fragment(TensorF const& f, TensorH& h) {
  using To = typename TensorH::value_type;
  constexpr int N = decltype(size(f))::value;
  static_assert(N % 2 == 0);
  cutlass::NumericArrayConverter<To, float, N> conv;
  *reinterpret_cast<cutlass::Array<To, N>*>(h.data()) =
      conv(*reinterpret_cast<cutlass::Array<float, N> const*>(f.data()));
}

// One warpgroup-wide wgmma over the whole K extent of the fragments; kWait < 0 leaves it in flight.
template <bool kZeroInit, int kWait, bool kAInRegs, class TiledMma, class TA, class TB, class TC>
__device__ __forceinline__ void wg_gemm(TiledMma& mma, TA&& a, TB const& b, TC& c) {
  if constexpr (kAInRegs) warpgroup_fence_operand(a);
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  if constexpr (kWait >= 0) warpgroup_wait<kWait>();
  warpgroup_fence_operand(c);
  if constexpr (kAInRegs) warpgroup_fence_operand(a);
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
