// Mainloop of the warp-specialized attention forward: the TMA producer and the wgmma consumers.
//
// Producer (one thread): per tile, K of the first key block, then Q (once the previous tile no longer needs Q's
// buffer: after its last Q K^T, or after its O store when O reuses the buffer), then K(n-1) and V(n) interleaved
// down to block 0, so the consumers always find K(j+1) before they need V(j). K and V each cycle through a
// kStages-deep mbarrier pipeline.
//
// Consumers (one warpgroup per 64 query rows): key blocks are visited from the last to the first. Iteration j
// issues S(j) = Q K(j)^T and O += P(j+1) V(j+1) back to back, then runs the softmax of S(j) while the P V
// wgmma is still running (intra-warpgroup overlap). Named barriers make the warpgroups take turns issuing their
// wgmmas, so one warpgroup's softmax overlaps the other's tensor-core work (inter-warpgroup ping-pong).
#pragma once
#include "sm90_fwd_kernel_traits.cuh"
#include "sm90_fwd_softmax_online.cuh"
#include "sm90_fwd_tile_scheduler.cuh"
#include <cutlass/numeric_conversion.h>

namespace frost::sm90::fwd {

using namespace cute;

// Named barrier ids (0 is __syncthreads): 1 = all consumers before the O store, 2.. = one per consumer warpgroup
// for the issue turn.
constexpr int kBarEpilogue = 1;
constexpr int kBarTurnBase = 2;

__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Issue one warpgroup-wide wgmma over the whole K extent of the fragments; kWait < 0 leaves it in flight.
template <bool kZeroInit, int kWait, bool kAInRegs, class TiledMma, class TA, class TB, class TC>
__device__ __forceinline__ void wg_gemm(TiledMma& mma, TA& a, TB const& b, TC& c) {
  if constexpr (kAInRegs) warpgroup_fence_operand(a);
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  if constexpr (kWait >= 0) warpgroup_wait<kWait>();
  warpgroup_fence_operand(c);
  if constexpr (kAInRegs) warpgroup_fence_operand(a);
}

// fp32 fragment -> 16-bit fragment with the same storage order (layouts of both tensors index the same slots).
template <class TensorF, class TensorH>
__device__ __forceinline__ void convert_fragment(TensorF const& f, TensorH& h) {
  using To = typename TensorH::value_type;
  constexpr int N = decltype(size(f))::value;
  static_assert(N % 2 == 0);
  cutlass::NumericArrayConverter<To, float, N> conv;
  *reinterpret_cast<cutlass::Array<To, N>*>(h.data()) = conv(*reinterpret_cast<cutlass::Array<float, N> const*>(f.data()));
}

// Set masked scores to -inf: keys >= s_kv, and under a causal mask keys beyond the row's diagonal.
template <class TensorS, class TensorC, class Params>
__device__ __forceinline__ void apply_mask(TensorS& s, TensorC const& coord, int row0, int col0, Params const& p) {
  CUTLASS_PRAGMA_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    int const row = row0 + get<0>(coord(r, 0));
    int limit = p.s_kv - col0;  // first masked column, relative to the block
    if (p.causal) limit = min(limit, row + p.causal_offset + 1 - col0);
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < size<1>(s); ++c)
      if (get<1>(coord(r, c)) >= limit) s(r, c) = -INFINITY;
  }
}

template <class Traits>
struct FwdMainloop {
  using Element = typename Traits::Element;
  using Pipeline = typename Traits::Pipeline;
  using PipelineState = typename Traits::PipelineState;
  using Params = FwdKernelParams<Traits>;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;

  // ---------------------------------------------------------------- producer (a single thread)
  __device__ __forceinline__ static void produce(Params const& p, typename Traits::SharedStorage& ss,
                                                 Pipeline& pipe_k, Pipeline& pipe_v) {
    Tensor mQ = p.tma_q.get_tma_tensor(p.shape_q);
    Tensor mK = p.tma_k.get_tma_tensor(p.shape_k);
    Tensor mV = p.tma_v.get_tma_tensor(p.shape_k);
    Tensor sQ = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutV{});
    PipelineState wr_k = cutlass::make_producer_start_state<Pipeline>();
    PipelineState wr_v = cutlass::make_producer_start_state<Pipeline>();
    auto& bar_q = reinterpret_cast<uint64_t&>(ss.barrier_q);

    for (int iter = 0;; ++iter) {
      int const tile = tile_of_wave(iter);
      if (tile >= p.num_tiles) break;
      TileCoord const tc = decode_tile(tile, p);
      int const n_blocks = num_key_blocks<kBlockM, kBlockN>(tc.m_block, p);
      int const kv_head = tc.head / p.h_ratio;
      Tensor gQ = local_tile(mQ(_, _, tc.head, tc.batch), select<0, 2>(typename Traits::TileShapeQK{}),
                             make_coord(tc.m_block, _0{}));
      Tensor gK = local_tile(mK(_, _, kv_head, tc.batch), select<1, 2>(typename Traits::TileShapeQK{}),
                             make_coord(_, _0{}));  // (kBlockN, d, n_blocks)
      Tensor gV = local_tile(mV(_, _, kv_head, tc.batch), select<1, 2>(typename Traits::TileShapeQK{}),
                             make_coord(_, _0{}));
      auto [tQg, tQs] = tma_partition(p.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
      auto [tKg, tKs] = tma_partition(p.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
      auto [tVg, tVs] = tma_partition(p.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));

      auto load_k = [&](int n) {
        pipe_k.producer_acquire(wr_k);
        copy(p.tma_k.with(*pipe_k.producer_get_barrier(wr_k), 0), tKg(_, n), tKs(_, wr_k.index()));
        ++wr_k;
      };
      auto load_v = [&](int n) {
        pipe_v.producer_acquire(wr_v);
        copy(p.tma_v.with(*pipe_v.producer_get_barrier(wr_v), 0), tVg(_, n), tVs(_, wr_v.index()));
        ++wr_v;
      };

      if (n_blocks > 0) load_k(n_blocks - 1);
      // Wait until the previous tile no longer needs the Q buffer (its last Q K^T, or its O store when O reuses it).
      if (iter > 0) ss.barrier_o.wait((iter - 1) & 1);
      ss.barrier_q.arrive_and_expect_tx(Traits::kTmaBytesQ);
      copy(p.tma_q.with(bar_q, 0), tQg, tQs);
      for (int n = n_blocks - 1; n > 0; --n) {
        load_k(n - 1);
        load_v(n);
      }
      if (n_blocks > 0) load_v(0);
    }
  }

