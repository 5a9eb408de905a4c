// The GDN backward's own kernels (see sm90_gdn.h for the launch sequence): the reverse state pass, the pieces the
// chunk gradient kernels share (GDN's on wgmma in sm90_gdn_bwd_grad_wgmma.cuh, KDA's in sm90_kda_bwd_kernels.cuh)
// and the GVA / L2-norm epilogue. The forward's chunk kernel and its state pass (kRecord) supply
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
  // The chunk gradient kernel's count of items taken (from the last), zeroed before each run.
  int32_t* grad_next = nullptr;
  // [chunks, HV]: how many value columns of that chunk's dS and dU' the reverse pass has stored (zeroed before each
  // run; kD once all), with the gradient kernel running beside the reverse pass (GdnPlan::grad_overlap); null
  // otherwise.
  int32_t* reversed = nullptr;
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
template <class E, int NT = 8>
__device__ __forceinline__ void store_dqk_tile(const float (*acc)[4], bool direct, float* ws_row0, E* out_row0,
                                               int64_t out_pitch, int value_heads, int fr, int fc, int rows) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = fr + half * 8;
    if (i >= rows) continue;
    if (direct) {
      E* dst = out_row0 + i * out_pitch + fc;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        *reinterpret_cast<uint32_t*>(&dst[nt * 8]) = Mma<E>::pack(acc[nt][half * 2], acc[nt][half * 2 + 1]);
    } else {
      float* dst = ws_row0 + static_cast<int64_t>(i) * value_heads * kD + fc;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
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

// exp(x) where keep, else 0, without a branch (exp(-inf) is 0): a branch around each element's expf serialized the
// elements, where the selects leave their exponentials to overlap.
__device__ __forceinline__ float masked_exp(bool keep, float x) { return expf(keep ? x : -INFINITY); }

// The cumulative gates of an accumulator tile's rows (row0, row0 + 8) and columns (col0 + 8 nt + e, nt < 4, e < 2),
// read once: between the elements the tile's consumers store to shared memory, after which the compiler would
// read them again per element.
template <int NT = 4>
__device__ __forceinline__ void cumulative_gates(const float* g, int row0, int col0, float g_row[2],
                                                 float g_col[2 * NT]) {
  g_row[0] = g[row0], g_row[1] = g[row0 + 8];
#pragma unroll
  for (int x = 0; x < 2 * NT; ++x) g_col[x] = g[col0 + (x >> 1) * 8 + (x & 1)];
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

// Chunk c of value head hv; false past the last chunk.
__device__ __forceinline__ bool locate_bwd_chunk(const GdnFwdParams& p, const Workspace& ws, int c, int hv,
                                                 BwdChunk& ch) {
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

// dT = diag(beta) (X1 + X2 diag(x_scale)) on the lower triangle with the diagonal (zero above it), rounded to 16
// bits: X1 and X2 are a warp's accumulator tiles for rows fr, fr + 8 and four 8-column tiles from nc; at(i, j) is
// where the pair (i, j), (i, j + 1) goes.
template <class E, int NT = 4, class XScale, class At>
__device__ __forceinline__ void store_dt(const float (*x1)[4], const float (*x2)[4], const float* beta, XScale x_scale,
                                         At at, int nc, int fr, int fc) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = fr + half * 8;
      float out[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = nc + nt * 8 + fc + e;
        // Formed everywhere and then selected, so that no branch holds the elements apart (x_scale(j) is finite).
        const float v = beta[j] * (x1[nt][half * 2 + e] + x_scale(j) * x2[nt][half * 2 + e]);
        out[e] = j <= i ? v : 0.f;
      }
      *reinterpret_cast<uint32_t*>(at(i, nc + nt * 8 + fc)) = Mma<E>::pack(out[0], out[1]);
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
  store_dt<E>(
      x1, x2, beta, x_scale, [dt](int i, int j) { return &dt[i * kLdC + j]; }, nc, fr, fc);
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
