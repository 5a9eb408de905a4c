// The GDN backward's chunk gradient kernel: the formulas at the top of sm90_gdn_bwd_kernels.cuh for one chunk and
// value head per CTA of two warpgroups, every product a warpgroup-wide wgmma from shared memory. Warp w owns rows
// [16 (w % 4), + 16) of every product and warpgroup w / 4 the half of its columns (64 of 128, or 32 of 64): a wgmma
// m64nN accumulator gives each warp the (row, column) elements of mma.sync m16n8 tiles, which the element-wise
// steps (masks, decays, the dG and dbeta dot products) index directly.
//
// Products are whole (no triangular skipping): the operands hold exact zeros where skipped blocks would be (dP,
// dT and dKK are stored masked, T is zero above its diagonal). Tiles are 16-bit, rows of 64 elements (128 bytes)
// with the 128-byte swizzle (16-byte chunks XOR the row's low three bits); a 128-wide tile is two such column
// blocks. The same bytes serve as a K-major operand (tile rows = M or N) and as an MN-major one (tile rows = K),
// each k-step a constant offset from one descriptor. Copies come in three cp.async groups, each waited for just
// before its first reader.
#pragma once
#include <cutlass/arch/barrier.h>

#include <cute/arch/mma_sm90_gmma.hpp>
#include <utility>

#include "engines/sm90/linear_attention/sm90_gdn_bwd_kernels.cuh"

