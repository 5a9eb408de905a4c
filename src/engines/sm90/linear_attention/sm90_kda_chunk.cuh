// KDA's per-chunk kernel (see sm90_gdn.h): gdn_chunk_kernel's work with one log decay per key channel. With
// G_i[d] the cumulative decay of token i in channel d, A[i][j] = beta_i sum_d k_i[d] k_j[d] exp(G_i[d] - G_j[d])
// and P[i][j] = scale sum_d q_i[d] k_j[d] exp(G_i[d] - G_j[d]) carry the decay inside the sum over channels,
// so the operands are gated element by element, split around an anchor token a between j and i:
// exp(G_i - G_a) on the row side and exp(G_a - G_j) on the column side. exp(-G) alone overflows within a
// chunk under strong decay; the anchors keep every factor that counts bounded:
//   - blocks left of the diagonal (j < 16 w <= i for warp w's rows): a = 16 w, both factors are decays (at
//     most 1), on the 16-bit tensor cores with the factors applied to the ldmatrix fragments;
//   - the diagonal 16 x 16 block: a in the middle of each 8-column tile (16 w + 4, 16 w + 12), factors within
//     exp(+-4 |g|) (inside FP32 for g >= kKdaMinLogDecay), on TF32 tensor cores (16-bit types would overflow
//     there). Pairs above the diagonal may overflow in the product; they are masked by selection.
// Then, elementwise: Q exp(G) (scale and the q norm folded in) and K exp(G_last - G) (the k norm folded in) to
// the workspace for the state pass, exp(G_last) per channel for the state's rows, and K exp(G) in place of k
// for W = T diag(beta rk) K exp(G). The solve and the WY products are gdn_chunk_kernel's.
#pragma once
#include "engines/sm90/linear_attention/sm90_gdn_kernels.cuh"

