// Epilogue: normalize O, write LSE from registers, stage O (16-bit) in smem with stmatrix (its own buffer, or Q's
// when shared memory is short) and store the tile with one TMA bulk copy, which also clips the rows past s_q.
#pragma once
#include "sm90_fwd_mainloop_tma_ws.cuh"

namespace frost::sm90::fwd {

using namespace cute;

template <class Traits>
struct FwdEpilogue {
  using Element = typename Traits::Element;
  using Params = FwdKernelParams<Traits>;
  static constexpr int kBlockM = Traits::kBlockM;

  template <class TensorO, class Softmax>
  __device__ __forceinline__ static void store(Params const& p, typename Traits::SharedStorage& ss,
                                               TileCoord const& tc, int mma_tid, TensorO& tOrO, Softmax& sm) {
    typename Traits::TiledMmaPV mma1;
    auto thr1 = mma1.get_thread_slice(mma_tid);
    auto o_rc = make_tensor(tOrO.data(), acc_rowcol_layout(tOrO.layout()));
    constexpr int kRows = decltype(size<0>(o_rc))::value;
    float inv_sum[kRows], lse2[kRows];
    sm.finalize(inv_sum, lse2);
    rescale_rows(o_rc, inv_sum);

    if (p.lse != nullptr) {
      Tensor cO = make_identity_tensor(select<0, 1>(typename Traits::TileShapePV{}));
      Tensor tOcO = thr1.partition_C(cO);
      Tensor cO_rc = make_tensor(tOcO.data(), acc_rowcol_layout(tOcO.layout()));
      if (get<1>(cO_rc(0, 0)) == 0) {  // the quad lane holding column 0 writes the row
        float* lse_bh = p.lse + tc.batch * p.lse_stride_b + tc.head * p.lse_stride_h;
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRows; ++r) {
          int const row = tc.m_block * kBlockM + get<0>(cO_rc(r, 0));
          if (row < p.s_q) lse_bh[row] = p.lse_log2 ? lse2[r] : lse2[r] * 0.69314718055994531f;
        }
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
    if (mma_tid == 0) {
      Tensor mO = p.tma_o.get_tma_tensor(p.shape_o);
      Tensor gO = local_tile(mO(_, _, tc.head, tc.batch), select<0, 1>(typename Traits::TileShapePV{}),
                             make_coord(tc.m_block, _0{}));
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
