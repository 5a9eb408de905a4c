// The KDA backward's own kernels (sm90_gdn.h lists the launches): the per-chunk gradient kernel through the WY
// form and the intra-chunk kernel for the products that carry the decay inside the sum over key channels. The
// forward's KDA chunk kernel (recording KK), its state pass (recording the states and U') and the reverse state
// pass (kPerKey) come first; the GVA / L2-norm epilogue is the GDN backward's.
//
// Notation of one chunk (rows i, j < 64, key channels d; q, k already L2-normalized; L the chunk's last row; G the
// cumulative log decay per channel, padded rows adding zero):
//   Qs = scale Q . exp(G), Kg = K . exp(G), Kr = K . exp(G_L - G),
//   KK_ij = sum_d k_id k_jd exp(G_id - G_jd) (j < i), P_ij = scale sum_d q_id k_jd exp(G_id - G_jd) (j <= i),
//   T = (I + diag(beta) KK)^-1, W = T diag(beta) Kg, U = T diag(beta) V, U' = U - W S,
//   O = Qs S + P U', S_next = diag(exp(G_L)) S + Kr^T U'.
// Given dO, the gradient dS_n of S_next and dU' (the reverse pass's), the chunk kernel forms
//   dP = scale dO U'^T (j <= i), dQs = dO S^T, dKr = U' dS_n^T, dW = -dU' S^T,
//   dT = dU' (diag(beta) V)^T + dW (diag(beta) Kg)^T (j <= i), dV = diag(beta) T^T dU', dKg = diag(beta) T^T dW,
//   dA = -T^T dT T^T (j < i), dKK = diag(beta) dA,
//   dbeta_j = v_j . (T^T dU')_j + Kg_j . (T^T dW)_j + sum_m dA_jm KK_jm,
//   dQ = exp(G) . scale dQs, dK = exp(G_L - G) . dKr + exp(G) . dKg,
//   dG = Qs . dQs - Kr . dKr + Kg . dKg, dG_L += exp(G_L) . rowsum(S . dS_n) + colsum(Kr . dKr);
// the intra kernel adds, with e_ijd = exp(G_id - G_jd) formed directly for j <= i (so never above 1):
//   aq_id = sum_j dP_ij k_jd e_ijd, ak_id = sum_j dKK_ij k_jd e_ijd, ac_jd = sum_i (dP_ij q_id + dKK_ij k_id) e_ijd,
//   dQ += aq, dK += ak + ac, dG += q . aq + k . (ak - ac),
// and dg, the gradient of the per-token log decay, is the reverse cumulative sum of dG within the chunk.
// python/tests/test_kda_bwd_chunked_algebra.py checks these formulas in float64 against autograd.
#pragma once
#include "engines/sm90/linear_attention/sm90_gdn_bwd_kernels.cuh"
#include "engines/sm90/linear_attention/sm90_kda_chunk.cuh"

