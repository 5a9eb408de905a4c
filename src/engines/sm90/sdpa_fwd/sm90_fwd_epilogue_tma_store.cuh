// Epilogue: normalize O (with the sink in the denominator), write LSE from registers, stage O (16-bit) in smem with
// stmatrix (its own buffer, or Q's when shared memory is short) and store each consumer warpgroup's 64 rows with
// one TMA bulk copy issued by that warpgroup, which also clips the rows past s_q. Packed (THD) rows that end past
// their sequence, and PACK_GQA tiles (rows of several query heads), are stored row by row instead, so rows outside
// the tile's sequence stay untouched.
#pragma once
#include "sm90_fwd_mainloop_tma_ws.cuh"

namespace frost::sm90::fwd {

using namespace cute;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.69314718055994531f;

// kGeneral = false (plain kernel): every row below s_q is valid, no sink, dense O and LSE. kPack: tile row r is
// position m_block * pack_rows + r % pack_rows of query head head * pack_group + r / pack_rows.
template <class Traits, bool kGeneral, bool kPack>
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

  __device__ __forceinline__ static Element* o_tile(Params const& p, TileInfo const& t) {
    int64_t const base = p.rows_o.kind ? packed_start(p.rows_o, t.batch) : t.batch * p.o_stride_b;
    return p.o_ptr + base + t.head * p.o_stride_h + int64_t(t.m_block) * kBlockM * p.o_stride_s;
  }

  // Element offset of a PACK_GQA tile row in a [b][h][s] tensor with the given strides; -1 past s_q.
  __device__ __forceinline__ static int64_t packed_row(Params const& p, TileInfo const& t, int row, int64_t sb,
                                                       int64_t sh, int64_t ss) {
    int const g = row / p.pack_rows;
    int const pos = t.m_block * p.pack_rows + row - g * p.pack_rows;
    if (pos >= p.s_q) return -1;
    return t.batch * sb + int64_t(t.head * p.pack_group + g) * sh + pos * ss;
  }

  // The warpgroup's 64 staged rows, 16-byte stores to dst(row of the warpgroup) or nothing where it is null.
  template <class TensorS, class Dst>
  __device__ __forceinline__ static void store_rows(TensorS const& sO, int wg, int mma_tid, Dst&& dst) {
    for (int i = mma_tid % 128; i < 64 * kChunks; i += 128) {
      if (Element* o = dst(i / kChunks))
        *reinterpret_cast<uint4*>(o + i % kChunks * 8) =
            *reinterpret_cast<uint4 const*>(&sO(wg * 64 + i / kChunks, i % kChunks * 8));
    }
  }

