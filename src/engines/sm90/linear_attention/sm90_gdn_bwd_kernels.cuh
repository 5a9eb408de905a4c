// The GDN backward's own kernels (see sm90_gdn.h for the launch sequence): the reverse state pass, the per-chunk
// gradient kernel and the GVA / L2-norm epilogue. The forward's chunk kernel and its state pass (kRecord) supply
// W, U, P, the row factors, T, the state entering each chunk and U'.
//
// Notation of one chunk (rows i, j < 64; L the chunk's last token; q, k already L2-normalized):
//   G = cumulative log decay, M_ij = exp(G_i - G_j) for j <= i (else 0), KK = (K K^T) . M strictly lower,
//   A = diag(beta) KK, T = (I + A)^-1, W = T diag(beta exp(G)) K, U = T diag(beta) V, U' = U - W S,
//   O = scale (diag(exp G) Q S + ((Q K^T) . M) U'), S_next = exp(G_L) S + K^T diag(exp(G_L - G)) U'.
// The gradients, given dO, dS_next = dS_n and dU' (from the reverse pass):
//   dP = scale dO U'^T . M                                     (the gradient of Q K^T)
//   dQ = scale diag(exp G) dO S^T + dP K
//   dK = dP^T Q + diag(exp(G_L - G)) U' dS_n^T + diag(beta exp G) T^T dW + dKK K + dKK^T K
//   dW = -dU' S^T, dT = dU' (diag(beta) V)^T + dW (diag(beta exp G) K)^T, dA = -T^T dT T^T (strictly lower)
//   dV = diag(beta) T^T dU',  dKK = diag(beta) dA . M
//   dbeta_j = v_j . (T^T dU')_j + exp(G_j) k_j . (T^T dW)_j + sum_m dA_jm KK_jm
//   dG_i = sum_j (dP . QK)_ij - sum_j (dP . QK)_ji + q_i . (scale exp(G_i) S dO_i) - k_i . (exp(G_L - G_i) dS_n U'_i)
//          + beta_i exp(G_i) k_i . (T^T dW)_i + sum_j (dA . A)_ij - sum_j (dA . A)_ji,
//   dG_L += exp(G_L) <dS_n, S> + sum_i k_i . (exp(G_L - G_i) dS_n U'_i),
// and dg, the gradient of the per-token log decay, is the reverse cumulative sum of dG within the chunk.
#pragma once
#include "engines/sm90/linear_attention/sm90_gdn_kernels.cuh"

