// Host side of one backward variant: TMA descriptors, kernel parameters and the four launches (pre, dsink, main,
// post) on one stream. Included only by the instantiation files (sm90_bwd_inst_*.cu), one variant each.
#pragma once
#include "sm90_bwd_kernel_ws.cuh"
#include "sm90_bwd_prepost.cuh"
#include "sm90_bwd_splitd_traits.cuh"
#include "sm90_bwd_workspace.h"
#include "sm90_sdpa_bwd.h"
#include <algorithm>
#include <atomic>

namespace frost::sm90::bwd {

using namespace cute;

// TMA needs 16-byte multiples for every global stride; a stride of an extent-1 dimension is never applied, so round
// it up instead of rejecting the layout.
inline int64_t tma_safe_stride(int64_t stride, int64_t extent, int64_t elems_per_16b) {
  if (extent > 1) return stride;
  return std::max<int64_t>(elems_per_16b, (stride + elems_per_16b - 1) / elems_per_16b * elems_per_16b);
}

inline int clamp_bound(int64_t v) { return int(std::min<int64_t>(v, int64_t(1) << 28)); }

template <class Kernel>
cudaError_t raise_smem_limit(Kernel kernel, int bytes, int dev) {
  static std::atomic<uint64_t> done{0};  // one bit per device
  uint64_t const bit = uint64_t(1) << (dev & 63);
  if (done.load(std::memory_order_acquire) & bit) return cudaSuccess;
  cudaError_t const err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess) done.fetch_or(bit, std::memory_order_acq_rel);
  return err;
}