namespace frost::sm90::gdn {

// Device views of the KDA backward's own workspace pieces (FP32).
struct KdaBwdWs {
  float* dp;   // [chunks, HV, 64, 64] dP (scale folded in, zero above the diagonal)
  float* dkk;  // [chunks, HV, 64, 64] dKK (zero on and above the diagonal)
  float* dg;   // [chunks, HV, 64, 128] dG of each token and channel before the reverse sum
};

// g of chunk rows [t0, t0 + rows) into sg (FP32 rows of kLdG; rows past the end zero), as the forward's KDA chunk
// kernel loads it (cp.async for FP32 rows with contiguous channels and 16-byte aligned starts); a commit group.
template <int kN>
__device__ __forceinline__ void load_kda_g(const GdnFwdParams& p, const SeqInfo& si, int hv, int64_t t0, int rows,
                                           float* sg) {
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t g_at = si.b * p.g_stride[0] + hv * p.g_stride[2] + t0 * p.g_stride[1];
  const bool g_rows16 =
      p.g_dtype == GdnDtype::FP32 && p.g_stride[3] == 1 &&
      ((reinterpret_cast<uintptr_t>(p.g) | static_cast<uintptr_t>(p.g_stride[0] | p.g_stride[1] | p.g_stride[2]) * 4) &
       15) == 0;
  if (g_rows16) {
    const float* gb = static_cast<const float*>(p.g) + g_at;
    for (int i = tid; i < kC * (kD / 4); i += kN) {
      const int r = i >> 5, col = (i & 31) * 4;
      const bool ok = r < rows;
      cp16(&sg[r * kLdG + col], gb + (ok ? r : 0) * p.g_stride[1] + col, ok);
    }
  } else {
#pragma unroll 8
    for (int i = tid; i < kC * kD; i += kN) {
      const int r = i >> 7, d = i & (kD - 1);
      sg[r * kLdG + d] = r < rows ? load_scalar(p.g, g_at + r * p.g_stride[1] + d * p.g_stride[3], p.g_dtype) : 0.f;
    }
  }
  cp_commit();
}

// After the loads: q and k rows L2-normalized in place (rounded to the input type) and the cumulative decay per
// channel, clamped as the forward's and in log2 units. Both KDA backward kernels run exactly this, so they see the
// same operands. Row r < 64 is q's row r, else k's row r - 64.
template <class E>
__device__ __forceinline__ void kda_normalize_row(const GdnFwdParams& p, E* sq, E* sk, int r) {
  using M = Mma<E>;
  if (!p.l2norm) return;
  E* row = r < kC ? &sq[r * kLdD] : &sk[(r - kC) * kLdD];
  const float inv = row_inv_norm(row, true);
#pragma unroll
  for (int d = 0; d < kD; d += 2) {
    const float2 x = M::unpack(*reinterpret_cast<const uint32_t*>(&row[d]));
    *reinterpret_cast<uint32_t*>(&row[d]) = M::pack(x.x * inv, x.y * inv);
  }
}

__device__ __forceinline__ void kda_cumulative_decay(float* sg, int d) {
  float acc = 0.f;
#pragma unroll 16
  for (int r = 0; r < kC; ++r) {
    const float x = sg[r * kLdG + d];
    acc += (x < kKdaMinLogDecay ? kKdaMinLogDecay : x) * kLog2e;  // a NaN stays NaN
    sg[r * kLdG + d] = acc;
  }
}

// The chunk kernel's split (256 threads): threads 0-127 normalize the rows, 128-255 sum the decays.
template <class E>
__device__ __forceinline__ void kda_prepare(const GdnFwdParams& p, E* sq, E* sk, float* sg) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < 2 * kC)
    kda_normalize_row(p, sq, sk, tid);
  else
    kda_cumulative_decay(sg, tid - 2 * kC);
}

template <class E>
struct KdaBwdChunkSmem {
  E q[kC * kLdD];                                 // q, then K exp(G)
  E k[kC * kLdD], v[kC * kLdD];                   // k (normalized), v
  E dout[kC * kLdD];                              // dO, then dW
  E up[kC * kLdD], dup[kC * kLdD];                // U', dU'
  E sb[kD * kLdD];                                // S entering the chunk, then dS of the state leaving it
  E tm[kC * kLdC], xm[kC * kLdC], dt[kC * kLdC];  // T, T^T dT, dT
  float kk[kC * kLdAt];                           // KK transposed (the forward's, FP32)
  float g[kC * kLdG];                             // G, log2 units
  float beta[kC];
  float dbw[kBwdWarps][kC];  // dbeta, one row per warp (summed in warp order)
  float dgl[kBwdWarps][kD];  // colsum(Kr . dKr) per warp
  float dsl[kD];             // exp(G_L) rowsum(S . dS_n)
};
static_assert(sizeof(KdaBwdChunkSmem<__nv_bfloat16>) <= 227 * 1024);