namespace frost::sm90::gdn {

// Device views of the backward's own workspace pieces.
struct BwdWs {
  void* h;     // [chunks, HV, 128, 128] state entering the chunk (16-bit)
  void* dh;    // [chunks, HV, 128, 128] gradient of the state leaving the chunk (16-bit)
  void* vnew;  // [chunks, HV, 64, 128] U'
  void* dv2;   // [chunks, HV, 64, 128] dU'
  float* dq;   // [B * T, HV, 128] dQ of each value head, before the L2 norm (unused when gdn_bwd_direct_grads)
  float* dk;   // [B * T, HV, 128]
};

__device__ __forceinline__ void store_scalar(void* p, int64_t i, GdnDtype dt, float x) {
  if (dt == GdnDtype::FP32)
    static_cast<float*>(p)[i] = x;
  else if (dt == GdnDtype::BF16)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(x);
  else
    static_cast<__half*>(p)[i] = __float2half(x);
}

// acc (16 rows from m0, NT 8-column tiles from n0) += A B over k in [k_lo, k_hi) (multiples of 16), operands
// 16-bit in shared memory. kAT: A stored [k][m] (read with ldmatrix .trans), else [m][k]. kBT: B stored [k][n]
// (.trans), else [n][k].
template <class E, bool kAT, bool kBT, int NT>
__device__ __forceinline__ void warp_mma(float (*acc)[4], const E* a, int lda, const E* b, int ldb, int lane, int m0,
                                         int n0, int k_lo, int k_hi) {
  static_assert(NT % 2 == 0);
  for (int k0 = k_lo; k0 < k_hi; k0 += 16) {
    uint32_t af[4];
    if constexpr (kAT)
      ldsm4_t(af, &a[(k0 + (lane & 7) + (lane >> 4) * 8) * lda + m0 + ((lane >> 3) & 1) * 8]);
    else
      ldsm4(af, &a[frag_a(lane, m0, k0, lda)]);
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t bf[4];
      if constexpr (kBT)
        ldsm4_t(bf, &b[frag_b_kn(lane, k0, n0 + np * 16, ldb)]);
      else
        ldsm4(bf, &b[frag_b_nk(lane, n0 + np * 16, k0, ldb)]);
      Mma<E>::run(acc[2 * np], af, bf[0], bf[1]);
      Mma<E>::run(acc[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

// Whether the chunk gradient kernel writes dQ and dK itself, rounded to the input type: GDN with one value head
// per key head and no L2 norm, where the finalize would only round. Else they go to the FP32 workspace (BwdWs).
__host__ __device__ __forceinline__ bool gdn_bwd_direct_grads(const GdnFwdParams& p) {
  return !p.per_key_decay && !p.l2norm && p.heads == p.value_heads;
}

// Rows fr and fr + 8 (of `rows` valid) of a warp's 16 x 64 tile of dQ or dK: FP32 into the workspace (row 0 at
// ws_row0, value_heads rows of 128 per token) or, when direct, rounded into the output (row 0 at out_row0, rows
// out_pitch elements apart).
template <class E>
__device__ __forceinline__ void store_dqk_tile(const float (*acc)[4], bool direct, float* ws_row0, E* out_row0,
                                               int64_t out_pitch, int value_heads, int fr, int fc, int rows) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = fr + half * 8;
    if (i >= rows) continue;
    if (direct) {
      E* dst = out_row0 + i * out_pitch + fc;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        *reinterpret_cast<uint32_t*>(&dst[nt * 8]) = Mma<E>::pack(acc[nt][half * 2], acc[nt][half * 2 + 1]);
    } else {
      float* dst = ws_row0 + static_cast<int64_t>(i) * value_heads * kD + fc;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        *reinterpret_cast<float2*>(&dst[nt * 8]) = make_float2(acc[nt][half * 2], acc[nt][half * 2 + 1]);
    }
  }
}

// Sums over the four lanes of a quad (one accumulator row).
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
// Sums over the eight quads of a warp (one accumulator column, 16 rows).
__device__ __forceinline__ float column_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 4);
  x += __shfl_xor_sync(0xffffffffu, x, 8);
  return x + __shfl_xor_sync(0xffffffffu, x, 16);
}

// The cumulative gates of an accumulator tile's rows (row0, row0 + 8) and columns (col0 + 8 nt + e, nt < 4, e < 2),
// read once: between the elements the tile's consumers store to shared memory, after which the compiler would
// read them again per element.
__device__ __forceinline__ void cumulative_gates(const float* g, int row0, int col0, float g_row[2], float g_col[8]) {
  g_row[0] = g[row0], g_row[1] = g[row0 + 8];
#pragma unroll
  for (int x = 0; x < 8; ++x) g_col[x] = g[col0 + (x >> 1) * 8 + (x & 1)];
}

// Pool rows no sequence names: their initial state reaches the final state unchanged, so D_INITIAL_STATE =
// D_FINAL_STATE there (zero without it). Grid: one CTA per (row, head).
__global__ void __launch_bounds__(256) gdn_bwd_pool_kernel(const GdnBwdParams p, const Workspace ws) {
  if (*ws.flag == 0) return;
  const int64_t slot = blockIdx.x, row = slot / p.fwd.value_heads;
  if (ws.bitmap[row >> 5] & (1u << (row & 31))) return;
  auto* dst = reinterpret_cast<float4*>(p.d_initial_state + slot * kD * kD);
  const auto* src = reinterpret_cast<const float4*>(p.d_final_state + slot * kD * kD);
  for (int i = static_cast<int>(threadIdx.x); i < kD * kD / 4; i += 256)
    dst[i] = p.d_final_state ? src[i] : make_float4(0.f, 0.f, 0.f, 0.f);
}

// The reverse state pass: one CTA of 8 warps per (sequence, value head, BV value columns), the forward pass's
// grid and warp layout (token rows [16 rg, 16 rg + 16), state rows [32 rg, 32 rg + 32), column half cg), chunks
// from last to first. Stage buffers as the forward's: q, k, w, P, dO (in `u`) and the row factors. kPerKey (KDA):
// the q and k tiles are the forward chunk kernel's gated ones (scale rq Q exp(G), rk K exp(G_last - G); no row
// factors), and each row of dS decays by its key channel's exp(G_last).
template <class E, int BV, bool kPerKey = false>
__global__ void __launch_bounds__(kPassThreads, 1)
    gdn_bwd_pass_kernel(const GdnBwdParams bp, const Workspace ws, const BwdWs bw) {
  using M = Mma<E>;
  constexpr int kCw = BV / 2, kNt = kCw / 8, kLdV = BV + 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<PassSmem<E, BV>*>(smem_raw);
  const GdnFwdParams& p = bp.fwd;
  if (*ws.flag == 0) return;
  const int hvs = static_cast<int>(p.value_heads);
  const PassCta cta = locate_pass_cta<BV>(p, ws);
  const int hv = cta.hv, h = cta.h, v0 = cta.v0, first = cta.first;
  const SeqInfo si = cta.si;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int rg = warp & 3, c0 = (warp >> 2) * kCw;
  const E* qb = static_cast<const E*>(p.q) + si.b * p.q_stride[0] + h * p.q_stride[2] + si.t0 * p.q_stride[1];
  const E* kb = static_cast<const E*>(p.k) + si.b * p.k_stride[0] + h * p.k_stride[2] + si.t0 * p.k_stride[1];
  const E* dob =
      static_cast<const E*>(bp.d_o) + si.b * bp.do_stride[0] + hv * bp.do_stride[2] + si.t0 * bp.do_stride[1] + v0;

  auto load = [&](int lc, int stage) {  // dO's columns of the slice take U's place
    PassStage<E, BV>& d = s.st[stage];
    const int rows = min(kC, si.len - lc * kC);
    load_pass_stage<E, BV, kPerKey>(d, p, ws, qb, kb, static_cast<int64_t>(first + lc) * hvs + hv, lc, rows, tid);
    const E* doc = dob + static_cast<int64_t>(lc) * kC * bp.do_stride[1];
    for_each_piece<kC, BV, kPassThreads>(tid, [&](int r, int col) {
      const bool ok = r < rows;
      cp16(&d.u[r * kLdV + col], doc + (ok ? r : 0) * bp.do_stride[1] + col, ok);
    });
  };

  // dS: rows 32 rg + 16 mt + (lane / 4) (+ 8), columns v0 + c0 + 8 nt + 2 (lane % 4) (+ 1).
  float ds[2][kNt][4];
  const int64_t state_at = (static_cast<int64_t>(si.row) * hvs + hv) * kD * kD + v0;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int key = rg * 32 + mt * 16 + (lane >> 2) + half * 8, col = c0 + nt * 8 + (lane & 3) * 2;
        float2 x = make_float2(0.f, 0.f);
        if (bp.d_final_state) x = *reinterpret_cast<const float2*>(&bp.d_final_state[state_at + key * kD + col]);
        ds[mt][nt][half * 2] = x.x, ds[mt][nt][half * 2 + 1] = x.y;
      }

