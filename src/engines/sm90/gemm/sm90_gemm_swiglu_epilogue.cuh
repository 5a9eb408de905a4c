// Fused SwiGLU: one GEMM over gate/up columns interleaved in blocks of kSwigluInterleave (8),
// whose epilogue computes H = silu(gate) * up from the accumulator registers.
//
// Why blocks of 8: in the wgmma accumulator layout each thread holds, per 64-row slab, rows
// (r, r+8) and columns 8*j + 2*(lane%4) + {0,1} for every 8-column group j. With gate in even
// groups and up in odd groups, a thread owns both operands of every output it computes: no shuffle.
//
// The outputs go through shared memory: each thread's adjacent pair as one 4-byte word into the tile's
// H block, then the block leaves as whole 16-byte row chunks. Storing the 4-byte pairs straight to
// global memory (8 rows x 16 bytes per warp instruction) cost the gate/up GEMM of the T8192 H4096
// F14336 MLP 3.4 % against the same kernel with no stores; the plain GEMM's staged epilogue ~1 %.
// CUTLASS's Sm90TmaWarpSpecializedAdapter supplies the (empty) load/store pipeline hooks and hands
// the epilogue its SharedStorage, carved out of the mainloop's stages.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/numeric_conversion.h"

#include "sm90_gemm.h"
#include "sm90_gemm_device_facts.h"

namespace frost::sm90::gemm_detail {

using namespace cute;

template <class ElementD_, class TileShape_>
class FrostSwigluEpilogue {
  static constexpr int kTileM = cute::size<0>(TileShape_{});
  static constexpr int kOutCols = cute::size<1>(TileShape_{}) / 2;  // H columns per tile
  static_assert(sizeof(ElementD_) == 2, "16-bit H: 8 outputs per 16-byte chunk");
  static constexpr int kChunkElems = 8;
  // Rows padded by one chunk: the 8 rows of a warp's 4-byte writes then fall in distinct banks.
  static constexpr int kRowStride = kOutCols + kChunkElems;

 public:
  using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  using ElementOutput = ElementD_;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementC = void;
  using ElementD = ElementD_;
  using StrideC = cute::Stride<int64_t, cute::_1, int64_t>;
  using StrideD = cute::Stride<int64_t, cute::_1, int64_t>;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  using ThreadEpilogueOp = void;  // GemmUniversalAdapter names it; nothing here is a thread-level op

  struct SharedStorage {
    alignas(128) ElementD_ h[kTileM * kRowStride];
  };
  using TensorStorage = SharedStorage;

  struct Arguments {
    ElementD* ptr_h = nullptr;
    int64_t ldh = 0;  // elements between rows of H
    float alpha = 1.f;
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& a, void*) { return a; }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) { return 0; }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const&) { return true; }

  CUTLASS_HOST_DEVICE FrostSwigluEpilogue(Params const& p, SharedStorage const& = SharedStorage()) : params(p) {}
  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const& acc,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char* smem) {
    constexpr int I = kSwigluInterleave;
    static_assert(I == 8, "the register pairing below relies on 8-column accumulator groups");
    static_assert(size<1>(BlockShapeMNK{}) % (2 * I) == 0, "tile N must hold whole gate/up block pairs");
    const int M = get<0>(problem_shape_mnkl);
    const int N2 = get<1>(problem_shape_mnkl);  // 2f
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;

    // Coordinates of every accumulator this thread holds, within the tile.
    Tensor cD = make_identity_tensor(take<0, 2>(blk_shape_MNK));
    auto thr_mma = tiled_mma.get_thread_slice(thread_idx);
    Tensor tCcD = thr_mma.partition_C(cD);  // ((2, 2, N/8), MMA_M, MMA_N)
    static_assert(rank<0>(FrgLayout{}) == 3, "expects the wgmma accumulator fragment ((2,2,N/8),M,N)");
    static_assert(size<0, 0>(FrgLayout{}) == 2 && size<0, 1>(FrgLayout{}) == 2, "expects column pairs x row halves");
    static_assert(size<0, 2>(FrgLayout{}) % 2 == 0, "8-column groups must come in gate/up pairs");
    constexpr int kGroups = size<0, 2>(FrgLayout{});
    // 128 threads own a tile in ping-pong (the two warpgroups' epilogues take turns), 256 in cooperative.
    constexpr int kThreads = size(TiledMma{});
    const auto barrier_id = static_cast<uint32_t>(cutlass::arch::ReservedNamedBarriers::EpilogueBarrier);
    ElementD* sh = reinterpret_cast<ElementD*>(smem);
    // The previous tile's reads of the block (cooperative: by these same threads) are done.
    cutlass::arch::NamedBarrier::sync(kThreads, barrier_id);

    cutlass::NumericArrayConverter<ElementD, float, 2> cvt;
    const float alpha = params.alpha;
    CUTLASS_PRAGMA_UNROLL
    for (int mm = 0; mm < size<1>(acc); ++mm) {
      CUTLASS_PRAGMA_UNROLL
      for (int nn = 0; nn < size<2>(acc); ++nn) {
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < 2; ++r) {
          CUTLASS_PRAGMA_UNROLL
          for (int q = 0; q < kGroups / 2; ++q) {
            auto crd = tCcD(make_coord(make_coord(0, r, 2 * q), mm, nn));
            const int row = get<0>(crd), col = get<1>(crd);
            cutlass::Array<float, 2> h;
            CUTLASS_PRAGMA_UNROLL
            for (int c = 0; c < 2; ++c) {
              float g = alpha * acc(make_coord(make_coord(c, r, 2 * q), mm, nn));
              float u = alpha * acc(make_coord(make_coord(c, r, 2 * q + 1), mm, nn));
              // silu(g) * u; the fast divide returns 0 once exp(-g) passes 2^126, silu's limit there.
              h[c] = __fdividef(g, 1.f + __expf(-g)) * u;
            }
            // Output column: block col/16 of 8 outputs, lane position col%8 (even, pairs stay together).
            const int out_col = (col / (2 * I)) * I + (col % I);
            *reinterpret_cast<cutlass::Array<ElementD, 2>*>(sh + row * kRowStride + out_col) = cvt(h);
          }
        }
      }
    }
    cutlass::arch::NamedBarrier::sync(kThreads, barrier_id);
    // Whole 16-byte chunks, consecutive threads along a row. f is a multiple of 8: no partial chunk.
    constexpr int kChunksPerRow = kOutCols / kChunkElems;
    const int m0 = m_coord * kTileM, f = N2 / 2;
    const int64_t c0 = static_cast<int64_t>(n_coord) * kOutCols;
    CUTLASS_PRAGMA_UNROLL
    for (int c = thread_idx; c < kTileM * kChunksPerRow; c += kThreads) {
      const int r = c / kChunksPerRow, chunk = c % kChunksPerRow;
      const int64_t col = c0 + chunk * kChunkElems;
      if (m0 + r >= M || col >= f) continue;
      *reinterpret_cast<uint4*>(params.ptr_h + (m0 + r) * params.ldh + col) =
          *reinterpret_cast<const uint4*>(sh + r * kRowStride + chunk * kChunkElems);
    }
  }

 private:
  Params params;
};

