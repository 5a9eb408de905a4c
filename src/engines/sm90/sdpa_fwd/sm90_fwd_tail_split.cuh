// SCHED_POLICY 3 on the device: the exchange of partial results between the CTAs that share a tile of the last
// wave (sm90_fwd_tail_split.h has the scheme and the workspace layout, sm90_fwd_tile_scheduler.cuh the units).
// A CTA's piece is always its first tail unit, so slot c is written at most once. An owner waits only for first
// units of later CTAs, which wait for nothing, and all CTAs of the grid are resident (one per SM): the waits
// cannot deadlock.
#pragma once
#include "sm90_fwd_epilogue_tma_store.cuh"

namespace frost::sm90::fwd {

using namespace cute;

__device__ __forceinline__ void store_release(int* flag, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(v) : "memory");
}
__device__ __forceinline__ int load_acquire(int const* flag) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

// Slot layout: element i of every consumer thread's O fragment at [i * threads + thread] (each warp's access is one
// contiguous run), then the row maxima and row sums at [(r or 2 + r) * threads + thread].
template <class Traits>
struct TailSplitExchange {
  static constexpr int kThreads = Traits::kNumMmaThreads;
  static constexpr int64_t kSlotFloats = split_slot_floats(Traits::kBlockM, Traits::kHeadDimV);

  template <class Params>
  __device__ __forceinline__ static float* slot(Params const& p, int cta) {
    return p.split.partials + int64_t(cta) * kSlotFloats;
  }

  // A piece: leave the unnormalized O and the row state in this CTA's slot, then raise its flag.
  template <class Params, class TensorO, class Softmax>
  __device__ __forceinline__ static void leave_piece(Params const& p, int mma_tid, TensorO const& tOrO,
                                                     Softmax const& sm) {
    static_assert(sizeof(sm.row_max) / sizeof(float) == 2, "two rows per consumer thread");
    float* s = slot(p, blockIdx.x);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(tOrO); ++i) __stcg(s + i * kThreads + mma_tid, tOrO(i));
    float* stats = s + Traits::kBlockM * Traits::kHeadDimV;
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < 2; ++r) {
      __stcg(stats + r * kThreads + mma_tid, sm.row_max[r]);
      __stcg(stats + (2 + r) * kThreads + mma_tid, sm.row_sum[r]);
    }
    // Every consumer thread's stores precede the barrier, the barrier precedes the release: the flag publishes
    // the whole slot.
    named_bar_sync(kBarEpilogue, kThreads);
    if (mma_tid == 0) store_release(p.split.ready + blockIdx.x, 1);
  }

  // The owner of tail tile `a`: fold in, in CTA order, the pieces of the later CTAs whose ranges start inside the
  // tile. Rows merge as two softmax states: with M the larger maximum, O = O_own 2^((m_own - M) s) +
  // O_piece 2^((m_piece - M) s), and the sums alike (each thread's partial sums: finalize reduces them).
  template <class Params, class TensorO, class Softmax>
  __device__ __forceinline__ static void merge_pieces(Params const& p, int64_t a, int mma_tid, TensorO& tOrO,
                                                      Softmax& sm, float scale_log2) {
    auto o_rc = make_tensor(tOrO.data(), acc_rowcol_layout(tOrO.layout()));
    static_assert(decltype(size<0>(o_rc))::value == 2, "two rows per consumer thread");
    int64_t const tile_end = (a + 1) * p.split.blocks;
    for (int c = blockIdx.x + 1; c < int(gridDim.x); ++c) {
      int64_t const begin = tail_begin(p.split, c);
      if (begin >= tile_end) break;
      if (begin == tail_begin(p.split, c + 1)) continue;  // an empty range leaves nothing
      if (mma_tid == 0)
        while (load_acquire(p.split.ready + c) == 0) __nanosleep(64);
      named_bar_sync(kBarEpilogue, kThreads);  // the acquire above, then every thread reads the slot
      float const* s = slot(p, c);
      float const* stats = s + Traits::kBlockM * Traits::kHeadDimV;
      float keep[2], take[2];
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) {
        float const m_piece = __ldcg(stats + r * kThreads + mma_tid);
        float const l_piece = __ldcg(stats + (2 + r) * kThreads + mma_tid);
        float const m = fmaxf(sm.row_max[r], m_piece);
        // A row without a visible key in either part keeps max -inf: both factors 0, so O and the sum stay 0.
        float const m_scaled = m == -INFINITY ? 0.f : m * scale_log2;
        keep[r] = exp2f(sm.row_max[r] * scale_log2 - m_scaled);
        take[r] = exp2f(m_piece * scale_log2 - m_scaled);
        sm.row_sum[r] = sm.row_sum[r] * keep[r] + l_piece * take[r];
        sm.row_max[r] = m;
      }
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) {
        CUTLASS_PRAGMA_UNROLL
        for (int c2 = 0; c2 < size<1>(o_rc); ++c2) {
          int const i = o_rc.layout()(r, c2);  // the element's index in the fragment, as leave_piece stored it
          o_rc(r, c2) = o_rc(r, c2) * keep[r] + __ldcg(s + i * kThreads + mma_tid) * take[r];
        }
      }
    }
  }
};

}  // namespace frost::sm90::fwd
