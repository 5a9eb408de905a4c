// Consumer warpgroups of the split-d attention backward (BwdTraitsSplitD: d_qk 256, or 192 with d_v 128).
//
// Step for query block m of query head hq, 64 keys x 64 queries:
//   S^T = K Q^T and dP^T = V dO^T, each warpgroup its 32 queries (both in flight); P^T = exp2(S^T * scale * log2(e)
//   - LSE2[query]) (masked tiles: invisible pairs -inf first), dS^T = P^T * (dP^T - D[query]), rounded to 16 bits
//   and stored to shared memory (stmatrix); a barrier over both warpgroups makes both halves visible.
//   Then dQ = dS K (in kDqChunks column chunks), dV += P^T dO and dK += dS^T Q, each warpgroup its half of d (d_v
//   for dV; of each chunk for dQ). dQ is added into the FP32 workspace from registers with 16-byte red.add
//   (fragment order, as the post-kernel reads it); once dV is done dO is released, once dK is done Q is.
// Deterministic mode (Traits::kDeterministic, WARP_SPEC_CFG 1): the key blocks take turns at each query block's dQ
// in write_dq's order, kept by two producer warps; see keep_turns.
// P^T and dS^T have two buffers each, indexed by the pipeline stage. Warpgroup w rewrites buffer s two steps after
// it last wrote it; in between it passed the barrier of the following step, which the other warpgroup reaches only
// after waiting for all of its wgmmas of the step that read buffer s.
#pragma once
#include "sm90_bwd_mainloop.cuh"
#include "sm90_bwd_splitd_traits.cuh"