  const int m0 = rg * 16;
  constexpr int kStages = kPassStages<BV>;
  const int chunks = si.chunks;
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) {
    if (c < chunks) load(chunks - 1 - c, c);
    cp_commit();
  }
  for (int it = 0; it < chunks; ++it) {
    const int lc = chunks - 1 - it;
    const PassStage<E, BV>& d = s.st[it % kStages];
    const int64_t slot = static_cast<int64_t>(first + lc) * hvs + hv;
    const float g_last = kPerKey ? 0.f : ws.glast[slot];
    E* const dh = static_cast<E*>(bw.dh) + slot * kD * kD + v0;
    // dS into sb: its last reader, the previous chunk's K dS, finished before that chunk's dU' barrier.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int key = rg * 32 + mt * 16 + (lane >> 2) + half * 8, col = c0 + nt * 8 + (lane & 3) * 2;
          const uint32_t packed = M::pack(ds[mt][nt][half * 2], ds[mt][nt][half * 2 + 1]);
          *reinterpret_cast<uint32_t*>(&s.sb[key * kLdV + col]) = packed;
          *reinterpret_cast<uint32_t*>(&dh[key * kD + col]) = packed;
        }
    cp_wait<kStages - 2>();
    __syncthreads();  // chunk lc has landed and sb is whole; every warp is done with the previous chunk and its stage
    if (it + kStages - 1 < chunks) load(chunks - 1 - (it + kStages - 1), (it + kStages - 1) % kStages);
    cp_commit();

    // dU' = exp(G_last - G) rk (K dS) + P^T dO for this warp's 16 token rows (P^T is zero left of the diagonal).
    float du[kNt][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < kD; k0 += 16) {
      uint32_t a[4];
      ldsm4(a, &d.k[sw(m0 + (lane & 15), k0 + (lane >> 4) * 8)]);
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        uint32_t b[4];
        ldsm4_t(b, &s.sb[frag_b_kn(lane, k0, c0 + np * 16, kLdV)]);
        M::run(du[2 * np], a, b[0], b[1]);
        M::run(du[2 * np + 1], a, b[2], b[3]);
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float kf = kPerKey ? 1.f : d.rowf[kC + m0 + (lane >> 2) + half * 8];
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) du[nt][half * 2] *= kf, du[nt][half * 2 + 1] *= kf;
    }
    for (int k0 = m0; k0 < kC; k0 += 16) {
      uint32_t a[4];
      ldsm4_t(a, &d.p[(k0 + (lane & 7) + (lane >> 4) * 8) * kLdC + m0 + ((lane >> 3) & 1) * 8]);
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        uint32_t b[4];
        ldsm4_t(b, &d.u[frag_b_kn(lane, k0, c0 + np * 16, kLdV)]);
        M::run(du[2 * np], a, b[0], b[1]);
        M::run(du[2 * np + 1], a, b[2], b[3]);
      }
    }
    E* const dvo = static_cast<E*>(bw.dv2) + slot * kC * kD + v0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = m0 + (lane >> 2) + half * 8;
      const float qf = kPerKey ? 1.f : d.rowf[i];
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        const int col = c0 + nt * 8 + (lane & 3) * 2;
        const float x0 = du[nt][half * 2], x1 = du[nt][half * 2 + 1];
        *reinterpret_cast<uint32_t*>(&dvo[i * kD + col]) = M::pack(x0, x1);
        *reinterpret_cast<uint32_t*>(&s.ukb[i * kLdV + col]) = M::pack(-x0, -x1);
        const float2 o = M::unpack(*reinterpret_cast<const uint32_t*>(&d.u[i * kLdV + col]));
        *reinterpret_cast<uint32_t*>(&s.ub[i * kLdV + col]) = M::pack(qf * o.x, qf * o.y);
      }
    }
    __syncthreads();

    // dS = exp(G_last) dS + Q^T (rows of dO times scale exp(G) rq) - W^T dU'; KDA: diag(exp(G_last)) dS + Qg^T dO
    // - W^T dU'.
    const float decay = kPerKey ? 1.f : expf(g_last);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float f = kPerKey ? d.rowf[rg * 32 + mt * 16 + (lane >> 2) + half * 8] : decay;
#pragma unroll
        for (int nt = 0; nt < kNt; ++nt) ds[mt][nt][half * 2] *= f, ds[mt][nt][half * 2 + 1] *= f;
      }
#pragma unroll
    for (int k0 = 0; k0 < kC; k0 += 16) {
      uint32_t aq[2][4], aw[2][4];
      const int row = k0 + (lane & 7) + (lane >> 4) * 8, col = rg * 32 + ((lane >> 3) & 1) * 8;
      ldsm4_t(aq[0], &d.q[sw(row, col)]);
      ldsm4_t(aq[1], &d.q[sw(row, col + 16)]);
      ldsm4_t(aw[0], &d.w[sw(row, col)]);
      ldsm4_t(aw[1], &d.w[sw(row, col + 16)]);
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        uint32_t b1[4], b2[4];
        ldsm4_t(b1, &s.ub[frag_b_kn(lane, k0, c0 + np * 16, kLdV)]);
        ldsm4_t(b2, &s.ukb[frag_b_kn(lane, k0, c0 + np * 16, kLdV)]);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          M::run(ds[mt][2 * np], aq[mt], b1[0], b1[1]);
          M::run(ds[mt][2 * np + 1], aq[mt], b1[2], b1[3]);
          M::run(ds[mt][2 * np], aw[mt], b2[0], b2[1]);
          M::run(ds[mt][2 * np + 1], aw[mt], b2[2], b2[3]);
        }
      }
    }
  }

  if (bp.d_initial_state) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int key = rg * 32 + mt * 16 + (lane >> 2) + half * 8, col = c0 + nt * 8 + (lane & 3) * 2;
          *reinterpret_cast<float2*>(&bp.d_initial_state[state_at + key * kD + col]) =
              make_float2(ds[mt][nt][half * 2], ds[mt][nt][half * 2 + 1]);
        }
  }
}

