// Epilogue: normalize O (with the sink in the denominator), write LSE from registers, stage O (16-bit) in smem with
// stmatrix (its own buffer, or Q's when shared memory is short) and store the tile with one TMA bulk copy, which
// also clips the rows past s_q. A packed (THD) tile that ends past its sequence is stored row by row instead, so
// the next sequence's rows stay untouched.
#pragma once
#include "sm90_fwd_mainloop_tma_ws.cuh"

namespace frost::sm90::fwd {

using namespace cute;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.69314718055994531f;

template <class Traits>
struct FwdEpilogue {
  using Element = typename Traits::Element;
  using Params = FwdKernelParams<Traits>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kChunks = Traits::kHeadDimV / 8;  // 16-byte pieces of an O row

  // LSE of batch b, head h starts here; rows [0, lse_rows) of it are written (dense: all of s_q, padding rows
  // included; packed: only the sequence's rows).
  __device__ __forceinline__ static float* lse_head(Params const& p, TileInfo const& t, int& lse_rows) {
    lse_rows = p.rows_lse.kind ? t.len_q : p.s_q;
    int64_t const base = p.rows_lse.kind ? packed_start(p.rows_lse, t.batch) : t.batch * p.lse_stride_b;
    return p.lse + base + t.head * p.lse_stride_h;
  }

  // Rows of this tile that O holds: dense up to s_q (padding rows get zeros), packed up to the sequence's end.
  __device__ __forceinline__ static int o_rows(Params const& p, TileInfo const& t) {
    return min(kBlockM, (p.rows_o.kind ? t.len_q : p.s_q) - t.m_block * kBlockM);
  }

  __device__ __forceinline__ static Element* o_tile(Params const& p, TileInfo const& t) {
    int64_t const base = p.rows_o.kind ? packed_start(p.rows_o, t.batch) : t.batch * p.o_stride_b;
    return p.o_ptr + base + t.head * p.o_stride_h + int64_t(t.m_block) * kBlockM * p.o_stride_s;
  }

  __device__ __forceinline__ static float sink2(Params const& p, TileInfo const& t) {
    return p.sink ? p.sink[t.head] * kLog2e : -INFINITY;
  }

  template <class TensorO, class Softmax>
  __device__ __forceinline__ static void store(Params const& p, typename Traits::SharedStorage& ss,
                                               TileInfo const& t, int mma_tid, TensorO& tOrO, Softmax& sm) {
    typename Traits::TiledMmaPV mma1;
    auto thr1 = mma1.get_thread_slice(mma_tid);
    auto o_rc = make_tensor(tOrO.data(), acc_rowcol_layout(tOrO.layout()));
    constexpr int kRows = decltype(size<0>(o_rc))::value;
    Tensor cO = make_identity_tensor(select<0, 1>(typename Traits::TileShapePV{}));
    Tensor tOcO = thr1.partition_C(cO);
    Tensor cO_rc = make_tensor(tOcO.data(), acc_rowcol_layout(tOcO.layout()));
    float inv_sum[kRows], lse2[kRows];
    sm.finalize(inv_sum, lse2, ss.scale_log2, sink2(p, t));
    int const row0 = t.m_block * kBlockM;
    // Padding rows (past the batch's length) are selected to 0, not scaled: they may have read anything.
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      bool const valid = row0 + get<0>(cO_rc(r, 0)) < t.len_q;
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(o_rc); ++c) o_rc(r, c) = valid ? o_rc(r, c) * inv_sum[r] : 0.f;
      if (!valid) lse2[r] = -INFINITY;
    }

    if (p.lse != nullptr && get<1>(cO_rc(0, 0)) == 0) {  // the quad lane holding column 0 writes the row
      int lse_rows;
      float* lse = lse_head(p, t, lse_rows);
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r) {
        int const row = row0 + get<0>(cO_rc(r, 0));
        if (row < lse_rows) lse[row * p.lse_stride_s] = p.lse_log2 ? lse2[r] : lse2[r] * kLn2;
      }
    }

    Tensor tOrO16 = make_tensor<Element>(tOrO.layout());
    convert_fragment(tOrO, tOrO16);
    Element* o_buf = Traits::kSeparateO ? ss.smem_o.data() : ss.smem_q.data();
    Tensor sO = make_tensor(make_smem_ptr(o_buf), typename Traits::SmemLayoutO{});
    if constexpr (Traits::kSeparateO) {
      // The previous tile's O store may still be reading the buffer: its issuing thread waits, then all proceed.
      if (mma_tid == 0) tma_store_wait<0>();
      named_bar_sync(kBarEpilogue, Traits::kNumMmaThreads);
    }
    auto smem_copy = make_tiled_copy_C(typename Traits::SmemCopyAtomO{}, mma1);
    auto thr_copy = smem_copy.get_thread_slice(mma_tid);
    Tensor src = thr_copy.retile_S(tOrO16);
    Tensor dst = thr_copy.partition_D(sO);
    copy(smem_copy, src, dst);
    cutlass::arch::fence_view_async_shared();  // make the stmatrix writes visible to the TMA engine
    named_bar_sync(kBarEpilogue, Traits::kNumMmaThreads);

    int const rows = o_rows(p, t);
    if (p.rows_o.kind && rows < kBlockM) {
      // Packed tile past its sequence's end: plain 16-byte stores of the sequence's rows only.
      Element* o = o_tile(p, t);
      for (int i = mma_tid; i < rows * kChunks; i += Traits::kNumMmaThreads)
        *reinterpret_cast<uint4*>(o + (i / kChunks) * p.o_stride_s + i % kChunks * 8) =
            *reinterpret_cast<uint4 const*>(&sO(i / kChunks, i % kChunks * 8));
      if constexpr (!Traits::kSeparateO) {
        named_bar_sync(kBarEpilogue, Traits::kNumMmaThreads);  // every read of the Q buffer is done
        if (mma_tid == 0) ss.barrier_o.arrive();
      }
      return;
    }
    if (mma_tid == 0) {
      Tensor mO = p.tma_o.get_tma_tensor(p.shape_o);
      Tensor gO = local_tile(domain_offset(make_coord(tma_row0(p.rows_o, t.batch), _0{}),
                                           mO(_, _, t.head, p.rows_o.kind ? 0 : t.batch)),
                             select<0, 1>(typename Traits::TileShapePV{}), make_coord(t.m_block, _0{}));
      auto [tOg, tOs] = tma_partition(p.tma_o, _0{}, Layout<_1>{}, group_modes<0, 2>(sO), group_modes<0, 2>(gO));
      copy(p.tma_o, tOs, tOg);
      tma_store_arrive();
      if constexpr (!Traits::kSeparateO) {
        tma_store_wait<0>();  // the Q buffer has been read; the producer may load the next Q into it
        ss.barrier_o.arrive();
      }
    }
  }
};

}  // namespace frost::sm90::fwd