namespace frost::sm90::bwd {

using namespace cute;

// Named barriers of the WARP_SPEC_CFG 2 path, beside kBarDS (both consumer warpgroups) of sm90_bwd_mainloop.cuh; the
// split-d kernels use no dQ smem handshake, so ids 2 and 3 are free here.
constexpr int kBarP = 2;     // WG0 arrives once P^T is in smem, WG1 syncs
constexpr int kBarPWG0 = 3;  // the 128 threads of WG0: all of P^T written before WG0's dV reads it
// Deterministic mode, two slots of each (steps alternate), each barrier between the consumers (256 threads) and one
// warp of the producer warpgroup (see keep_turns):
//   kBarTurn:      the turn keeper arrives once the step's turn has come; the consumers sync before their dQ adds.
//   kBarTurnTaken: the consumers arrive once past kBarTurn; the turn keeper syncs before it arrives there again.
//   kBarAddsDone:  the consumers arrive once the step's adds are issued; the counting warp syncs, then counts them in.
//   kBarSlotFree:  the counting warp arrives once it has counted the step in; the consumers sync before they next
//                  arrive at that kBarAddsDone.
// A named barrier must complete between two arrivals of one party; each of these only sees a party again after its
// partner barrier completed.
constexpr int kBarTurn = 4;
constexpr int kBarTurnTaken = 6;
constexpr int kBarAddsDone = 8;
constexpr int kBarSlotFree = 10;
constexpr int kTurnBarThreads = 256 + 32;

// Element-wise FP32 add of 16 bytes into global memory (sm_90 vector reduction; no return value).
__device__ __forceinline__ void red_add_v4(float* gmem, float a, float b, float c, float d) {
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

template <class Traits>
struct BwdConsumerSplitD {
  using Element = typename Traits::Element;
  using Params = BwdKernelParams<Traits>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kHeadDimV = Traits::kHeadDimV;

  __device__ __forceinline__ static void run(Params const& p, typename Traits::SharedStorage& ss,
                                             typename Traits::Pipeline& pipe_q, typename Traits::Pipeline& pipe_do,
                                             TileInfo const& t, int mma_tid) {
    if constexpr (Traits::kRoles)
      run_roles(p, ss, pipe_q, pipe_do, t, mma_tid);
    else
      run_split_queries(p, ss, pipe_q, pipe_do, t, mma_tid);
  }

  // WARP_SPEC_CFG 1: both warpgroups compute S^T and dP^T, each for 32 of the queries.
  __device__ __forceinline__ static void run_split_queries(Params const& p, typename Traits::SharedStorage& ss,
                                                           typename Traits::Pipeline& pipe_q,
                                                           typename Traits::Pipeline& pipe_do, TileInfo const& t,
                                                           int mma_tid) {
    int const wg = mma_tid / 128;
    typename Traits::TiledMmaSdP mma_sdp;
    typename Traits::TiledMmadK mma_dk;
    typename Traits::TiledMmadV mma_dv;
    typename Traits::TiledMmadQ mma_dq;
    auto thr_sdp = mma_sdp.get_thread_slice(mma_tid);
    auto thr_dk = mma_dk.get_thread_slice(mma_tid);
    auto thr_dv = mma_dv.get_thread_slice(mma_tid);
    auto thr_dq = mma_dq.get_thread_slice(mma_tid);

    Tensor sQ = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(ss.smem_do.data()), typename Traits::SmemLayoutdO{});
    Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutV{});
    Tensor sQt = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQt{});
    Tensor sdOt = make_tensor(make_smem_ptr(ss.smem_do.data()), typename Traits::SmemLayoutdOt{});
    Tensor sKt = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutKt{});
    Tensor sPt = make_tensor(make_smem_ptr(ss.smem_p.data()), typename Traits::SmemLayoutPt{});
    Tensor sdSt = make_tensor(make_smem_ptr(ss.smem_ds.data()), typename Traits::SmemLayoutdSt{});
    Tensor sdS = make_tensor(make_smem_ptr(ss.smem_ds.data()), typename Traits::SmemLayoutdS{});

    Tensor tSrK = thr_sdp.partition_fragment_A(sK);  // (MMA, MMA_M, MMA_K)
    Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);  // (MMA, MMA_N, MMA_K, stage)
    Tensor tdPrV = thr_sdp.partition_fragment_A(sV);
    Tensor tdPrdO = thr_sdp.partition_fragment_B(sdO);
    Tensor tdVrPt = thr_dv.partition_fragment_A(sPt);  // (MMA, MMA_M, MMA_K, stage)
    Tensor tdVrdOt = thr_dv.partition_fragment_B(sdOt);
    Tensor tdKrdSt = thr_dk.partition_fragment_A(sdSt);
    Tensor tdKrQt = thr_dk.partition_fragment_B(sQt);
    Tensor tdQrdS = thr_dq.partition_fragment_A(sdS);
    using TileDqChunk = Shape<Int<kBlockM>, Int<Traits::kDqChunkCols>>;
    // K^T for dQ column chunk c: (MMA, MMA_N, MMA_K)
    auto dq_b = [&](auto c) {
      return thr_dq.partition_fragment_B(
          local_tile(sKt, Shape<Int<Traits::kDqChunkCols>, Int<kBlockN>>{}, make_coord(c, _0{})));
    };

    Tensor tdKrdK = partition_fragment_C(mma_dk, Shape<Int<kBlockN>, Int<kHeadDim>>{});
    Tensor tdVrdV = partition_fragment_C(mma_dv, Shape<Int<kBlockN>, Int<kHeadDimV>>{});
    clear(tdKrdK);
    clear(tdVrdV);

    Tensor cS = make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{});
    Tensor tScS = thr_sdp.partition_C(cS);
    Tensor cS_rc = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
    constexpr int kRows = decltype(size<0>(cS_rc))::value;
    constexpr int kCols = decltype(size<1>(cS_rc))::value;

    auto ps_copy = make_tiled_copy_C(typename Traits::SmemCopyAtom{}, mma_sdp);
    auto thr_ps_copy = ps_copy.get_thread_slice(mma_tid);
    Tensor tPsP = thr_ps_copy.partition_D(sPt);  // (CPY, CPY_M, CPY_N, stage)
    Tensor tdSsdS = thr_ps_copy.partition_D(sdSt);

    if (t.m_max > t.m_min) {
      ss.barrier_kv.wait(0);
      typename Traits::PipelineState rd;
      int turn_slot = 0;  // deterministic mode: this step's slot of the turn barriers (keep_turns)
      for (int g = 0; g < p.h_ratio; ++g) {
        int64_t const bh = int64_t(t.batch) * p.h_q + t.kv_head * p.h_ratio + g;
        float* acc_head =
            p.dq_acc + bh * p.num_m_blocks * (kBlockM * kHeadDim) + wg * Traits::kDqHalf + (mma_tid % 128) * 4;
        for (int m = t.m_min; m < t.m_max; ++m) {
          int const stage = rd.index();
          pipe_q.consumer_wait(rd);
          Tensor tSrS = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
          wg_gemm<true, -1, false>(mma_sdp, tSrK, tSrQ(_, _, _, stage), tSrS);
          pipe_do.consumer_wait(rd);
          Tensor tdPrdP = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
          wg_gemm<true, -1, false>(mma_sdp, tdPrV, tdPrdO(_, _, _, stage), tdPrdP);

          float const* lse_s = ss.smem_lse.data() + stage * kBlockM;
          float lse[kCols];
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c < kCols; ++c) lse[c] = lse_s[get<1>(cS_rc(0, c))];
          auto s_rc = make_tensor(tSrS.data(), acc_rowcol(tSrS.layout()));
          warpgroup_wait<1>();  // S^T has landed; dP^T may still run
          if (tile_needs_mask<kBlockM, kBlockN>(m, t.n_block, t.si, p.mask)) {
            CUTLASS_PRAGMA_UNROLL
            for (int r = 0; r < kRows; ++r) {
              int const j = t.n_block * kBlockN + get<0>(cS_rc(r, 0));
              CUTLASS_PRAGMA_UNROLL
              for (int c = 0; c < kCols; ++c)
                if (!visible(m * kBlockM + get<1>(cS_rc(r, c)), j, t.si, p.mask)) s_rc(r, c) = -INFINITY;
            }
          }
          CUTLASS_PRAGMA_UNROLL
          for (int r = 0; r < kRows; ++r) {
            CUTLASS_PRAGMA_UNROLL
            for (int c = 0; c < kCols; ++c) s_rc(r, c) = fast_exp2(fmaf(s_rc(r, c), p.scale_log2, -lse[c]));
          }

          warpgroup_wait<0>();
          float const* delta_s = ss.smem_delta.data() + stage * kBlockM;
          auto dp_rc = make_tensor(tdPrdP.data(), acc_rowcol(tdPrdP.layout()));
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c < kCols; ++c) {
            float const d = delta_s[get<1>(cS_rc(0, c))];
            CUTLASS_PRAGMA_UNROLL
            for (int r = 0; r < kRows; ++r) dp_rc(r, c) = s_rc(r, c) * (dp_rc(r, c) - d);
          }
          Tensor rP = make_tensor<Element>(tSrS.layout());
          convert_fragment(tSrS, rP);
          Tensor rdS = make_tensor<Element>(tdPrdP.layout());
          convert_fragment(tdPrdP, rdS);
          copy(ps_copy, thr_ps_copy.retile_S(rP), tPsP(_, _, _, stage));
          copy(ps_copy, thr_ps_copy.retile_S(rdS), tdSsdS(_, _, _, stage));
          cutlass::arch::fence_view_async_shared();  // stmatrix writes -> wgmma reads
          named_bar_sync(kBarDS, Traits::kNumMmaThreads);

          // Issue order dQ0, dV, [dQ1,] dK: each dQ chunk is added while the next wgmma runs.
          float* dst = acc_head + int64_t(m) * (kBlockM * kHeadDim);
          Tensor dq0 = partition_fragment_C(mma_dq, TileDqChunk{});
          wg_gemm<true, -1, false>(mma_dq, tdQrdS(_, _, _, stage), dq_b(_0{}), dq0);
          wg_gemm<false, -1, false>(mma_dv, tdVrPt(_, _, _, stage), tdVrdOt(_, _, _, stage), tdVrdV);
          warpgroup_wait<1>();  // dQ chunk 0 has landed
          if constexpr (Traits::kDeterministic) {
            named_bar_sync(kBarTurn + turn_slot, kTurnBarThreads);
            named_bar_arrive(kBarTurnTaken + turn_slot, kTurnBarThreads);
          }
          add_dq(dst, dq0, 0);
          if constexpr (Traits::kDqChunks == 2) {
            Tensor dq1 = partition_fragment_C(mma_dq, TileDqChunk{});
            wg_gemm<true, -1, false>(mma_dq, tdQrdS(_, _, _, stage), dq_b(_1{}), dq1);
            wg_gemm<false, -1, false>(mma_dk, tdKrdSt(_, _, _, stage), tdKrQt(_, _, _, stage), tdKrdK);
            warpgroup_wait<1>();  // dV and dQ chunk 1 done
            add_dq(dst, dq1, 1);
          } else {
            static_assert(Traits::kDqChunks == 1);
            wg_gemm<false, -1, false>(mma_dk, tdKrdSt(_, _, _, stage), tdKrQt(_, _, _, stage), tdKrdK);
            warpgroup_wait<1>();  // dV done
          }
          if constexpr (Traits::kDeterministic) {
            __syncwarp();
            named_bar_sync(kBarSlotFree + turn_slot, kTurnBarThreads);
            named_bar_arrive(kBarAddsDone + turn_slot, kTurnBarThreads);
            turn_slot ^= 1;
          }
          pipe_do.consumer_release(rd);
          warpgroup_wait<0>();  // dK done
          pipe_q.consumer_release(rd);
          ++rd;
        }
      }
    }
    epilogue(p, ss, t, mma_tid, tdKrdK, tdVrdV);
  }

  // WARP_SPEC_CFG 2: warpgroup 0 computes S^T and P^T, warpgroup 1 dP^T and dS^T (each 64 keys x 64 queries).
  // Per step: WG0: S^T, P^T to smem, arrive kBarP; issue its dV. WG1: dP^T, sync kBarP, issue its dV, load P^T from
  // smem, dS^T to smem. Both: sync kBarDS (dS^T complete), then dQ chunks and dK as in run_split_queries.
  // Buffer reuse as there: a warpgroup rewrites P^T (WG0) or dS^T (WG1) two steps later, after a barrier the other
  // reaches only once it has waited for its wgmmas of the step that read them. kBarP alternates with kBarDS, so
  // its arrivals never run a step ahead of the sync.
  __device__ __forceinline__ static void run_roles(Params const& p, typename Traits::SharedStorage& ss,
                                                   typename Traits::Pipeline& pipe_q,
                                                   typename Traits::Pipeline& pipe_do, TileInfo const& t, int mma_tid) {
    int const wg = mma_tid / 128, wg_tid = mma_tid % 128;
    typename Traits::TiledMmaSdPRole mma_sdp;
    typename Traits::TiledMmadK mma_dk;
    typename Traits::TiledMmadV mma_dv;
    typename Traits::TiledMmadQ mma_dq;
    auto thr_sdp = mma_sdp.get_thread_slice(wg_tid);
    auto thr_dk = mma_dk.get_thread_slice(mma_tid);
    auto thr_dv = mma_dv.get_thread_slice(mma_tid);
    auto thr_dq = mma_dq.get_thread_slice(mma_tid);

    Tensor sQ = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(ss.smem_do.data()), typename Traits::SmemLayoutdO{});
    Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutV{});
    Tensor sQt = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQt{});
    Tensor sdOt = make_tensor(make_smem_ptr(ss.smem_do.data()), typename Traits::SmemLayoutdOt{});
    Tensor sKt = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutKt{});
    Tensor sPt = make_tensor(make_smem_ptr(ss.smem_p.data()), typename Traits::SmemLayoutPt{});
    Tensor sdSt = make_tensor(make_smem_ptr(ss.smem_ds.data()), typename Traits::SmemLayoutdSt{});
    Tensor sdS = make_tensor(make_smem_ptr(ss.smem_ds.data()), typename Traits::SmemLayoutdS{});

    // WG0 reads K and Q, WG1 V and dO; both partitions are made, each warpgroup uses its own.
    Tensor tSrK = thr_sdp.partition_fragment_A(sK);
    Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);
    Tensor tdPrV = thr_sdp.partition_fragment_A(sV);
    Tensor tdPrdO = thr_sdp.partition_fragment_B(sdO);
    Tensor tdVrPt = thr_dv.partition_fragment_A(sPt);
    Tensor tdVrdOt = thr_dv.partition_fragment_B(sdOt);
    Tensor tdKrdSt = thr_dk.partition_fragment_A(sdSt);
    Tensor tdKrQt = thr_dk.partition_fragment_B(sQt);
    Tensor tdQrdS = thr_dq.partition_fragment_A(sdS);
    using TileDqChunk = Shape<Int<kBlockM>, Int<Traits::kDqChunkCols>>;
    auto dq_b = [&](auto c) {
      return thr_dq.partition_fragment_B(
          local_tile(sKt, Shape<Int<Traits::kDqChunkCols>, Int<kBlockN>>{}, make_coord(c, _0{})));
    };

    Tensor tdKrdK = partition_fragment_C(mma_dk, Shape<Int<kBlockN>, Int<kHeadDim>>{});
    Tensor tdVrdV = partition_fragment_C(mma_dv, Shape<Int<kBlockN>, Int<kHeadDimV>>{});
    clear(tdKrdK);
    clear(tdVrdV);

    Tensor cS = make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{});
    Tensor tScS = thr_sdp.partition_C(cS);
    Tensor cS_rc = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
    constexpr int kRows = decltype(size<0>(cS_rc))::value;
    constexpr int kCols = decltype(size<1>(cS_rc))::value;

    // P^T / dS^T stores and the P^T load of WG1: the same per-thread fragment layout (one warpgroup's accumulator).
    auto st_copy = make_tiled_copy_C(typename Traits::SmemCopyAtom{}, mma_sdp);
    auto thr_st = st_copy.get_thread_slice(wg_tid);
    auto ld_copy = make_tiled_copy_C(typename Traits::SmemLoadAtom{}, mma_sdp);
    auto thr_ld = ld_copy.get_thread_slice(wg_tid);
    Tensor tPsP = thr_st.partition_D(sPt);  // (CPY, CPY_M, CPY_N, stage)
    Tensor tdSsdS = thr_st.partition_D(sdSt);
    Tensor tPsP_ld = thr_ld.partition_S(sPt);

    if (t.m_max > t.m_min) {
      ss.barrier_kv.wait(0);
      typename Traits::PipelineState rd;
      for (int g = 0; g < p.h_ratio; ++g) {
        int64_t const bh = int64_t(t.batch) * p.h_q + t.kv_head * p.h_ratio + g;
        float* acc_head =
            p.dq_acc + bh * p.num_m_blocks * (kBlockM * kHeadDim) + wg * Traits::kDqHalf + (mma_tid % 128) * 4;
        for (int m = t.m_min; m < t.m_max; ++m) {
          int const stage = rd.index();
          Tensor acc = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});  // S^T or dP^T
          auto acc_rc = make_tensor(acc.data(), acc_rowcol(acc.layout()));
          if (wg == 0) {
            pipe_q.consumer_wait(rd);
            wg_gemm<true, 0, false>(mma_sdp, tSrK, tSrQ(_, _, _, stage), acc);
            float const* lse_s = ss.smem_lse.data() + stage * kBlockM;
            if (tile_needs_mask<kBlockM, kBlockN>(m, t.n_block, t.si, p.mask)) {
              CUTLASS_PRAGMA_UNROLL
              for (int r = 0; r < kRows; ++r) {
                int const j = t.n_block * kBlockN + get<0>(cS_rc(r, 0));
                CUTLASS_PRAGMA_UNROLL
                for (int c = 0; c < kCols; ++c)
                  if (!visible(m * kBlockM + get<1>(cS_rc(r, c)), j, t.si, p.mask)) acc_rc(r, c) = -INFINITY;
              }
            }
            CUTLASS_PRAGMA_UNROLL
            for (int c = 0; c < kCols; ++c) {
              float const lse = lse_s[get<1>(cS_rc(0, c))];
              CUTLASS_PRAGMA_UNROLL
              for (int r = 0; r < kRows; ++r) acc_rc(r, c) = fast_exp2(fmaf(acc_rc(r, c), p.scale_log2, -lse));
            }
            Tensor rP = make_tensor<Element>(acc.layout());
            convert_fragment(acc, rP);
            copy(st_copy, thr_st.retile_S(rP), tPsP(_, _, _, stage));
            cutlass::arch::fence_view_async_shared();  // stmatrix writes -> wgmma reads (both warpgroups)
            named_bar_arrive(kBarP, Traits::kNumMmaThreads);
            named_bar_sync(kBarPWG0, 128);  // all of P^T from this warpgroup before its own dV reads it
            pipe_do.consumer_wait(rd);
            wg_gemm<false, -1, false>(mma_dv, tdVrPt(_, _, _, stage), tdVrdOt(_, _, _, stage), tdVrdV);
          } else {
            pipe_do.consumer_wait(rd);
            wg_gemm<true, -1, false>(mma_sdp, tdPrV, tdPrdO(_, _, _, stage), acc);
            named_bar_sync(kBarP, Traits::kNumMmaThreads);  // P^T of this step is in smem
            wg_gemm<false, -1, false>(mma_dv, tdVrPt(_, _, _, stage), tdVrdOt(_, _, _, stage), tdVrdV);
            Tensor rP = make_tensor<Element>(acc.layout());
            copy(ld_copy, tPsP_ld(_, _, _, stage), thr_ld.retile_D(rP));
            warpgroup_wait<1>();  // dP^T has landed; dV may still run
            auto p_rc = make_tensor(rP.data(), acc_rowcol(rP.layout()));
            float const* delta_s = ss.smem_delta.data() + stage * kBlockM;
            CUTLASS_PRAGMA_UNROLL
            for (int c = 0; c < kCols; ++c) {
              float const d = delta_s[get<1>(cS_rc(0, c))];
              CUTLASS_PRAGMA_UNROLL
              for (int r = 0; r < kRows; ++r) acc_rc(r, c) = float(p_rc(r, c)) * (acc_rc(r, c) - d);
            }
            Tensor rdS = make_tensor<Element>(acc.layout());
            convert_fragment(acc, rdS);
            copy(st_copy, thr_st.retile_S(rdS), tdSsdS(_, _, _, stage));
            cutlass::arch::fence_view_async_shared();
            pipe_q.consumer_wait(rd);
          }
          named_bar_sync(kBarDS, Traits::kNumMmaThreads);  // dS^T complete

          float* dst = acc_head + int64_t(m) * (kBlockM * kHeadDim);
          Tensor dq0 = partition_fragment_C(mma_dq, TileDqChunk{});
          wg_gemm<true, -1, false>(mma_dq, tdQrdS(_, _, _, stage), dq_b(_0{}), dq0);
          wg_gemm<false, -1, false>(mma_dk, tdKrdSt(_, _, _, stage), tdKrQt(_, _, _, stage), tdKrdK);
          warpgroup_wait<1>();  // dV and dQ chunk 0 done; dK may still run
          pipe_do.consumer_release(rd);
          add_dq(dst, dq0, 0);
          if constexpr (Traits::kDqChunks == 2) {
            Tensor dq1 = partition_fragment_C(mma_dq, TileDqChunk{});
            wg_gemm<true, -1, false>(mma_dq, tdQrdS(_, _, _, stage), dq_b(_1{}), dq1);
            warpgroup_wait<0>();
            add_dq(dst, dq1, 1);
          } else {
            warpgroup_wait<0>();
          }
          pipe_q.consumer_release(rd);
          ++rd;
        }
      }
    }
    epilogue(p, ss, t, mma_tid, tdKrdK, tdVrdV);
  }

  // The counter of (head, query block m) counts the key blocks whose adds into m are done. A key block's turn is its
  // rank among the blocks that see m (ascending, or descending under the deterministic mode's right-bound order, as
  // in write_dq). Two warps of the producer warpgroup keep the turns, so the consumers only ever meet CTA barriers:
  // - the turn keeper (warp 2) spins on the counter until the step's turn has come and tells the consumers, up to two
  //   steps ahead of them;
  // - the counting warp (warp 1), once the consumers' adds of a step are issued, fences at GPU scope (cumulative over
  //   the adds the barrier ordered before it) and increments the step's counter (release); the consumers wait for it
  //   only when it falls two steps behind.
  // When the consumers waited for the turns and fenced their own adds, the fence stalled them for the adds' round
  // trip to L2 (64 KB per step at d256) and each wait for a load's (NOTES.md v8: 0.71-0.74 of the default mode).
  // A CTA only waits for CTAs launched before it, and every CTA reaches its next step or its end: no deadlock.
  __device__ __forceinline__ static void keep_turns(Params const& p, TileInfo const& t, int warp) {
    static_assert(Traits::kNumMmaThreads + 32 == kTurnBarThreads, "the turn barriers count the consumers and a warp");
    int const per_head = t.m_max - t.m_min;  // steps per query head of the group
    int const steps = per_head > 0 ? per_head * p.h_ratio : 0;
    int* const first = p.sema + (int64_t(t.batch) * p.h_q + t.kv_head * p.h_ratio) * p.num_m_blocks;
    if (warp == 1)
      for (int slot = 0; slot < min(2, steps); ++slot) named_bar_arrive(kBarSlotFree + slot, kTurnBarThreads);
    CUTLASS_PRAGMA_NO_UNROLL
    for (int step = 0; step < steps; ++step) {
      int const slot = step & 1, g = step / per_head, m = t.m_min + step - g * per_head;
      int* const counter = first + g * p.num_m_blocks + m;
      if (warp == 1) {
        named_bar_sync(kBarAddsDone + slot, kTurnBarThreads);
        if (cute::elect_one_sync()) {
          __threadfence();
          bump_counter(counter);
        }
        __syncwarp();
        if (step + 2 < steps) named_bar_arrive(kBarSlotFree + slot, kTurnBarThreads);
      } else {
        if (step >= 2) named_bar_sync(kBarTurnTaken + slot, kTurnBarThreads);  // the consumers took step - 2's turn
        if (cute::elect_one_sync()) {
          int n_lo, n_hi;
          n_block_range<kBlockM, kBlockN>(m, t.si, p.mask, n_lo, n_hi);
          wait_counter_at_least(counter, p.n_descending ? n_hi - t.n_block : t.n_block - n_lo);
        }
        __syncwarp();
        named_bar_arrive(kBarTurn + slot, kTurnBarThreads);
      }
    }
    if (warp == 2)  // the consumers' last two arrivals
      for (int step = max(steps - 2, 0); step < steps; ++step)
        named_bar_sync(kBarTurnTaken + (step & 1), kTurnBarThreads);
  }

  // Column chunk c of this thread's dQ partial into the workspace (dst: its fragment-order slot). Chunk c holds the
  // values c * size(chunk) onwards of the whole-tile fragment, which is how the post-kernel reads them back.
  template <class TensorDQ>
  __device__ __forceinline__ static void add_dq(float* dst, TensorDQ const& dq, int c) {
    constexpr int kVals = decltype(size(dq))::value;
    static_assert(kVals * Traits::kDqChunks == Traits::kDqFrag && kVals % 4 == 0);
    float* base = dst + c * (kVals / 4) * 512;
    CUTLASS_PRAGMA_UNROLL
    for (int v = 0; v < kVals / 4; ++v)
      red_add_v4(base + v * 512, dq(4 * v), dq(4 * v + 1), dq(4 * v + 2), dq(4 * v + 3));
  }

  // dK (times the softmax scale) and dV rounded once, staged in K's and V's buffers, stored with TMA (rows past
  // s_kv clipped). A key block no query sees stores zeros.
  template <class TensorK, class TensorV>
  __device__ __forceinline__ static void epilogue(Params const& p, typename Traits::SharedStorage& ss,
                                                  TileInfo const& t, int mma_tid, TensorK& dk, TensorV& dv) {
    typename Traits::TiledMmadK mma_dk;
    typename Traits::TiledMmadV mma_dv;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(dk); ++i) dk(i) *= p.scale;
    Tensor rdK = make_tensor<Element>(dk.layout());
    Tensor rdV = make_tensor<Element>(dv.layout());
    convert_fragment(dk, rdK);
    convert_fragment(dv, rdV);
    Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutV{});
    auto k_copy = make_tiled_copy_C(typename Traits::SmemCopyAtom{}, mma_dk);
    auto v_copy = make_tiled_copy_C(typename Traits::SmemCopyAtom{}, mma_dv);
    auto thr_k_copy = k_copy.get_thread_slice(mma_tid);
    auto thr_v_copy = v_copy.get_thread_slice(mma_tid);
    named_bar_sync(kBarDS, Traits::kNumMmaThreads);  // every wgmma of both warpgroups is done with K and V
    copy(k_copy, thr_k_copy.retile_S(rdK), thr_k_copy.partition_D(sK));
    copy(v_copy, thr_v_copy.retile_S(rdV), thr_v_copy.partition_D(sV));
    cutlass::arch::fence_view_async_shared();  // stmatrix writes -> TMA store reads
    named_bar_sync(kBarDS, Traits::kNumMmaThreads);
    store_dkv(p, t, sK, sV, mma_tid);
  }
};

}  // namespace frost::sm90::bwd