constexpr int kBwdThreads = 256;
constexpr int kBwdWarps = kBwdThreads / 32;

// The chunk a backward CTA serves: blockIdx (chunk, value head hv) placed in its sequence.
struct BwdChunk {
  SeqInfo si;
  int64_t t0;    // the chunk's first token
  int rows;      // its tokens: kC, or fewer at the end of a sequence
  int h;         // the key head of value head hv
  int64_t slot;  // (chunk, value head): the index of its per-chunk workspace entries
};

// False past the last chunk.
__device__ __forceinline__ bool locate_bwd_chunk(const GdnFwdParams& p, const Workspace& ws, BwdChunk& ch) {
  const int c = static_cast<int>(blockIdx.x), hv = static_cast<int>(blockIdx.y);
  const int hvs = static_cast<int>(p.value_heads);
  int local;
  if (!locate_chunk(p, ws, c, ch.si, local)) return false;
  ch.t0 = ch.si.t0 + static_cast<int64_t>(local) * kC;
  ch.rows = min(kC, ch.si.len - local * kC);
  ch.h = hv / (hvs / static_cast<int>(p.heads));
  ch.slot = static_cast<int64_t>(c) * hvs + hv;
  return true;
}

// Starts the cp.async copies (row pitch kLdD) of the chunk's q and k rows; rows past the sequence read as zeros.
template <class E, int kThreadsOfCta>
__device__ __forceinline__ void copy_qk_rows(const GdnFwdParams& p, const BwdChunk& ch, E* sq, E* sk) {
  const E* qb = static_cast<const E*>(p.q) + ch.si.b * p.q_stride[0] + ch.h * p.q_stride[2] + ch.t0 * p.q_stride[1];
  const E* kb = static_cast<const E*>(p.k) + ch.si.b * p.k_stride[0] + ch.h * p.k_stride[2] + ch.t0 * p.k_stride[1];
  for (int i = static_cast<int>(threadIdx.x); i < kC * (kD / 8); i += kThreadsOfCta) {
    const int r = i >> 4, col = (i & 15) * 8;
    const bool ok = r < ch.rows;
    const int rr = ok ? r : 0;
    cp16(&sq[r * kLdD + col], qb + rr * p.q_stride[1] + col, ok);
    cp16(&sk[r * kLdD + col], kb + rr * p.k_stride[1] + col, ok);
  }
}

// The same for value head hv's v and dO rows, and the recording pass's U' and dU' of the chunk.
template <class E, int kThreadsOfCta>
__device__ __forceinline__ void copy_v_do_rows(const GdnBwdParams& bp, const BwdWs& bw, const BwdChunk& ch, int hv,
                                               E* sv, E* sdo, E* sup, E* sdup) {
  const GdnFwdParams& p = bp.fwd;
  const E* vb = static_cast<const E*>(p.v) + ch.si.b * p.v_stride[0] + hv * p.v_stride[2] + ch.t0 * p.v_stride[1];
  const E* dob =
      static_cast<const E*>(bp.d_o) + ch.si.b * bp.do_stride[0] + hv * bp.do_stride[2] + ch.t0 * bp.do_stride[1];
  const E* up = static_cast<const E*>(bw.vnew) + ch.slot * kC * kD;
  const E* dup = static_cast<const E*>(bw.dv2) + ch.slot * kC * kD;
  for (int i = static_cast<int>(threadIdx.x); i < kC * (kD / 8); i += kThreadsOfCta) {
    const int r = i >> 4, col = (i & 15) * 8;
    const bool ok = r < ch.rows;
    const int rr = ok ? r : 0;
    cp16(&sv[r * kLdD + col], vb + rr * p.v_stride[1] + col, ok);
    cp16(&sdo[r * kLdD + col], dob + rr * bp.do_stride[1] + col, ok);
    cp16(&sup[r * kLdD + col], up + r * kD + col, true);
    cp16(&sdup[r * kLdD + col], dup + r * kD + col, true);
  }
}

// dT = dU' (diag(beta) V)^T + dW (diag(beta) diag(x_scale) X)^T on the lower triangle with the diagonal, rounded
// into dt (rows of kLdC): this warp's rows [m0, m0 + 16) and 32 columns from nc (column blocks past the warp's
// row group are zero). GDN: X = K, x_scale(j) = exp(G_j); KDA: X = K exp(G) already, x_scale 1.
template <class E, class XScale>
__device__ __forceinline__ void chunk_dt(const E* dup, const E* dw, const E* v, const E* x, const float* beta,
                                         XScale x_scale, E* dt, int lane, int m0, int nc, int fr, int fc, int ch,
                                         int rg) {
  using M = Mma<E>;
  float x1[4][4] = {}, x2[4][4] = {};
#pragma unroll
  for (int k0 = 0; k0 < kD; k0 += 16) {
    uint32_t a1[4], a2[4];
    ldsm4(a1, &dup[frag_a(lane, m0, k0, kLdD)]);
    ldsm4(a2, &dw[frag_a(lane, m0, k0, kLdD)]);
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      if (ch * 2 + np > rg) break;
      uint32_t bv[4], bx[4];
      ldsm4(bv, &v[frag_b_nk(lane, nc + np * 16, k0, kLdD)]);
      ldsm4(bx, &x[frag_b_nk(lane, nc + np * 16, k0, kLdD)]);
      M::run(x1[2 * np], a1, bv[0], bv[1]);
      M::run(x1[2 * np + 1], a1, bv[2], bv[3]);
      M::run(x2[2 * np], a2, bx[0], bx[1]);
      M::run(x2[2 * np + 1], a2, bx[2], bx[3]);
    }
  }
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = fr + half * 8;
      float out[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = nc + nt * 8 + fc + e;
        out[e] = j <= i ? beta[j] * (x1[nt][half * 2 + e] + x_scale(j) * x2[nt][half * 2 + e]) : 0.f;
      }
      *reinterpret_cast<uint32_t*>(&dt[i * kLdC + nc + nt * 8 + fc]) = M::pack(out[0], out[1]);
    }
}