namespace frost::sm90::gdn {

namespace wgmma_grad {

using cute::SM90::GMMA::Major;
using cute::SM90::GMMA::ScaleOut;

// Element offset of (r, c) in a swizzled tile of kRows rows.
template <int kRows>
__device__ __forceinline__ int at(int r, int c) {
  return (c >> 6) * (kRows * 64) + r * 64 + ((((c >> 3) ^ r) & 7) << 3) + (c & 7);
}

// The descriptor of a 128-byte-swizzled operand at p: 8-row groups 1024 bytes apart (the leading offset is unused
// by these shapes: K-major rows are one swizzle row wide in k per step, MN-major ones at most 64 wide).
__device__ __forceinline__ uint64_t descriptor(const void* p) {
  return static_cast<uint64_t>((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

// Step k (16 of K) of a K-major operand: rows r0.. of a tile of kRows rows, K along its columns. Steps differ from
// the first by constant byte offsets (in the descriptor's 16-byte units).
template <int kRows, class E>
struct KMajor {
  uint64_t first;
  __device__ __forceinline__ KMajor(const E* tile, int r0) : first(descriptor(tile + r0 * 64)) {}
  __device__ __forceinline__ uint64_t operator()(int k) const {
    return first + static_cast<uint32_t>(((k >> 2) * (kRows * 64) + (k & 3) * 16) * sizeof(E) / 16);
  }
};
// Step k of an MN-major operand: columns c0.. (a multiple of 32) of a tile of kRows rows, K along its rows. A start
// 32 columns into a swizzle row is the same offset the K-major steps take: the swizzle applies to the whole
// address, the row's 1024-byte group aligned.
template <int kRows, class E>
struct MnMajor {
  uint64_t first;
  __device__ __forceinline__ MnMajor(const E* tile, int c0)
      : first(descriptor(tile + (c0 >> 6) * (kRows * 64) + (c0 & 63))) {}
  __device__ __forceinline__ uint64_t operator()(int k) const {
    return first + static_cast<uint32_t>(k * 16 * 64 * sizeof(E) / 16);
  }
};

template <class E, int N, Major kA, Major kB>
struct Op;
template <Major kA, Major kB>
struct Op<__nv_bfloat16, 64, kA, kB> : cute::SM90::GMMA::MMA_64x64x16_F32BF16BF16_SS<kA, kB> {};
template <Major kA, Major kB>
struct Op<__nv_bfloat16, 32, kA, kB> : cute::SM90::GMMA::MMA_64x32x16_F32BF16BF16_SS<kA, kB> {};
template <Major kA, Major kB>
struct Op<__half, 64, kA, kB> : cute::SM90::GMMA::MMA_64x64x16_F32F16F16_SS<kA, kB> {};
template <Major kA, Major kB>
struct Op<__half, 32, kA, kB> : cute::SM90::GMMA::MMA_64x32x16_F32F16F16_SS<kA, kB> {};

template <class O, size_t... I>
__device__ __forceinline__ void issue(uint64_t a, uint64_t b, float* d, ScaleOut s, std::index_sequence<I...>) {
  O::fma(a, b, d[I]..., s);
}

template <int NT>
__device__ __forceinline__ void fence(float (&acc)[NT][4]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(acc[nt][e])::"memory");
}

// acc = (or +=) A B over kSteps k-steps of 16, issued by the warpgroup and committed as one group; wait() before
// reading acc.
template <class E, Major kA, Major kB, int kSteps, int NT, class DA, class DB>
__device__ __forceinline__ void product(float (&acc)[NT][4], DA a, DB b, bool accumulate) {
  fence(acc);
  cute::warpgroup_arrive();
#pragma unroll
  for (int k = 0; k < kSteps; ++k)
    issue<Op<E, NT * 8, kA, kB>>(a(k), b(k), &acc[0][0], k > 0 || accumulate ? ScaleOut::One : ScaleOut::Zero,
                                 std::make_index_sequence<NT * 4>{});
  cute::warpgroup_commit_batch();
}

template <int NT, class... More>
__device__ __forceinline__ void wait(float (&acc)[NT][4], More&... more) {
  cute::warpgroup_wait<0>();
  fence(acc);
  (fence(more), ...);
}

// Shared-memory stores the next products read: visible to the async proxy, then to every warp.
__device__ __forceinline__ void publish() {
  cutlass::arch::fence_view_async_shared();
  __syncthreads();
}

// cp.async of a tile's rows (row r at src + r * pitch, kCols wide) into the swizzled tile; rows at or past `valid`
// read as zeros. A thread's pieces are rows a multiple of 8 apart at one column, so they share the swizzle and
// step by constant offsets (for_each_piece unrolls them).
template <int kRows, int kCols, int kThreads, class E>
__device__ __forceinline__ void copy_tile(E* dst, const E* src, int64_t pitch, int valid, int tid) {
  constexpr int kStep = kThreads / (kCols / 8);
  static_assert(kStep % 8 == 0);
  const int r0 = tid / (kCols / 8);
  E* const first = dst + at<kRows>(r0, (tid % (kCols / 8)) * 8);
  for_each_piece<kRows, kCols, kThreads>(tid, [&](int r, int col) {
    const bool ok = r < valid;
    cp16(first + (r - r0) * 64, ok ? src + r * pitch + col : src, ok);
  });
}

// A warpgroup's 64 x NW slice of dQ or dK (a warp's rows fr and fr + 8, 8-column accumulator tiles), rounded to 16
// bits, into output rows `pitch` apart (those at or past `rows` left alone): through a swizzled staging tile of the
// warpgroup's own, read back as 16-byte pieces of whole rows. Stored from the accumulators, each instruction would
// write 4 bytes per lane over eight rows, and the stores' data registers stayed held until the store queue took them.
template <class E, int NW>
__device__ __forceinline__ void store_rows_staged(const float (*acc)[4], E* stage, E* out, int64_t pitch, int rows,
                                                  int fr, int fc, int wg_thread, int wg) {
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int nt = 0; nt < NW / 8; ++nt)
      *reinterpret_cast<uint32_t*>(&stage[at<kC>(fr + half * 8, nt * 8 + fc)]) =
          Mma<E>::pack(acc[nt][half * 2], acc[nt][half * 2 + 1]);
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");  // the warpgroup's staging tile complete
  // All pieces read before any is stored: one register set per piece, so that no read waits for a store's data.
  constexpr int kPerRow = NW / 8, kStep = 128 / kPerRow, kPieces = kC / kStep;
  const int r0 = wg_thread / kPerRow, c = (wg_thread % kPerRow) * 8;
  uint4 piece[kPieces];
#pragma unroll
  for (int n = 0; n < kPieces; ++n) piece[n] = *reinterpret_cast<const uint4*>(&stage[at<kC>(r0 + n * kStep, c)]);
#pragma unroll
  for (int n = 0; n < kPieces; ++n)
    if (r0 + n * kStep < rows) *reinterpret_cast<uint4*>(out + (r0 + n * kStep) * pitch + c) = piece[n];
}

// Row r of a 64 x 128 tile times 1 / sqrt(|row|^2 + 1e-6), summed in column order as the forward's chunk kernel
// sums it, so both round the same normalized rows.
template <class E>
__device__ __forceinline__ void normalize_row(E* tile, int r) {
  using M = Mma<E>;
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kD; c += 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(&tile[at<kC>(r, c)]);
    const E* e = reinterpret_cast<const E*>(&raw);
#pragma unroll
    for (int x = 0; x < 8; ++x) sum = fmaf(M::to_float(e[x]), M::to_float(e[x]), sum);
  }
  const float inv = rsqrtf(sum + 1e-6f);
#pragma unroll
  for (int c = 0; c < kD; c += 2) {
    uint32_t* x = reinterpret_cast<uint32_t*>(&tile[at<kC>(r, c)]);
    const float2 v = M::unpack(*x);
    *x = M::pack(v.x * inv, v.y * inv);
  }
}

// dG_j -= the sums over the warp's 16 rows of an 8-column accumulator tile's (row, column) terms, columns c0..:
// csum[e] holds this lane's share of column c0 + 2 (lane % 4) + e.
__device__ __forceinline__ void subtract_column_sums(float* dgw, int c0, const float csum[2], int lane) {
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const float x = column_sum(csum[e]);
    if (lane < 4) dgw[c0 + lane * 2 + e] -= x;
  }
}

template <class E, int kWarps>
struct Smem {
  alignas(1024) E q[kC * kD];     // q and k L2-normalized in place
  alignas(1024) E k[2][kC * kD];  // this item's k and the next one's
  alignas(1024) E v[kC * kD];
  alignas(1024) E dout[kC * kD];  // dO, then dW
  alignas(1024) E up[kC * kD];    // U'
  alignas(1024) E dup[kC * kD];   // dU'
  alignas(1024) E s[kD * kD];     // S entering the chunk
  alignas(1024) E dsn[kD * kD];   // dS of the state leaving it
  alignas(1024) E tm[kC * kC];    // T
  alignas(1024) E dpm[kC * kC];   // dP (the gradient of Q K^T), then X = T^T dT
  alignas(1024) E dt[kC * kC];    // dT, then dKK
  // K K^T masked and decayed (FP32, (i, j) at j * kLdAt + i) from its product to the dA step; then dK's staging
  // tile (16-bit, 64 x 128).
  float kk[kC * kLdAt];
  float g[kC], beta[kC];  // g becomes G
  // dG and dbeta, one row per warp so that the sums are bitwise reproducible: a warp adds to an entry from one
  // lane at a time (__syncwarp between the steps), and the rows are summed in order at the end.
  float dgw[kWarps][kC], dbw[kWarps][kC];
  int32_t taken;  // thread 0's claim of the next item, for every thread
};
// ~222 KB with two warpgroups: one CTA per SM.
static_assert(sizeof(Smem<__nv_bfloat16, 8>) + 1024 <= 227 * 1024);

// One (chunk, value head) of the persistent grid's list: chunk-major, value heads fastest.
struct Item {
  BwdChunk c;
  int hv;
};
__device__ __forceinline__ bool locate_item(const GdnFwdParams& p, const Workspace& ws, int64_t item, Item& it) {
  const int hvs = static_cast<int>(p.value_heads);
  it.hv = static_cast<int>(item % hvs);
  return locate_bwd_chunk(p, ws, static_cast<int>(item / hvs), it.hv, it.c);
}

// An item's copies come in three groups, each issued while the item before works, once that item's last reader of
// the buffers has passed a barrier. Group 1: q, U', S, dS_n and k (k into the buffer the item before does not use).
template <int kThreads, class E, class S>
__device__ __forceinline__ void copy_state_group(const GdnBwdParams& bp, const BwdWs& bw, const Item& it, S& s, E* k,
                                                 int tid) {
  const GdnFwdParams& p = bp.fwd;
  const BwdChunk& c = it.c;
  const int64_t b = c.si.b;
  if (bw.reversed) {  // the reverse pass runs at once: wait until every CTA of it has stored this chunk (dS_n, dU')
    while (load_acquire(&bw.reversed[c.slot]) < kD) {
    }
  }
  copy_tile<kC, kD, kThreads>(
      s.q, static_cast<const E*>(p.q) + b * p.q_stride[0] + c.h * p.q_stride[2] + c.t0 * p.q_stride[1], p.q_stride[1],
      c.rows, tid);
  copy_tile<kC, kD, kThreads>(
      k, static_cast<const E*>(p.k) + b * p.k_stride[0] + c.h * p.k_stride[2] + c.t0 * p.k_stride[1], p.k_stride[1],
      c.rows, tid);
  copy_tile<kC, kD, kThreads>(s.up, static_cast<const E*>(bw.vnew) + c.slot * kC * kD, kD, kC, tid);
  copy_tile<kD, kD, kThreads>(s.s, static_cast<const E*>(bw.h) + c.slot * kD * kD, kD, kD, tid);
  copy_tile<kD, kD, kThreads>(s.dsn, static_cast<const E*>(bw.dh) + c.slot * kD * kD, kD, kD, tid);
  cp_commit();
}
// Group 2: dO, dU' and V.
template <int kThreads, class E, class S>
__device__ __forceinline__ void copy_wy_group(const GdnBwdParams& bp, const BwdWs& bw, const Item& it, S& s, int tid) {
  const GdnFwdParams& p = bp.fwd;
  const BwdChunk& c = it.c;
  const int64_t b = c.si.b;
  copy_tile<kC, kD, kThreads>(
      s.dout, static_cast<const E*>(bp.d_o) + b * bp.do_stride[0] + it.hv * bp.do_stride[2] + c.t0 * bp.do_stride[1],
      bp.do_stride[1], c.rows, tid);
  copy_tile<kC, kD, kThreads>(s.dup, static_cast<const E*>(bw.dv2) + c.slot * kC * kD, kD, kC, tid);
  copy_tile<kC, kD, kThreads>(
      s.v, static_cast<const E*>(p.v) + b * p.v_stride[0] + it.hv * p.v_stride[2] + c.t0 * p.v_stride[1], p.v_stride[1],
      c.rows, tid);
  cp_commit();
}
// Group 3: T.
template <int kThreads, class E, class S>
__device__ __forceinline__ void copy_t_group(const Workspace& ws, const Item& it, S& s, int tid) {
  copy_tile<kC, kC, kThreads>(s.tm, static_cast<const E*>(ws.t) + it.c.slot * kC * kC, kC, kC, tid);
  cp_commit();
}

// dbeta, and dg as the reverse cumulative sum of dG within the chunk, of an item whose dG and dbeta rows are
// complete: the warps' rows summed in order, then suffix sums across warp 2's lanes (rows l and l + 32), a fixed
// order. Each entry is read and zeroed by one thread (dbeta's column tid by thread tid < kC, dG's columns l and
// l + 32 by lane l of warp 2, the first warp with no dbeta column: warp 0 scans the next item's gates meanwhile),
// so that the next item may add to the rows once a barrier has passed.
template <int kWarps, class S>
__device__ __forceinline__ void finish_item(const GdnBwdParams& bp, const Item& it, S& s, int tid) {
  const int64_t b = it.c.si.b, t0 = it.c.t0;
  const int rows = it.c.rows, hv = it.hv, lane = tid & 31;
  if (tid < kC) {
    float db = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) db += s.dbw[w][tid], s.dbw[w][tid] = 0.f;
    if (tid < rows)
      store_scalar(bp.dbeta, b * bp.dbeta_stride[0] + (t0 + tid) * bp.dbeta_stride[1] + hv * bp.dbeta_stride[2],
                   bp.dbeta_dtype, db);
  }
  if (tid >> 5 == 2) {
    float lo = 0.f, hi = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      lo += s.dgw[w][lane], hi += s.dgw[w][lane + 32];
      s.dgw[w][lane] = 0.f, s.dgw[w][lane + 32] = 0.f;
    }
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float l = __shfl_down_sync(0xffffffffu, lo, off), h = __shfl_down_sync(0xffffffffu, hi, off);
      if (lane + off < 32) lo += l, hi += h;
    }
    lo += __shfl_sync(0xffffffffu, hi, 0);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = lane + half * 32;
      if (i < rows)
        store_scalar(bp.dg, b * bp.dg_stride[0] + (t0 + i) * bp.dg_stride[1] + hv * bp.dg_stride[2], bp.dg_dtype,
                     half ? hi : lo);
    }
  }
}

}  // namespace wgmma_grad

