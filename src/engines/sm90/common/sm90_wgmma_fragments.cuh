// Register-fragment helpers the sm90 wgmma kernels share (attention forward and backward, the GDN state pass):
// an accumulator reused as the register A operand of the next product, its conversion to 16 bits, and one
// warpgroup-wide product issued over the whole k extent.
#pragma once
#include <cutlass/numeric_conversion.h>

#include <cute/tensor.hpp>

namespace frost::sm90 {

// The A fragment of a register-sourced wgmma over a 64x16 k-block is ((2, 2, 2), MMA_M, MMA_K): a k pair, the row
// 8 below, the k block 8 to the right; those are the accumulator values of two neighbouring 8-column blocks, so an
// accumulator converted to 16 bits serves as A (its N becoming K) without moving data.
template <class AccLayout>
__device__ __forceinline__ constexpr auto acc_as_a_operand(AccLayout const& acc) {
  using namespace cute;
  auto v = get<0>(acc);
  auto cols = logical_divide(get<2>(v), Layout<_2>{});
  return make_layout(make_layout(get<0>(v), get<1>(v), get<0>(cols)), get<1>(acc),
                     coalesce(make_layout(get<1>(cols), get<2>(acc))));
}

// FP32 fragment -> 16-bit fragment with the same storage order (the layouts of both index the same slots).
template <class TensorF, class TensorH>
__device__ __forceinline__ void convert_fragment(TensorF const& f, TensorH& h) {
  using To = typename TensorH::value_type;
  constexpr int N = decltype(cute::size(f))::value;
  static_assert(N % 2 == 0);
  cutlass::NumericArrayConverter<To, float, N> conv;
  *reinterpret_cast<cutlass::Array<To, N>*>(h.data()) =
      conv(*reinterpret_cast<cutlass::Array<float, N> const*>(f.data()));
}

// One warpgroup-wide wgmma over the whole k extent of the fragments, committed as one group; kWait < 0 leaves it
// in flight. kAInRegs: A is a register fragment (fenced like the accumulator).
template <bool kZeroInit, int kWait, bool kAInRegs, class TiledMma, class TA, class TB, class TC>
__device__ __forceinline__ void wg_gemm(TiledMma& mma, TA&& a, TB const& b, TC& c) {
  using namespace cute;
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

}  // namespace frost::sm90
