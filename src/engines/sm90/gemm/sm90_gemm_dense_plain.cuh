// Dense GEMM with CUTLASS's stock linear-combination epilogue (D = alpha * acc, no source):
// the fast path that dispatch takes when the caller asks for no bias, residual, activation,
// clamp, output scale or amax. FP8 kernels scale by alpha * descale_a * descale_b instead (the
// descales read from device memory once per CTA), so descaled FP8 GEMMs take this path too.
// Same mainloop and tile as the fused-epilogue kernels; FP8 with FP32 promotion may use the
// overlapped promotion of sm90_gemm_fp8_overlap.cuh (schedule tag Fp8OverlappedCooperative).
//
// Why a second kernel: the fused tree (sm90_gemm_epilogue_evt.cuh) measured 60 % of cuBLAS at
// 8192^3 while CUTLASS kernels with the stock epilogue on the same mainloop ran near cuBLAS
// (see NOTES.md), so plain GEMMs must not pay for the tree.
#pragma once

#include "cutlass/epilogue/fusion/operations.hpp"

#include "sm90_gemm_dense_tma_ws.cuh"
#include "sm90_gemm_fp8_overlap.cuh"
#include "sm90_gemm_scaled_acc.cuh"

namespace frost::sm90::gemm_detail {

// TileScheduler_: void for CUTLASS's persistent data-parallel scheduler, or cutlass::gemm::StreamKScheduler
// (cooperative kernels only), whose decomposition make_plain_args picks from GemmConfig::split_k.
template <class ElementA_, class LayoutA_, class ElementB_, class LayoutB_, class ElementD_, class TileShape_,
          class ClusterShape_, class MainloopSchedule_, class EpilogueSchedule_, class TileScheduler_ = void>
struct DensePlainGemm {
  using ElementA = ElementA_;
  using ElementB = ElementB_;
  using ElementD = ElementD_;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignA = 128 / cutlass::sizeof_bits_v<ElementA>;
  static constexpr int kAlignB = 128 / cutlass::sizeof_bits_v<ElementB>;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits_v<ElementD>;
  static constexpr bool kFp8 = cutlass::sizeof_bits_v<ElementA> == 8;
  using Fusion = cute::conditional_t<kFp8, ScaledAccFusion<ElementD>,
                                     cutlass::epilogue::fusion::LinearCombination<ElementD, float, void, float>>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape_, ClusterShape_,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignD, ElementD, LayoutD,
      kAlignD, EpilogueSchedule_, Fusion>::CollectiveOp;
  using BuiltMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA_, kAlignA, ElementB, LayoutB_, kAlignB,
      float, TileShape_, ClusterShape_,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename BuilderSchedule<MainloopSchedule_>::type>::CollectiveOp;
  using CollectiveMainloop = cute::conditional_t<BuilderSchedule<MainloopSchedule_>::kOverlappedFp8,
                                                 Fp8OverlappedPromotionMma<BuiltMainloop>, BuiltMainloop>;
  static constexpr bool kStreamK = cute::is_same_v<TileScheduler_, cutlass::gemm::StreamKScheduler>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, TileScheduler_>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <class G>
typename G::Kernel::Arguments make_plain_args(const GemmParams& p, const GemmConfig& cfg) {
  using Kernel = typename G::Kernel;
  typename Kernel::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), static_cast<int>(p.batch)};
  args.mainloop.ptr_A = static_cast<const typename G::ElementA*>(p.a);
  args.mainloop.dA = make_stride3<typename Kernel::StrideA>(p.a_stride_m, p.a_stride_k, p.a_stride_batch);
  args.mainloop.ptr_B = static_cast<const typename G::ElementB*>(p.b);
  args.mainloop.dB = make_stride3<typename Kernel::StrideB>(p.b_stride_n, p.b_stride_k, p.b_stride_batch);
  if constexpr (G::kFp8) {
    set_scaled_acc_args(args.epilogue.thread, p.alpha, p.descale_a, p.descale_b);
  } else {
    args.epilogue.thread.alpha = p.alpha;
    args.epilogue.thread.beta = 0.f;
  }
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = make_stride3<typename Kernel::StrideC>(p.d_stride_m, p.d_stride_n, p.d_stride_batch);
  args.epilogue.ptr_D = static_cast<typename G::ElementD*>(p.d);
  args.epilogue.dD = make_stride3<typename Kernel::StrideD>(p.d_stride_m, p.d_stride_n, p.d_stride_batch);
  args.hw_info.device_id = current_device();
  args.hw_info.sm_count = sm_count(args.hw_info.device_id);
  args.scheduler.max_swizzle_size = cfg.swizzle > 0 ? cfg.swizzle : 1;
  if constexpr (G::kStreamK) {
    // Unset: CUTLASS's heuristic splits the k-loops of the tail wave's tiles over all CTAs when that wave is
    // less than half full (8192^3 at 128x128: 4096 tiles = 31 waves of 132 and 4 tiles); stream_k 1: also when
    // it is more than half full (m8192 n4096 at 128x256: 7 waves and 100 tiles); split_k 1: data-parallel only.
    // Partial tiles are reduced in a fixed order (deterministic) through the workspace.
    using Mode = typename Kernel::TileScheduler::DecompositionMode;
    args.scheduler.decomposition_mode =
        cfg.split_k == 1 ? Mode::DataParallel : cfg.stream_k == 1 ? Mode::StreamK : Mode::Heuristic;
  }
  return args;
}

template <class G>
cudaError_t plain_run(const GemmParams& p, const GemmConfig& cfg, void* workspace, cudaStream_t stream) {
  auto args = make_plain_args<G>(p, cfg);
  typename G::Adapter op;
  cutlass::Status st = op.initialize(args, workspace, stream);
  if (st != cutlass::Status::kSuccess) return status_to_cuda(st);
  st = op.run(stream);
  if (st != cutlass::Status::kSuccess) return status_to_cuda(st);
  return cudaGetLastError();
}

}  // namespace frost::sm90::gemm_detail

#define FROST_SM90_GEMM_PLAIN_INSTANCE(NAME, ...)                                                           \
  namespace frost::sm90::gemm_detail {                                                                     \
  using NAME##_t = DensePlainGemm<__VA_ARGS__>;                                                            \
  size_t NAME##_workspace(const GemmParams& p, const GemmConfig& c) {                                      \
    return NAME##_t::Adapter::get_workspace_size(make_plain_args<NAME##_t>(p, c));                         \
  }                                                                                                        \
  cudaError_t NAME##_run(const GemmParams& p, const GemmConfig& c, void* w, cudaStream_t s) {             \
    return plain_run<NAME##_t>(p, c, w, s);                                                                \
  }                                                                                                        \
  }
