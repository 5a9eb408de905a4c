// FP8 mainloop with FP32 promotion whose promotion adds run under the next k-tile's wgmmas.
//
// CUTLASS's FP8 mainloop (GmmaFP8Accumulation) accumulates each 128-deep k-tile into a temporary
// register set, then waits for every wgmma in flight (warpgroup_wait<0>) and adds the temporaries
// to the FP32 accumulators. The tensor cores sit idle during the wait and the adds: one FADD per
// accumulator per k-tile is a quarter of that k-tile's tensor-core time whatever the tile size
// (tile_k 128 at 4096 FP8 MACs per clock and SM), about the gap measured to cuBLASLt (0.77).
//
// Here two temporaries alternate: k-tile i+1's wgmmas are issued into one, then warpgroup_wait<1>
// retires only k-tile i, whose temporary is added while i+1 runs. Numerics do not change (every
// k-tile of 128 is promoted to FP32, in order). Cost: a third register set, so per consumer thread
// 3 * (tile_m / 2) * tile_n / 128 FP32 values: 192 at 128x128 with two consumer warpgroups.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"

namespace frost::sm90::gemm_detail {

// Mainloop schedule tags for the builder's cooperative FP8 mainloops (dense, and the grouped ptr-array one)
// wrapped by Fp8OverlappedPromotionMma.
struct Fp8OverlappedCooperative {};
struct Fp8OverlappedPtrArrayCooperative {};

// The schedule the builder is asked for, and whether its mainloop gets wrapped.
template <class Schedule>
struct BuilderSchedule {
  using type = Schedule;
  static constexpr bool kOverlappedFp8 = false;
};
template <>
struct BuilderSchedule<Fp8OverlappedCooperative> {
  using type = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  static constexpr bool kOverlappedFp8 = true;
};
template <>
struct BuilderSchedule<Fp8OverlappedPtrArrayCooperative> {
  using type = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  static constexpr bool kOverlappedFp8 = true;
};

// Base: CUTLASS's CollectiveMma for MainloopSm90TmaGmmaWarpSpecializedFP8 or its ptr-array form
// (MainloopSm90ArrayTmaGmmaWarpSpecializedFP8). Everything but mma() is inherited (TMA loads, pipeline,
// mma_tail, the ptr-array tensor-map updates); the kernel calls mma() on this type. Both bases share mma()'s
// signature and K_PIPE_MMAS.
template <class Base>
struct Fp8OverlappedPromotionMma : Base {
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::TensorStorage;
  using typename Base::TiledMma;
  // mma_tail() releases the last K_PIPE_MMAS stages after mma() returns; mma() below leaves one.
  static_assert(Base::K_PIPE_MMAS == 1, "mma() leaves exactly one stage for mma_tail() to release");

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& shared_tensors, Params const&) {
    using namespace cute;
    static_assert(is_rmem<FrgTensorC>::value, "accumulators must be in registers");
    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});  // (BLK_M,BLK_K,PIPE)
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});  // (BLK_N,BLK_K,PIPE)
    constexpr int kWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    const auto wg_layout = make_layout(Int<kWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    const int wg = __shfl_sync(0xffffffff, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    TiledMma tiled_mma;
    auto thr = tiled_mma.get_slice(wg_layout(wg));
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));  // smem descriptors (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));  // (MMA,MMA_N,MMA_K,PIPE)
    Tensor part0 = make_fragment_like(accum);
    Tensor part1 = make_fragment_like(accum);
    PipelineState smem_pipe_release = smem_pipe_read;
    clear(accum);
    if (k_tile_count <= 0) return;

    // One k-tile into `part`, started from zero; the batch stays in flight.
    auto issue = [&](auto& part) {
      pipeline.consumer_wait(smem_pipe_read, pipeline.consumer_try_wait(smem_pipe_read));
      const int stage = smem_pipe_read.index();
      warpgroup_fence_operand(part);
      warpgroup_arrive();
      tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
      CUTLASS_PRAGMA_UNROLL
      for (int kb = 0; kb < size<2>(tCrA); ++kb) {
        cute::gemm(tiled_mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), part);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_fence_operand(part);
      ++smem_pipe_read;
    };
    // The older batch is complete (wait<1> before): add its temporary, free its stage.
    auto promote = [&](auto& part) {
      warpgroup_fence_operand(part);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) += part(i);
      warpgroup_fence_operand(accum);
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_release;
    };

    issue(part0);
    --k_tile_count;
    CUTLASS_PRAGMA_NO_UNROLL
    while (k_tile_count > 0) {
      issue(part1);
      --k_tile_count;
      warpgroup_wait<1>();
      promote(part0);
      if (k_tile_count == 0) {
        warpgroup_wait<0>();
        warpgroup_fence_operand(part1);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(accum); ++i) accum(i) += part1(i);
        return;
      }
      issue(part0);
      --k_tile_count;
      warpgroup_wait<1>();
      promote(part1);
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(part0);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accum); ++i) accum(i) += part0(i);
  }
};

}  // namespace frost::sm90::gemm_detail