// One CTA of 8 warps per (chunk, value head). Grid (max_chunks, HV). Warp w owns rows [16 rg, 16 rg + 16),
// rg = w % 4, of every product and the half ch = w / 4 of its columns (64 of 128, or 32 of 64). dQ and dK (FP32
// per value head) and dG go to the workspace; the intra kernel completes them.
template <class E>
__global__ void __launch_bounds__(kBwdThreads, 1)
    kda_bwd_chunk_kernel(const GdnBwdParams bp, const Workspace ws, const BwdWs bw, const KdaBwdWs kw) {
  using M = Mma<E>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<KdaBwdChunkSmem<E>*>(smem_raw);
  const GdnFwdParams& p = bp.fwd;
  if (*ws.flag == 0) return;
  const int hv = static_cast<int>(blockIdx.y), hvs = static_cast<int>(p.value_heads);
  BwdChunk chunk;
  if (!locate_bwd_chunk(p, ws, static_cast<int>(blockIdx.x), hv, chunk)) return;
  const SeqInfo si = chunk.si;
  const int64_t t0 = chunk.t0, slot = chunk.slot;
  const int rows = chunk.rows;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  {
    copy_qk_rows<E, kBwdThreads>(p, chunk, s.q, s.k);
    copy_v_do_rows<E, kBwdThreads>(bp, bw, chunk, hv, s.v, s.dout, s.up, s.dup);
    const E* hs = static_cast<const E*>(bw.h) + slot * kD * kD;
    for (int i = tid; i < kD * (kD / 8); i += kBwdThreads) {
      const int r = i >> 4, col = (i & 15) * 8;
      cp16(&s.sb[r * kLdD + col], hs + r * kD + col, true);
    }
    const float* kks = ws.kk + slot * kC * kC;
    for (int i = tid; i < kC * (kC / 4); i += kBwdThreads) {
      const int r = i >> 4, col = (i & 15) * 4;
      cp16(&s.kk[r * kLdAt + col], kks + r * kC + col, true);
    }
    copy_recorded_t<E, kBwdThreads>(ws, slot, s.tm);
    cp_commit();
  }
  load_kda_g<kBwdThreads>(p, si, hv, t0, rows, s.g);
  if (tid < kC) {
    const int64_t t = t0 + tid;
    s.beta[tid] =
        tid < rows
            ? load_scalar(p.beta, si.b * p.beta_stride[0] + t * p.beta_stride[1] + hv * p.beta_stride[2], p.beta_dtype)
            : 0.f;
  }
  for (int i = tid; i < kBwdWarps * kC; i += kBwdThreads) (&s.dbw[0][0])[i] = 0.f;
  for (int i = tid; i < kBwdWarps * kD; i += kBwdThreads) (&s.dgl[0][0])[i] = 0.f;
  cp_wait<0>();
  __syncthreads();
  kda_prepare(p, s.q, s.k, s.g);
  __syncthreads();

  const float* const G = s.g;
  const int rg = warp & 3, ch = warp >> 2;
  const int m0 = rg * 16, last = rows - 1;
  const int nw = ch * 64, nc = ch * 32;
  float* const dbw = s.dbw[warp];
  // Accumulator tiles: row fr (+ 8 for half 1), column n0 + 8 nt + fc + e.
  const int fr = m0 + (lane >> 2), fc = (lane & 3) * 2;
  const int64_t tok0 = si.b * p.len + t0;  // flattened token of row 0
  float dk[8][4] = {}, dg[8][4] = {};      // this warp's rows and 64 channels of dK and dG

  // dP = scale dO U'^T, lower triangle with the diagonal, to the workspace.
  {
    float dp[4][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < kD; k0 += 16) {
      uint32_t ad[4];
      ldsm4(ad, &s.dout[frag_a(lane, m0, k0, kLdD)]);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        if (ch * 2 + np > rg) break;
        uint32_t bu[4];
        ldsm4(bu, &s.up[frag_b_nk(lane, nc + np * 16, k0, kLdD)]);
        M::run(dp[2 * np], ad, bu[0], bu[1]);
        M::run(dp[2 * np + 1], ad, bu[2], bu[3]);
      }
    }
    float* dst = kw.dp + slot * kC * kC;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = fr + half * 8, j = nc + nt * 8 + fc;
        *reinterpret_cast<float2*>(&dst[i * kC + j]) =
            make_float2(j <= i ? p.scale * dp[nt][half * 2] : 0.f, j + 1 <= i ? p.scale * dp[nt][half * 2 + 1] : 0.f);
      }
  }

  // dQs = dO S^T: dQ = scale exp(G) . dQs (its state term), dG = Qs . dQs.
  {
    float acc[8][4] = {};
    warp_mma<E, false, false, 8>(acc, s.dout, kLdD, s.sb, kLdD, lane, m0, nw, 0, kD);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = fr + half * 8;
      float* dst = bw.dq + ((tok0 + i) * hvs + hv) * kD + nw;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int d = nw + nt * 8 + fc;
        const float2 gi = *reinterpret_cast<const float2*>(&G[i * kLdG + d]);
        const float2 q = M::unpack(*reinterpret_cast<const uint32_t*>(&s.q[i * kLdD + d]));
        const float x0 = p.scale * exp2f(gi.x) * acc[nt][half * 2], x1 = p.scale * exp2f(gi.y) * acc[nt][half * 2 + 1];
        dg[nt][half * 2] = q.x * x0, dg[nt][half * 2 + 1] = q.y * x1;
        if (i < rows) *reinterpret_cast<float2*>(&dst[nt * 8 + fc]) = make_float2(x0, x1);
      }
    }
  }

  // dW = -dU' S^T (into dO's place after the barrier), and exp(G_L) rowsum(S . dS_n) while S is here.
  {
    float acc[8][4] = {};
    warp_mma<E, false, false, 8>(acc, s.dup, kLdD, s.sb, kLdD, lane, m0, nw, 0, kD);
    {
      const int r = tid >> 1, col = (tid & 1) * 64;
      const E* dsn = static_cast<const E*>(bw.dh) + slot * kD * kD + r * kD + col;
      float sum = 0.f;
#pragma unroll
      for (int x = 0; x < 64; x += 8) {
        const uint4 a = *reinterpret_cast<const uint4*>(&s.sb[r * kLdD + col + x]);
        const uint4 b = *reinterpret_cast<const uint4*>(&dsn[x]);
        const uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 fa = M::unpack(av[e]), fb = M::unpack(bv[e]);
          sum += fa.x * fb.x + fa.y * fb.y;
        }
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      if ((tid & 1) == 0) s.dsl[r] = exp2f(G[(kC - 1) * kLdG + r]) * sum;
    }
    __syncthreads();  // every warp is done with dO and S
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        *reinterpret_cast<uint32_t*>(&s.dout[(fr + half * 8) * kLdD + nw + nt * 8 + fc]) =
            M::pack(-acc[nt][half * 2], -acc[nt][half * 2 + 1]);
  }
  {  // dS_n into S's place; meanwhile K exp(G) into q's place
    const E* dhs = static_cast<const E*>(bw.dh) + slot * kD * kD;
    for (int i = tid; i < kD * (kD / 8); i += kBwdThreads) {
      const int r = i >> 4, col = (i & 15) * 8;
      cp16(&s.sb[r * kLdD + col], dhs + r * kD + col, true);
    }
    cp_commit();
  }
  for (int i = tid; i < kC * (kD / 2); i += kBwdThreads) {
    const int r = i >> 6, d = (i & 63) * 2;
    const float2 x = M::unpack(*reinterpret_cast<const uint32_t*>(&s.k[r * kLdD + d]));
    const float2 gi = *reinterpret_cast<const float2*>(&G[r * kLdG + d]);
    *reinterpret_cast<uint32_t*>(&s.q[r * kLdD + d]) = M::pack(x.x * exp2f(gi.x), x.y * exp2f(gi.y));
  }
  cp_wait<0>();
  __syncthreads();

  // dKr = U' dS_n^T: dK = exp(G_L - G) . dKr, dG -= Kr . dKr, and its column sums to G_L.
  {
    float acc[8][4] = {};
    warp_mma<E, false, false, 8>(acc, s.up, kLdD, s.sb, kLdD, lane, m0, nw, 0, kD);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int d = nw + nt * 8 + fc;
      const float2 gl = *reinterpret_cast<const float2*>(&G[(kC - 1) * kLdG + d]);
      float csum[2] = {0.f, 0.f};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = fr + half * 8;
        const float2 gi = *reinterpret_cast<const float2*>(&G[i * kLdG + d]);
        const float2 k = M::unpack(*reinterpret_cast<const uint32_t*>(&s.k[i * kLdD + d]));
        const float f0 = exp2f(gl.x - gi.x), f1 = exp2f(gl.y - gi.y);
        const float a0 = f0 * acc[nt][half * 2], a1 = f1 * acc[nt][half * 2 + 1];
        dk[nt][half * 2] = a0, dk[nt][half * 2 + 1] = a1;
        const float x0 = k.x * a0, x1 = k.y * a1;
        dg[nt][half * 2] -= x0, dg[nt][half * 2 + 1] -= x1;
        csum[0] += x0, csum[1] += x1;
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float x = column_sum(csum[e]);
        if (lane < 4) s.dgl[warp][nw + nt * 8 + lane * 2 + e] = x;
      }
    }
  }

  // dT = dU' (diag(beta) V)^T + dW (diag(beta) Kg)^T, lower triangle with the diagonal (Kg in q's place).
  const auto one = [](int) { return 1.f; };
  chunk_dt(s.dup, s.dout, s.v, s.q, s.beta, one, s.dt, lane, m0, nc, fr, fc, ch, rg);
  __syncthreads();  // T and dT complete

  // T^T dU': dV = diag(beta) of it; v . it into dbeta.
  chunk_dv_and_dbeta(bp, si, t0, rows, hv, s.tm, s.dup, s.v, s.beta, dbw, lane, m0, nw, fr, fc);
  // T^T dW: dKg = diag(beta) of it; dK += exp(G) . dKg, dG += Kg . dKg, dbeta += Kg . it.
  {
    float acc[8][4] = {};
    warp_mma<E, true, true, 8>(acc, s.tm, kLdC, s.dout, kLdD, lane, m0, nw, m0, kC);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int j = fr + half * 8;
      const float bj = s.beta[j];
      float dot = 0.f;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int d = nw + nt * 8 + fc;
        const float2 k = M::unpack(*reinterpret_cast<const uint32_t*>(&s.k[j * kLdD + d]));
        const float2 gj = *reinterpret_cast<const float2*>(&G[j * kLdG + d]);
        const float e0 = exp2f(gj.x), e1 = exp2f(gj.y);
        const float z0 = acc[nt][half * 2], z1 = acc[nt][half * 2 + 1];
        const float kz0 = k.x * e0 * z0, kz1 = k.y * e1 * z1;
        dot += kz0 + kz1;
        dk[nt][half * 2] += bj * e0 * z0, dk[nt][half * 2 + 1] += bj * e1 * z1;
        dg[nt][half * 2] += bj * kz0, dg[nt][half * 2 + 1] += bj * kz1;
      }
      dot = quad_sum(dot);
      if ((lane & 3) == 0) dbw[j] += dot;
    }
    __syncwarp();
  }
  // X = T^T dT (this warp's rows and 32 columns).
  {
    float acc[4][4] = {};
    warp_mma<E, true, true, 4>(acc, s.tm, kLdC, s.dt, kLdC, lane, m0, nc, m0, kC);
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
        *reinterpret_cast<uint32_t*>(&s.xm[(fr + half * 8) * kLdC + nc + nt * 8 + fc]) =
            M::pack(acc[nt][half * 2], acc[nt][half * 2 + 1]);
  }
  __syncthreads();  // X complete

  // dA = -X T^T (strictly lower): dbeta_i += dA_i . KK_i; dKK = diag(beta) dA to the workspace.
  {
    float acc[4][4] = {};
    warp_mma<E, false, false, 4>(acc, s.xm, kLdC, s.tm, kLdC, lane, m0, nc, 0, m0 + 16);
    float* dst = kw.dkk + slot * kC * kC;
    float rb[2] = {0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = fr + half * 8;
        const float bi = s.beta[i];
        float out[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = nc + nt * 8 + fc + e;
          const float da = j < i ? -acc[nt][half * 2 + e] : 0.f;
          rb[half] += da * s.kk[j * kLdAt + i];
          out[e] = bi * da;
        }
        *reinterpret_cast<float2*>(&dst[i * kC + nc + nt * 8 + fc]) = make_float2(out[0], out[1]);
      }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float b = quad_sum(rb[half]);
      if ((lane & 3) == 0) dbw[fr + half * 8] += b;
    }
  }

  // dK (FP32, per value head) and dG to the workspace.
  {
    float* dgs = kw.dg + slot * kC * kD + nw;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = fr + half * 8;
      float* dst = bw.dk + ((tok0 + i) * hvs + hv) * kD + nw;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (i < rows)
          *reinterpret_cast<float2*>(&dst[nt * 8 + fc]) = make_float2(dk[nt][half * 2], dk[nt][half * 2 + 1]);
        *reinterpret_cast<float2*>(&dgs[i * kD + nt * 8 + fc]) = make_float2(dg[nt][half * 2], dg[nt][half * 2 + 1]);
      }
    }
  }
  __syncthreads();  // dbeta, the G_L terms and dG of the last row complete (global writes seen by the block)
  if (tid < kD) {
    float x = s.dsl[tid];
#pragma unroll
    for (int w = 0; w < kBwdWarps; ++w) x += s.dgl[w][tid];
    kw.dg[(slot * kC + last) * kD + tid] += x;
  }
  if (tid < rows) {
    const int64_t t = t0 + tid;
    float db = 0.f;
#pragma unroll
    for (int w = 0; w < kBwdWarps; ++w) db += s.dbw[w][tid];
    store_scalar(bp.dbeta, si.b * bp.dbeta_stride[0] + t * bp.dbeta_stride[1] + hv * bp.dbeta_stride[2], bp.dbeta_dtype,
                 db);
  }
}

