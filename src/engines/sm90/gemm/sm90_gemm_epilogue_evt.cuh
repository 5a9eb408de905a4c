// The fused epilogue shared by every dense instantiation, as a CUTLASS epilogue visitor tree:
//
//   s   = alpha * descale_a * descale_b          (scalar broadcast, device pointers or values)
//   z   = clamp(act(s * acc + bias[n] + beta * C))
//   amax = max |z|                               (atomic, skipped when the pointer is null)
//   D   = cvt(z * scale_d)
//
// One tree for all dtypes keeps the instantiation count at one per (dtype, layout, tile) while
// the activation, clamp, bias and residual stay runtime choices: the few extra FLOPs per output
// element are noise next to the 2*K FLOPs of the mainloop.
#pragma once

#include <cmath>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"
#include "sm90_gemm_scaled_acc.cuh"

namespace frost::sm90::gemm_detail {

// Matches GemmAct's numbering; kept as an int so the device code needs nothing from the host header.
enum ActCode : int { kActNone = 0, kActRelu, kActGelu, kActGeluTanh, kActSilu, kActSigmoid };

// Why the activation code looks like this: CUTLASS unrolls the epilogue over every accumulator a
// thread holds (128 per tile at 128x256), so per-element code is replicated 128 times. It is kept
// short and branches only forward over small warp-uniform blocks: one sigmoid form serves silu,
// sigmoid and gelu_tanh (x * sigmoid(k1*x + k3*x^3)), and GELU's erf uses an exp-based rational
// approximation (|error| < 1.5e-7, Abramowitz & Stegun 7.1.26) instead of the long erff.
struct FrostActCoef {
  int kind = 0;       // 0 none, 1 relu, 2 sigmoid form, 3 gelu (erf)
  int mul_x = 1;      // output x * g (silu, gelu_tanh, gelu) or g alone (sigmoid)
  float k1 = 1.f, k3 = 0.f;
};

inline FrostActCoef act_coef(int act) {
  FrostActCoef c;
  switch (act) {
    case kActRelu: c.kind = 1; break;
    case kActGelu: c.kind = 3; break;
    case kActGeluTanh: c.kind = 2; c.k1 = 1.5957691216057308f; c.k3 = 0.0713548162726009f; break;  // 2*sqrt(2/pi)*{1, 0.044715}
    case kActSilu: c.kind = 2; break;
    case kActSigmoid: c.kind = 2; c.mul_x = 0; break;
    default: break;
  }
  return c;
}

CUTLASS_DEVICE float apply_act(FrostActCoef const& c, float x) {
  float g = 1.f;
  if (c.kind == 1) g = x > 0.f ? 1.f : 0.f;
  if (c.kind == 2) g = __frcp_rn(1.f + __expf(-x * fmaf(c.k3, x * x, c.k1)));
  if (c.kind == 3) {  // Phi(x) = 0.5 * erfc(-x / sqrt(2))
    float z = fabsf(x) * 0.70710678118654752f;
    float t = __frcp_rn(fmaf(0.3275911f, z, 1.f));
    float poly = t * fmaf(t, fmaf(t, fmaf(t, fmaf(t, 1.061405429f, -1.453152027f), 1.421413741f), -0.284496736f),
                          0.254829592f);
    float half_erfc = 0.5f * poly * __expf(-z * z);
    g = x >= 0.f ? 1.f - half_erfc : half_erfc;
  }
  return c.mul_x ? x * g : g;
}

// Compute node body: inputs (s, acc, bias, C) already converted to float by Sm90Compute.
struct FrostEpiArgs {
  float beta = 0.f;
  FrostActCoef act{};
  int use_c = 0;  // the C fragment is garbage when C is not loaded: never multiply it by 0
  float clamp_min = -INFINITY;
  float clamp_max = INFINITY;
};

// Sm90Compute looks for Arguments on the scalar instantiation (ComputeFn<float>) and calls the
// fragment instantiation (ComputeFn<Array<float, N>>) with the params appended.
template <class T>
struct FrostEpiFn {
  using Arguments = FrostEpiArgs;
};

template <int N>
struct FrostEpiFn<cutlass::Array<float, N>> {
  using Arguments = FrostEpiArgs;
  CUTLASS_DEVICE cutlass::Array<float, N> operator()(cutlass::Array<float, N> const& s, cutlass::Array<float, N> const& acc,
                                                     cutlass::Array<float, N> const& bias,
                                                     cutlass::Array<float, N> const& c, Arguments const& p) const {
    cutlass::Array<float, N> z;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) {
      float v = fmaf(s[i], acc[i], bias[i]);
      v = p.use_c ? fmaf(p.beta, c[i], v) : v;
      v = apply_act(p.act, v);
      z[i] = fminf(fmaxf(v, p.clamp_min), p.clamp_max);
    }
    return z;
  }
};

