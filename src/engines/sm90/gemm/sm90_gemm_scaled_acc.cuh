// D = cvt((alpha * descale_a * descale_b) * acc) as a CUTLASS epilogue tree, shared by the plain dense
// FP8 kernels and the grouped kernels. The scalar broadcast multiplies its three operands, a null pointer
// taking the value (1 for the descales), and reads the descales from device memory once per CTA in the
// consumer warps: unlike the ptr-array linear combination's scalars, it needs no epilogue load warp.
#pragma once

#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"

namespace frost::sm90::gemm_detail {

template <class ElementD>
using ScaledAccFusion = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, ElementD, float,
                                           cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90ScalarBroadcast<float, cute::Stride<cute::_0, cute::_0, cute::_0>, 3>,
    cutlass::epilogue::fusion::Sm90AccFetch>;

// The three operands of a scalar broadcast like ScaledAccFusion's: alpha, then the descales (a null pointer
// reads as 1).
template <class ScalarArguments>
void set_alpha_and_descales(ScalarArguments& s, float alpha, const float* descale_a, const float* descale_b) {
  s.scalars[0] = alpha;
  s.scalars[1] = 1.f;
  s.scalars[2] = 1.f;
  s.scalar_ptrs[0] = nullptr;
  s.scalar_ptrs[1] = descale_a;
  s.scalar_ptrs[2] = descale_b;
}

// ScaledAccFusion's arguments: op_0 is the scalar broadcast (Sm90EVT lays out the children first, then the node).
template <class FusionArguments>
void set_scaled_acc_args(FusionArguments& thread, float alpha, const float* descale_a, const float* descale_b) {
  set_alpha_and_descales(thread.op_0, alpha, descale_a, descale_b);
}

}  // namespace frost::sm90::gemm_detail