// T^T dU' for this warp's rows j, which are T's columns (T^T is zero left of them), and the 64 value columns from
// nw: dV = diag(beta) of it, stored for the chunk's valid rows, and v . it added to the warp's dbeta row dbw. The
// GDN and KDA chunk gradients share it (tm: T, dup: dU', v: V, rows of kLdC / kLdD in shared memory).
template <class E>
__device__ __forceinline__ void chunk_dv_and_dbeta(const GdnBwdParams& bp, const SeqInfo& si, int64_t t0, int rows,
                                                   int hv, const E* tm, const E* dup, const E* v, const float* beta,
                                                   float* dbw, int lane, int m0, int nw, int fr, int fc) {
  using M = Mma<E>;
  float acc[8][4] = {};
  warp_mma<E, true, true, 8>(acc, tm, kLdC, dup, kLdD, lane, m0, nw, m0, kC);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int j = fr + half * 8;
    const float bj = beta[j];
    float dot = 0.f;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const float2 vv = M::unpack(*reinterpret_cast<const uint32_t*>(&v[j * kLdD + nw + nt * 8 + fc]));
      dot += acc[nt][half * 2] * vv.x + acc[nt][half * 2 + 1] * vv.y;
    }
    dot = quad_sum(dot);
    if ((lane & 3) == 0) dbw[j] += dot;
    if (j < rows) {
      E* dst = static_cast<E*>(bp.dv) + si.b * bp.dv_stride[0] + hv * bp.dv_stride[2] + (t0 + j) * bp.dv_stride[1] + nw;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        *reinterpret_cast<uint32_t*>(&dst[nt * 8 + fc]) = M::pack(bj * acc[nt][half * 2], bj * acc[nt][half * 2 + 1]);
    }
  }
  __syncwarp();
}

template <class E>
struct BwdChunkSmem {
  E q[kC * kLdD], k[kC * kLdD], v[kC * kLdD];  // q and k L2-normalized in place
  E dout[kC * kLdD];                           // dO, then dW
  E up[kC * kLdD], dup[kC * kLdD];             // U', dU'
  E s[kD * kLdD], dsn[kD * kLdD];              // S entering the chunk, dS of the state leaving it
  E tm[kC * kLdC];                             // T
  E dpm[kC * kLdC];                            // dP (the gradient of Q K^T), then T^T dT
  E dt[kC * kLdC];                             // dT, then dKK
  float kk[kC * kLdAt];                        // KK transposed (FP32)
  float g[kC], beta[kC];                       // g becomes G
  // dG and dbeta, one row per warp so that the sums are bitwise reproducible: a warp adds to an entry from one
  // lane at a time (__syncwarp between the steps), and the rows are summed in order at the end.
  float dgw[kBwdWarps][kC], dbw[kBwdWarps][kC];
};
// 218 KB: one CTA (8 warps) per SM.
static_assert(sizeof(BwdChunkSmem<__nv_bfloat16>) <= 227 * 1024);

