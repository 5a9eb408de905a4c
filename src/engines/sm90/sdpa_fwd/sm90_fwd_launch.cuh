// Host side of one kernel variant: TMA descriptors, scheduler parameters and the launch. Included only by the
// instantiation files (sm90_fwd_inst_*.cu), one variant each.
#pragma once
#include <algorithm>
#include <atomic>

#include "sm90_fwd_hand_out.h"
#include "sm90_fwd_kernel_ws.cuh"
#include "sm90_sdpa_fwd.h"

namespace frost::sm90::fwd {

using namespace cute;

// TMA needs 16-byte multiples for every global stride; a stride of an extent-1 dimension is never applied, so
// round it up instead of rejecting the layout.
inline int64_t tma_safe_stride(int64_t stride, int64_t extent, int64_t elems_per_16b) {
  if (extent > 1) return stride;
  return std::max<int64_t>(elems_per_16b, (stride + elems_per_16b - 1) / elems_per_16b * elems_per_16b);
}

inline DevRowStarts dev_rows(RowStarts const& r, int64_t stride_s) {
  return {r.ptr, r.kind == RowStartKind::DENSE ? 0 : int(r.kind), stride_s};
}

// PACK_GQA's view of a dense Q: (d, s_q, group, h_kv, b) with a (64, rows, group, 1, 1) box and the 128-byte
// swizzle of the Q tile, so one load per 64 columns fills group * rows tile rows, head by head.
inline cudaError_t encode_packed_q(cute::TmaDescriptor& desc, SdpaFwdParams const& a, int group, int rows, int d,
                                   bool bf16) {
  constexpr int64_t kBytes = 2, kVec = 8;
  int64_t const hkv = a.h_kv;
  cuuint64_t const dims[5] = {cuuint64_t(d), cuuint64_t(a.s_q), cuuint64_t(group), cuuint64_t(hkv), cuuint64_t(a.b)};
  cuuint64_t const strides[4] = {cuuint64_t(tma_safe_stride(a.q_stride_s, a.s_q, kVec) * kBytes),
                                 cuuint64_t(a.q_stride_h * kBytes),
                                 cuuint64_t(tma_safe_stride(group * a.q_stride_h, hkv, kVec) * kBytes),
                                 cuuint64_t(tma_safe_stride(a.q_stride_b, a.b, kVec) * kBytes)};
  cuuint32_t const box[5] = {64, cuuint32_t(rows), cuuint32_t(group), 1, 1};
  cuuint32_t const elem_strides[5] = {1, 1, 1, 1, 1};
  CUresult const r = cutlass::call_cuTensorMapEncodeTiled(
      &desc, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 5, const_cast<void*>(a.q),
      dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// A launch of `grid` CTAs in clusters of Traits::kClusterM; `attr` holds the cluster shape and must outlive the
// returned configuration.
template <class Traits>
cudaLaunchConfig_t cluster_launch_config(unsigned grid, cudaStream_t stream, cudaLaunchAttribute& attr) {
  attr = cudaLaunchAttribute{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim = {unsigned(Traits::kClusterM), 1, 1};
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(Traits::kNumThreads);
  cfg.dynamicSmemBytes = Traits::kSmemBytes;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Most clusters of Traits::kClusterM CTAs the device holds at once with this kernel (cached per device).
template <class Traits, class Kernel>
cudaError_t max_active_clusters(Kernel kernel, int dev, int& out) {
  static std::atomic<int> cached[64]{};
  if (int const v = cached[dev & 63].load(std::memory_order_acquire); v > 0) {
    out = v;
    return cudaSuccess;
  }
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t const cfg = cluster_launch_config<Traits>(Traits::kClusterM, nullptr, attr);
  cudaError_t const err = cudaOccupancyMaxActiveClusters(&out, kernel, &cfg);
  if (err != cudaSuccess) return err;
  if (out < 1) return cudaErrorInvalidConfiguration;
  cached[dev & 63].store(out, std::memory_order_release);
  return cudaSuccess;
}

template <class Traits>
cudaError_t launch_sdpa_fwd(SdpaFwdParams const& a, SdpaFwdConfig const& c, void* workspace, cudaStream_t stream) {
  // TILE_CGA_M 2 (validated to plain problems whose tiles all span the same key blocks, head dims >= 128, an even
  // m-block count) runs the CTA-pair kernel of the same tile.
  if constexpr (Traits::kClusterM == 1 && Traits::kHeadDim >= 128) {
    if (c.tile_cga_m == 2) return launch_sdpa_fwd<typename Traits::template WithCluster<2>>(a, c, workspace, stream);
  }
  using Element = typename Traits::Element;
  constexpr int64_t kVec = 16 / sizeof(Element);
  int const b = int(a.b), hq = int(a.h_q), hkv = int(a.h_kv), sq = int(a.s_q), skv = int(a.s_kv);
  int const d = int(a.d_qk), dv = int(a.d_v);

  // Dense tensors are viewed as (s, d, h, b); packed ones as (tokens, d, h, 1), addressed from each batch's token.
  auto view = [&](auto* ptr, RowStarts const& rows, int s, int64_t tokens, int dd, int h, int64_t ss, int64_t sh,
                  int64_t sb) {
    bool const packed = rows.kind != RowStartKind::DENSE;
    int const rows_n = packed ? int(tokens) : s, batches = packed ? 1 : b;
    return make_tensor(make_gmem_ptr(ptr), make_shape(rows_n, dd, h, batches),
                       make_stride(tma_safe_stride(ss, rows_n, kVec), _1{}, tma_safe_stride(sh, h, kVec),
                                   tma_safe_stride(sb, batches, kVec)));
  };
  auto in = [](void const* ptr) { return static_cast<Element const*>(ptr); };
  auto mQ = view(in(a.q), a.q_rows, sq, a.tokens_q, d, hq, a.q_stride_s, a.q_stride_h, a.q_stride_b);
  auto mK = view(in(a.k), a.k_rows, skv, a.tokens_kv, d, hkv, a.k_stride_s, a.k_stride_h, a.k_stride_b);
  auto mV = view(in(a.v), a.v_rows, skv, a.tokens_kv, dv, hkv, a.v_stride_s, a.v_stride_h, a.v_stride_b);
  auto mO = view(static_cast<Element*>(a.o), a.o_rows, sq, a.tokens_q, dv, hq, a.o_stride_s, a.o_stride_h,
                 a.o_stride_b);

  // PACK_GQA: the scheduler walks K/V heads, each tile holding pack_rows positions of the group's query heads.
  bool const pack = c.pack_gqa != 0;
  int const group = hq / hkv;
  int const pack_rows = pack ? Traits::kBlockM / group : Traits::kBlockM;
  int const tile_heads = pack ? hkv : hq;
  int const num_m_blocks = (sq + pack_rows - 1) / pack_rows;
  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;

  // Heads per scheduler group. Policy 1: K/V within ~8 MB of the 50-60 MB L2 (24 MB under a right bound), but two
  // heads for rows of at most 16 m-blocks. Unbounded rows: at d128 h16 b4 s4096 (ncu, H200, 2026-12-03) 8 MB groups
  // read 208 MB from DRAM against 461 MB for 24 MB ones, whose K and V are read about twice (+0.1 to +0.3 % in three
  // rounds of turns). Short rows with many heads gain from the smaller group (H200, d128 h16 b16 s1024 causal,
  // 2026-12-01: 442 TFLOP/s for two heads against 399 for the 48 of the L2 rule, in the same rounds; 445-451 for 1,
  // 2, 4 and 12, 427-436 for 8, 346 for 16, 395 for 64: groups whose tiles nearly fill a wave hand each CTA tiles of
  // the same length wave after wave). Under a causal mask policy 1's balance depends on the group (b1 s16384 causal:
  // 407 for two heads, 545-573 for three in the day's other runs), hence the larger budget there. Policy 2: all heads
  // in one group, so the longest-first order is global (tile lengths differ under a causal mask). Default: 2 under a
  // causal-like mask with more than 16 m-blocks, else 1. Short causal rows with many heads lose more to L2 misses
  // under the global order than they gain in balance (d128 h16 b16 s1024 causal: policy 1 404 TFLOP/s, policy 2 371;
  // s16384 causal: 563 vs 664). Policy 4: policy 1's order with 8 MB groups under any mask, the tiles handed out as
  // CTAs come free, which keeps causal tiles balanced without a global order: at d128 h16 b4 s4096 causal (ncu,
  // H200, 2026-12-03) the global order reads 1.10 GB from DRAM at 1.52 GHz in 472 us, the hand-out 0.21 GB at 1.68 GHz
  // in 423 us.
  bool const right_bounded = a.causal || (a.has_right_bound && !a.has_left_bound);
  int const policy = c.sched_policy ? c.sched_policy : right_bounded && num_m_blocks > 16 ? 2 : 1;
  int64_t const kv_bytes =
      std::max<int64_t>(1, int64_t(skv) * (d + dv) * int64_t(sizeof(Element)) / (tile_heads / hkv));
  int64_t const l2_budget = int64_t(right_bounded && policy != 4 ? 24 : 8) << 20;
  int64_t const l2_heads = num_m_blocks <= 16 ? 2 : l2_budget / kv_bytes;
  int const total_bh = tile_heads * b;
  int const heads_per_group = policy == 2 ? total_bh : int(std::clamp<int64_t>(l2_heads, 1, total_bh));
  // Policy 4 ends with one larger group (sm90_fwd_hand_out.h).
  int const last_group_bh0 =
      policy == 4 ? hand_out_last_group_bh0(total_bh, heads_per_group, num_m_blocks, sms) : total_bh;
  auto bound = [](bool has, int64_t v) { return has ? int(std::min<int64_t>(v, kUnbounded)) : kUnbounded; };
  bool const packed_kv = a.k_rows.kind != RowStartKind::DENSE || a.v_rows.kind != RowStartKind::DENSE;
  bool const padded_kv = a.seq_len_kv != nullptr || a.cu_seq_len_kv != nullptr;

  FwdKernelParams<Traits> kp{
      make_tma_copy(SM90_TMA_LOAD{}, mQ, typename Traits::SmemLayoutQ{}, select<0, 2>(typename Traits::TileShapeQK{}),
                    _1{}),
      make_tma_copy(typename Traits::TmaLoadKV{}, mK, take<0, 2>(typename Traits::SmemLayoutK{}),
                    select<1, 2>(typename Traits::TileShapeQK{}), Int<Traits::kClusterM>{}),
      make_tma_copy(typename Traits::TmaLoadKV{}, mV, take<0, 2>(typename Traits::SmemLayoutV{}),
                    select<2, 1>(typename Traits::TileShapePV{}), Int<Traits::kClusterM>{}),
      make_tma_copy(SM90_TMA_STORE{}, mO, typename Traits::SmemLayoutOWG{}, Shape<_64, Int<Traits::kHeadDimV>>{}, _1{}),
      mQ.shape(),
      mK.shape(),
      mV.shape(),
      mO.shape(),
      a.lse,
      a.lse_stride_b,
      a.lse_stride_h,
      a.lse_stride_s ? a.lse_stride_s : 1,
      static_cast<Element*>(a.o),
      a.o_stride_b,
      a.o_stride_h,
      a.o_stride_s,
      sq,
      skv,
      tile_heads,
      tile_heads / hkv,
      b,
      bound(a.has_left_bound, a.left_bound),
      a.causal ? 0 : bound(a.has_right_bound, a.right_bound),
      a.bottom_right ? 1 : 0,
      a.lse_log2 ? 1 : 0,
      a.scale * 1.4426950408889634f,
      a.scale_dev,
      a.sink,
      {a.seq_len_q, a.cu_seq_len_q},
      {a.seq_len_kv, a.cu_seq_len_kv},
      dev_rows(a.q_rows, a.q_stride_s),
      dev_rows(a.k_rows, a.k_stride_s),
      dev_rows(a.v_rows, a.v_stride_s),
      dev_rows(a.o_rows, a.o_stride_s),
      dev_rows(a.lse_rows, a.lse_stride_s ? a.lse_stride_s : 1),
      packed_kv || padded_kv ? 1 : 0,
      num_m_blocks,
      num_m_blocks * tile_heads * b,
      heads_per_group,
      last_group_bh0,
      {},
      group,
      pack_rows,
      {},
      nullptr,
#ifdef FROST_FWD_TIMELINE
      nullptr,
#endif
  };
  err = pack ? encode_packed_q(kp.tma_q_packed, a, group, pack_rows, Traits::kHeadDim,
                               std::is_same_v<Element, cute::bfloat16_t>)
             : cudaSuccess;
  if (err != cudaSuccess) return err;

  // SCHED_POLICY 3 (validated to plain, unbounded problems): one CTA per SM, the last wave's tiles shared along
  // their key blocks. Tiles that fill whole waves leave no tail: the plain kernel then runs as under policy 1.
  int const num_blocks = (skv + Traits::kBlockN - 1) / Traits::kBlockN;
  bool const split = c.sched_policy == 3 && kp.num_tiles % sms != 0;
  if (split) {
    if (workspace == nullptr) return cudaErrorInvalidValue;
    char* ws = static_cast<char*>(workspace);
    kp.split = {reinterpret_cast<float*>(ws + split_flags_bytes(sms)), reinterpret_cast<int*>(ws),
                kp.num_tiles / sms, num_blocks, int64_t(kp.num_tiles % sms) * num_blocks};
    err = cudaMemsetAsync(ws, 0, size_t(sms) * sizeof(int), stream);
    if (err != cudaSuccess) return err;
  }
  // SCHED_POLICY 4 (validated to the plain single-CTA kernel): the hand-out's counter, zeroed before each launch.
  if (c.sched_policy == 4) {
    if (workspace == nullptr) return cudaErrorInvalidValue;
    kp.tile_counter = static_cast<int*>(workspace);
    err = cudaMemsetAsync(workspace, 0, sizeof(int), stream);
    if (err != cudaSuccess) return err;
  }

  // The plain kernel serves dense, unpadded problems without a left band bound, device scale or sink; anything
  // else takes the general one. Causal and right bounds (either alignment) stay in the plain kernel, and so do
  // PACK_GQA and the split (validated to plain problems only).
  int const kind = split ? (pack ? 4 : 3) : pack ? 2 : sdpa_fwd_is_plain(a) ? 0 : 1;
  auto kernel = &sm90_sdpa_fwd_kernel<Traits, false, false>;
  if constexpr (Traits::kClusterM == 1) {
    kernel = kind == 4   ? &sm90_sdpa_fwd_kernel<Traits, false, true, true>
             : kind == 3 ? &sm90_sdpa_fwd_kernel<Traits, false, false, true>
             : kind == 2 ? &sm90_sdpa_fwd_kernel<Traits, false, true>
             : kind == 1 ? &sm90_sdpa_fwd_kernel<Traits, true, false>
                         : kernel;
  } else if (kind != 0) {
    return cudaErrorInvalidValue;  // validation admits only the plain kernel under a cluster
  }
  static std::atomic<uint64_t> smem_attr_set[5]{};  // one bit per device, per kernel
  uint64_t const bit = uint64_t(1) << (dev & 63);
  if (!(smem_attr_set[kind].load(std::memory_order_acquire) & bit)) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
    if (err != cudaSuccess) return err;
    smem_attr_set[kind].fetch_or(bit, std::memory_order_acq_rel);
  }
#ifdef FROST_FWD_TIMELINE
  kp.timeline = g_timeline;
#endif
  if constexpr (Traits::kClusterM > 1) {
    int clusters = 0;
    err = max_active_clusters<Traits>(kernel, dev, clusters);
    if (err != cudaSuccess) return err;
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t const cfg = cluster_launch_config<Traits>(
        unsigned(Traits::kClusterM * std::min(clusters, kp.num_tiles / Traits::kClusterM)), stream, attr);
    return cudaLaunchKernelEx(&cfg, kernel, kp);
  } else {
    int const grid = split ? sms : std::max(1, std::min(kp.num_tiles, sms));
    kernel<<<grid, Traits::kNumThreads, Traits::kSmemBytes, stream>>>(kp);
    return cudaGetLastError();
  }
}

}  // namespace frost::sm90::fwd