namespace frost::sm90::gdn {

constexpr int kLdG = kD + 8;  // FP32 rows of 128 (float2 reads of 4 rows x 4 lanes fall in 32 distinct banks)
constexpr float kLog2e = 1.4426950408889634f;

template <class E>
struct KdaChunkSmem {
  E qv[kC * kLdD];  // q, then v (loaded while A is solved)
  E k[kC * kLdD];   // k, then K exp(G)
  union {
    float g[kC * kLdG];    // g, then the cumulative G; log2 units
    float at[kC * kLdAt];  // once G is dead: A transposed, FP32; then Tw and Tu
  };
  float beta[kC], rq[kC], rk[kC];
};
// 69 KB: three CTAs per SM (A waits in registers while G is still read).
static_assert(sizeof(KdaChunkSmem<__nv_bfloat16>) <= 227 * 1024 / 3 - 1024);

template <class E>
__device__ __forceinline__ uint32_t scale_pair(uint32_t x, float a, float b) {
  const float2 f = Mma<E>::unpack(x);
  return Mma<E>::pack(f.x * a, f.y * b);
}

// One CTA per (chunk, value head). Grid (max_chunks, HV). kRecord (the KDA backward): KK = A without beta, strictly
// lower and transposed, to ws.kk in FP32.
template <class E, bool kRecord = false>
__global__ void __launch_bounds__(kThreads, 3) kda_chunk_kernel(const GdnFwdParams p, const Workspace ws) {
  using M = Mma<E>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<KdaChunkSmem<E>*>(smem_raw);
  const int c = static_cast<int>(blockIdx.x), hv = static_cast<int>(blockIdx.y);
  const int hvs = static_cast<int>(p.value_heads);
  SeqInfo si;
  int64_t t0;
  int rows;
  const E* vb;
  if (!start_chunk(p, ws, c, hv, s.qv, s.k, si, t0, rows, vb)) return;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  // g, raw: FP32 rows with contiguous channels and 16-byte aligned starts (FLA's layout) by cp.async beside q
  // and k; anything else by scalar loads, eight in flight per thread. Rows past the end are zeros (no decay).
  const int64_t g_at = si.b * p.g_stride[0] + hv * p.g_stride[2] + t0 * p.g_stride[1];
  const bool g_rows16 =
      p.g_dtype == GdnDtype::FP32 && p.g_stride[3] == 1 &&
      ((reinterpret_cast<uintptr_t>(p.g) | static_cast<uintptr_t>(p.g_stride[0] | p.g_stride[1] | p.g_stride[2]) * 4) &
       15) == 0;
  if (g_rows16) {
    const float* gb = static_cast<const float*>(p.g) + g_at;
    for (int i = tid; i < kC * (kD / 4); i += kThreads) {
      const int r = i >> 5, col = (i & 31) * 4;
      const bool ok = r < rows;
      cp16(&s.g[r * kLdG + col], gb + (ok ? r : 0) * p.g_stride[1] + col, ok);
    }
  } else {
#pragma unroll 8
    for (int i = tid; i < kC * kD; i += kThreads) {
      const int r = i >> 7, d = i & (kD - 1);
      s.g[r * kLdG + d] = r < rows ? load_scalar(p.g, g_at + r * p.g_stride[1] + d * p.g_stride[3], p.g_dtype) : 0.f;
    }
  }
  cp_commit();
  if (tid < kC) {
    const int64_t t = t0 + tid;
    s.beta[tid] =
        tid < rows
            ? load_scalar(p.beta, si.b * p.beta_stride[0] + t * p.beta_stride[1] + hv * p.beta_stride[2], p.beta_dtype)
            : 0.f;
  }
  cp_wait<0>();
  __syncthreads();

  // Row norms (q rows for threads 0-63, k rows for 64-127); thread d sums channel d down the chunk (clamped,
  // in log2 units).
  (tid < kC ? s.rq[tid] : s.rk[tid - kC]) =
      row_inv_norm(tid < kC ? &s.qv[tid * kLdD] : &s.k[(tid - kC) * kLdD], p.l2norm);
  {
    float acc = 0.f;
#pragma unroll 16
    for (int r = 0; r < kC; ++r) {
      const float x = s.g[r * kLdG + tid];
      acc += (x < kKdaMinLogDecay ? kKdaMinLogDecay : x) * kLog2e;  // a NaN stays NaN
      s.g[r * kLdG + tid] = acc;
    }
  }
  __syncthreads();

  const float* const G = s.g;
  const int m0 = warp * 16, gr = lane >> 2, tq = lane & 3;
  float kk[8][4] = {}, qk[8][4] = {};
  // Left of the diagonal, anchored at token m0. Fragment register x of A holds row m0 + gr + 8 (x & 1) at
  // channels k0 + 8 (x >> 1) + 2 tq (+ 1); register y of B holds token 16 np + gr + 8 (y >> 1) at channels
  // k0 + 8 (y & 1) + 2 tq (+ 1).
  if (warp > 0) {
#pragma unroll 2
    for (int k0 = 0; k0 < kD; k0 += 16) {
      uint32_t ak[4], aq[4];
      ldsm4(ak, &s.k[frag_a(lane, m0, k0, kLdD)]);
      ldsm4(aq, &s.qv[frag_a(lane, m0, k0, kLdD)]);
      const float2 anchor[2] = {*reinterpret_cast<const float2*>(&G[m0 * kLdG + k0 + 2 * tq]),
                                *reinterpret_cast<const float2*>(&G[m0 * kLdG + k0 + 8 + 2 * tq])};
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const float2 gi =
            *reinterpret_cast<const float2*>(&G[(m0 + gr + 8 * (x & 1)) * kLdG + k0 + 8 * (x >> 1) + 2 * tq]);
        const float f0 = exp2f(gi.x - anchor[x >> 1].x), f1 = exp2f(gi.y - anchor[x >> 1].y);
        ak[x] = scale_pair<E>(ak[x], f0, f1);
        aq[x] = scale_pair<E>(aq[x], f0, f1);
      }
#pragma unroll
      for (int np = 0; np < 3; ++np) {
        if (np >= warp) break;
        uint32_t b[4];
        ldsm4(b, &s.k[frag_b_nk(lane, np * 16, k0, kLdD)]);
#pragma unroll
        for (int y = 0; y < 4; ++y) {
          const float2 gj =
              *reinterpret_cast<const float2*>(&G[(np * 16 + gr + 8 * (y >> 1)) * kLdG + k0 + 8 * (y & 1) + 2 * tq]);
          b[y] = scale_pair<E>(b[y], exp2f(anchor[y & 1].x - gj.x), exp2f(anchor[y & 1].y - gj.y));
        }
        M::run(kk[2 * np], ak, b[0], b[1]);
        M::run(kk[2 * np + 1], ak, b[2], b[3]);
        M::run(qk[2 * np], aq, b[0], b[1]);
        M::run(qk[2 * np + 1], aq, b[2], b[3]);
      }
    }
  }
  // The diagonal block in TF32 (m16n8k8: A registers (row gr, channel tq), (gr + 8, tq), (gr, tq + 4),
  // (gr + 8, tq + 4); B registers (channel tq, token gr), (tq + 4, gr)). Tile 0 (tokens m0 .. m0 + 7) anchored
  // at m0 + 4, tile 1 (m0 + 8 .. m0 + 15) at m0 + 12 and without rows m0 .. m0 + 7, which all precede it.
  {
    float dk[2][4] = {}, dq[2][4] = {};  // apart from kk and qk, whose index would depend on the warp
    const int i0 = m0 + gr, i1 = i0 + 8, a0 = m0 + 4, a1 = m0 + 12;
#pragma unroll 4
    for (int k8 = 0; k8 < kD; k8 += 8) {
      const int d0 = k8 + tq, d1 = d0 + 4;
      const float g00 = G[i0 * kLdG + d0], g01 = G[i0 * kLdG + d1], g10 = G[i1 * kLdG + d0], g11 = G[i1 * kLdG + d1];
      const float h0 = G[a0 * kLdG + d0], h1 = G[a0 * kLdG + d1], e0 = G[a1 * kLdG + d0], e1 = G[a1 * kLdG + d1];
      const float k00 = M::to_float(s.k[i0 * kLdD + d0]), k01 = M::to_float(s.k[i0 * kLdD + d1]);
      const float k10 = M::to_float(s.k[i1 * kLdD + d0]), k11 = M::to_float(s.k[i1 * kLdD + d1]);
      const float q00 = M::to_float(s.qv[i0 * kLdD + d0]), q01 = M::to_float(s.qv[i0 * kLdD + d1]);
      const float q10 = M::to_float(s.qv[i1 * kLdD + d0]), q11 = M::to_float(s.qv[i1 * kLdD + d1]);
      {
        const float r00 = exp2f(g00 - h0), r01 = exp2f(g01 - h1), r10 = exp2f(g10 - h0), r11 = exp2f(g11 - h1);
        const uint32_t ak[4] = {tf32(k00 * r00), tf32(k10 * r10), tf32(k01 * r01), tf32(k11 * r11)};
        const uint32_t aq[4] = {tf32(q00 * r00), tf32(q10 * r10), tf32(q01 * r01), tf32(q11 * r11)};
        const uint32_t b0 = tf32(k00 * exp2f(h0 - g00)), b1 = tf32(k01 * exp2f(h1 - g01));
        mma_tf32(dk[0], ak, b0, b1);
        mma_tf32(dq[0], aq, b0, b1);
      }
      {
        const float r10 = exp2f(g10 - e0), r11 = exp2f(g11 - e1);
        const uint32_t ak[4] = {0u, tf32(k10 * r10), 0u, tf32(k11 * r11)};
        const uint32_t aq[4] = {0u, tf32(q10 * r10), 0u, tf32(q11 * r11)};
        const uint32_t b0 = tf32(k10 * exp2f(e0 - g10)), b1 = tf32(k11 * exp2f(e1 - g11));
        mma_tf32(dk[1], ak, b0, b1);
        mma_tf32(dq[1], aq, b0, b1);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        if (nt / 2 == warp) kk[nt][x] = dk[nt & 1][x], qk[nt][x] = dq[nt & 1][x];
  }

  // P to the workspace, A (FP32) into kk's registers until G's space is free; entries above the diagonal are
  // selected away.
  const int64_t slot = static_cast<int64_t>(c) * hvs + hv;
  {
    E* pb = static_cast<E*>(ws.p) + slot * kC * kC;
    // The factors of this lane's 2 rows and 16 columns, read once (the stores in between would have the compiler
    // read them from shared memory again per element).
    float rk_row[2], brk_row[2], qf_row[2], rk_col[16];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = m0 + gr + half * 8;
      rk_row[half] = s.rk[i], brk_row[half] = s.beta[i] * s.rk[i], qf_row[half] = p.scale * s.rq[i];
    }
#pragma unroll
    for (int x = 0; x < 16; ++x) rk_col[x] = s.rk[(x >> 1) * 8 + tq * 2 + (x & 1)];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = m0 + gr + half * 8;
        float out[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = nt * 8 + tq * 2 + e;
          const float rkj = rk_col[nt * 2 + e];
          if constexpr (kRecord)
            ws.kk[(slot * kC + j) * kC + i] = j < i ? rk_row[half] * rkj * kk[nt][half * 2 + e] : 0.f;
          kk[nt][half * 2 + e] = j < i ? brk_row[half] * rkj * kk[nt][half * 2 + e] : 0.f;
          out[e] = j <= i ? qf_row[half] * rkj * qk[nt][half * 2 + e] : 0.f;
        }
        *reinterpret_cast<uint32_t*>(&pb[i * kC + nt * 8 + tq * 2]) = M::pack(out[0], out[1]);
      }
  }
  __syncthreads();  // every warp is done with the raw q and k