template <class E>
struct KdaIntraSmem {
  E q[kC * kLdD], k[kC * kLdD];  // normalized as the chunk kernel's
  float g[kC * kLdG];            // G, log2 units
  float dp[kC * kC], dkk[kC * kC];
};
// 100 KB: two CTAs per SM.
static_assert(sizeof(KdaIntraSmem<__nv_bfloat16>) <= 227 * 1024 / 2 - 1024);

constexpr int kIntraThreads = kD;  // one thread per key channel
constexpr int kIntraRows = 4;      // rows a (and columns b) per register block

// 2^x rounded to zero below 2^-126: a decay that small adds nothing an FP32 sum keeps.
__device__ __forceinline__ float decay_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The intra-chunk products (aq, ak, ac above) in FP32 on the CUDA cores, one CTA of 128 threads per (chunk, value
// head), thread d owning key channel d. Every factor e_abd = exp(G_ad - G_bd), a >= b, is formed once and serves
// both sums it enters: row a's aq and ak (over b <= a) and row b's ac (over a >= b); each is a decay (at most 1)
// whatever the strength of the decay. Rows go in blocks of four from the last: when block a0 is done, its rows'
// ac are complete too (every a >= b has been seen), so dQ and dK of those rows are completed in the workspace
// there, and dg, the sum of dG from the row to the chunk's end, on the way. The columns' ac live in registers (the
// b loop is unrolled, so their indices are constants); each block of four columns loads its G and k once for four
// rows and dP, dKK as float4. Each output is summed in one fixed order: bitwise reproducible.
template <class E>
__global__ void __launch_bounds__(kIntraThreads, 2)
    kda_bwd_intra_kernel(const GdnBwdParams bp, const Workspace ws, const BwdWs bw, const KdaBwdWs kw) {
  using M = Mma<E>;
  constexpr int R = kIntraRows;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<KdaIntraSmem<E>*>(smem_raw);
  const GdnFwdParams& p = bp.fwd;
  if (*ws.flag == 0) return;
  const int hv = static_cast<int>(blockIdx.y), hvs = static_cast<int>(p.value_heads);
  BwdChunk chunk;
  if (!locate_bwd_chunk(p, ws, static_cast<int>(blockIdx.x), hv, chunk)) return;
  const SeqInfo si = chunk.si;
  const int64_t t0 = chunk.t0, slot = chunk.slot;
  const int rows = chunk.rows;
  const int d = static_cast<int>(threadIdx.x);
  {
    copy_qk_rows<E, kIntraThreads>(p, chunk, s.q, s.k);
    const float* dps = kw.dp + slot * kC * kC;
    const float* dkks = kw.dkk + slot * kC * kC;
    for (int i = d; i < kC * kC / 4; i += kIntraThreads) {
      cp16(&s.dp[i * 4], dps + i * 4, true);
      cp16(&s.dkk[i * 4], dkks + i * 4, true);
    }
    cp_commit();
  }
  load_kda_g<kIntraThreads>(p, si, hv, t0, rows, s.g);
  cp_wait<0>();
  __syncthreads();
  kda_normalize_row(p, s.q, s.k, d);  // q or k row d
  kda_cumulative_decay(s.g, d);
  __syncthreads();

  const float* const G = s.g;
  auto gk = [&](int r) { return M::to_float(s.k[r * kLdD + d]); };
  float ac[kC];
#pragma unroll
  for (int b = 0; b < kC; ++b) ac[b] = 0.f;
  const int64_t tok0 = si.b * p.len + t0;
  const float* const dg_chunk = kw.dg + slot * kC * kD + d;  // the chunk kernel's dG of channel d
  float dg_sum = 0.f;                                        // dg of row a: dG summed over rows a .. rows - 1
  for (int a0 = (rows - 1) / R * R; a0 >= 0; a0 -= R) {
    // This block's workspace values, loaded before its products so that their latency hides behind them.
    float dq_old[R], dk_old[R], dg_old[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int a = min(a0 + r, rows - 1);
      const int64_t at = ((tok0 + a) * hvs + hv) * kD + d;
      dq_old[r] = bw.dq[at], dk_old[r] = bw.dk[at], dg_old[r] = dg_chunk[a * kD];
    }
    // Rows past the chunk's end get G = -inf: their factors are 0, so they add nothing (their dP, dKK are finite).
    float ga[R], qa[R], ka[R], aq[R], ak[R], acd[R] = {};
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool valid = a0 + r < rows;
      ga[r] = valid ? G[(a0 + r) * kLdG + d] : -INFINITY;
      qa[r] = valid ? M::to_float(s.q[(a0 + r) * kLdD + d]) : 0.f;
      ka[r] = valid ? gk(a0 + r) : 0.f;
      aq[r] = ak[r] = 0.f;
    }
    // Columns left of the diagonal block: every pair a > b.
#pragma unroll
    for (int b0 = 0; b0 < kC; b0 += R) {
      if (b0 == a0) {
#pragma unroll
        for (int c = 0; c < R; ++c) acd[c] = ac[b0 + c];
      }
      if (b0 >= a0) continue;
      float gb[R], kb[R];
#pragma unroll
      for (int c = 0; c < R; ++c) gb[c] = G[(b0 + c) * kLdG + d], kb[c] = gk(b0 + c);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float4 dp4 = *reinterpret_cast<const float4*>(&s.dp[(a0 + r) * kC + b0]);
        const float4 dk4 = *reinterpret_cast<const float4*>(&s.dkk[(a0 + r) * kC + b0]);
        const float dpv[R] = {dp4.x, dp4.y, dp4.z, dp4.w}, dkv[R] = {dk4.x, dk4.y, dk4.z, dk4.w};
#pragma unroll
        for (int c = 0; c < R; ++c) {
          const float e = decay_exp2(ga[r] - gb[c]);
          const float kbe = kb[c] * e;
          aq[r] = fmaf(dpv[c], kbe, aq[r]);
          ak[r] = fmaf(dkv[c], kbe, ak[r]);
          ac[b0 + c] = fmaf(fmaf(dpv[c], qa[r], dkv[c] * ka[r]), e, ac[b0 + c]);
        }
      }
    }
    // The diagonal block: pairs b <= a among rows a0 .. a0 + 3 (its columns' ac are the scalars acd).
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int c = 0; c <= r; ++c) {
        const int b = a0 + c;
        const float dpv = s.dp[(a0 + r) * kC + b], dkv = s.dkk[(a0 + r) * kC + b];
        const float e = decay_exp2(ga[r] - G[b * kLdG + d]);
        const float kbe = gk(b) * e;
        aq[r] = fmaf(dpv, kbe, aq[r]);
        ak[r] = fmaf(dkv, kbe, ak[r]);
        acd[c] = fmaf(fmaf(dpv, qa[r], dkv * ka[r]), e, acd[c]);
      }
    }
#pragma unroll
    for (int r = R - 1; r >= 0; --r) {  // last to first, for dg
      const int a = a0 + r;
      if (a >= rows) continue;
      const int64_t at = ((tok0 + a) * hvs + hv) * kD + d;
      bw.dq[at] = dq_old[r] + aq[r];
      bw.dk[at] = dk_old[r] + (ak[r] + acd[r]);
      dg_sum += dg_old[r] + (qa[r] * aq[r] + ka[r] * (ak[r] - acd[r]));
      store_scalar(bp.dg,
                   si.b * bp.dg_stride[0] + (t0 + a) * bp.dg_stride[1] + hv * bp.dg_stride[2] + d * bp.dg_stride[3],
                   bp.dg_dtype, dg_sum);
    }
  }
}

}  // namespace frost::sm90::gdn
