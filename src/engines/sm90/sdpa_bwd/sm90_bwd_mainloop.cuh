// Consumer warpgroups of the attention backward: the per-query-block step (five wgmmas) and the dK/dV epilogue.
//
// Step for query block m of query head hq (each warpgroup: its 64 keys; rows = keys, columns = queries):
//   S^T = K Q^T, dP^T = V dO^T (both in flight), then P^T = exp2(S^T * scale * log2(e) - LSE2[query]) (masked tiles:
//   invisible pairs -inf first), dS^T = P^T * (dP^T - D[query]); P^T and dS^T rounded to 16 bits. With 128-row query
//   blocks (Traits::kSerialSdP) dP^T is issued only after the exponentials: S^T and dP^T are 64 registers each
//   there, and both in flight beside dK and dV made ptxas serialize every wgmma and spill dK (C7512, 808 bytes).
//   dS^T goes to shared memory (stmatrix), dV += P^T dO is issued from registers, a barrier over both warpgroups
//   makes the whole dS visible, then dQ = dS K (this warpgroup's half of d; of the rows with 128-row blocks) and
//   dK += dS^T Q.
//   Once dQ is done, the partial goes to shared memory for the writer warp; once dK is done, Q is released.
// dS^T has two buffers. Warpgroup w rewrites buffer s two steps after it last wrote it; in between it passed the
// barrier of the following step, which the other warpgroup reaches only after waiting for its own dQ wgmma that read
// buffer s. So one barrier per step orders the buffer reuse.
#pragma once
#include "sm90_bwd_kernel_traits.cuh"
#include "sm90_bwd_utils.cuh"

namespace frost::sm90::bwd {

using namespace cute;

// Named barrier ids (0 is __syncthreads).
constexpr int kBarDS = 1;        // both consumer warpgroups (dS complete; epilogue)
// + 2 * buffer + warpgroup (dQ staging buffers, BwdTraits::kDqBufs <= 2):
constexpr int kBarDqFull = 2;    // its dQ partial is in smem (128 consumers arrive, the writer syncs)
constexpr int kBarDqEmpty = 6;   // the writer is done with it (the writer arrives, 128 consumers sync)

struct TileInfo {
  int n_block, kv_head, batch;
  SeqInfo si;
  int m_min, m_max;  // query blocks this key block visits (the same for every head of the group)
  // TMA row coordinates of the batch's row 0 in Q, dO, K and V (packed tensors; 0 when dense). Computed before the
  // producer drops to 24 registers: the 64-bit division of a ragged offset would spill there.
  int row0_q, row0_do, row0_k, row0_v;
};

// The staged dK and dV tiles (smem) to global memory. Dense: one TMA store each, by one thread (rows past s_kv
// clipped). Packed (THD): only the rows of the batch's sequence, 16 bytes per access by all consumer threads (8
// consecutive d elements are contiguous in every swizzled layout here); the tile's other rows belong to another
// sequence or a gap and stay untouched.
template <class Traits, class TensorK, class TensorV>
__device__ __forceinline__ void store_dkv(BwdKernelParams<Traits> const& p, TileInfo const& t, TensorK const& sK,
                                          TensorV const& sV, int mma_tid) {
  constexpr int kBlockN = Traits::kBlockN;
  int const n_rows = min(kBlockN, t.si.len_kv - t.n_block * kBlockN);
  auto rows_out = [&](auto const& s, auto* base, DevRows const& r, int64_t stride_h, int64_t stride_s, auto dim) {
    constexpr int kVecs = decltype(dim)::value / 8;
    auto* dst = base + row_start(r, t.batch) + t.kv_head * stride_h + int64_t(t.n_block) * kBlockN * stride_s;
    for (int i = mma_tid; i < n_rows * kVecs; i += Traits::kNumMmaThreads) {
      int const row = i / kVecs, col = (i - row * kVecs) * 8;
      *reinterpret_cast<uint4*>(dst + row * stride_s + col) = *reinterpret_cast<uint4 const*>(&s(row, col));
    }
  };
  if (p.rows_dk.kind) rows_out(sK, p.dk_ptr, p.rows_dk, p.dk_stride_h, p.dk_stride_s, Int<Traits::kHeadDim>{});
  if (p.rows_dv.kind) rows_out(sV, p.dv_ptr, p.rows_dv, p.dv_stride_h, p.dv_stride_s, Int<Traits::kHeadDimV>{});
  if (mma_tid != 0 || (p.rows_dk.kind && p.rows_dv.kind)) return;
  Tensor mdK = p.tma_dk.get_tma_tensor(p.shape_k);
  Tensor mdV = p.tma_dv.get_tma_tensor(p.shape_v);
  Tensor gdK = local_tile(mdK(_, _, t.kv_head, t.batch), Shape<Int<kBlockN>, Int<Traits::kHeadDim>>{},
                          make_coord(t.n_block, _0{}));
  Tensor gdV = local_tile(mdV(_, _, t.kv_head, t.batch), Shape<Int<kBlockN>, Int<Traits::kHeadDimV>>{},
                          make_coord(t.n_block, _0{}));
  auto [tKg, tKs] = tma_partition(p.tma_dk, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gdK));
  auto [tVg, tVs] = tma_partition(p.tma_dv, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gdV));
  if (!p.rows_dk.kind) copy(p.tma_dk, tKs, tKg);
  if (!p.rows_dv.kind) copy(p.tma_dv, tVs, tVg);
  tma_store_arrive();
  tma_store_wait<0>();  // shared memory must outlive the stores' reads
}