  // The state pass's operands, and K exp(G) for W. G_last is row 63's: rows past the end added zeros.
  {
    E* qg = static_cast<E*>(ws.qg) + slot * kC * kD;
    E* kd = static_cast<E*>(ws.kd) + slot * kC * kD;
    for (int i = tid; i < kC * (kD / 8); i += kThreads) {
      const int r = i >> 4, col = (i & 15) * 8;
      const uint4 qraw = *reinterpret_cast<const uint4*>(&s.qv[r * kLdD + col]);
      const uint4 kraw = *reinterpret_cast<const uint4*>(&s.k[r * kLdD + col]);
      const uint32_t qin[4] = {qraw.x, qraw.y, qraw.z, qraw.w}, kin[4] = {kraw.x, kraw.y, kraw.z, kraw.w};
      float gv[8], lv[8];
      *reinterpret_cast<float4*>(&gv[0]) = *reinterpret_cast<const float4*>(&G[r * kLdG + col]);
      *reinterpret_cast<float4*>(&gv[4]) = *reinterpret_cast<const float4*>(&G[r * kLdG + col + 4]);
      *reinterpret_cast<float4*>(&lv[0]) = *reinterpret_cast<const float4*>(&G[(kC - 1) * kLdG + col]);
      *reinterpret_cast<float4*>(&lv[4]) = *reinterpret_cast<const float4*>(&G[(kC - 1) * kLdG + col + 4]);
      const float qf = p.scale * s.rq[r], kf = s.rk[r];
      uint32_t qo[4], ko[4], kgo[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const float e0 = exp2f(gv[2 * x]), e1 = exp2f(gv[2 * x + 1]);
        const float l0 = exp2f(lv[2 * x] - gv[2 * x]) * kf, l1 = exp2f(lv[2 * x + 1] - gv[2 * x + 1]) * kf;
        const float2 qx = M::unpack(qin[x]), kx = M::unpack(kin[x]);
        qo[x] = M::pack(qx.x * e0 * qf, qx.y * e1 * qf);
        ko[x] = M::pack(kx.x * l0, kx.y * l1);
        kgo[x] = M::pack(kx.x * e0, kx.y * e1);
      }
      *reinterpret_cast<uint4*>(&qg[r * kD + col]) = make_uint4(qo[0], qo[1], qo[2], qo[3]);
      *reinterpret_cast<uint4*>(&kd[r * kD + col]) = make_uint4(ko[0], ko[1], ko[2], ko[3]);
      *reinterpret_cast<uint4*>(&s.k[r * kLdD + col]) = make_uint4(kgo[0], kgo[1], kgo[2], kgo[3]);
    }
    if (tid < kD) ws.glast[slot * kD + tid] = exp2f(G[(kC - 1) * kLdG + tid]);
  }
  __syncthreads();  // q and G are dead: v lands in q's place while A, transposed in G's place, is solved
  for (int i = tid; i < kC * (kD / 8); i += kThreads) {
    const int r = i >> 4, col = (i & 15) * 8;
    const bool ok = r < rows;
    cp16(&s.qv[r * kLdD + col], vb + (ok ? r : 0) * p.v_stride[1] + col, ok);
  }
  cp_commit();
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int x = 0; x < 4; ++x) s.at[(nt * 8 + tq * 2 + (x & 1)) * kLdAt + m0 + gr + (x >> 1) * 8] = kk[nt][x];
  __syncthreads();

  const int col = warp * 16 + (lane & 15), half = lane >> 4;
  float t[32];
  solve_unit_lower(s.at, lane, warp, t);
  record_t<E>(ws, slot, half, col, t);
  __syncthreads();  // every column is done reading A
  E* const tw = reinterpret_cast<E*>(s.at);
  E* const tu = tw + kC * kC;
  {
    const float cw = s.beta[col] * s.rk[col], cu = s.beta[col];
#pragma unroll
    for (int x = 0; x < 32; ++x) {
      tw[sw64(half * 32 + x, col)] = E(t[x] * cw);
      tu[sw64(half * 32 + x, col)] = E(t[x] * cu);
    }
  }
  cp_wait<0>();
  __syncthreads();
  // W = Tw K exp(G) and U = Tu V.
  wy_product(tw, s.k, static_cast<E*>(ws.w) + slot * kC * kD, lane, m0);
  wy_product(tu, s.qv, static_cast<E*>(ws.u) + slot * kC * kD, lane, m0);
}

}  // namespace frost::sm90::gdn