template <class Traits>
cudaError_t launch_sdpa_bwd(SdpaBwdParams const& a, void* workspace, cudaStream_t stream) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  constexpr int kHeadDimV = Traits::kHeadDimV;
  constexpr int64_t kVec = 16 / sizeof(Element);
  int const b = int(a.b), hq = int(a.h_q), hkv = int(a.h_kv), sq = int(a.s_q), skv = int(a.s_kv);
  int const num_m = (sq + kBlockM - 1) / kBlockM, num_n = (skv + kBlockN - 1) / kBlockN;
  BwdWorkspace const ws = bwd_workspace(a.b, a.h_q, a.s_q, a.d_qk, kBlockM);
  char* const wsb = static_cast<char*>(workspace);

  // Dense tensors are viewed as (s, d, h, b); packed ones as (tokens, d, h, 1), addressed from each batch's first
  // token, so a tile reads past its sequence at most into the next one or, past max_total_seq_len, zeros.
  auto gtensor = [&](auto* ptr, BwdRowStarts const& rows, int s, int64_t tokens, int d, int h, int64_t const(&st)[3]) {
    bool const packed = rows.kind != BwdRowKind::DENSE;
    int const rows_n = packed ? int(tokens) : s, batches = packed ? 1 : b;
    return make_tensor(make_gmem_ptr(ptr), make_shape(rows_n, d, h, batches),
                       make_stride(tma_safe_stride(st[2], rows_n, kVec), _1{}, tma_safe_stride(st[1], h, kVec),
                                   tma_safe_stride(st[0], batches, kVec)));
  };
  int64_t const tq = a.tokens_q > 0 ? a.tokens_q : a.b * a.s_q, tkv = a.tokens_kv > 0 ? a.tokens_kv : a.b * a.s_kv;
  auto mQ = gtensor(static_cast<Element const*>(a.q), a.q_rows, sq, tq, kHeadDim, hq, a.q_stride);
  auto mdO = gtensor(static_cast<Element const*>(a.d_o), a.do_rows, sq, tq, kHeadDimV, hq, a.do_stride);
  auto mK = gtensor(static_cast<Element const*>(a.k), a.k_rows, skv, tkv, kHeadDim, hkv, a.k_stride);
  auto mV = gtensor(static_cast<Element const*>(a.v), a.v_rows, skv, tkv, kHeadDimV, hkv, a.v_stride);
  auto mdK = gtensor(static_cast<Element*>(a.dk), a.dk_rows, skv, tkv, kHeadDim, hkv, a.dk_stride);
  auto mdV = gtensor(static_cast<Element*>(a.dv), a.dv_rows, skv, tkv, kHeadDimV, hkv, a.dv_stride);
  auto dev_rows = [](BwdRowStarts const& r, int64_t const(&st)[3]) {
    return DevRows{r.ptr, int(r.kind), st[0], st[2]};
  };
  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TiledO = Shape<Int<kBlockM>, Int<kHeadDimV>>;
  using TileK = Shape<Int<kBlockN>, Int<kHeadDim>>;
  using TileV = Shape<Int<kBlockN>, Int<kHeadDimV>>;
  using SmemQ = decltype(take<0, 2>(typename Traits::SmemLayoutQ{}));
  using SmemdO = decltype(take<0, 2>(typename Traits::SmemLayoutdO{}));
  using SmemK = typename Traits::SmemLayoutK;
  using SmemV = typename Traits::SmemLayoutV;

  BandMask const mask{a.has_left ? 1 : 0, a.has_right ? 1 : 0, clamp_bound(a.left), clamp_bound(a.right),
                      a.bottom_right ? 1 : 0};
  bool const descending = a.deterministic && a.has_right;  // the deterministic order, see write_dq
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  // Tile order (decode_tile). Under a right bound tiles differ in length: groups of heads whose Q, dO and dQ
  // accumulator (2 + 4 bytes per element of Q, 2 per element of dO, per query head) stay within ~32 MB of L2, key
  // blocks outer inside a group, so long tiles go first. The deterministic mode without one: key block n of a head
  // adds into each query block only once key block n - 1's add there is complete and released (write_dq), a latency
  // of up to about one step (one query block). With one head per group the key blocks of a head start one freed SM
  // after the other, sms / steps of them per step time (steps: query blocks per tile; d64 s4096: ~4), and from the
  // second wave on each waits for its predecessor; groups of ceil(2 * sms / steps) heads, key blocks outer, start
  // them about two steps apart (NOTES.md v5, d64 b4 h32 s4096: 0.82 -> 0.99 of the default mode; groups 1.2 to 3.9
  // steps apart measured alike, 0.5 steps fell short), still within the L2 bound.
  int64_t const head_bytes = int64_t(hq / hkv) * sq * (6 * kHeadDim + 2 * kHeadDimV);
  int64_t const l2_heads = (int64_t(32) << 20) / std::max<int64_t>(head_bytes, 1);
  int64_t const steps = int64_t(num_m) * (hq / hkv);
  int64_t const chain_heads = a.deterministic ? (2 * sms + steps - 1) / steps : 1;
  int const heads_per_group =
      int(std::clamp<int64_t>(a.has_right ? l2_heads : std::min(l2_heads, chain_heads), 1, int64_t(b) * hkv));
  BwdKernelParams<Traits> const kp{
      make_tma_copy(SM90_TMA_LOAD{}, mQ, SmemQ{}, TileQ{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, mdO, SmemdO{}, TiledO{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, mK, SmemK{}, TileK{}, _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, mV, SmemV{}, TileV{}, _1{}),
      make_tma_copy(SM90_TMA_STORE{}, mdK, SmemK{}, TileK{}, _1{}),
      make_tma_copy(SM90_TMA_STORE{}, mdV, SmemV{}, TileV{}, _1{}),
      mQ.shape(),
      mdO.shape(),
      mK.shape(),
      mV.shape(),
      reinterpret_cast<float*>(wsb + ws.dq_acc),
      reinterpret_cast<float const*>(wsb + ws.lse2),
      reinterpret_cast<float const*>(wsb + ws.delta),
      reinterpret_cast<int*>(wsb + ws.sema),
      a.seq_len_q,
      a.seq_len_kv,
      a.seq_len_q_stride,
      a.seq_len_kv_stride,
      a.cu_seq_len_q,
      a.cu_seq_len_kv,
      dev_rows(a.q_rows, a.q_stride),
      dev_rows(a.do_rows, a.do_stride),
      dev_rows(a.k_rows, a.k_stride),
      dev_rows(a.v_rows, a.v_stride),
      dev_rows(a.dk_rows, a.dk_stride),
      dev_rows(a.dv_rows, a.dv_stride),
      static_cast<Element*>(a.dk),
      static_cast<Element*>(a.dv),
      a.dk_stride[1],
      a.dk_stride[2],
      a.dv_stride[1],
      a.dv_stride[2],
      sq,
      skv,
      hq,
      hkv,
      hq / hkv,
      b,
      num_m,
      num_n,
      mask,
      a.scale * 1.4426950408889634f,
      a.scale,
      a.deterministic ? 1 : 0,
      descending ? 1 : 0,
      heads_per_group,
  };

  PrePostParams pp{};
  pp.o = a.o;
  pp.d_o = a.d_o;
  pp.stats = a.stats;
  pp.dq = a.dq;
  pp.dq_acc = reinterpret_cast<float*>(wsb + ws.dq_acc);
  pp.lse2 = reinterpret_cast<float*>(wsb + ws.lse2);
  pp.delta = reinterpret_cast<float*>(wsb + ws.delta);
  pp.sema = a.deterministic ? reinterpret_cast<int*>(wsb + ws.sema) : nullptr;
  pp.sink = a.sink;
  pp.dsink = a.dsink;
  pp.seq_len_q = a.seq_len_q;
  pp.seq_len_q_stride = a.seq_len_q_stride;
  pp.cu_seq_len_q = a.cu_seq_len_q;
  pp.rows_o = dev_rows(a.o_rows, a.o_stride);
  pp.rows_do = dev_rows(a.do_rows, a.do_stride);
  pp.rows_dq = dev_rows(a.dq_rows, a.dq_stride);
  pp.rows_stats = dev_rows(a.stats_rows, a.stats_stride);
  for (int i = 0; i < 3; ++i) {
    pp.o_stride[i] = a.o_stride[i];
    pp.do_stride[i] = a.do_stride[i];
    pp.dq_stride[i] = a.dq_stride[i];
    pp.stats_stride[i] = a.stats_stride[i];
  }
  pp.sink_stride = a.sink_stride;
  pp.dsink_stride = a.dsink_stride;
  pp.s_q = sq;
  pp.h_q = hq;
  pp.batch = b;
  pp.num_m_blocks = num_m;
  pp.stats_log2 = a.stats_log2 ? 1 : 0;
  pp.scale = a.scale;

  auto kernel = &sm90_sdpa_bwd_kernel<Traits>;
  err = raise_smem_limit(kernel, Traits::kSmemBytes, dev);
  if (err != cudaSuccess) return err;

  dim3 const rows_grid(num_m, hq, b);
  sm90_sdpa_bwd_pre_kernel<Element, kBlockM, kHeadDim, kHeadDimV><<<rows_grid, 256, 0, stream>>>(pp);
  if (a.dsink != nullptr) sm90_sdpa_bwd_dsink_kernel<kBlockM><<<hq, 256, 0, stream>>>(pp);
  kernel<<<num_n * hkv * b, Traits::kNumThreads, Traits::kSmemBytes, stream>>>(kp);
  sm90_sdpa_bwd_post_kernel<Traits><<<rows_grid, Traits::kNumMmaThreads, 0, stream>>>(pp);
  return cudaGetLastError();
}

}  // namespace frost::sm90::bwd
