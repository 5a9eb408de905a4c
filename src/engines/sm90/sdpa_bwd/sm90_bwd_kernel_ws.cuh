// Kernel entry of the sm90 attention backward, and its two producer roles.
//
// Grid: one CTA per (key block, kv head, batch). The (batch, kv head) pairs are taken in groups of heads_per_group
// (under a right bound as many as keep the group's Q, dO and dQ accumulator within ~32 MB of L2; without one 1, or
// in the deterministic mode enough to start a head's key blocks about a step apart, see launch_sdpa_bwd); inside a
// group key blocks are the outer index, ascending (under a causal mask the first key blocks see the most queries:
// longest tiles first, the short ones fill the tail) or descending (the deterministic mode under a right bound, see
// write_dq).
//
// Warp 0 (one thread) loads K and V once, then Q, dO and their statistics (base-2 LSE, D) for every query block of
// every query head of the GQA group through two kStages-deep mbarrier pipelines. Warp 1 takes each step's FP32 dQ
// partial from shared memory and adds it into the workspace with one bulk reduce-add per consumer warpgroup (not
// in the split-d variants, whose consumers add dQ from registers).
#pragma once
#include "sm90_bwd_mainloop.cuh"
#include "sm90_bwd_mainloop_splitd.cuh"

namespace frost::sm90::bwd {

using namespace cute;

template <class Traits>
__device__ __forceinline__ TileInfo decode_tile(BwdKernelParams<Traits> const& p) {
  TileInfo t;
  int const per_group = p.heads_per_group * p.num_n_blocks;
  int const group = int(blockIdx.x) / per_group;
  int const r = int(blockIdx.x) - group * per_group;
  int const bh0 = group * p.heads_per_group;
  int const gsize = min(p.heads_per_group, p.batch * p.h_kv - bh0);  // the last group may be short
  int const n_idx = r / gsize;
  int const bh = bh0 + (r - n_idx * gsize);
  t.n_block = p.n_descending ? p.num_n_blocks - 1 - n_idx : n_idx;
  t.batch = bh / p.h_kv;
  t.kv_head = bh - t.batch * p.h_kv;
  int const len_q = side_len(p.seq_len_q, p.seq_len_q_stride, p.cu_seq_len_q, t.batch, p.s_q);
  int const len_kv = side_len(p.seq_len_kv, p.seq_len_kv_stride, p.cu_seq_len_kv, t.batch, p.s_kv);
  t.si = {len_q, len_kv, p.mask.bottom_right ? len_kv - len_q : 0};
  m_block_range<Traits::kBlockM, Traits::kBlockN>(t.n_block, t.si, p.mask, t.m_min, t.m_max);
  t.row0_q = tma_row0(p.rows_q, t.batch), t.row0_do = tma_row0(p.rows_do, t.batch);
  t.row0_k = tma_row0(p.rows_k, t.batch), t.row0_v = tma_row0(p.rows_v, t.batch);
  return t;
}

// ---------------------------------------------------------------- producer: TMA loads (a single thread)
template <class Traits>
__device__ __forceinline__ void produce(BwdKernelParams<Traits> const& p, typename Traits::SharedStorage& ss,
                                        typename Traits::Pipeline& pipe_q, typename Traits::Pipeline& pipe_do,
                                        TileInfo const& t) {
  using Pipeline = typename Traits::Pipeline;
  constexpr int kBlockM = Traits::kBlockM;
  using TileQ = Shape<Int<kBlockM>, Int<Traits::kHeadDim>>;
  using TiledO = Shape<Int<kBlockM>, Int<Traits::kHeadDimV>>;
  using TileK = Shape<Int<Traits::kBlockN>, Int<Traits::kHeadDim>>;
  using TileV = Shape<Int<Traits::kBlockN>, Int<Traits::kHeadDimV>>;
  Tensor mQ = p.tma_q.get_tma_tensor(p.shape_q);
  Tensor mdO = p.tma_do.get_tma_tensor(p.shape_do);
  Tensor mK = p.tma_k.get_tma_tensor(p.shape_k);
  Tensor mV = p.tma_v.get_tma_tensor(p.shape_v);
  Tensor sQ = make_tensor(make_smem_ptr(ss.smem_q.data()), typename Traits::SmemLayoutQ{});
  Tensor sdO = make_tensor(make_smem_ptr(ss.smem_do.data()), typename Traits::SmemLayoutdO{});
  Tensor sK = make_tensor(make_smem_ptr(ss.smem_k.data()), typename Traits::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(ss.smem_v.data()), typename Traits::SmemLayoutV{});

  // Dense tensors are addressed by batch; packed ones by token, from the batch's first token.
  auto view = [&](auto& m, DevRows const& r, int row0, int head) {
    return domain_offset(make_coord(row0, _0{}), m(_, _, head, r.kind ? 0 : t.batch));
  };
  Tensor gK = local_tile(view(mK, p.rows_k, t.row0_k, t.kv_head), TileK{}, make_coord(t.n_block, _0{}));
  Tensor gV = local_tile(view(mV, p.rows_v, t.row0_v, t.kv_head), TileV{}, make_coord(t.n_block, _0{}));
  auto [tKg, tKs] = tma_partition(p.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
  auto [tVg, tVs] = tma_partition(p.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));
  auto& bar_kv = reinterpret_cast<uint64_t&>(ss.barrier_kv);
  ss.barrier_kv.arrive_and_expect_tx(Traits::kTmaBytesKV);
  copy(p.tma_k.with(bar_kv, 0), tKg, tKs);
  copy(p.tma_v.with(bar_kv, 0), tVg, tVs);

  int64_t const s_pad = int64_t(p.num_m_blocks) * kBlockM;
  typename Traits::PipelineState wr = cutlass::make_producer_start_state<Pipeline>();
  for (int g = 0; g < p.h_ratio; ++g) {
    int const hq = t.kv_head * p.h_ratio + g;
    Tensor gQ = local_tile(view(mQ, p.rows_q, t.row0_q, hq), TileQ{}, make_coord(_, _0{}));  // (kBlockM, d, m_blocks)
    Tensor gdO = local_tile(view(mdO, p.rows_do, t.row0_do, hq), TiledO{}, make_coord(_, _0{}));
    auto [tQg, tQs] = tma_partition(p.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    auto [tdOg, tdOs] = tma_partition(p.tma_do, _0{}, Layout<_1>{}, group_modes<0, 2>(sdO), group_modes<0, 2>(gdO));
    float const* lse_head = p.lse2 + (int64_t(t.batch) * p.h_q + hq) * s_pad;
    float const* delta_head = p.delta + (int64_t(t.batch) * p.h_q + hq) * s_pad;
    CUTLASS_PRAGMA_NO_UNROLL
    for (int m = t.m_min; m < t.m_max; ++m) {
      int const stage = wr.index();
      pipe_q.producer_acquire(wr);
      uint64_t* bar_q = pipe_q.producer_get_barrier(wr);
      copy(p.tma_q.with(*bar_q, 0), tQg(_, m), tQs(_, stage));
      bulk_load(ss.smem_lse.data() + stage * kBlockM, lse_head + m * kBlockM, kBlockM * sizeof(float), bar_q);
      pipe_do.producer_acquire(wr);
      uint64_t* bar_do = pipe_do.producer_get_barrier(wr);
      copy(p.tma_do.with(*bar_do, 0), tdOg(_, m), tdOs(_, stage));
      bulk_load(ss.smem_delta.data() + stage * kBlockM, delta_head + m * kBlockM, kBlockM * sizeof(float), bar_do);
      ++wr;
    }
  }
}

// ---------------------------------------------------------------- producer: dQ reduce-adds (one warp)
// Default mode: the adds of different CTAs into one dQ block land in any order (FP32 addition is not associative:
// the last bits vary run to run). Deterministic mode: a counter per (batch, query head, query block) admits the key
// blocks one at a time in a fixed order: ascending key blocks, or descending under a right bound, where the tiles of
// a head are also launched last key block first. Either way a CTA only ever waits for CTAs launched before it
// (resident or finished: no deadlock); under a causal mask the block that adds first is the one that reached the
// row first. Without a band every key block of a head starts at query block 0, so the k-th one waits for k
// reduce-and-release latencies before its first add where the key blocks start together (the first wave; later
// ones start them apart, see launch_sdpa_bwd; NOTES.md: a staggered walk measured slower).
template <class Traits>
__device__ __forceinline__ void write_dq(BwdKernelParams<Traits> const& p, typename Traits::SharedStorage& ss,
                                         TileInfo const& t) {
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kWG = Traits::kNumMmaWG;
  constexpr int kHalf = Traits::kDqHalf;
  constexpr int kBarThreads = 128 + 32;
  static_assert(kBarDqEmpty + Traits::kDqBufs * kWG <= 16, "named barrier ids");
  int const lane = int(threadIdx.x) % 32;
  int const steps = t.m_max > t.m_min ? (t.m_max - t.m_min) * p.h_ratio : 0;
  if (steps == 0) return;
  // Buffers in turn. The default mode hands a buffer back once the bulk reduce has read it. The deterministic mode
  // waits for each add to complete and be released; with one buffer it hands the buffer back before that wait, with
  // two (d128) after it (measured faster than before it, NOTES.md v4), the consumers filling the other one meanwhile.
  int const bufs = p.deterministic ? Traits::kDqBufs : 1;
  bool const hold = p.deterministic && bufs > 1;
  for (int b = 0; b < min(bufs, steps); ++b)
    for (int wg = 0; wg < kWG; ++wg) named_bar_arrive(kBarDqEmpty + b * kWG + wg, kBarThreads);
  int step = 0, buf = 0;
  for (int g = 0; g < p.h_ratio; ++g) {
    int64_t const bh = int64_t(t.batch) * p.h_q + t.kv_head * p.h_ratio + g;
    float* acc_head = p.dq_acc + bh * p.num_m_blocks * (kBlockM * Traits::kHeadDim);
    int* sema_head = p.sema + bh * p.num_m_blocks;
    CUTLASS_PRAGMA_NO_UNROLL
    for (int m = t.m_min; m < t.m_max; ++m) {
      if (p.deterministic) {
        int n_lo, n_hi;
        n_block_range<kBlockM, kBlockN>(m, t.si, p.mask, n_lo, n_hi);
        if (lane == 0) wait_counter(sema_head + m, p.n_descending ? n_hi - t.n_block : t.n_block - n_lo);
        __syncwarp();
      }
      float* dst = acc_head + int64_t(m) * (kBlockM * Traits::kHeadDim);
      float const* src = ss.smem_dq.data() + buf * kWG * kHalf;
      for (int wg = 0; wg < kWG; ++wg) {
        named_bar_sync(kBarDqFull + buf * kWG + wg, kBarThreads);
        if (lane == 0) {
          bulk_reduce_add_f32(dst + wg * kHalf, src + wg * kHalf, kHalf * sizeof(float));
          bulk_commit();
        }
      }
      auto release = [&] {
        if (lane == 0) {
          bulk_wait_all();
          bump_counter(sema_head + m);
        }
      };
      if (hold) release();
      else if (lane == 0) bulk_wait_read_all();
      __syncwarp();
      ++step;
      if (step + bufs <= steps)  // the consumers write this buffer again at step + bufs
        for (int wg = 0; wg < kWG; ++wg) named_bar_arrive(kBarDqEmpty + buf * kWG + wg, kBarThreads);
      buf = buf + 1 == bufs ? 0 : buf + 1;
      if (p.deterministic && !hold) release();
    }
  }
  if (lane == 0) bulk_wait_all();
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kNumThreads, 1)
    sm90_sdpa_bwd_kernel(CUTE_GRID_CONSTANT BwdKernelParams<Traits> const p) {
  using Pipeline = typename Traits::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<typename Traits::SharedStorage*>(smem_raw);

  int const warp_idx = cutlass::canonical_warp_idx_sync();
  int const wg_idx = cutlass::canonical_warp_group_idx();
  if (warp_idx == 0 && cute::elect_one_sync()) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_do.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
    ss.barrier_kv.init(1);
  }
  typename Pipeline::Params pp;
  pp.transaction_bytes = Traits::kTmaBytesQ;  // Q + LSE
  pp.role = wg_idx == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = Traits::kNumMmaThreads;
  Pipeline pipe_q(ss.pipeline_q, pp, Shape<_1, _1, _1>{});
  pp.transaction_bytes = Traits::kTmaBytesdO;  // dO + D
  Pipeline pipe_do(ss.pipeline_do, pp, Shape<_1, _1, _1>{});
  __syncthreads();

  TileInfo const t = decode_tile(p);
  if (wg_idx == 0) {
    cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
    if (threadIdx.x == 0) {
      if (t.m_max > t.m_min) produce(p, ss, pipe_q, pipe_do, t);
    } else if (warp_idx == 1) {
      if constexpr (Traits::kDqViaSmem) write_dq(p, ss, t);
    }
    if constexpr (Traits::kSplitD) {
      if constexpr (Traits::kDeterministic)
        if (warp_idx == 1 || warp_idx == 2) BwdConsumerSplitD<Traits>::keep_turns(p, t, warp_idx);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
    if constexpr (Traits::kSplitD)
      BwdConsumerSplitD<Traits>::run(p, ss, pipe_q, pipe_do, t, int(threadIdx.x) - 128);
    else
      BwdConsumer<Traits>::run(p, ss, pipe_q, pipe_do, t, int(threadIdx.x) - 128);
  }
}

}  // namespace frost::sm90::bwd
