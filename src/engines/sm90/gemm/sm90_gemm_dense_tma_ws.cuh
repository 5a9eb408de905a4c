// Dense (batched) GEMM on CUTLASS's sm90 TMA warp-specialized persistent kernels with the frost
// epilogue tree. One template, instantiated by the short list under inst/.
//
// CUTLASS's operand convention: A is (M,K,L), B is (N,K,L), D is (M,N,L). frost's B is [k][n], so
// a row-major frost B (n contiguous) is CUTLASS's "N-major" B (layout tag RowMajor) and a frost B
// with k contiguous (a W[n][k] weight) is CUTLASS's K-major B (layout tag ColumnMajor).
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "sm90_gemm.h"
#include "sm90_gemm_epilogue_evt.cuh"
#include "sm90_gemm_device_facts.h"

namespace frost::sm90::gemm_detail {

using namespace cute;

// Bias follows D, except that an FP8 output takes a BF16 bias (an FP8 bias would lose the bias).
template <class ElementD>
using BiasElement = cute::conditional_t<(cutlass::sizeof_bits_v<ElementD> == 8), cutlass::bfloat16_t, ElementD>;

template <class ElementA_, class LayoutA_, class ElementB_, class LayoutB_, class ElementD_, class TileShape_,
          class ClusterShape_, class MainloopSchedule_, class EpilogueSchedule_>
struct DenseGemm {
  using ElementA = ElementA_;
  using ElementB = ElementB_;
  using ElementD = ElementD_;
  using TileShape = TileShape_;
  using ClusterShape = ClusterShape_;
  using LayoutD = cutlass::layout::RowMajor;
  // TMA moves 16-byte rows: the contiguous extent and every other stride must be 16-byte multiples.
  static constexpr int kAlignA = 128 / cutlass::sizeof_bits_v<ElementA>;
  static constexpr int kAlignB = 128 / cutlass::sizeof_bits_v<ElementB>;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits_v<ElementD>;

  using Fusion = FrostEpilogueTree<TileShape, ElementD, BiasElement<ElementD>>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementD, LayoutD, kAlignD, ElementD, LayoutD,
      kAlignD, EpilogueSchedule_, Fusion>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA_, kAlignA, ElementB, LayoutB_, kAlignB,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule_>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// Sets the dynamic modes of a rank-3 CUTLASS stride; static modes (the unit stride) stay as typed.
template <class Stride>
Stride make_stride3(int64_t s0, int64_t s1, int64_t s2) {
  Stride st{};
  if constexpr (!cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<0>(st))>>) cute::get<0>(st) = s0;
  if constexpr (!cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<1>(st))>>) cute::get<1>(st) = s1;
  if constexpr (!cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<2>(st))>>) cute::get<2>(st) = s2;
  return st;
}

inline cudaError_t status_to_cuda(cutlass::Status s) {
  if (s == cutlass::Status::kSuccess) return cudaSuccess;
  if (s == cutlass::Status::kErrorInternal) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? cudaErrorUnknown : e;
  }
  return cudaErrorNotSupported;
}

template <class G>
typename G::Kernel::Arguments make_dense_args(const GemmParams& p, const GemmConfig& cfg) {
  using Kernel = typename G::Kernel;
  using StrideA = typename Kernel::StrideA;
  using StrideB = typename Kernel::StrideB;
  using StrideC = typename Kernel::StrideC;
  using StrideD = typename Kernel::StrideD;
  typename Kernel::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), static_cast<int>(p.batch)};
  args.mainloop.ptr_A = static_cast<const typename G::ElementA*>(p.a);
  args.mainloop.dA = make_stride3<StrideA>(p.a_stride_m, p.a_stride_k, p.a_stride_batch);
  args.mainloop.ptr_B = static_cast<const typename G::ElementB*>(p.b);
  args.mainloop.dB = make_stride3<StrideB>(p.b_stride_n, p.b_stride_k, p.b_stride_batch);
  const bool use_c = p.c != nullptr && p.beta != 0.f;
  fill_epilogue_args<decltype(args.epilogue.thread), BiasElement<typename G::ElementD>>(
      args.epilogue.thread, p.alpha, p.descale_a, p.descale_b, p.bias, p.beta, use_c, static_cast<int>(p.act),
      p.clamp_min, p.clamp_max, p.scale_d, p.amax);
  // Without C the collective still builds a TMA descriptor for it: point it at D (same type and
  // shape); with load_c == 0 it is never read.
  args.epilogue.ptr_C = static_cast<const typename G::ElementD*>(use_c ? p.c : p.d);
  args.epilogue.dC = make_stride3<StrideC>(p.d_stride_m, p.d_stride_n, p.d_stride_batch);
  args.epilogue.ptr_D = static_cast<typename G::ElementD*>(p.d);
  args.epilogue.dD = make_stride3<StrideD>(p.d_stride_m, p.d_stride_n, p.d_stride_batch);
  args.hw_info.device_id = current_device();
  args.hw_info.sm_count = sm_count(args.hw_info.device_id);
  // Rasterization swizzle: groups of tiles walk the same A rows / B columns while they sit in L2.
  args.scheduler.max_swizzle_size = cfg.swizzle > 0 ? cfg.swizzle : 1;
  return args;
}

template <class G>
size_t dense_workspace(const GemmParams& p, const GemmConfig& cfg) {
  auto args = make_dense_args<G>(p, cfg);
  return G::Adapter::get_workspace_size(args);
}

template <class G>
cudaError_t dense_run(const GemmParams& p, const GemmConfig& cfg, void* workspace, cudaStream_t stream) {
  auto args = make_dense_args<G>(p, cfg);
  typename G::Adapter op;
  cutlass::Status st = op.initialize(args, workspace, stream);
  if (st != cutlass::Status::kSuccess) return status_to_cuda(st);
  st = op.run(stream);
  if (st != cutlass::Status::kSuccess) return status_to_cuda(st);
  return cudaGetLastError();
}

}  // namespace frost::sm90::gemm_detail

// One line per instantiation in inst/*.cu: defines the two entry points the registry names.
#define FROST_SM90_GEMM_DENSE_INSTANCE(NAME, ...)                                                           \
  namespace frost::sm90::gemm_detail {                                                                      \
  using NAME##_t = DenseGemm<__VA_ARGS__>;                                                                 \
  size_t NAME##_workspace(const GemmParams& p, const GemmConfig& c) { return dense_workspace<NAME##_t>(p, c); } \
  cudaError_t NAME##_run(const GemmParams& p, const GemmConfig& c, void* w, cudaStream_t s) {             \
    return dense_run<NAME##_t>(p, c, w, s);                                                                 \
  }                                                                                                         \
  }