// One CTA per (chunk, value head). Grid (max_chunks, HV). Warp w owns rows [16 rg, 16 rg + 16), rg = w % 4, of
// every product and the half ch = w / 4 of its columns (64 of 128, or 32 of 64).
template <class E>
__global__ void __launch_bounds__(kBwdThreads, 1)
    gdn_bwd_chunk_kernel(const GdnBwdParams bp, const Workspace ws, const BwdWs bw) {
  using M = Mma<E>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<BwdChunkSmem<E>*>(smem_raw);
  const GdnFwdParams& p = bp.fwd;
  if (*ws.flag == 0) return;
  const int hv = static_cast<int>(blockIdx.y), hvs = static_cast<int>(p.value_heads);
  BwdChunk chunk;
  if (!locate_bwd_chunk(p, ws, chunk)) return;
  const SeqInfo si = chunk.si;
  const int64_t t0 = chunk.t0, slot = chunk.slot;
  const int rows = chunk.rows;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  {
    copy_qk_rows<E, kBwdThreads>(p, chunk, s.q, s.k);
    copy_v_do_rows<E, kBwdThreads>(bp, bw, chunk, hv, s.v, s.dout, s.up, s.dup);
    const E* hs = static_cast<const E*>(bw.h) + slot * kD * kD;
    const E* dhs = static_cast<const E*>(bw.dh) + slot * kD * kD;
    for (int i = tid; i < kD * (kD / 8); i += kBwdThreads) {
      const int r = i >> 4, col = (i & 15) * 8;
      cp16(&s.s[r * kLdD + col], hs + r * kD + col, true);
      cp16(&s.dsn[r * kLdD + col], dhs + r * kD + col, true);
    }
    copy_recorded_t<E, kBwdThreads>(ws, slot, s.tm);
    cp_commit();
  }
  if (tid < kC) {
    const bool ok = tid < rows;
    const int64_t t = t0 + tid;
    s.g[tid] = ok ? load_scalar(p.g, si.b * p.g_stride[0] + t * p.g_stride[1] + hv * p.g_stride[2], p.g_dtype) : 0.f;
    s.beta[tid] =
        ok ? load_scalar(p.beta, si.b * p.beta_stride[0] + t * p.beta_stride[1] + hv * p.beta_stride[2], p.beta_dtype)
           : 0.f;
  }
  for (int i = tid; i < kBwdWarps * kC; i += kBwdThreads) (&s.dgw[0][0])[i] = 0.f, (&s.dbw[0][0])[i] = 0.f;
  cp_wait<0>();
  __syncthreads();

  // L2 norms in place (q rows for threads 0-63, k rows for 64-127), then warp 0 scans g.
  if (p.l2norm && tid < 2 * kC) {
    E* row = tid < kC ? &s.q[tid * kLdD] : &s.k[(tid - kC) * kLdD];
    const float r = row_inv_norm(row, true);
#pragma unroll
    for (int d = 0; d < kD; d += 2) {
      const float2 x = M::unpack(*reinterpret_cast<const uint32_t*>(&row[d]));
      *reinterpret_cast<uint32_t*>(&row[d]) = M::pack(x.x * r, x.y * r);
    }
  }
  if (warp == 0) {
    float x0 = s.g[lane], x1 = s.g[lane + 32];
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float y0 = __shfl_up_sync(0xffffffffu, x0, off), y1 = __shfl_up_sync(0xffffffffu, x1, off);
      if (lane >= off) x0 += y0, x1 += y1;
    }
    x1 += __shfl_sync(0xffffffffu, x0, 31);
    s.g[lane] = x0, s.g[lane + 32] = x1;
  }
  __syncthreads();
  const int rg = warp & 3, ch = warp >> 2;
  const int m0 = rg * 16, last = rows - 1;
  const int nw = ch * 64, nc = ch * 32;  // this warp's first column of 128-wide and 64-wide products
  const float g_last = s.g[last];
  float* const dgw = s.dgw[warp];
  float* const dbw = s.dbw[warp];
  // Every (row, column) of an accumulator tile: row m0 + lane / 4 (+ 8 for half 1), column n0 + 8 nt + 2 (lane % 4)
  // + e.
  const int fr = m0 + (lane >> 2), fc = (lane & 3) * 2;

  // K K^T, Q K^T and dO U'^T for this warp's rows and 32 columns, up to its diagonal block.
  {
    float kk[4][4] = {}, qk[4][4] = {}, dp[4][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < kD; k0 += 16) {
      uint32_t ak[4], aq[4], ad[4];
      ldsm4(ak, &s.k[frag_a(lane, m0, k0, kLdD)]);
      ldsm4(aq, &s.q[frag_a(lane, m0, k0, kLdD)]);
      ldsm4(ad, &s.dout[frag_a(lane, m0, k0, kLdD)]);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        if (ch * 2 + np > rg) break;
        uint32_t b[4], bu[4];
        ldsm4(b, &s.k[frag_b_nk(lane, nc + np * 16, k0, kLdD)]);
        ldsm4(bu, &s.up[frag_b_nk(lane, nc + np * 16, k0, kLdD)]);
        M::run(kk[2 * np], ak, b[0], b[1]);
        M::run(kk[2 * np + 1], ak, b[2], b[3]);
        M::run(qk[2 * np], aq, b[0], b[1]);
        M::run(qk[2 * np + 1], aq, b[2], b[3]);
        M::run(dp[2 * np], ad, bu[0], bu[1]);
        M::run(dp[2 * np + 1], ad, bu[2], bu[3]);
      }
    }
    float rsum[2] = {0.f, 0.f}, g_row[2], g_col[8];
    cumulative_gates(s.g, fr, nc + fc, g_row, g_col);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      float csum[2] = {0.f, 0.f};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = fr + half * 8;
        float out[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = nc + nt * 8 + fc + e;
          const float decay = j <= i ? expf(g_row[half] - g_col[nt * 2 + e]) : 0.f;
          s.kk[j * kLdAt + i] = j < i ? kk[nt][half * 2 + e] * decay : 0.f;
          out[e] = p.scale * dp[nt][half * 2 + e] * decay;
          const float x = out[e] * qk[nt][half * 2 + e];
          rsum[half] += x, csum[e] += x;
        }
        *reinterpret_cast<uint32_t*>(&s.dpm[i * kLdC + nc + nt * 8 + fc]) = M::pack(out[0], out[1]);
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float x = column_sum(csum[e]);
        if (lane < 4) dgw[nc + nt * 8 + lane * 2 + e] -= x;
      }
    }
    __syncwarp();
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float x = quad_sum(rsum[half]);
      if ((lane & 3) == 0) dgw[fr + half * 8] += x;
    }
    __syncwarp();
  }
  __syncthreads();

  const int64_t tok0 = si.b * p.len + t0;  // flattened token of row 0
  const bool direct = gdn_bwd_direct_grads(p);
  const int64_t out_q = si.b * bp.dq_stride[0] + t0 * bp.dq_stride[1] + hv * bp.dq_stride[2];
  const int64_t out_k = si.b * bp.dk_stride[0] + t0 * bp.dk_stride[1] + hv * bp.dk_stride[2];

  // dQ = scale exp(G) dO S^T + dP K; q . (its first term) is dG's output share.
  {
    float acc[8][4] = {};
    warp_mma<E, false, false, 8>(acc, s.dout, kLdD, s.s, kLdD, lane, m0, nw, 0, kD);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = fr + half * 8;
      const float f = p.scale * expf(s.g[i]);
      float dot = 0.f;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float2 q = M::unpack(*reinterpret_cast<const uint32_t*>(&s.q[i * kLdD + nw + nt * 8 + fc]));
        acc[nt][half * 2] *= f, acc[nt][half * 2 + 1] *= f;
        dot += acc[nt][half * 2] * q.x + acc[nt][half * 2 + 1] * q.y;
      }
      dot = quad_sum(dot);
      if ((lane & 3) == 0) dgw[i] += dot;
    }
    __syncwarp();
    warp_mma<E, false, true, 8>(acc, s.dpm, kLdC, s.k, kLdD, lane, m0, nw, 0, m0 + 16);
    store_dqk_tile<E>(acc, direct, bw.dq + (tok0 * hvs + hv) * kD + nw, static_cast<E*>(bp.dq) + out_q + nw,
                      bp.dq_stride[1], hvs, fr, fc, rows);
  }

  // dK, first two terms: exp(G_L - G) U' dS_n^T (k . it moves dG from row i to the last row), then dP^T Q.
  float dk[8][4] = {};
  warp_mma<E, false, false, 8>(dk, s.up, kLdD, s.dsn, kLdD, lane, m0, nw, 0, kD);
  {
    float moved = 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = fr + half * 8;
      const float f = expf(g_last - s.g[i]);
      float dot = 0.f;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float2 k = M::unpack(*reinterpret_cast<const uint32_t*>(&s.k[i * kLdD + nw + nt * 8 + fc]));
        dk[nt][half * 2] *= f, dk[nt][half * 2 + 1] *= f;
        dot += dk[nt][half * 2] * k.x + dk[nt][half * 2 + 1] * k.y;
      }
      dot = quad_sum(dot);
      if ((lane & 3) == 0) dgw[i] -= dot;
      moved += dot;
    }
    moved = column_sum(moved);  // every quad holds its rows' sums: the warp's total
    __syncwarp();
    if (lane == 0) dgw[last] += moved;
    __syncwarp();
  }
  {  // exp(G_L) <dS_n, S>
    float sum = 0.f;
    for (int x = tid; x < kD * (kD / 8); x += kBwdThreads) {
      const int r = x >> 4, col = (x & 15) * 8;
#pragma unroll
      for (int e = 0; e < 8; e += 2) {
        const float2 a = M::unpack(*reinterpret_cast<const uint32_t*>(&s.s[r * kLdD + col + e]));
        const float2 b = M::unpack(*reinterpret_cast<const uint32_t*>(&s.dsn[r * kLdD + col + e]));
        sum += a.x * b.x + a.y * b.y;
      }
    }
    sum = quad_sum(sum);
    sum = column_sum(sum);
    if (lane == 0) dgw[last] += expf(g_last) * sum;
    __syncwarp();
  }
  warp_mma<E, true, true, 8>(dk, s.dpm, kLdC, s.q, kLdD, lane, m0, nw, m0, kC);

  // dW = -dU' S^T into dO's place: both warps of a row group read all of dO's rows for dQ first.
  {
    float acc[8][4] = {};
    warp_mma<E, false, false, 8>(acc, s.dup, kLdD, s.s, kLdD, lane, m0, nw, 0, kD);
    __syncthreads();
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        *reinterpret_cast<uint32_t*>(&s.dout[(fr + half * 8) * kLdD + nw + nt * 8 + fc]) =
            M::pack(-acc[nt][half * 2], -acc[nt][half * 2 + 1]);
  }
  __syncthreads();

  // dT = dU' (diag(beta) V)^T + dW (diag(beta exp G) K)^T, lower triangle with the diagonal.
  const auto exp_g = [&](int j) { return expf(s.g[j]); };
  chunk_dt(s.dup, s.dout, s.v, s.k, s.beta, exp_g, s.dt, lane, m0, nc, fr, fc, ch, rg);
  __syncthreads();  // T, dW and dT complete; every warp is done reading dP

  // T^T dU': dV = diag(beta) of it; v . it into dbeta.
  chunk_dv_and_dbeta(bp, si, t0, rows, hv, s.tm, s.dup, s.v, s.beta, dbw, lane, m0, nw, fr, fc);
  // T^T dW: dK += diag(beta exp G) of it; exp(G) k . it into dbeta, beta exp(G) k . it into dG.
  {
    float acc[8][4] = {};
    warp_mma<E, true, true, 8>(acc, s.tm, kLdC, s.dout, kLdD, lane, m0, nw, m0, kC);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int j = fr + half * 8;
      const float bj = s.beta[j], gj = expf(s.g[j]), f = bj * gj;
      float dot = 0.f;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const float2 k = M::unpack(*reinterpret_cast<const uint32_t*>(&s.k[j * kLdD + nw + nt * 8 + fc]));
        dot += acc[nt][half * 2] * k.x + acc[nt][half * 2 + 1] * k.y;
        dk[nt][half * 2] += f * acc[nt][half * 2], dk[nt][half * 2 + 1] += f * acc[nt][half * 2 + 1];
      }
      dot = quad_sum(dot);
      if ((lane & 3) == 0) {
        dbw[j] += gj * dot;
        dgw[j] += f * dot;
      }
    }
    __syncwarp();
  }
  // X = T^T dT into dP's place (this warp's rows and 32 columns; every warp finished with dP before the barrier).
  {
    float acc[4][4] = {};
    warp_mma<E, true, true, 4>(acc, s.tm, kLdC, s.dt, kLdC, lane, m0, nc, m0, kC);
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
        *reinterpret_cast<uint32_t*>(&s.dpm[(fr + half * 8) * kLdC + nc + nt * 8 + fc]) =
            M::pack(acc[nt][half * 2], acc[nt][half * 2 + 1]);
  }
  __syncthreads();  // X complete; every warp is done reading dT

  // dA = -X T^T (strictly lower): dbeta_i += dA_i . KK_i, dG from dA . A, dKK = diag(beta) dA . M into dT's place.
  {
    float acc[4][4] = {};
    warp_mma<E, false, false, 4>(acc, s.dpm, kLdC, s.tm, kLdC, lane, m0, nc, 0, m0 + 16);
    float rb[2] = {0.f, 0.f}, rg2[2] = {0.f, 0.f}, g_row[2], g_col[8], b_row[2];
    cumulative_gates(s.g, fr, nc + fc, g_row, g_col);
    b_row[0] = s.beta[fr], b_row[1] = s.beta[fr + 8];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      float csum[2] = {0.f, 0.f};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = fr + half * 8;
        const float bi = b_row[half];
        float out[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = nc + nt * 8 + fc + e;
          const float da = j < i ? -acc[nt][half * 2 + e] : 0.f;
          const float kk = s.kk[j * kLdAt + i];
          rb[half] += da * kk;
          const float x = da * bi * kk;
          rg2[half] += x, csum[e] += x;
          out[e] = j < i ? bi * da * expf(g_row[half] - g_col[nt * 2 + e]) : 0.f;
        }
        *reinterpret_cast<uint32_t*>(&s.dt[i * kLdC + nc + nt * 8 + fc]) = M::pack(out[0], out[1]);
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float x = column_sum(csum[e]);
        if (lane < 4) dgw[nc + nt * 8 + lane * 2 + e] -= x;
      }
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
  __syncthreads();  // dKK complete

  // dK += dKK K + dKK^T K, then out.
  warp_mma<E, false, true, 8>(dk, s.dt, kLdC, s.k, kLdD, lane, m0, nw, 0, m0 + 16);
  warp_mma<E, true, true, 8>(dk, s.dt, kLdC, s.k, kLdD, lane, m0, nw, m0, kC);
  store_dqk_tile<E>(dk, direct, bw.dk + (tok0 * hvs + hv) * kD + nw, static_cast<E*>(bp.dk) + out_k + nw,
                    bp.dk_stride[1], hvs, fr, fc, rows);
  __syncthreads();  // dG and dbeta complete

  // dbeta, and dg as the reverse cumulative sum of dG within the chunk (the warps' rows summed in order).
  if (tid < rows) {
    const int64_t t = t0 + tid;
    float db = 0.f;
#pragma unroll
    for (int w = 0; w < kBwdWarps; ++w) db += s.dbw[w][tid];
    store_scalar(bp.dbeta, si.b * bp.dbeta_stride[0] + t * bp.dbeta_stride[1] + hv * bp.dbeta_stride[2], bp.dbeta_dtype,
                 db);
    float sum = 0.f;
    for (int i = rows - 1; i >= tid; --i) {
      float x = 0.f;
#pragma unroll
      for (int w = 0; w < kBwdWarps; ++w) x += s.dgw[w][i];
      sum += x;
    }
    store_scalar(bp.dg, si.b * bp.dg_stride[0] + t * bp.dg_stride[1] + hv * bp.dg_stride[2], bp.dg_dtype, sum);
  }
}

