// The small kernels around the main backward kernel.
//   pre:   D = rowsum(dO * O) and the base-2 LSE per query row (+inf, and D = 0, for rows without gradient: past the
//          padding length or with Stats = -inf), into padded per-head arrays the main kernel bulk-loads; zeroes the
//          FP32 dQ accumulator and the deterministic-mode counters of the block.
//   dsink: dSink[h] = -sum over rows of exp(sink[h] - LSE) * D, one CTA per head, in a fixed order.
//   post:  dQ = scale * accumulator, rounded to the output type; reads the accumulator in fragment order.
#pragma once
#include "sm90_bwd_kernel_traits.cuh"

namespace frost::sm90::bwd {

using namespace cute;

struct PrePostParams {
  void const* o;
  void const* d_o;
  float const* stats;
  void* dq;
  float* dq_acc;
  float* lse2;
  float* delta;
  int* sema;  // null outside the deterministic mode
  float const* sink;
  float* dsink;
  int const* seq_len_q;
  int64_t seq_len_q_stride;
  int const* cu_seq_len_q;
  DevRows rows_o, rows_do, rows_dq, rows_stats;  // batch row starts (packed THD tensors, or dense)
  int64_t o_stride[3], do_stride[3], dq_stride[3], stats_stride[3];
  int64_t sink_stride, dsink_stride;
  int s_q, h_q, batch, num_m_blocks;
  int stats_log2;
  float scale;
};

__device__ __forceinline__ int valid_rows(PrePostParams const& p, int batch) {
  return side_len(p.seq_len_q, p.seq_len_q_stride, p.cu_seq_len_q, batch, p.s_q);
}

// grid (num_m_blocks, h_q, batch), 256 threads: 256 / kBlockM threads per row, 16-byte loads. The threads of a row
// take its 16-byte chunks in turn (chunk c * kThreadsPerRow + part), so each warp load covers whole 64-byte runs
// of 8 rows; with each thread reading its own contiguous run instead, a d256 warp load touched 32 lines of 128
// bytes for 16 bytes each.
template <class Element, int kBlockM, int kHeadDimQK, int kHeadDimV>
__global__ void __launch_bounds__(256) sm90_sdpa_bwd_pre_kernel(PrePostParams const p) {
  constexpr int kThreadsPerRow = 256 / kBlockM;
  constexpr int kElems = kHeadDimV / kThreadsPerRow;
  static_assert(kElems % 8 == 0, "each thread reads whole 16-byte vectors");
  int const m = blockIdx.x, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
  int const row = m * kBlockM + tid / kThreadsPerRow, part = tid % kThreadsPerRow;
  int const len_q = valid_rows(p, b);
  float acc = 0.f;
  if (row < len_q) {
    auto const* o = static_cast<Element const*>(p.o) + row_start(p.rows_o, b) + h * p.o_stride[1] +
                    row * p.o_stride[2] + part * 8;
    auto const* d_o = static_cast<Element const*>(p.d_o) + row_start(p.rows_do, b) + h * p.do_stride[1] +
                      row * p.do_stride[2] + part * 8;
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kElems / 8; ++c) {
      uint4 const ov = *reinterpret_cast<uint4 const*>(o + c * 8 * kThreadsPerRow);
      uint4 const dv = *reinterpret_cast<uint4 const*>(d_o + c * 8 * kThreadsPerRow);
      Element const* oe = reinterpret_cast<Element const*>(&ov);
      Element const* de = reinterpret_cast<Element const*>(&dv);
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < 8; ++e) acc = fmaf(float(oe[e]), float(de[e]), acc);
    }
  }
  CUTLASS_PRAGMA_UNROLL
  for (int off = kThreadsPerRow / 2; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffff, acc, off);
  if (part == 0) {
    int64_t const idx = (int64_t(b) * p.h_q + h) * (int64_t(p.num_m_blocks) * kBlockM) + row;
    float const lse =
        row < len_q ? p.stats[row_start(p.rows_stats, b) + h * p.stats_stride[1] + row * p.stats_stride[2]] : -INFINITY;
    bool const dead = lse == -INFINITY;
    p.lse2[idx] = dead ? INFINITY : (p.stats_log2 ? lse : lse * 1.4426950408889634f);
    p.delta[idx] = dead ? 0.f : acc;
  }
  float4* blk = reinterpret_cast<float4*>(p.dq_acc + ((int64_t(b) * p.h_q + h) * p.num_m_blocks + m) *
                                                         (int64_t(kBlockM) * kHeadDimQK));
  for (int i = tid; i < kBlockM * kHeadDimQK / 4; i += 256) blk[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (p.sema != nullptr && tid == 0) p.sema[(int64_t(b) * p.h_q + h) * p.num_m_blocks + m] = 0;
}

