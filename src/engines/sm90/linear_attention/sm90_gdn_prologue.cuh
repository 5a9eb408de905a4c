// The one-CTA prologue the GDN / KDA forward and the GDN backward share: the sequence table, the chunk offsets
// and the validity flag, from cu_seqlens and state_indices read on the device. A template so that both
// translation units can instantiate it.
#pragma once
#include <cub/block/block_scan.cuh>

#include "engines/sm90/linear_attention/sm90_gdn_kernels.cuh"

namespace frost::sm90::gdn {

constexpr int kPrologueThreads = 256;

// One CTA: reads cu_seqlens and state_indices once, writes the sequence table, the chunk offsets and
// the validity flag. Bad offsets (not starting at 0, not ending at T, decreasing), indices out of the
// pool or repeated, or more chunks than the build sized for, clear the flag.
template <int kN>
__global__ void __launch_bounds__(kN)
    gdn_prologue_kernel(const GdnFwdParams p, const Workspace ws, int64_t max_chunks) {
  using Scan = cub::BlockScan<int64_t, kN>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int bad;
  __shared__ int64_t carry;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) bad = 0, carry = 0;
  const int64_t words = (p.state_rows + 31) / 32;
  if (p.state_indices)
    for (int64_t i = tid; i < words; i += kN) ws.bitmap[i] = 0;
  __syncthreads();
  const void* const cu = p.cu_seqlens;
  const bool cu64 = p.cu_int64;
  auto cu_at = [cu, cu64](int64_t i) -> int64_t {
    return cu64 ? static_cast<const int64_t*>(cu)[i] : static_cast<const int32_t*>(cu)[i];
  };
  if (p.cu_seqlens && tid == 0 && (cu_at(0) != 0 || cu_at(p.sequences) != p.len)) bad = 1;
  for (int64_t base = 0; base < p.sequences; base += kN) {
    const int64_t n = base + tid;
    int64_t chunks = 0;
    SeqInfo si{};
    if (n < p.sequences) {
      int64_t t0 = 0, len = p.len, b = n;
      if (p.cu_seqlens) {
        t0 = cu_at(n), len = cu_at(n + 1) - t0, b = 0;
        if (len < 0 || len > p.len) bad = 1, len = 0;
      }
      int64_t row = n;
      if (p.state_indices) {
        row = p.state_indices[n];
        if (row < 0 || row >= p.state_rows) {
          bad = 1, row = 0;
        } else {
          const uint32_t bit = 1u << (row & 31);
          if (atomicOr(&ws.bitmap[row >> 5], bit) & bit) bad = 1;
        }
      }
      chunks = (len + kC - 1) / kC;
      si = {t0, static_cast<int32_t>(b), static_cast<int32_t>(len), static_cast<int32_t>(row),
            static_cast<int32_t>(chunks)};
    }
    int64_t before = 0, total = 0;
    Scan(scan_tmp).ExclusiveSum(chunks, before, total);
    if (n < p.sequences) {
      const int64_t first = carry + before;
      ws.seqs[n] = si;
      ws.chunk_first[n] = static_cast<int32_t>(first < max_chunks ? first : max_chunks);
    }
    __syncthreads();
    if (tid == 0) carry += total;
    __syncthreads();
  }
  if (tid == 0) {
    const bool ok = bad == 0 && carry <= max_chunks;
    ws.chunk_first[p.sequences] = static_cast<int32_t>(ok ? carry : 0);
    *ws.flag = ok ? 1 : 0;
  }
}

}  // namespace frost::sm90::gdn
