// Kernel entry of the sm90 attention forward: barrier setup, register reallocation, role split, tile loop.
#pragma once
#include "sm90_fwd_tail_split.cuh"

namespace frost::sm90::fwd {

using namespace cute;

#ifdef FROST_FWD_TIMELINE
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

// kGeneral = false: the plain kernel (dense, unpadded, no left band bound, no device scale, no sink); true: every
// feature. The host picks one per launch from the problem, so a plan's knobs stay the only choice it records.
// kPack: the plain kernel with PACK_GQA tiles (the knob picks it). kSplit: the plain kernel under SCHED_POLICY 3,
// the last wave's tiles shared along their key blocks (sm90_fwd_tail_split.h).
template <class Traits, bool kGeneral, bool kPack, bool kSplit = false>
__global__ void __launch_bounds__(Traits::kNumThreads, 1)
    sm90_sdpa_fwd_kernel(CUTE_GRID_CONSTANT FwdKernelParams<Traits> const p) {
  using Pipeline = typename Traits::Pipeline;
  using Mainloop = FwdMainloop<Traits, kGeneral, kPack>;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<typename Traits::SharedStorage*>(smem_raw);

  int const warp_idx = cutlass::canonical_warp_idx_sync();
  int const wg_idx = cutlass::canonical_warp_group_idx();
  if (warp_idx == 0 && cute::elect_one_sync()) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_o.get_tma_descriptor());
    if constexpr (kPack) prefetch_tma_descriptor(&p.tma_q_packed);
    ss.barrier_q.init(1);
    ss.barrier_v_tail.init(1);
    // One arrival per consumer warp (its last Q K^T is done), or per consumer warpgroup (its O store read Q's buffer).
    ss.barrier_o.init(Traits::kSeparateO ? Traits::kNumMmaThreads / 32 : Traits::kNumMmaWG);
    // A device scale must be positive and finite (the softmax shifts by the row max of the unscaled scores);
    // anything else turns every output into NaN rather than into a wrong number.
    float scale_log2 = p.scale_log2;
    if (kGeneral && p.scale_dev != nullptr) {
      float const s = *p.scale_dev;
      scale_log2 = s > 0.f && s < INFINITY ? s * kLog2e : __int_as_float(0x7fffffff);
    }
    ss.scale_log2 = scale_log2;
  }
  typename Pipeline::Params pp;
  pp.role = wg_idx == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = Traits::kNumMmaThreads;
  // Under a cluster the consumers release each K/V stage to both CTAs (either producer's half lands in both), and
  // each CTA's full barrier counts the bytes of the whole block.
  pp.transaction_bytes = Traits::kTmaBytesK;
  Pipeline pipe_k(ss.pipeline_k, pp, typename Traits::ClusterShape{});
  pp.transaction_bytes = Traits::kTmaBytesV;
  Pipeline pipe_v(ss.pipeline_v, pp, typename Traits::ClusterShape{});
  if constexpr (Traits::kClusterM > 1) {
    cute::cluster_arrive_relaxed();  // the partner's barriers are initialized before anything lands in them
    cute::cluster_wait();
  } else {
    __syncthreads();
  }

  if (wg_idx == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (warp_idx == 0) Mainloop::template produce<kSplit>(p, ss, pipe_k, pipe_v, threadIdx.x % 32);
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    int const mma_tid = threadIdx.x - 128;
    // The first consumer warpgroup takes the first issue turn.
    if (mma_tid / 128 == Traits::kNumMmaWG - 1) named_bar_arrive(kBarTurnBase, 2 * 128);
    uint32_t kv_reads = 0;
    typename Traits::TiledMmaPV mma1;
    bool const hand_out = hands_out_tiles<kSplit, kGeneral, kPack>(p);
    for (int iter = 0;; ++iter) {
      // Under the hand-out (SCHED_POLICY 4) the producer publishes the unit's tile with its Q barrier.
      if (hand_out) ss.barrier_q.wait(iter & 1);
      WorkUnit const u =
          hand_out ? WorkUnit{published_tile(&ss.tiles[iter & 1]), 0, 0, kWholeTile} : work_unit<kSplit>(iter, p);
      if (u.tile < 0) break;
#ifdef FROST_FWD_TIMELINE
      TimelineRecord* rec = p.timeline && mma_tid == 0 && iter < kTimelineUnits
                                ? p.timeline + blockIdx.x * kTimelineUnits + iter
                                : nullptr;
      if (rec) *rec = {globaltimer_ns(), 0, 0, u.tile, u.n_lo, u.n_hi, u.kind};
#endif
      TileInfo const t = unit_info<Traits::kBlockM, Traits::kBlockN, kGeneral, kPack, kSplit>(u, iter, p);
      Tensor tOrO = partition_fragment_C(mma1, select<0, 1>(typename Traits::TileShapePV{}));
      clear(tOrO);
      OnlineSoftmax<2, Traits::kLazyRescale> sm;
      if (!hand_out) ss.barrier_q.wait(iter & 1);  // the tile's Q, or (no key to visit) just the producer's turn
      if (t.n_hi > t.n_lo) {
        KeyRange const k = key_range<Traits::kBlockM, kPack>(t, p);
        Mainloop::template consume_tile<kSplit>(p, ss, pipe_k, pipe_v, kv_reads, k, mma_tid, tOrO, sm);
      } else if constexpr (Traits::kSeparateO) {
        if (mma_tid % 32 == 0) ss.barrier_o.arrive();  // nothing read Q: release it at once
      }
      // The epilogue recomputes the tile's view instead of keeping it in registers through the key-block loop; the
      // empty asm hides that `again` equals `iter`, so the values are not carried over. A tile without keys goes
      // through the same epilogue: zero accumulators give O = 0 and LSE = -inf (the sink with one).
      int again = iter;
      asm volatile("" : "+r"(again));
      if constexpr (kSplit) {
        WorkUnit const v = work_unit<kSplit>(again, p);
        if (v.kind == kPiece) {
          TailSplitExchange<Traits>::leave_piece(p, mma_tid, tOrO, sm);
#ifdef FROST_FWD_TIMELINE
          if (rec) rec->end = globaltimer_ns();
#endif
          // Nothing of this unit reads Q's buffer any more; with O in that buffer its store would have released it.
          if constexpr (!Traits::kSeparateO) {
            if (mma_tid % 128 == 0) ss.barrier_o.arrive();
          }
          continue;
        }
        if (v.kind == kOwner) {
          int64_t const tail_tile = v.tile - int64_t(p.split.full_waves) * gridDim.x;
          TailSplitExchange<Traits>::merge_pieces(p, tail_tile, mma_tid, tOrO, sm, p.scale_log2);
#ifdef FROST_FWD_TIMELINE
          if (rec) rec->merged = globaltimer_ns();
#endif
        }
        FwdEpilogue<Traits, kGeneral, kPack>::store(
            p, ss, tile_info<Traits::kBlockM, Traits::kBlockN, kGeneral, kPack>(v.tile, p), mma_tid, tOrO, sm);
      } else {
        FwdEpilogue<Traits, kGeneral, kPack>::store(
            p, ss,
            tile_info<Traits::kBlockM, Traits::kBlockN, kGeneral, kPack>(
                hand_out ? published_tile(&ss.tiles[again & 1]) : tile_of_wave<Traits::kClusterM>(again), p),
            mma_tid, tOrO, sm);
      }
#ifdef FROST_FWD_TIMELINE
      if (rec) rec->end = globaltimer_ns();
#endif
    }
    if constexpr (Traits::kSeparateO) {
      if (mma_tid % 128 == 0) tma_store_wait<0>();  // the last O stores must read smem before the CTA exits
    }
  }
  // The partner's consumers release their last stages into this CTA's barriers: neither CTA leaves before both
  // are done.
  if constexpr (Traits::kClusterM > 1) {
    cute::cluster_arrive();
    cute::cluster_wait();
  }
}

}  // namespace frost::sm90::fwd