  __device__ __forceinline__ static float sink2(Params const& p, TileInfo const& t) {
    return kGeneral && p.sink ? p.sink[t.head] * kLog2e : -INFINITY;
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
    sm.finalize(inv_sum, lse2, kGeneral ? ss.scale_log2 : p.scale_log2, sink2(p, t));
    int const row0 = t.m_block * kBlockM;
    // Padding rows (past the batch's length) are selected to 0, not scaled: they may have read anything.
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      bool const valid = !kGeneral || row0 + get<0>(cO_rc(r, 0)) < t.len_q;
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < size<1>(o_rc); ++c) o_rc(r, c) = valid ? o_rc(r, c) * inv_sum[r] : 0.f;
      if (!valid) lse2[r] = -INFINITY;
    }

    if (kPack && p.lse != nullptr && get<1>(cO_rc(0, 0)) == 0) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r) {
        int64_t const at = packed_row(p, t, get<0>(cO_rc(r, 0)), p.lse_stride_b, p.lse_stride_h, p.lse_stride_s);
        if (at >= 0) p.lse[at] = p.lse_log2 ? lse2[r] : lse2[r] * kLn2;
      }
    } else if (p.lse != nullptr && get<1>(cO_rc(0, 0)) == 0) {  // the quad lane holding column 0 writes the row
      int lse_rows = p.s_q;
      float* lse = kGeneral ? lse_head(p, t, lse_rows) : p.lse + t.batch * p.lse_stride_b + t.head * p.lse_stride_h;
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < kRows; ++r) {
        int const row = row0 + get<0>(cO_rc(r, 0));
        if (row < lse_rows) lse[row * p.lse_stride_s] = p.lse_log2 ? lse2[r] : lse2[r] * kLn2;
      }
    }

    Tensor tOrO16 = make_tensor<Element>(tOrO.layout());
    convert_fragment(tOrO, tOrO16);
    // Each consumer warpgroup stores its own 64 rows: a 128-thread barrier and one TMA store per warpgroup, so a
    // warpgroup that is done with its tile moves on to the next one while the other still runs its last P V.
    int const wg = mma_tid / 128;
    bool const leader = mma_tid % 128 == 0;
    Element* o_buf = Traits::kSeparateO ? ss.smem_o.data() : ss.smem_q.data();
    Tensor sO = make_tensor(make_smem_ptr(o_buf), typename Traits::SmemLayoutO{});
    if constexpr (Traits::kSeparateO) {
      // This warpgroup's previous O store may still be reading its rows: the thread that issued it waits.
      if (leader) tma_store_wait<0>();
      named_bar_sync(kBarEpilogueWG + wg, 128);
    } else {
      // O overwrites Q's buffer, whose rows are shared by the warpgroups: every Q K^T of the tile must be done.
      named_bar_sync(kBarEpilogue, Traits::kNumMmaThreads);
    }
    auto smem_copy = make_tiled_copy_C(typename Traits::SmemCopyAtomO{}, mma1);
    auto thr_copy = smem_copy.get_thread_slice(mma_tid);
    Tensor src = thr_copy.retile_S(tOrO16);
    Tensor dst = thr_copy.partition_D(sO);
    copy(smem_copy, src, dst);
    cutlass::arch::fence_view_async_shared();  // make the stmatrix writes visible to the TMA engine
    named_bar_sync(kBarEpilogueWG + wg, 128);

    int const row_wg = t.m_block * kBlockM + wg * 64;  // this warpgroup's first row
    int const rows = min(64, (kGeneral && p.rows_o.kind ? t.len_q : p.s_q) - row_wg);
    if (kPack || (kGeneral && p.rows_o.kind && rows < 64)) {
      if constexpr (kPack) {
        store_rows(sO, wg, mma_tid, [&](int r) -> Element* {
          int64_t const at = packed_row(p, t, wg * 64 + r, p.o_stride_b, p.o_stride_h, p.o_stride_s);
          return at < 0 ? nullptr : p.o_ptr + at;
        });
      } else {
        // Packed rows that end past their sequence: the sequence's rows only.
        Element* o = o_tile(p, t) + int64_t(wg) * 64 * p.o_stride_s;
        store_rows(sO, wg, mma_tid, [&](int r) { return r < rows ? o + r * p.o_stride_s : nullptr; });
      }
      if constexpr (!Traits::kSeparateO) {
        named_bar_sync(kBarEpilogueWG + wg, 128);  // every read of this warpgroup's rows is done
        if (leader) ss.barrier_o.arrive();
      }
      return;
    }
    if (leader) {
      Tensor mO = p.tma_o.get_tma_tensor(p.shape_o);
      int const row_start = kGeneral ? tma_row0(p.rows_o, t.batch) : 0;
      int const batch = kGeneral && p.rows_o.kind ? 0 : t.batch;
      Tensor gO = local_tile(domain_offset(make_coord(row_start, _0{}), mO(_, _, t.head, batch)),
                             Shape<_64, Int<Traits::kHeadDimV>>{},
                             make_coord(t.m_block * Traits::kNumMmaWG + wg, _0{}));
      // The warpgroup's rows are one contiguous block of the O layout (see SmemLayoutO).
      Tensor sO_wg = make_tensor(make_smem_ptr(o_buf + wg * 64 * Traits::kHeadDimV), typename Traits::SmemLayoutOWG{});
      auto [tOg, tOs] = tma_partition(p.tma_o, _0{}, Layout<_1>{}, group_modes<0, 2>(sO_wg), group_modes<0, 2>(gO));
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