// A persistent grid (at most one CTA per SM) of two warpgroups takes the (chunk, value head) items from the last,
// one at a time from a shared count (bw.grad_next): CTAs that start late, on SMs the reverse pass leaves, take fewer.
// Each item's copies land while the item before works (copy_state_group), so after its first item a CTA waits on no
// global load but the gates', which are also read one item ahead.
template <class E, int kWG>
__device__ __forceinline__ void gradient_items(const GdnBwdParams& bp, const Workspace& ws, const BwdWs& bw,
                                               int64_t items) {
  using namespace wgmma_grad;
  using M = Mma<E>;
  constexpr Major K = Major::K, MN = Major::MN;
  extern __shared__ __align__(1024) unsigned char smem_grad_wgmma[];
  // Warpgroup w owns columns [w NW, + NW) of 128-wide products and [w NC, + NC) of 64-wide ones: TW and TC
  // 8-column accumulator tiles per warp.
  constexpr int kThreads = kWG * 128, kWarps = kWG * 4, NW = kD / kWG, NC = kC / kWG, TW = NW / 8, TC = NC / 8;
  auto& s = *reinterpret_cast<Smem<E, kWarps>*>(smem_grad_wgmma);
  const GdnFwdParams& p = bp.fwd;
  if (*ws.flag == 0) return;
  const int hvs = static_cast<int>(p.value_heads);
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  // Items past the packed sequences' chunks are left out: the d-th taken is item `valid - 1 - d`.
  const int64_t valid = p.cu_seqlens ? static_cast<int64_t>(ws.chunk_first[p.sequences]) * hvs : items;
  if (tid == 0) s.taken = atomicAdd(bw.grad_next, 1);
  __syncthreads();
  Item it;
  if (s.taken >= valid || !locate_item(p, ws, valid - 1 - s.taken, it)) return;
  copy_state_group<kThreads>(bp, bw, it, s, s.k[0], tid);
  copy_wy_group<kThreads, E>(bp, bw, it, s, tid);
  copy_t_group<kThreads, E>(ws, it, s, tid);
  // Thread tid < kC: row tid's g and beta of the item the copies in flight are for.
  float2 gates = tid < kC ? gates_of(p, it.c.si, it.c.t0, it.c.rows, it.hv, tid) : make_float2(0.f, 0.f);

  for (int i = tid; i < kWarps * kC; i += kThreads) (&s.dgw[0][0])[i] = 0.f, (&s.dbw[0][0])[i] = 0.f;
  Item done;  // the item before, whose dg and dbeta are summed and stored while this one's first products run
  bool any_done = false;
  for (int kb = 0;; kb ^= 1) {
    int32_t taken = 0;  // thread 0's, published with the first products' results
    if (tid == 0) taken = atomicAdd(bw.grad_next, 1);
    const SeqInfo si = it.c.si;
    const int64_t t0 = it.c.t0;
    const int rows = it.c.rows, hv = it.hv;
    E* const sk = s.k[kb];
    cp_wait<0>();
    if (tid < kC) s.g[tid] = gates.x, s.beta[tid] = gates.y;
    publish();  // the copies have landed, and the item before is done with every buffer and has its dG and dbeta
    // L2 norms in place (q rows for threads 0-63, k rows for 64-127).
    if (p.l2norm) {
      if (tid < 2 * kC) normalize_row(tid < kC ? s.q : sk, tid & (kC - 1));
      publish();
    }
    const int rg = warp & 3, ch = warp >> 2;
    const int m0 = rg * 16, last = rows - 1;
    const int nw = ch * NW, nc = ch * NC;  // this warpgroup's first column of 128-wide and 64-wide products
    float* const dgw = s.dgw[warp];
    float* const dbw = s.dbw[warp];
    const int fr = m0 + (lane >> 2), fc = (lane & 3) * 2;
    const KMajor<kC, E> k_rows{sk, 0}, q_rows{s.q, 0}, do_rows{s.dout, 0}, up_rows{s.up, 0}, dup_rows{s.dup, 0};
    const MnMajor<kC, E> k_cols{sk, nw};

    const KMajor<kD, E> s_rows{s.s, nw}, dsn_rows{s.dsn, nw};
    // dQ's and dK's state terms, dO S^T and U' dS_n^T: issued once S and dS_n have landed, to run while the
    // element-wise step below works.
    float dq[TW][4], dk[TW][4];
    float g_last;

    // K K^T, Q K^T and dO U'^T for this warpgroup's 32 columns, running while the item before is finished and
    // warp 0 scans g.
    {
      float kk[TC][4], qk[TC][4], dp[TC][4];
      product<E, K, K, kD / 16>(kk, k_rows, KMajor<kC, E>{sk, nc}, false);
      product<E, K, K, kD / 16>(qk, q_rows, KMajor<kC, E>{sk, nc}, false);
      product<E, K, K, kD / 16>(dp, do_rows, KMajor<kC, E>{s.up, nc}, false);
      if (any_done) finish_item<kWarps>(bp, done, s, tid);
      if (warp == 0) scan_gates(s.g, lane);
      __syncthreads();  // G complete; dG and dbeta zeroed
      g_last = s.g[last];
      wait(kk, qk, dp);
      product<E, K, K, kD / 16>(dq, do_rows, s_rows, false);
      product<E, K, K, kD / 16>(dk, up_rows, dsn_rows, false);
      float rsum[2] = {0.f, 0.f}, g_row[2], g_col[2 * TC];
      cumulative_gates<TC>(s.g, fr, nc + fc, g_row, g_col);
#pragma unroll
      for (int nt = 0; nt < TC; ++nt) {
        float csum[2] = {0.f, 0.f};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = fr + half * 8;
          float out[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = nc + nt * 8 + fc + e;
            const float decay = masked_exp(j <= i, g_row[half] - g_col[nt * 2 + e]);
            s.kk[j * kLdAt + i] = j < i ? kk[nt][half * 2 + e] * decay : 0.f;
            out[e] = p.scale * dp[nt][half * 2 + e] * decay;
            const float x = out[e] * qk[nt][half * 2 + e];
            rsum[half] += x, csum[e] += x;
          }
          *reinterpret_cast<uint32_t*>(&s.dpm[at<kC>(i, nc + nt * 8 + fc)]) = M::pack(out[0], out[1]);
        }
        subtract_column_sums(dgw, nc + nt * 8, csum, lane);
      }
      __syncwarp();
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float x = quad_sum(rsum[half]);
        if ((lane & 3) == 0) dgw[fr + half * 8] += x;
      }
      __syncwarp();
    }
    if (tid == 0) s.taken = taken;  // every thread read the last claim before the barriers since
    publish();
    Item next;
    const bool more = s.taken < valid && locate_item(p, ws, valid - 1 - s.taken, next);

    const int64_t tok0 = si.b * p.len + t0;  // flattened token of row 0
    const bool direct = gdn_bwd_direct_grads(p);
    // 16-byte rows of dQ and dK (the strides are multiples of 8 elements; the execute check asks 8-byte bases).
    const bool staged = direct && ((reinterpret_cast<uintptr_t>(bp.dq) | reinterpret_cast<uintptr_t>(bp.dk)) & 15) == 0;
    const int64_t out_q = si.b * bp.dq_stride[0] + t0 * bp.dq_stride[1] + hv * bp.dq_stride[2];
    const int64_t out_k = si.b * bp.dk_stride[0] + t0 * bp.dk_stride[1] + hv * bp.dk_stride[2];
    const KMajor<kC, E> dp_rows{s.dpm, 0};

    // dQ = scale exp(G) dO S^T + dP K (q . its first term into dG), and dK's first term exp(G_L - G) U' dS_n^T
    // (k . it moves dG from row i to the last row).
    {
      wait(dq, dk);
      float moved = 0.f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = fr + half * 8;
        const float f = p.scale * expf(s.g[i]), fk = expf(g_last - s.g[i]);
        float dot = 0.f, dot_k = 0.f;
#pragma unroll
        for (int nt = 0; nt < TW; ++nt) {
          const float2 q = M::unpack(*reinterpret_cast<const uint32_t*>(&s.q[at<kC>(i, nw + nt * 8 + fc)]));
          const float2 k = M::unpack(*reinterpret_cast<const uint32_t*>(&sk[at<kC>(i, nw + nt * 8 + fc)]));
          dq[nt][half * 2] *= f, dq[nt][half * 2 + 1] *= f;
          dot += dq[nt][half * 2] * q.x + dq[nt][half * 2 + 1] * q.y;
          dk[nt][half * 2] *= fk, dk[nt][half * 2 + 1] *= fk;
          dot_k += dk[nt][half * 2] * k.x + dk[nt][half * 2 + 1] * k.y;
        }
        dot = quad_sum(dot);
        dot_k = quad_sum(dot_k);
        if ((lane & 3) == 0) dgw[i] += dot - dot_k;
        moved += dot_k;
      }
      moved = column_sum(moved);  // every quad holds its rows' sums: the warp's total
      __syncwarp();
      if (lane == 0) dgw[last] += moved;
      __syncwarp();
      product<E, K, MN, kC / 16>(dq, dp_rows, k_cols, true);
      wait(dq);
      if (staged)  // staged in the k buffer of the next item, whose copy starts after the dW step
        store_rows_staged<E, NW>(dq, s.k[kb ^ 1] + ch * (kC * NW), static_cast<E*>(bp.dq) + out_q + nw, bp.dq_stride[1],
                                 rows, fr, fc, tid & 127, ch);
      else
        store_dqk_tile<E, TW>(dq, direct, bw.dq + (tok0 * hvs + hv) * kD + nw, static_cast<E*>(bp.dq) + out_q + nw,
                              bp.dq_stride[1], hvs, fr, fc, rows);
    }
    // dK += dP^T Q, and dW = -dU' S^T, both running while <dS_n, S> is summed.
    product<E, MN, MN, kC / 16>(dk, MnMajor<kC, E>{s.dpm, 0}, MnMajor<kC, E>{s.q, nw}, true);
    float dw[TW][4];
    product<E, K, K, kD / 16>(dw, dup_rows, s_rows, false);
    {  // exp(G_L) <dS_n, S>: both tiles in the same layout, summed element by element in four running sums (one
       // sum waited on each of its adds)
      float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int n = 0; n < kD * kD / 8 / kThreads; ++n) {
        const int x = tid + n * kThreads;
        const uint4 a = reinterpret_cast<const uint4*>(s.s)[x], b = reinterpret_cast<const uint4*>(s.dsn)[x];
        const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw4[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 u = M::unpack(aw[e]), w = M::unpack(bw4[e]);
          part[e] += u.x * w.x + u.y * w.y;
        }
      }
      float sum = (part[0] + part[1]) + (part[2] + part[3]);
      sum = quad_sum(sum);
      sum = column_sum(sum);
      if (lane == 0) dgw[last] += expf(g_last) * sum;
      __syncwarp();
    }
    // dW into dO's place (every warpgroup's reads of dO have completed: their waits came before).
    {
      wait(dw, dk);
      __syncthreads();  // q, U', S and dS_n are dead: the next item's copies may start
      if (more) {
        copy_state_group<kThreads>(bp, bw, next, s, s.k[kb ^ 1], tid);
        if (tid < kC) gates = gates_of(p, next.c.si, next.c.t0, next.c.rows, next.hv, tid);
      }
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int nt = 0; nt < TW; ++nt)
          *reinterpret_cast<uint32_t*>(&s.dout[at<kC>(fr + half * 8, nw + nt * 8 + fc)]) =
              M::pack(-dw[nt][half * 2], -dw[nt][half * 2 + 1]);
    }
    publish();

    // dT = dU' (diag(beta) V)^T + dW (diag(beta exp G) K)^T, lower triangle with the diagonal.
    {
      float x1[TC][4], x2[TC][4];
      product<E, K, K, kD / 16>(x1, dup_rows, KMajor<kC, E>{s.v, nc}, false);
      product<E, K, K, kD / 16>(x2, do_rows, KMajor<kC, E>{sk, nc}, false);
      wait(x1, x2);
      const auto exp_g = [&](int j) { return expf(s.g[j]); };
      store_dt<E, TC>(
          x1, x2, s.beta, exp_g, [&](int i, int j) { return &s.dt[at<kC>(i, j)]; }, nc, fr, fc);
    }
    publish();  // dT complete; every warp is done reading dP

    const MnMajor<kC, E> t_cols{s.tm, 0};
    // T^T dU' (dV = diag(beta) of it; v . it into dbeta) and T^T dW (dK += diag(beta exp G) of it; exp(G) k . it into
    // dbeta, beta exp(G) k . it into dG).
    {
      float tdu[TW][4], tdw[TW][4];
      product<E, MN, MN, kC / 16>(tdu, t_cols, MnMajor<kC, E>{s.dup, nw}, false);
      product<E, MN, MN, kC / 16>(tdw, t_cols, MnMajor<kC, E>{s.dout, nw}, false);
      wait(tdu, tdw);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int j = fr + half * 8;
        const float bj = s.beta[j], gj = expf(s.g[j]), f = bj * gj;
        float dot_v = 0.f, dot_k = 0.f;
#pragma unroll
        for (int nt = 0; nt < TW; ++nt) {
          const float2 vv = M::unpack(*reinterpret_cast<const uint32_t*>(&s.v[at<kC>(j, nw + nt * 8 + fc)]));
          const float2 k = M::unpack(*reinterpret_cast<const uint32_t*>(&sk[at<kC>(j, nw + nt * 8 + fc)]));
          dot_v += tdu[nt][half * 2] * vv.x + tdu[nt][half * 2 + 1] * vv.y;
          dot_k += tdw[nt][half * 2] * k.x + tdw[nt][half * 2 + 1] * k.y;
          dk[nt][half * 2] += f * tdw[nt][half * 2], dk[nt][half * 2 + 1] += f * tdw[nt][half * 2 + 1];
        }
        dot_v = quad_sum(dot_v);
        dot_k = quad_sum(dot_k);
        if ((lane & 3) == 0) {
          dbw[j] += dot_v + gj * dot_k;
          dgw[j] += f * dot_k;
        }
        if (j < rows) {
          E* dst =
              static_cast<E*>(bp.dv) + si.b * bp.dv_stride[0] + hv * bp.dv_stride[2] + (t0 + j) * bp.dv_stride[1] + nw;
#pragma unroll
          for (int nt = 0; nt < TW; ++nt)
            *reinterpret_cast<uint32_t*>(&dst[nt * 8 + fc]) =
                M::pack(bj * tdu[nt][half * 2], bj * tdu[nt][half * 2 + 1]);
        }
      }
      __syncwarp();
    }
    // X = T^T dT into dP's place, this warpgroup's 32 columns.
    {
      float x[TC][4];
      product<E, MN, MN, kC / 16>(x, t_cols, MnMajor<kC, E>{s.dt, nc}, false);
      wait(x);
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int nt = 0; nt < TC; ++nt)
          *reinterpret_cast<uint32_t*>(&s.dpm[at<kC>(fr + half * 8, nc + nt * 8 + fc)]) =
              M::pack(x[nt][half * 2], x[nt][half * 2 + 1]);
    }
    publish();  // X complete; every warp is done reading dT, and with dO (dW), dU' and V
    if (more) copy_wy_group<kThreads, E>(bp, bw, next, s, tid);

    // dA = -X T^T (strictly lower): dbeta_i += dA_i . KK_i, dG from dA . A, dKK = diag(beta) dA . M into dT's place.
    {
      float da_acc[TC][4];
      product<E, K, K, kC / 16>(da_acc, dp_rows, KMajor<kC, E>{s.tm, nc}, false);
      wait(da_acc);
      float rb[2] = {0.f, 0.f}, rg2[2] = {0.f, 0.f}, g_row[2], g_col[2 * TC], b_row[2];
      cumulative_gates<TC>(s.g, fr, nc + fc, g_row, g_col);
      b_row[0] = s.beta[fr], b_row[1] = s.beta[fr + 8];
#pragma unroll
      for (int nt = 0; nt < TC; ++nt) {
        float csum[2] = {0.f, 0.f};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = fr + half * 8;
          const float bi = b_row[half];
          float out[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = nc + nt * 8 + fc + e;
            const float da = j < i ? -da_acc[nt][half * 2 + e] : 0.f;
            const float kk = s.kk[j * kLdAt + i];
            rb[half] += da * kk;
            const float x = da * bi * kk;
            rg2[half] += x, csum[e] += x;
            out[e] = bi * da * masked_exp(j < i, g_row[half] - g_col[nt * 2 + e]);  // da is 0 where j >= i
          }
          *reinterpret_cast<uint32_t*>(&s.dt[at<kC>(i, nc + nt * 8 + fc)]) = M::pack(out[0], out[1]);
        }
        subtract_column_sums(dgw, nc + nt * 8, csum, lane);
      }
      __syncwarp();
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float b = quad_sum(rb[half]), g = quad_sum(rg2[half]);
        if ((lane & 3) == 0) {
          dbw[fr + half * 8] += b;
          dgw[fr + half * 8] += g;
        }
      }
    }
    publish();  // dKK complete; every warp is done reading T
    if (more) copy_t_group<kThreads, E>(ws, next, s, tid);

    // dK += dKK K + dKK^T K, then out.
    product<E, K, MN, kC / 16>(dk, KMajor<kC, E>{s.dt, 0}, k_cols, true);
    product<E, MN, MN, kC / 16>(dk, MnMajor<kC, E>{s.dt, 0}, k_cols, true);
    wait(dk);
    if (staged)  // staged where K K^T was (read for the last time before dKK's barrier)
      store_rows_staged<E, NW>(dk, reinterpret_cast<E*>(s.kk) + ch * (kC * NW), static_cast<E*>(bp.dk) + out_k + nw,
                               bp.dk_stride[1], rows, fr, fc, tid & 127, ch);
    else
      store_dqk_tile<E, TW>(dk, direct, bw.dk + (tok0 * hvs + hv) * kD + nw, static_cast<E*>(bp.dk) + out_k + nw,
                            bp.dk_stride[1], hvs, fr, fc, rows);
    done = it, any_done = true;
    if (!more) break;
    it = next;
  }
  __syncthreads();  // the last item's dG and dbeta complete
  finish_item<kWarps>(bp, done, s, tid);
}

template <class E, int kWG>
__global__ void __launch_bounds__(kWG * 128, 1)
    gdn_bwd_grad_wgmma_kernel(const GdnBwdParams bp, const Workspace ws, const BwdWs bw, int64_t items) {
  gradient_items<E, kWG>(bp, ws, bw, items);
  // Launched behind the reverse pass (GdnPlan::grad_overlap), this grid completes after it: what follows on the
  // stream may read all of its results.
  wait_for_prior_grids();
}

}  // namespace frost::sm90::gdn