// MainloopSchedule_: cooperative (both consumer warpgroups on one tile) or ping-pong (one tile each, the
// epilogue of one under the other's mainloop).
template <class ElementA_, class LayoutA_, class ElementB_, class LayoutB_, class ElementD_, class TileShape_,
          class ClusterShape_, class MainloopSchedule_>
struct SwigluGemm {
  using ElementA = ElementA_;
  using ElementB = ElementB_;
  using ElementD = ElementD_;
  static constexpr int kAlignA = 128 / cutlass::sizeof_bits_v<ElementA>;
  static constexpr int kAlignB = 128 / cutlass::sizeof_bits_v<ElementB>;
  using CollectiveEpilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<
      FrostSwigluEpilogue<ElementD, TileShape_>>;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA_, kAlignA, ElementB, LayoutB_, kAlignB,
      float, TileShape_, ClusterShape_,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::TensorStorage))>,
      MainloopSchedule_>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <class Stride>
Stride swiglu_stride3(int64_t s0, int64_t s1) {
  Stride st{};
  if constexpr (!cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<0>(st))>>) cute::get<0>(st) = s0;
  if constexpr (!cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<1>(st))>>) cute::get<1>(st) = s1;
  if constexpr (!cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<2>(st))>>) cute::get<2>(st) = s0 * 16;
  return st;
}

template <class G>
typename G::Kernel::Arguments make_swiglu_args(const SwigluParams& p, const GemmConfig& cfg) {
  using Kernel = typename G::Kernel;
  typename Kernel::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {static_cast<int>(p.m), static_cast<int>(2 * p.f), static_cast<int>(p.k), 1};
  args.mainloop.ptr_A = static_cast<const typename G::ElementA*>(p.a);
  args.mainloop.dA = swiglu_stride3<typename Kernel::StrideA>(p.a_stride_m, p.a_stride_k);
  args.mainloop.ptr_B = static_cast<const typename G::ElementB*>(p.w);
  args.mainloop.dB = swiglu_stride3<typename Kernel::StrideB>(p.w_stride_n, p.w_stride_k);
  args.epilogue.ptr_h = static_cast<typename G::ElementD*>(p.h);
  args.epilogue.ldh = p.h_stride_m;
  args.epilogue.alpha = p.alpha;
  args.hw_info.device_id = current_device();
  args.hw_info.sm_count = sm_count(args.hw_info.device_id);
  args.scheduler.max_swizzle_size = cfg.swizzle > 0 ? cfg.swizzle : 1;
  return args;
}

template <class G>
size_t swiglu_workspace(const SwigluParams& p, const GemmConfig& cfg) {
  return G::Adapter::get_workspace_size(make_swiglu_args<G>(p, cfg));
}

template <class G>
cudaError_t swiglu_run(const SwigluParams& p, const GemmConfig& cfg, void* workspace, cudaStream_t stream) {
  auto args = make_swiglu_args<G>(p, cfg);
  typename G::Adapter op;
  if (op.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
  if (op.run(stream) != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
  return cudaGetLastError();
}

}  // namespace frost::sm90::gemm_detail

#define FROST_SM90_GEMM_SWIGLU_INSTANCE(NAME, ...)                                                       \
  namespace frost::sm90::gemm_detail {                                                                   \
  using NAME##_t = SwigluGemm<__VA_ARGS__>;                                                             \
  size_t NAME##_workspace(const SwigluParams& p, const GemmConfig& c) { return swiglu_workspace<NAME##_t>(p, c); } \
  cudaError_t NAME##_run(const SwigluParams& p, const GemmConfig& c, void* w, cudaStream_t s) {         \
    return swiglu_run<NAME##_t>(p, c, w, s);                                                             \
  }                                                                                                      \
  }
