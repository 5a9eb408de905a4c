// Kernel entry of the sm90 attention forward: barrier setup, register reallocation, role split, tile loop.
#pragma once
#include "sm90_fwd_epilogue_tma_store.cuh"

namespace frost::sm90::fwd {

using namespace cute;

template <class Traits>
__global__ void __launch_bounds__(Traits::kNumThreads, 1)
    sm90_sdpa_fwd_kernel(CUTE_GRID_CONSTANT FwdKernelParams<Traits> const p) {
  using Pipeline = typename Traits::Pipeline;
  using PipelineState = typename Traits::PipelineState;
  using Mainloop = FwdMainloop<Traits>;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<typename Traits::SharedStorage*>(smem_raw);

  int const warp_idx = cutlass::canonical_warp_idx_sync();
  int const wg_idx = cutlass::canonical_warp_group_idx();
  if (warp_idx == 0 && cute::elect_one_sync()) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_o.get_tma_descriptor());
    ss.barrier_q.init(1);
    ss.barrier_o.init(Traits::kSeparateO ? Traits::kNumMmaThreads / 32 : 1);  // per consumer warp, or the storer
  }
  typename Pipeline::Params pp;
  pp.transaction_bytes = Traits::kTmaBytesKV;
  pp.role = wg_idx == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = Traits::kNumMmaThreads;
  Pipeline pipe_k(ss.pipeline_k, pp, Shape<_1, _1, _1>{});
  Pipeline pipe_v(ss.pipeline_v, pp, Shape<_1, _1, _1>{});
  __syncthreads();

  if (wg_idx == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (threadIdx.x == 0) Mainloop::produce(p, ss, pipe_k, pipe_v);
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    int const mma_tid = threadIdx.x - 128;
    // The first consumer warpgroup takes the first issue turn.
    if (mma_tid / 128 == Traits::kNumMmaWG - 1) named_bar_arrive(kBarTurnBase, 2 * 128);
    PipelineState rd_k, rd_v;
    typename Traits::TiledMmaPV mma1;
    for (int iter = 0;; ++iter) {
      int const tile = tile_of_wave(iter);
      if (tile >= p.num_tiles) break;
      TileCoord const tc = decode_tile(tile, p);
      int const n_blocks = num_key_blocks<Traits::kBlockM, Traits::kBlockN>(tc.m_block, p);
      Tensor tOrO = partition_fragment_C(mma1, select<0, 1>(typename Traits::TileShapePV{}));
      clear(tOrO);
      OnlineSoftmax<2> sm(p.scale_log2);
      ss.barrier_q.wait(iter & 1);
      if (n_blocks > 0) {
        Mainloop::consume_tile(p, ss, pipe_k, pipe_v, rd_k, rd_v, tc, n_blocks, mma_tid, tOrO, sm);
      } else if constexpr (Traits::kSeparateO) {
        if (mma_tid % 32 == 0) ss.barrier_o.arrive();  // nothing read Q: release it at once
      }
      FwdEpilogue<Traits>::store(p, ss, tc, mma_tid, tOrO, sm);
    }
    if constexpr (Traits::kSeparateO) {
      if (mma_tid == 0) tma_store_wait<0>();  // the last O store must read smem before the CTA exits
    }
  }
}

}  // namespace frost::sm90::fwd
