// Mainloop of the warp-specialized attention forward: the TMA producer and the wgmma consumers.
//
// Producer (one warp; lane 0 issues): per tile with keys to visit, K of the tile's last key block, then Q (once
// the previous Q is no longer needed: loaded into registers (kQInRegs), after its last Q K^T, or after its O store
// when O reuses the buffer), then K(n-1) and V(n) interleaved down to the tile's first key block, so the consumers
// always find K(j+1) before they need V(j). K and V each cycle through a kStages-deep mbarrier pipeline.
//
// Consumers (one warpgroup per 64 query rows): the tile's key blocks are visited from the last to the first.
// Iteration j issues S(j) = Q K(j)^T and O += P(j+1) V(j+1) back to back, then runs the softmax of S(j) while the
// P V wgmma is still running (intra-warpgroup overlap). Named barriers make the warpgroups take turns issuing
// their wgmmas, so one warpgroup's softmax overlaps the other's tensor-core work (inter-warpgroup ping-pong).
#pragma once
#include "sm90_fwd_kernel_traits.cuh"
#include "sm90_fwd_softmax_online.cuh"
#include "sm90_fwd_tile_scheduler.cuh"

#include "engines/sm90/common/sm90_wgmma_fragments.cuh"

namespace frost::sm90::fwd {

using namespace cute;

// Named barrier ids (0 is __syncthreads): 1 = all consumers before O overwrites Q's buffer (and around the tail
// split's slot exchange), 2..4 = one per consumer warpgroup for the issue turn, 5..7 = one per consumer warpgroup
// for its O store.
constexpr int kBarEpilogue = 1;
constexpr int kBarTurnBase = 2;
constexpr int kBarEpilogueWG = 5;

__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Set masked scores to -inf: keys at or past the batch's length, and keys outside each row's diagonal band
// [i' - left + 1, i' + right]. kLeft: the band has a left bound (sliding window). kPack: tile row r holds position
// r % pack_rows of its query head (PACK_GQA).
template <bool kLeft, bool kPack, class TensorS, class TensorC, class Params>
__device__ __forceinline__ void apply_mask(TensorS& s, TensorC const& coord, KeyRange const& k, int col0,
                                           Params const& p) {
  CUTLASS_PRAGMA_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    // Bounds are taken relative to this thread's first column, so each element compares a compile-time column
    // offset with them (an immediate operand) instead of materializing every column index in a register; the
    // empty asm keeps the compiler from folding the offset back into each comparison.
    int const c0 = get<1>(coord(r, 0));
    int const diag = (kPack ? get<0>(coord(r, 0)) % p.pack_rows : get<0>(coord(r, 0))) + k.diag0;
    int hi = min(k.len_kv, diag + p.right + 1) - col0 - c0;  // first masked column past the band
    int lo = diag - p.left + 1 - col0 - c0;                   // first visible column
    asm("" : "+r"(hi), "+r"(lo));
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(s); ++c) {
      int const dc = get<1>(coord(r, c)) - c0;
      if (dc >= hi || (kLeft && dc < lo)) s(r, c) = -INFINITY;
    }
  }
}

// Whether this launch hands out its tiles (SCHED_POLICY 4): only the plain single-CTA kernel without the split
// compiles the hand-out, and its launch passes the counter.
template <bool kSplit, bool kGeneral, bool kPack, class Params>
__device__ __forceinline__ bool hands_out_tiles(Params const& p) {
  if constexpr (kSplit || kGeneral || kPack || Params::kClusterM > 1)
    return false;
  else
    return p.tile_counter != nullptr;
}

// The hand-out's slots are written before the producer's arrival on the Q barrier and read after the consumers' wait
// on it. CUTLASS's barrier asm carries no memory clobber, so plain accesses could move across it: these cannot.
__device__ __forceinline__ void publish_tile(int* slot, int tile) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(cute::cast_smem_ptr_to_uint(slot)), "r"(tile) : "memory");
}
__device__ __forceinline__ int published_tile(int const* slot) {
  int tile;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(tile) : "r"(cute::cast_smem_ptr_to_uint(slot)) : "memory");
  return tile;
}