// dQ and dK of each (token, head): the value heads of the group summed, then through the L2 norm when the op
// normalizes (dx = r (dy - y (y . dy)), y = r x, r = 1 / sqrt(|x|^2 + 1e-6)). Rows: q rows, then k rows; a warp
// takes kFinalizeRowsPerWarp of them, each lane 4 of the 128 columns.
constexpr int kFinalizeWarps = 8, kFinalizeRowsPerWarp = 2;
constexpr int kFinalizeRows = kFinalizeWarps * kFinalizeRowsPerWarp;  // per CTA

template <class E>
__global__ void __launch_bounds__(kFinalizeWarps * 32)
    gdn_bwd_finalize_kernel(const GdnBwdParams bp, const Workspace ws, const BwdWs bw) {
  using M = Mma<E>;
  constexpr int R = kFinalizeRowsPerWarp;
  const GdnFwdParams& p = bp.fwd;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t heads = p.heads, total = p.batch * p.len * heads, group = p.value_heads / heads;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kFinalizeWarps + (threadIdx.x >> 5)) * R;
  // Every load goes out before the validity flag is read: the addresses follow from the shapes alone (in bounds
  // whatever the flag says), so the flag's latency overlaps the loads' instead of preceding them. (The H200 timed
  // this form and one row per warp behind the flag alike; NOTES.md.)
  float gsum[R][4];
  uint2 raw[R];
  E* y[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int64_t row = first + i < 2 * total ? first + i : 0;
    const bool is_k = row >= total;
    const int64_t r = is_k ? row - total : row;
    const int64_t tok = r / heads, h = r % heads, b = tok / p.len, t = tok % p.len;
    const int64_t* xs = is_k ? p.k_stride : p.q_stride;
    const int64_t* ys = is_k ? bp.dk_stride : bp.dq_stride;
    const E* x = static_cast<const E*>(is_k ? p.k : p.q) + b * xs[0] + t * xs[1] + h * xs[2] + lane * 4;
    y[i] = static_cast<E*>(is_k ? bp.dk : bp.dq) + b * ys[0] + t * ys[1] + h * ys[2] + lane * 4;
    const float* src = (is_k ? bw.dk : bw.dq) + (tok * p.value_heads + h * group) * kD + lane * 4;
    gsum[i][0] = gsum[i][1] = gsum[i][2] = gsum[i][3] = 0.f;
    for (int64_t j = 0; j < group; ++j) {
      const float4 v = *reinterpret_cast<const float4*>(src + j * kD);
      gsum[i][0] += v.x, gsum[i][1] += v.y, gsum[i][2] += v.z, gsum[i][3] += v.w;
    }
    raw[i] = p.l2norm ? *reinterpret_cast<const uint2*>(x) : make_uint2(0u, 0u);
  }
  if (*ws.flag == 0) return;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    if (first + i >= 2 * total) break;
    float* g = gsum[i];
    if (p.l2norm) {
      const float2 x01 = M::unpack(raw[i].x), x23 = M::unpack(raw[i].y);
      const float xv[4] = {x01.x, x01.y, x23.x, x23.y};
      float ss = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) ss += xv[e] * xv[e];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
      const float inv = rsqrtf(ss + 1e-6f);
      float dot = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) dot += xv[e] * inv * g[e];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
#pragma unroll
      for (int e = 0; e < 4; ++e) g[e] = inv * (g[e] - xv[e] * inv * dot);
    }
    *reinterpret_cast<uint2*>(y[i]) = make_uint2(M::pack(g[0], g[1]), M::pack(g[2], g[3]));
  }
}

}  // namespace frost::sm90::gdn