  // ---------------------------------------------------------------- consumers
  // Runs the key-block loop of one tile; returns with O (unnormalized) in tOrO and the row statistics in sm.
  template <class TensorO, class Softmax>
  __device__ __forceinline__ static void consume_tile(Params const& p, typename Traits::SharedStorage& ss,
                                                      Pipeline& pipe_k, Pipeline& pipe_v, PipelineState& rd_k,
                                                      PipelineState& rd_v, TileCoord const& tc, int n_blocks,
                                                      int mma_tid, TensorO& tOrO, Softmax& sm) {
    constexpr int kNumWG = Traits::kNumMmaWG;
    int const wg = mma_tid / 128;
    typename Traits::TiledMmaQK mma0;
    typename Traits::TiledMmaPV mma1;
    auto thr0 = mma0.get_thread_slice(mma_tid);
    auto thr1 = mma1.get_thread_slice(mma_tid);
    Tensor sQ = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
    Tensor sVt = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutVt{});
    Tensor tSrQ = thr0.partition_fragment_A(sQ);   // (MMA, MMA_M, MMA_K) smem descriptors
    Tensor tSrK = thr0.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, stage)
    Tensor tOrV = thr1.partition_fragment_B(sVt);  // (MMA, MMA_d, MMA_N, stage)
    Tensor cS = make_identity_tensor(select<0, 1>(typename Traits::TileShapeQK{}));
    Tensor tScS = thr0.partition_C(cS);
    Tensor cS_rc = make_tensor(tScS.data(), acc_rowcol_layout(tScS.layout()));
    auto o_rc = make_tensor(tOrO.data(), acc_rowcol_layout(tOrO.layout()));
    constexpr int kRows = decltype(size<0>(cS_rc))::value;
    float rescale[kRows];

    int const row0 = tc.m_block * kBlockM;
    auto turn_sync = [&] { named_bar_sync(kBarTurnBase + wg, 2 * 128); };
    auto turn_pass = [&] { named_bar_arrive(kBarTurnBase + (wg + 1) % kNumWG, 2 * 128); };

    Tensor tSrS = partition_fragment_C(mma0, select<0, 1>(typename Traits::TileShapeQK{}));
    Tensor tOrP = make_tensor<Element>(acc_to_a_operand_layout(tSrS.layout()));
    auto s_rc = make_tensor(tSrS.data(), acc_rowcol_layout(tSrS.layout()));

    // First (highest) key block: S only.
    int n = n_blocks - 1;
    pipe_k.consumer_wait(rd_k);
    turn_sync();
    wg_gemm<true, -1, false>(mma0, tSrQ, tSrK(_, _, _, rd_k.index()), tSrS);
    turn_pass();
    warpgroup_wait<0>();
    pipe_k.consumer_release(rd_k);
    ++rd_k;
    if (key_block_needs_mask<kBlockM, kBlockN>(tc.m_block, n, p)) apply_mask(s_rc, cS_rc, row0, n * kBlockN, p);
    sm.template update<true>(s_rc, rescale);
    convert_fragment(tSrS, tOrP);

    for (--n; n >= 0; --n) {
      pipe_k.consumer_wait(rd_k);
      turn_sync();
      wg_gemm<true, -1, false>(mma0, tSrQ, tSrK(_, _, _, rd_k.index()), tSrS);
      pipe_v.consumer_wait(rd_v);
      wg_gemm<false, -1, true>(mma1, tOrP, tOrV(_, _, _, rd_v.index()), tOrO);
      turn_pass();
      warpgroup_wait<1>();  // S(n) has landed; P V may still run
      pipe_k.consumer_release(rd_k);
      ++rd_k;
      if (key_block_needs_mask<kBlockM, kBlockN>(tc.m_block, n, p)) apply_mask(s_rc, cS_rc, row0, n * kBlockN, p);
      sm.template update<false>(s_rc, rescale);
      warpgroup_wait<0>();
      pipe_v.consumer_release(rd_v);
      ++rd_v;
      rescale_rows(o_rc, rescale);
      convert_fragment(tSrS, tOrP);
    }
    // Every Q K^T of this warpgroup has completed: with a separate O buffer, Q's buffer may take the next tile.
    if constexpr (Traits::kSeparateO) {
      if (mma_tid % 32 == 0) ss.barrier_o.arrive();  // one arrival per warp, after its own wgmma wait
    }
    pipe_v.consumer_wait(rd_v);
    wg_gemm<false, 0, true>(mma1, tOrP, tOrV(_, _, _, rd_v.index()), tOrO);
    pipe_v.consumer_release(rd_v);
    ++rd_v;
  }
};

}  // namespace frost::sm90::fwd
