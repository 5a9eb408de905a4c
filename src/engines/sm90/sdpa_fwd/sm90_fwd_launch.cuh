// Host side of one kernel variant: TMA descriptors, scheduler parameters and the launch. Included only by the
// instantiation files (sm90_fwd_inst_*.cu), one variant each.
#pragma once
#include "sm90_fwd_kernel_ws.cuh"
#include "sm90_sdpa_fwd.h"
#include <algorithm>
#include <atomic>

namespace frost::sm90::fwd {

using namespace cute;

// TMA needs 16-byte multiples for every global stride; a stride of an extent-1 dimension is never applied, so
// round it up instead of rejecting the layout.
inline int64_t tma_safe_stride(int64_t stride, int64_t extent, int64_t elems_per_16b) {
  if (extent > 1) return stride;
  return std::max<int64_t>(elems_per_16b, (stride + elems_per_16b - 1) / elems_per_16b * elems_per_16b);
}

template <class Traits>
cudaError_t launch_sdpa_fwd(SdpaFwdParams const& a, cudaStream_t stream) {
  using Element = typename Traits::Element;
  constexpr int64_t kVec = 16 / sizeof(Element);
  int const b = int(a.b), hq = int(a.h_q), hkv = int(a.h_kv), sq = int(a.s_q), skv = int(a.s_kv);
  int const d = int(a.d_qk), dv = int(a.d_v);

  auto in_tensor = [&](void const* ptr, int s, int dd, int h, int64_t ss, int64_t sh, int64_t sb) {
    return make_tensor(make_gmem_ptr(static_cast<Element const*>(ptr)), make_shape(s, dd, h, b),
                       make_stride(tma_safe_stride(ss, s, kVec), _1{}, tma_safe_stride(sh, h, kVec),
                                   tma_safe_stride(sb, b, kVec)));
  };
  auto mQ = in_tensor(a.q, sq, d, hq, a.q_stride_s, a.q_stride_h, a.q_stride_b);
  auto mK = in_tensor(a.k, skv, d, hkv, a.k_stride_s, a.k_stride_h, a.k_stride_b);
  auto mV = in_tensor(a.v, skv, dv, hkv, a.v_stride_s, a.v_stride_h, a.v_stride_b);
  auto mO = make_tensor(make_gmem_ptr(static_cast<Element*>(a.o)), make_shape(sq, dv, hq, b),
                        make_stride(tma_safe_stride(a.o_stride_s, sq, kVec), _1{}, tma_safe_stride(a.o_stride_h, hq, kVec),
                                    tma_safe_stride(a.o_stride_b, b, kVec)));

  int const num_m_blocks = (sq + Traits::kBlockM - 1) / Traits::kBlockM;
  // Heads per scheduler group: without a mask, keep the K/V that concurrently running tiles read within ~24 MB of
  // the 50-60 MB L2. Under a causal mask tile lengths differ, and one global longest-first order balances the CTAs.
  int64_t const kv_bytes = std::max<int64_t>(1, int64_t(skv) * (d + dv) * int64_t(sizeof(Element)) / (hq / hkv));
  int const heads_per_group =
      a.causal ? hq * b : int(std::clamp<int64_t>((int64_t(24) << 20) / kv_bytes, 1, int64_t(hq) * b));

  FwdKernelParams<Traits> const kp{
      make_tma_copy(SM90_TMA_LOAD{}, mQ, typename Traits::SmemLayoutQ{}, select<0, 2>(typename Traits::TileShapeQK{}), _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, mK, take<0, 2>(typename Traits::SmemLayoutK{}),
                    select<1, 2>(typename Traits::TileShapeQK{}), _1{}),
      make_tma_copy(SM90_TMA_LOAD{}, mV, take<0, 2>(typename Traits::SmemLayoutV{}),
                    select<1, 2>(typename Traits::TileShapeQK{}), _1{}),
      make_tma_copy(SM90_TMA_STORE{}, mO, typename Traits::SmemLayoutO{}, select<0, 1>(typename Traits::TileShapePV{}), _1{}),
      mQ.shape(),
      mK.shape(),
      mO.shape(),
      a.lse,
      a.lse_stride_b,
      a.lse_stride_h,
      sq,
      skv,
      hq,
      hq / hkv,
      b,
      a.causal ? 1 : 0,
      a.causal && a.causal_bottom_right ? skv - sq : 0,
      a.lse_log2 ? 1 : 0,
      a.scale * 1.4426950408889634f,
      num_m_blocks,
      num_m_blocks * hq * b,
      heads_per_group,
  };

  int dev = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;

  auto kernel = &sm90_sdpa_fwd_kernel<Traits>;
  static std::atomic<uint64_t> smem_attr_set{0};  // one bit per device
  uint64_t const bit = uint64_t(1) << (dev & 63);
  if (!(smem_attr_set.load(std::memory_order_acquire) & bit)) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
    if (err != cudaSuccess) return err;
    smem_attr_set.fetch_or(bit, std::memory_order_acq_rel);
  }
  int const grid = std::max(1, std::min(kp.num_tiles, sms));
  kernel<<<grid, Traits::kNumThreads, Traits::kSmemBytes, stream>>>(kp);
  return cudaGetLastError();
}

}  // namespace frost::sm90::fwd