// grid h_q, 256 threads.
template <int kBlockM>
__global__ void __launch_bounds__(256) sm90_sdpa_bwd_dsink_kernel(PrePostParams const p) {
  __shared__ float warp_sums[8];
  int const h = blockIdx.x, tid = threadIdx.x;
  float const sink2 = p.sink[h * p.sink_stride] * 1.4426950408889634f;
  int64_t const s_pad = int64_t(p.num_m_blocks) * kBlockM;
  float sum = 0.f;
  for (int b = 0; b < p.batch; ++b) {
    int64_t const base = (int64_t(b) * p.h_q + h) * s_pad;
    for (int i = tid; i < p.s_q; i += 256) sum += exp2f(sink2 - p.lse2[base + i]) * p.delta[base + i];
  }
  CUTLASS_PRAGMA_UNROLL
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffff, sum, off);
  if (tid % 32 == 0) warp_sums[tid / 32] = sum;
  __syncthreads();
  if (tid == 0) {
    float total = 0.f;
    for (int w = 0; w < 8; ++w) total += warp_sums[w];
    p.dsink[h * p.dsink_stride] = -total;
  }
}

// grid (num_m_blocks, h_q, batch), kNumMmaThreads threads: thread t reads the values it would hold as the dQ wgmma's
// thread t, and learns their (row, column) from the same partition of an identity tensor. The rounded pairs go to a
// shared-memory copy of the tile first, then out as whole 16-byte row chunks: stored from the fragment directly, each
// warp store covers 8 rows x 16 bytes.
template <class Traits>
__global__ void __launch_bounds__(Traits::kNumMmaThreads) sm90_sdpa_bwd_post_kernel(PrePostParams const p) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM, kHeadDim = Traits::kHeadDim, kThreads = Traits::kNumMmaThreads;
  // Row pitch in 32-bit words: kHeadDim / 2 + 4 with kHeadDim / 2 a multiple of 32, so 8 rows x 4 words (one
  // fragment store of a warp) fall in 32 distinct banks and every row starts on 16 bytes.
  constexpr int kPitch = kHeadDim / 2 + 4;
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static_assert(kHeadDim % 64 == 0);
  __shared__ __align__(16) uint32_t tile[kBlockM * kPitch];
  int const m = blockIdx.x, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
  typename Traits::TiledMmadQ mma;
  auto thr = mma.get_thread_slice(tid);
  Tensor coord = thr.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  static_assert(decltype(size(coord))::value == Traits::kDqFrag);
  float const* src = p.dq_acc + ((int64_t(b) * p.h_q + h) * p.num_m_blocks + m) * (int64_t(kBlockM) * kHeadDim) +
                     (tid / 128) * Traits::kDqHalf + (tid % 128) * 4;
  CUTLASS_PRAGMA_UNROLL
  for (int v = 0; v < Traits::kDqFrag / 4; ++v) {
    float4 const x = *reinterpret_cast<float4 const*>(src + v * 512);
    float const vals[4] = {x.x, x.y, x.z, x.w};
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < 4; e += 2) {  // values 2i, 2i+1 are neighbouring columns of one row
      cutlass::Array<Element, 2> pair;
      pair[0] = Element(vals[e] * p.scale);
      pair[1] = Element(vals[e + 1] * p.scale);
      tile[get<0>(coord(4 * v + e)) * kPitch + get<1>(coord(4 * v + e)) / 2] =
          *reinterpret_cast<uint32_t const*>(&pair);
    }
  }
  __syncthreads();
  // Dense dQ gets zeros in its rows past the batch's length; a packed one holds other sequences there.
  int const rows = min(kBlockM, (p.rows_dq.kind ? valid_rows(p, b) : p.s_q) - m * kBlockM);
  Element* dq = static_cast<Element*>(p.dq) + row_start(p.rows_dq, b) + h * p.dq_stride[1] +
                int64_t(m) * kBlockM * p.dq_stride[2];
  for (int i = tid; i < rows * kChunks; i += kThreads) {
    int const r = i / kChunks, c = i - r * kChunks;
    *reinterpret_cast<uint4*>(dq + r * p.dq_stride[2] + c * 8) =
        *reinterpret_cast<uint4 const*>(&tile[r * kPitch + c * 4]);
  }
}

}  // namespace frost::sm90::bwd