// Consumer-side pipeline state of the c-th block read through a kStages-deep pipeline. The K and V pipelines are
// read in lockstep (V one block behind K inside a tile, level at tile boundaries), so the consumers keep one
// counter instead of two (index, phase) pairs next to the accumulators.
template <class PipelineState, int kStages>
__device__ __forceinline__ PipelineState read_state(uint32_t c) {
  return PipelineState(int(c % kStages), (c / kStages) & 1, c);
}

// kGeneral = false: the plain kernel (dense, unpadded, no left band bound, no device scale, no sink); the
// features it lacks cost it neither registers nor instructions. kPack (plain only): PACK_GQA tiles.
template <class Traits, bool kGeneral, bool kPack>
struct FwdMainloop {
  static_assert(!(kGeneral && kPack), "PACK_GQA runs in the plain kernel only");
  using Element = typename Traits::Element;
  using Pipeline = typename Traits::Pipeline;
  using PipelineState = typename Traits::PipelineState;
  using Params = FwdKernelParams<Traits>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;

  // ---------------------------------------------------------------- producer (warp 0 of the producer warpgroup)
  // Lane 0 issues every TMA and barrier arrival. The whole warp zeroes the rows of a V block past the batch's keys
  // when those rows may hold anything (padding rows or another sequence's tokens): P is 0 there, but 0 * NaN is
  // NaN in P V.
  template <bool kSplit>
  __device__ __forceinline__ static void produce(Params const& p, typename Traits::SharedStorage& ss,
                                                 Pipeline& pipe_k, Pipeline& pipe_v, int lane) {
    Tensor mQ = p.tma_q.get_tma_tensor(p.shape_q);
    Tensor mK = p.tma_k.get_tma_tensor(p.shape_k);
    Tensor mV = p.tma_v.get_tma_tensor(p.shape_v);
    Tensor sQ = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutV{});
    PipelineState wr_k = cutlass::make_producer_start_state<Pipeline>();
    PipelineState wr_v = cutlass::make_producer_start_state<Pipeline>();
    auto& bar_q = reinterpret_cast<uint64_t&>(ss.barrier_q);
    auto& bar_v_tail = reinterpret_cast<uint64_t&>(ss.barrier_v_tail);
    int v_tails = 0;
    bool const hand_out = hands_out_tiles<kSplit, kGeneral, kPack>(p);