template <class Traits>
struct BwdConsumer {
  using Element = typename Traits::Element;
  using Params = BwdKernelParams<Traits>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  // With 128-row blocks the column statistics (32 per thread) are read from smem where they are used rather than
  // cached in registers ahead of the exponentials (register budget, see kSerialSdP).
  static constexpr bool kSerialLse = Traits::kSerialSdP;

  __device__ __forceinline__ static void run(Params const& p, typename Traits::SharedStorage& ss,
                                             typename Traits::Pipeline& pipe_q, typename Traits::Pipeline& pipe_do,
                                             TileInfo const& t, int mma_tid) {
    int const wg = mma_tid / 128;
    typename Traits::TiledMmaSdP mma_sdp;
    typename Traits::TiledMmadKV mma_dkv;
    typename Traits::TiledMmadQ mma_dq;
    auto thr_sdp = mma_sdp.get_thread_slice(mma_tid);
    auto thr_dkv = mma_dkv.get_thread_slice(mma_tid);
    auto thr_dq = mma_dq.get_thread_slice(mma_tid);

    Tensor sQ = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(ss.smem_do.data()), typename Traits::SmemLayoutdO{});
    Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutV{});
    Tensor sQt = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQt{});
    Tensor sdOt = make_tensor(make_smem_ptr(ss.smem_do.data()), typename Traits::SmemLayoutdOt{});
    Tensor sKt = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutKt{});
    Tensor sdSt = make_tensor(make_smem_ptr(ss.smem_ds.data()), typename Traits::SmemLayoutdSt{});
    Tensor sdS = make_tensor(make_smem_ptr(ss.smem_ds.data()), typename Traits::SmemLayoutdS{});

    Tensor tSrK = thr_sdp.partition_fragment_A(sK);      // (MMA, MMA_M, MMA_K)
    Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);      // (MMA, MMA_N, MMA_K, stage)
    Tensor tdPrV = thr_sdp.partition_fragment_A(sV);
    Tensor tdPrdO = thr_sdp.partition_fragment_B(sdO);
    Tensor tdVrdOt = thr_dkv.partition_fragment_B(sdOt);  // (MMA, MMA_N, MMA_K, stage)
    Tensor tdKrQt = thr_dkv.partition_fragment_B(sQt);
    Tensor tdQrdS = thr_dq.partition_fragment_A(sdS);     // (MMA, MMA_M, MMA_K, stage)
    Tensor tdQrKt = thr_dq.partition_fragment_B(sKt);

    Tensor tdKrdK = partition_fragment_C(mma_dkv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
    Tensor tdVrdV = partition_fragment_C(mma_dkv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
    clear(tdKrdK);
    clear(tdVrdV);

    // (key, query) coordinates of this thread's S^T / dP^T values, as (rows, cols).
    Tensor cS = make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{});
    Tensor tScS = thr_sdp.partition_C(cS);
    Tensor cS_rc = make_tensor(tScS.data(), acc_rowcol(tScS.layout()));
    constexpr int kRows = decltype(size<0>(cS_rc))::value;
    constexpr int kCols = decltype(size<1>(cS_rc))::value;

    auto ds_copy = make_tiled_copy_C(typename Traits::SmemCopyAtom{}, mma_sdp);
    auto thr_ds_copy = ds_copy.get_thread_slice(mma_tid);
    Tensor tdSsdS = thr_ds_copy.partition_D(sdSt);  // (CPY, CPY_M, CPY_N, stage)

    if (t.m_max > t.m_min) {
      ss.barrier_kv.wait(0);
      typename Traits::PipelineState rd;
      int const dq_bufs = p.deterministic ? Traits::kDqBufs : 1;  // see write_dq
      int dq_buf = 0;
      for (int g = 0; g < p.h_ratio; ++g) {
        for (int m = t.m_min; m < t.m_max; ++m) {
          int const stage = rd.index();
          pipe_q.consumer_wait(rd);
          Tensor tSrS = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
          wg_gemm<true, -1, false>(mma_sdp, tSrK, tSrQ(_, _, _, stage), tSrS);
          Tensor tdPrdP = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
          auto issue_dp = [&] {
            pipe_do.consumer_wait(rd);
            wg_gemm<true, -1, false>(mma_sdp, tdPrV, tdPrdO(_, _, _, stage), tdPrdP);
          };
          if constexpr (!Traits::kSerialSdP) issue_dp();

          float const* lse_s = ss.smem_lse.data() + stage * kBlockM;
          float lse[kSerialLse ? 1 : kCols];
          if constexpr (!kSerialLse) {
            CUTLASS_PRAGMA_UNROLL
            for (int c = 0; c < kCols; ++c) lse[c] = lse_s[get<1>(cS_rc(0, c))];
          }
          auto s_rc = make_tensor(tSrS.data(), acc_rowcol(tSrS.layout()));
          warpgroup_wait<Traits::kSerialSdP ? 0 : 1>();  // S^T has landed; dP^T, if issued, may still run
          if (tile_needs_mask<kBlockM, kBlockN>(m, t.n_block, t.si, p.mask)) {
            // 128-row blocks: each key's visible query range, then two compares and a select per element (the
            // per-element test compiled to a chain of branches there). 64-row blocks keep the per-element test:
            // with the range form the d128 kernel measured 3-4 % slower at s16384 (NOTES.md, v4).
            CUTLASS_PRAGMA_UNROLL
            for (int r = 0; r < kRows; ++r) {
              int const j = t.n_block * kBlockN + get<0>(cS_rc(r, 0));
              if constexpr (Traits::kSerialSdP) {
                int lo, hi;
                visible_queries(j, t.si, p.mask, lo, hi);
                lo -= m * kBlockM, hi -= m * kBlockM;  // as column indices of this tile
                CUTLASS_PRAGMA_UNROLL
                for (int c = 0; c < kCols; ++c) {
                  int const i = get<1>(cS_rc(r, c));
                  s_rc(r, c) = (i >= lo) & (i < hi) ? s_rc(r, c) : -INFINITY;
                }
              } else {
                CUTLASS_PRAGMA_UNROLL
                for (int c = 0; c < kCols; ++c)
                  if (!visible(m * kBlockM + get<1>(cS_rc(r, c)), j, t.si, p.mask)) s_rc(r, c) = -INFINITY;
              }
            }
          }
          // A masked score gives exp2(-inf) = 0; a row without gradient has LSE2 = +inf and gives 0 too.
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c < kCols; ++c) {
            float const lse_c = kSerialLse ? lse_s[get<1>(cS_rc(0, c))] : lse[kSerialLse ? 0 : c];
            CUTLASS_PRAGMA_UNROLL
            for (int r = 0; r < kRows; ++r) s_rc(r, c) = fast_exp2(fmaf(s_rc(r, c), p.scale_log2, -lse_c));
          }

          if constexpr (Traits::kSerialSdP) issue_dp();
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

          copy(ds_copy, thr_ds_copy.retile_S(rdS), tdSsdS(_, _, _, stage));
          Tensor tdVrP = make_tensor(rP.data(), acc_as_a_operand(tSrS.layout()));
          wg_gemm<false, -1, true>(mma_dkv, tdVrP, tdVrdOt(_, _, _, stage), tdVrdV);
          cutlass::arch::fence_view_async_shared();  // stmatrix writes -> wgmma reads
          named_bar_sync(kBarDS, Traits::kNumMmaThreads);

          Tensor tdQrdQ = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
          wg_gemm<true, -1, false>(mma_dq, tdQrdS(_, _, _, stage), tdQrKt, tdQrdQ);
          Tensor tdKrdS = make_tensor(rdS.data(), acc_as_a_operand(tdPrdP.layout()));
          wg_gemm<false, -1, true>(mma_dkv, tdKrdS, tdKrQt(_, _, _, stage), tdKrdK);
          warpgroup_wait<1>();  // dV and dQ done; dK may still run
          pipe_do.consumer_release(rd);
          store_dq_partial(ss, tdQrdQ, wg, mma_tid % 128, dq_buf);
          dq_buf = dq_buf + 1 == dq_bufs ? 0 : dq_buf + 1;
          warpgroup_wait<0>();
          pipe_q.consumer_release(rd);
          ++rd;
        }
      }
    }
    epilogue(p, ss, t, mma_tid, tdKrdK, tdVrdV);
  }

  // The step's dQ partial into this warpgroup's half of the dQ buffer, in fragment order (see BwdTraits).
  template <class TensorDQ>
  __device__ __forceinline__ static void store_dq_partial(typename Traits::SharedStorage& ss, TensorDQ const& dq,
                                                          int wg, int wg_tid, int buf) {
    static_assert(decltype(size(dq))::value == Traits::kDqFrag);
    int const slot = buf * Traits::kNumMmaWG + wg;
    named_bar_sync(kBarDqEmpty + slot, 128 + 32);
    float4* dst = reinterpret_cast<float4*>(ss.smem_dq.data() + slot * Traits::kDqHalf) + wg_tid;
    CUTLASS_PRAGMA_UNROLL
    for (int v = 0; v < Traits::kDqFrag / 4; ++v)
      dst[v * 128] = make_float4(dq(4 * v), dq(4 * v + 1), dq(4 * v + 2), dq(4 * v + 3));
    cutlass::arch::fence_view_async_shared();  // generic stores -> bulk copy reads
    named_bar_arrive(kBarDqFull + slot, 128 + 32);
  }

  // dK (times the softmax scale) and dV rounded once, staged in K's and V's buffers, stored with TMA (which clips
  // the rows past s_kv). A key block no query sees stores zeros.
  template <class TensorAcc>
  __device__ __forceinline__ static void epilogue(Params const& p, typename Traits::SharedStorage& ss,
                                                  TileInfo const& t, int mma_tid, TensorAcc& dk, TensorAcc& dv) {
    typename Traits::TiledMmadKV mma_dkv;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(dk); ++i) dk(i) *= p.scale;
    Tensor rdK = make_tensor<Element>(dk.layout());
    Tensor rdV = make_tensor<Element>(dv.layout());
    convert_fragment(dk, rdK);
    convert_fragment(dv, rdV);
    Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutV{});
    auto kv_copy = make_tiled_copy_C(typename Traits::SmemCopyAtom{}, mma_dkv);
    auto thr_kv_copy = kv_copy.get_thread_slice(mma_tid);
    named_bar_sync(kBarDS, Traits::kNumMmaThreads);  // every wgmma of both warpgroups is done with K and V
    copy(kv_copy, thr_kv_copy.retile_S(rdK), thr_kv_copy.partition_D(sK));
    copy(kv_copy, thr_kv_copy.retile_S(rdV), thr_kv_copy.partition_D(sV));
    cutlass::arch::fence_view_async_shared();  // stmatrix writes -> TMA store reads
    named_bar_sync(kBarDS, Traits::kNumMmaThreads);
    store_dkv(p, t, sK, sV, mma_tid);
  }
};

}  // namespace frost::sm90::bwd