// Source (C) fetch whose load is a runtime choice: CUTLASS's Sm90SrcFetch loads C whenever its
// element type is non-void, which would read a whole extra matrix for the common beta == 0 case.
struct FrostSrcFetch {
  struct SharedStorage {};
  struct Arguments {
    int load_c = 0;
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& a, void*) { return a; }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const&) { return true; }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) { return 0; }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  CUTLASS_HOST_DEVICE FrostSrcFetch() {}
  CUTLASS_HOST_DEVICE FrostSrcFetch(Params const& p, SharedStorage const&) : params(p) {}
  Params params;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return params.load_c != 0; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return params.load_c != 0; }

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(cutlass::epilogue::fusion::ProducerLoadArgs<Args...> const&) {
    return cutlass::epilogue::fusion::EmptyProducerLoadCallbacks{};
  }

  template <class SrcTensor>
  struct ConsumerStoreCallbacks : cutlass::epilogue::fusion::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(SrcTensor const& t) : tCrC(t) {}
    SrcTensor const& tCrC;
    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<typename SrcTensor::value_type, FragmentSize> visit(
        cutlass::Array<ElementAccumulator, FragmentSize> const&, int epi_v, int, int) {
      return cute::recast<cutlass::Array<typename SrcTensor::value_type, FragmentSize>>(tCrC)(epi_v);
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(cutlass::epilogue::fusion::ConsumerStoreArgs<Args...> const& args) {
    return ConsumerStoreCallbacks<cute::remove_cvref_t<decltype(args.tCrC)>>(args.tCrC);
  }
};

template <class TileShape, class ElementD, class ElementBias>
using FrostEpilogueTree = cutlass::epilogue::fusion::Sm90EVT<
    // D = cvt(z * scale_d)
    cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, ElementD, float, cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90EVT<
        // amax = max |z| (no-op on a null pointer)
        cutlass::epilogue::fusion::Sm90ScalarReduction<cutlass::epilogue::fusion::detail::amax,
                                                       cutlass::atomic_maximum, float, float,
                                                       cutlass::FloatRoundStyle::round_to_nearest>,
        cutlass::epilogue::fusion::Sm90EVT<
            cutlass::epilogue::fusion::Sm90Compute<FrostEpiFn, float, float, cutlass::FloatRoundStyle::round_to_nearest>,
            // s = alpha * descale_a * descale_b
            cutlass::epilogue::fusion::Sm90ScalarBroadcast<float, cute::Stride<cute::_0, cute::_0, cute::_0>, 3>,
            cutlass::epilogue::fusion::Sm90AccFetch,
            // bias[n]: alignment 1 so an n that is not a multiple of the vector width never reads past the end
            cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, ElementBias, float,
                                                        cute::Stride<cute::_0, cute::_1, cute::_0>, 1>,
            FrostSrcFetch>>,
    cutlass::epilogue::fusion::Sm90ScalarBroadcast<float>>;

// Fills the tree's nested arguments (children first, node last, as Sm90EVT lays them out).
template <class Args, class ElementBias>
void fill_epilogue_args(Args& t, float alpha, const float* descale_a, const float* descale_b, const void* bias, float beta,
                        bool use_c, int act, float clamp_min, float clamp_max, const float* scale_d, float* amax) {
  // Sm90VisitorImplBase names up to four ops op_0..op_3 and holds five or more in a cute::tuple.
  auto& amax_evt = t.op_0;
  auto& scale_d_args = t.op_1;
  auto& z_evt = amax_evt.op_0;
  auto& amax_args = amax_evt.op_1;
  auto& s_args = cute::get<0>(z_evt);
  auto& bias_args = cute::get<2>(z_evt);
  auto& src_args = cute::get<3>(z_evt);
  auto& fn_args = cute::get<4>(z_evt);

  set_alpha_and_descales(s_args, alpha, descale_a, descale_b);
  bias_args.ptr_row = static_cast<const ElementBias*>(bias);
  bias_args.null_default = ElementBias(0);
  src_args.load_c = use_c ? 1 : 0;
  fn_args.beta = beta;
  fn_args.act = act_coef(act);
  fn_args.use_c = use_c ? 1 : 0;
  fn_args.clamp_min = clamp_min;
  fn_args.clamp_max = clamp_max;
  amax_args.ptr_scalar = amax;
  amax_args.reduction_identity = 0.f;
  scale_d_args.scalars[0] = 1.f;
  scale_d_args.scalar_ptrs[0] = scale_d;
}

}  // namespace frost::sm90::gemm_detail