    for (int iter = 0;; ++iter) {
      WorkUnit const u =
          hand_out ? WorkUnit{handed_out_tile(iter, p, lane), 0, 0, kWholeTile} : work_unit<kSplit>(iter, p);
      // Under the hand-out the consumers learn each unit's tile from slot iter % 2, written before the unit's Q
      // barrier arrives. They last read that slot in the epilogue of unit iter - 2, which ended before they released
      // the Q of unit iter - 1 (barrier_o), so it is free once that wait has passed.
      auto publish = [&](int tile) {
        if (hand_out && lane == 0) publish_tile(&ss.tiles[iter & 1], tile);
      };
      if (u.tile < 0) {
        if (hand_out) {  // the consumers wait for one more slot: the end
          if (iter > 0) ss.barrier_o.wait((iter - 1) & 1);
          publish(-1);
          if (lane == 0) ss.barrier_q.arrive();
        }
        break;
      }
      TileInfo const t = unit_info<kBlockM, kBlockN, kGeneral, kPack, kSplit>(u, iter, p);
      if (t.n_hi <= t.n_lo) {
        // No key to visit: no Q either, but barrier_q still completes a phase so that producer and consumers stay
        // in step tile by tile.
        if (iter > 0) ss.barrier_o.wait((iter - 1) & 1);
        publish(u.tile);
        if (lane == 0) ss.barrier_q.arrive();
        continue;
      }
      int const kv_head = t.head / p.h_ratio;
      // Dense tensors are addressed by batch; packed ones by token, from the batch's first token.
      auto view = [&](auto& m, DevRowStarts const& r, int head) {
        if constexpr (!kGeneral) return domain_offset(make_coord(0, _0{}), m(_, _, head, t.batch));
        return domain_offset(make_coord(tma_row0(r, t.batch), _0{}), m(_, _, head, r.kind ? 0 : t.batch));
      };
      Tensor gQ = local_tile(view(mQ, p.rows_q, t.head), select<0, 2>(typename Traits::TileShapeQK{}),
                             make_coord(t.m_block, _0{}));
      Tensor gK = local_tile(view(mK, p.rows_k, kv_head), select<1, 2>(typename Traits::TileShapeQK{}),
                             make_coord(_, _0{}));  // (kBlockN, d, blocks)
      Tensor gV = local_tile(view(mV, p.rows_v, kv_head), select<2, 1>(typename Traits::TileShapePV{}),
                             make_coord(_, _0{}));  // (kBlockN, dv, blocks)
      auto [tQg, tQs] = tma_partition(p.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
      // Under a cluster each CTA loads its slice of a K/V block into both CTAs' stage (mask: every rank).
      constexpr int kCluster = Traits::kClusterM;
      int const rank = kCluster > 1 ? int(cute::block_rank_in_cluster()) : 0;
      uint16_t const mcast = kCluster > 1 ? uint16_t((1 << kCluster) - 1) : uint16_t(0);
      auto [tKg, tKs] =
          tma_partition(p.tma_k, rank, Layout<Int<kCluster>>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
      auto [tVg, tVs] =
          tma_partition(p.tma_v, rank, Layout<Int<kCluster>>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));

      auto load_k = [&](int n) {
        pipe_k.producer_acquire(wr_k);
        if (lane == 0) copy(p.tma_k.with(*pipe_k.producer_get_barrier(wr_k), mcast), tKg(_, n), tKs(_, wr_k.index()));
        ++wr_k;
      };
      auto load_v = [&](int n) {
        int const keys = t.len_kv - n * kBlockN;  // rows of this block that hold keys (>= 1)
        if (!kGeneral || !p.kv_tail_garbage || keys >= kBlockN) {
          pipe_v.producer_acquire(wr_v);
          if (lane == 0) copy(p.tma_v.with(*pipe_v.producer_get_barrier(wr_v), mcast), tVg(_, n), tVs(_, wr_v.index()));
        } else {
          // Land the block on a private barrier, zero rows [keys, kBlockN), then complete the stage with a plain
          // arrival (release) so the consumers see the zeros.
          ss.pipeline_v.empty_barrier_[wr_v.index()].wait(wr_v.phase());
          if (lane == 0) {
            ss.barrier_v_tail.arrive_and_expect_tx(Traits::kTmaBytesV);
            copy(p.tma_v.with(bar_v_tail, 0), tVg(_, n), tVs(_, wr_v.index()));
          }
          ss.barrier_v_tail.wait(v_tails & 1);
          ++v_tails;
          Tensor sVs = sV(_, _, wr_v.index());
          constexpr int kChunks = Traits::kHeadDimV / 8;  // 16-byte pieces per row; swizzling keeps each whole
          for (int i = keys * kChunks + lane; i < kBlockN * kChunks; i += 32)
            *reinterpret_cast<uint4*>(&sVs(i / kChunks, i % kChunks * 8)) = make_uint4(0, 0, 0, 0);
          cutlass::arch::fence_view_async_shared();  // generic-proxy writes, read next by wgmma
          __threadfence_block();
          __syncwarp();
          if (lane == 0) ss.pipeline_v.full_barrier_[wr_v.index()].arrive();
        }
        ++wr_v;
      };

      load_k(t.n_hi - 1);
      // Wait until the previous Q is no longer needed (its tile's last Q K^T, or its O store when O reuses Q's
      // buffer), then load this tile's Q.
      if (iter > 0) ss.barrier_o.wait((iter - 1) & 1);
      publish(u.tile);
      if (lane == 0) {
        ss.barrier_q.arrive_and_expect_tx(Traits::kTmaBytesQ);
        if constexpr (kPack) {
          // One box per 64 columns: (64, pack_rows, group) lands as kBlockM rows of 128 bytes, which is the
          // layout of one 64-column slice of SmemLayoutQ (its swizzle atoms stack along M first).
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c < Traits::kHeadDim / 64; ++c)
            SM90_TMA_LOAD_5D::copy(&p.tma_q_packed, &bar_q, uint64_t(TMA::CacheHintSm90::EVICT_NORMAL),
                                   ss.smem_q.data() + c * kBlockM * 64, c * 64, t.m_block * p.pack_rows, 0, t.head,
                                   t.batch);
        } else {
          copy(p.tma_q.with(bar_q, 0), tQg, tQs);
        }
      }
      for (int n = t.n_hi - 1; n > t.n_lo; --n) {
        load_k(n - 1);
        load_v(n);
      }
      load_v(t.n_lo);
    }
  }

  // ---------------------------------------------------------------- consumers
  // Runs the key-block loop of one tile; returns with O (unnormalized) in tOrO and the row statistics in sm.
  // kv_reads counts the K (and V) blocks this thread has read so far, over all tiles. kSplit: the plain kernel's
  // units may start above key block 0 (SCHED_POLICY 3); otherwise its tiles always end there.
  template <bool kSplit, class TensorO, class Softmax>
  __device__ __forceinline__ static void consume_tile(Params const& p, typename Traits::SharedStorage& ss,
                                                      Pipeline& pipe_k, Pipeline& pipe_v, uint32_t& kv_reads,
                                                      KeyRange const& k, int mma_tid, TensorO& tOrO, Softmax& sm) {
    constexpr int kNumWG = Traits::kNumMmaWG;
    constexpr int kStages = Traits::kStages;
    typename Traits::TiledMmaQK mma0;
    typename Traits::TiledMmaPV mma1;
    auto thr0 = mma0.get_thread_slice(mma_tid);
    auto thr1 = mma1.get_thread_slice(mma_tid);
    Tensor sQ = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sVt = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutVt{});
    Tensor tSrK = thr0.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, stage)
    Tensor tOrV = thr1.partition_fragment_B(sVt);  // (MMA, MMA_d, MMA_N, stage)
    Tensor cS = make_identity_tensor(select<0, 1>(typename Traits::TileShapeQK{}));
    Tensor tScS = thr0.partition_C(cS);
    Tensor cS_rc = make_tensor(tScS.data(), acc_rowcol_layout(tScS.layout()));
    auto o_rc = make_tensor(tOrO.data(), acc_rowcol_layout(tOrO.layout()));
    constexpr int kRows = decltype(size<0>(cS_rc))::value;
    float rescale[kRows];

    // Values derived from the thread index (barrier ids, Q's descriptors) are rebuilt at each use, a few integer
    // operations, rather than held in registers through the key-block loop (where ptxas spilled them); the empty
    // asm keeps the compiler from hoisting them out of the loop again.
    auto tid_now = [&] {
      int tid = mma_tid;
      asm volatile("" : "+r"(tid));
      return tid;
    };
    auto turn_sync = [&] { named_bar_sync(kBarTurnBase + tid_now() / 128, 2 * 128); };
    auto turn_pass = [&] { named_bar_arrive(kBarTurnBase + (tid_now() / 128 + 1) % kNumWG, 2 * 128); };
    // Q's operand of S = Q K^T. kQInRegs: registers loaded once per tile with ldmatrix, after which Q's buffer is
    // released to the next tile (one arrival per warp). Otherwise wgmma descriptors rebuilt at each use: one 64-bit
    // value per 16-wide k block (4 for d64, 16 for d256).
    auto tSrQ_regs = [&] {
      if constexpr (Traits::kQInRegs) {
        Tensor q = thr0.partition_fragment_A(sQ);
        auto q_copy = make_tiled_copy_A(typename Traits::SmemCopyAtomQ{}, mma0);
        auto thr_q = q_copy.get_thread_slice(mma_tid);
        copy(q_copy, thr_q.partition_S(sQ), thr_q.retile_D(q));
        __syncwarp();
        if (mma_tid % 32 == 0) ss.barrier_o.arrive();
        return q;
      } else {
        return 0;
      }
    }();
    // The plain kernel's scale is a kernel parameter (an operand straight from the constant bank); the general
    // one's may come from a device tensor and is staged in shared memory.
    auto scale_log2 = [&] {
      if constexpr (kGeneral)
        return ss.scale_log2;
      else
        return p.scale_log2;
    };

    Tensor tSrS = partition_fragment_C(mma0, select<0, 1>(typename Traits::TileShapeQK{}));
    Tensor tOrP = make_tensor<Element>(acc_to_a_operand_layout(tSrS.layout()));
    auto s_rc = make_tensor(tSrS.data(), acc_rowcol_layout(tSrS.layout()));
    auto issue_s = [&](int stage) {
      if constexpr (Traits::kQInRegs) {
        wg_gemm<true, -1, true>(mma0, tSrQ_regs, tSrK(_, _, _, stage), tSrS);
      } else {
        Tensor tSrQ = mma0.get_thread_slice(tid_now()).partition_fragment_A(sQ);
        wg_gemm<true, -1, false>(mma0, tSrQ, tSrK(_, _, _, stage), tSrS);
      }
    };
    auto mask = [&](int n) {
      if (kGeneral && p.left < kUnbounded)
        apply_mask<true, false>(s_rc, cS_rc, k, n * kBlockN, p);
      else
        apply_mask<false, kPack>(s_rc, cS_rc, k, n * kBlockN, p);
    };

    // First (highest) key block: S only.
    int n = k.n_hi - 1;
    {
      auto const rd_k = read_state<PipelineState, kStages>(kv_reads);
      pipe_k.consumer_wait(rd_k);
      turn_sync();
      issue_s(rd_k.index());
      turn_pass();
      warpgroup_wait<0>();
      pipe_k.consumer_release(rd_k);
    }
    if (key_block_needs_mask<kBlockM, kBlockN>(k, n, p)) mask(n);
    sm.template update<true>(s_rc, rescale, scale_log2());
    convert_fragment(tSrS, tOrP);

    // One step: S(n) = Q K(n)^T and O += P(n+1) V(n+1) issued back to back, the softmax of S(n) under the P V.
    // K block kv_reads + 1 and V block kv_reads are read.
    auto step = [&](int n, auto masked) {
      auto const rd_k = read_state<PipelineState, kStages>(kv_reads + 1);
      auto const rd_v = read_state<PipelineState, kStages>(kv_reads);
      pipe_k.consumer_wait(rd_k);
      turn_sync();
      issue_s(rd_k.index());
      pipe_v.consumer_wait(rd_v);
      wg_gemm<false, -1, true>(mma1, tOrP, tOrV(_, _, _, rd_v.index()), tOrO);
      turn_pass();
      warpgroup_wait<1>();  // S(n) has landed; P V may still run
      pipe_k.consumer_release(rd_k);
      if constexpr (decltype(masked)::value) {
        if (!kGeneral || key_block_needs_mask<kBlockM, kBlockN>(k, n, p)) mask(n);
      }
      bool const moved = sm.template update<false>(s_rc, rescale, scale_log2());
      warpgroup_wait<0>();
      pipe_v.consumer_release(rd_v);
      ++kv_reads;
      if (!Softmax::kLazy || __any_sync(0xffffffff, moved)) rescale_rows(o_rc, rescale);
      convert_fragment(tSrS, tOrP);
    };
    if constexpr (kGeneral) {
      // A left band bound can mask the lowest blocks too: test every block.
      for (--n; n >= k.n_lo; --n) step(n, cute::true_type{});
    } else {
      // The masked blocks are the top ones; the loop below them carries no mask code at all.
      int const n_end = kSplit ? k.n_lo : 0;
      int const n_masked = kSplit ? max(first_masked_block<kBlockN>(k, p), n_end) : first_masked_block<kBlockN>(k, p);
      for (--n; n >= n_masked; --n) step(n, cute::true_type{});
      for (; n >= n_end; --n) step(n, cute::false_type{});
    }
    // Every Q K^T of this warpgroup has completed: with a separate O buffer, Q's buffer may take the next tile.
    if constexpr (Traits::kSeparateO && !Traits::kQInRegs) {
      if (mma_tid % 32 == 0) ss.barrier_o.arrive();  // one arrival per warp, after its own wgmma wait
    }
    auto const rd_v = read_state<PipelineState, kStages>(kv_reads);
    pipe_v.consumer_wait(rd_v);
    wg_gemm<false, 0, true>(mma1, tOrP, tOrV(_, _, _, rd_v.index()), tOrO);
    pipe_v.consumer_release(rd_v);
    ++kv_reads;
  }
};

}  // namespace frost::sm90::fwd
