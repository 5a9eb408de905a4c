// The GDN state pass with column warps: one CTA of BV / 8 warps per (sequence, value head, BV value columns), and
// each warp owns 8 whole columns of the state (128 keys x 8 values, FP32, 32 registers per thread). Every
// product of a chunk step (m16n8k16, n = the warp's 8 columns) finds the state and U' in its own warp's
// registers: an accumulator becomes a B operand by movmatrix.trans, so nothing on the state's chain crosses
// shared memory and the only CTA barrier per chunk is the one that publishes a landed stage. The mma.sync pass
// (sm90_gdn_kernels.cuh) splits the state by key rows instead, so W S there needs every warp's rows: two shared
// round trips and two barriers per chunk, the latency a single sequence with few heads waits on.
//
// Inputs are those of the wgmma pass (the chunk kernel without kStoreWu): q, k, v, Tu = T diag(beta), P and the
// row factors qf, kf, wf. Per chunk, in each warp (S its 128 x 8 columns; tokens 64):
//   G1 = K S and B = Q S                               (64 x 8 each, over 128 keys)
//   X  = V - diag(wf) G1 (16-bit);  U' = Tu X          (= U - W S; Tu lower triangular)
//   O  = diag(qf) B + P U'                             (P causal)
//   S  = exp(g_last) S + K^T diag(kf) U'               (the chain: G1 -> X -> U' -> S)
// Each warp reads whole q, k, Tu and P tiles by ldmatrix (about 64 KB per chunk), so shared-memory bandwidth,
// not a barrier, bounds a chunk step here. GDN's scalar decay only.
#pragma once
#include "engines/sm90/linear_attention/sm90_gdn_kernels.cuh"

namespace frost::sm90::gdn {

namespace cols_pass {

constexpr int kLdT = kC + 8;  // Tu and P rows (64 + 8 elements: conflict-free ldmatrix)
constexpr int kStages = 3;

template <class E, int BV>
struct Stage {
  E q[kC * kLdD], k[kC * kLdD], tu[kC * kLdT], p[kC * kLdT], v[kC * (BV + 8)];
  float qf[kC], kf[kC], wf[kC];
};
template <class E, int BV>
struct Smem {
  Stage<E, BV> st[kStages];
};
static_assert(sizeof(Smem<__nv_bfloat16, 64>) <= 227 * 1024);

// The 8 x 8 block of 16-bit values a quad-row of lanes holds (lane: row lane / 4, columns 2 (lane % 4) and + 1),
// transposed: an accumulator's 8 x 8 block as the B operand of the next m16n8k16.
__device__ __forceinline__ uint32_t movmatrix_t(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// B fragments (k = 16 rows, n = 8 columns) of a 16-row block of an m16n8 accumulator c (rows g and g + 8).
template <class E>
__device__ __forceinline__ void acc_as_b(const float c[4], uint32_t b[2], float f0 = 1.f, float f1 = 1.f) {
  b[0] = movmatrix_t(Mma<E>::pack(f0 * c[0], f0 * c[1]));
  b[1] = movmatrix_t(Mma<E>::pack(f1 * c[2], f1 * c[3]));
}

}  // namespace cols_pass

// Grid: sequences x value heads x (128 / BV), the column slice fastest so a head's slices read one chunk's
// tiles from L2 together. BV / 8 warps of 32 lanes; warp w owns value columns v0 + 8 w to + 8.
template <class E, int BV>
__global__ void __launch_bounds__(BV * 4, 1) gdn_pass_cols_kernel(const GdnFwdParams p, const Workspace ws) {
  using namespace cols_pass;
  using M = Mma<E>;
  constexpr int kThreadsOfCta = BV * 4, kLdV = BV + 8, kSlices = kD / BV;
  extern __shared__ __align__(128) unsigned char smem_cols_pass[];
  auto& s = *reinterpret_cast<Smem<E, BV>*>(smem_cols_pass);
  if (*ws.flag == 0) return;
  const int hvs = static_cast<int>(p.value_heads);
  const int slice = static_cast<int>(blockIdx.x) % kSlices, rest = static_cast<int>(blockIdx.x) / kSlices;
  const int hv = rest % hvs, n = rest / hvs;
  const int h = hv / (hvs / static_cast<int>(p.heads));
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const SeqInfo si = ws.seqs[n];
  const int first = ws.chunk_first[n];
  const int v0 = slice * BV;
  const E* qb = static_cast<const E*>(p.q) + si.b * p.q_stride[0] + h * p.q_stride[2] + si.t0 * p.q_stride[1];
  const E* kb = static_cast<const E*>(p.k) + si.b * p.k_stride[0] + h * p.k_stride[2] + si.t0 * p.k_stride[1];
  const E* vb = static_cast<const E*>(p.v) + si.b * p.v_stride[0] + hv * p.v_stride[2] + si.t0 * p.v_stride[1] + v0;
  E* o_rows = static_cast<E*>(p.o) + si.b * p.o_stride[0] + hv * p.o_stride[2] + si.t0 * p.o_stride[1] + v0;

  auto load = [&](int lc, int stage) {
    Stage<E, BV>& d = s.st[stage];
    const int rows = min(kC, si.len - lc * kC);
    const int64_t slot = static_cast<int64_t>(first + lc) * hvs + hv, tok = static_cast<int64_t>(lc) * kC;
    const E* pp = static_cast<const E*>(ws.p) + slot * kC * kC;
    const E* tu = static_cast<const E*>(ws.tu) + slot * kC * kC;
    for_each_piece<kC, kD, kThreadsOfCta>(tid, [&](int r, int col) {  // rows past the sequence land as zeros
      const bool ok = r < rows;
      const int64_t rr = tok + (ok ? r : 0);
      cp16(&d.q[r * kLdD + col], qb + rr * p.q_stride[1] + col, ok);
      cp16(&d.k[r * kLdD + col], kb + rr * p.k_stride[1] + col, ok);
    });
    for_each_piece<kC, BV, kThreadsOfCta>(tid, [&](int r, int col) {
      const bool ok = r < rows;
      cp16(&d.v[r * kLdV + col], vb + (tok + (ok ? r : 0)) * p.v_stride[1] + col, ok);
    });
    for_each_piece<kC, kC, kThreadsOfCta>(tid, [&](int r, int col) {
      cp16(&d.tu[r * kLdT + col], tu + r * kC + col, true);
      cp16(&d.p[r * kLdT + col], pp + r * kC + col, true);
    });
    if (tid < kC / 4) {
      cp16(&d.qf[tid * 4], ws.rowf + slot * 2 * kC + tid * 4, true);
      cp16(&d.kf[tid * 4], ws.rowf + slot * 2 * kC + kC + tid * 4, true);
      cp16(&d.wf[tid * 4], ws.wf + slot * kC + tid * 4, true);
    }
  };

  // The state: st[mi] is keys 16 mi + g (+ 8) x this warp's columns 2 t, 2 t + 1.
  const int col = 8 * warp + 2 * t;
  const int64_t state_at = (static_cast<int64_t>(si.row) * hvs + hv) * kD * kD + v0 + col;
  float st[8][4];
#pragma unroll
  for (int mi = 0; mi < 8; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float2 x = make_float2(0.f, 0.f);
      if (p.initial_state)
        x = *reinterpret_cast<const float2*>(&p.initial_state[state_at + (16 * mi + g + 8 * half) * kD]);
      st[mi][2 * half] = x.x, st[mi][2 * half + 1] = x.y;
    }

  // This lane's ldmatrix offsets (elements): A row-major over rows of ld, and K^T (A [key][token] read
  // transposed from K's token rows). Blocks of 16 add compile-time immediates.
  const int a_lane = (lane & 15) * kLdD + (lane >> 4) * 8;
  const int a_lane_t = (lane & 15) * kLdT + (lane >> 4) * 8;
  const int kt_lane = ((lane & 7) + (lane >> 4) * 8) * kLdD + ((lane >> 3) & 1) * 8;

#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) {
    if (c < si.chunks) load(c, c);
    cp_commit();  // empty groups keep the count uniform
  }
  for (int lc = 0; lc < si.chunks; ++lc) {
    const Stage<E, BV>& d = s.st[lc % kStages];
    const float decay = expf(ws.glast[static_cast<int64_t>(first + lc) * hvs + hv]);
    cp_wait<kStages - 2>();
    __syncthreads();  // chunk lc has landed; every warp is done with chunk lc - 1 and its stage
    if (lc + kStages - 1 < si.chunks) load(lc + kStages - 1, (lc + kStages - 1) % kStages);
    cp_commit();

    // G1 = K S and B = Q S, from the state's B fragments.
    uint32_t sb[8][2];
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) acc_as_b<E>(st[kk], sb[kk]);
    float g1[4][4] = {}, ob[4][4] = {};
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        uint32_t a[4];
        ldsm4(a, &d.k[a_lane + 16 * mi * kLdD + 16 * kk]);
        M::run(g1[mi], a, sb[kk][0], sb[kk][1]);
        ldsm4(a, &d.q[a_lane + 16 * mi * kLdD + 16 * kk]);
        M::run(ob[mi], a, sb[kk][0], sb[kk][1]);
      }

    // X = V - diag(wf) G1, as B fragments; U' = Tu X.
    uint32_t xb[4][2];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = 16 * mi + g + 8 * half;
        const float2 v = M::unpack(*reinterpret_cast<const uint32_t*>(&d.v[i * kLdV + col]));
        g1[mi][2 * half] = v.x - d.wf[i] * g1[mi][2 * half];
        g1[mi][2 * half + 1] = v.y - d.wf[i] * g1[mi][2 * half + 1];
      }
      acc_as_b<E>(g1[mi], xb[mi]);
    }
    float un[4][4] = {};
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int kj = 0; kj <= mi; ++kj) {
        uint32_t a[4];
        ldsm4(a, &d.tu[a_lane_t + 16 * mi * kLdT + 16 * kj]);
        M::run(un[mi], a, xb[kj][0], xb[kj][1]);
      }
    uint32_t ub[4][2], ukb[4][2];  // U' and diag(kf) U' as B fragments
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
      acc_as_b<E>(un[mi], ub[mi]);
      acc_as_b<E>(un[mi], ukb[mi], d.kf[16 * mi + g], d.kf[16 * mi + g + 8]);
    }

    // S = exp(g_last) S + K^T diag(kf) U'.
#pragma unroll
    for (int mi = 0; mi < 8; ++mi)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[mi][e] *= decay;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int mi = 0; mi < 8; ++mi) {
        uint32_t a[4];
        ldsm4_t(a, &d.k[kt_lane + 16 * kk * kLdD + 16 * mi]);
        M::run(st[mi], a, ukb[kk][0], ukb[kk][1]);
      }

      // O = diag(qf) B + P U'; rows past the sequence are not written.
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float qf = d.qf[16 * mi + g + 8 * half];
        ob[mi][2 * half] *= qf, ob[mi][2 * half + 1] *= qf;
      }
#pragma unroll
      for (int kj = 0; kj <= mi; ++kj) {
        uint32_t a[4];
        ldsm4(a, &d.p[a_lane_t + 16 * mi * kLdT + 16 * kj]);
        M::run(ob[mi], a, ub[kj][0], ub[kj][1]);
      }
    }
    const int rows = min(kC, si.len - lc * kC);
    E* const oc = o_rows + static_cast<int64_t>(lc) * kC * p.o_stride[1];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = 16 * mi + g + 8 * half;
        if (i < rows)
          *reinterpret_cast<uint32_t*>(&oc[i * p.o_stride[1] + col]) = M::pack(ob[mi][2 * half], ob[mi][2 * half + 1]);
      }
  }

  if (p.final_state) {
#pragma unroll
    for (int mi = 0; mi < 8; ++mi)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        *reinterpret_cast<float2*>(&p.final_state[state_at + (16 * mi + g + 8 * half) * kD]) =
            make_float2(st[mi][2 * half], st[mi][2 * half + 1]);
  }
}

}  // namespace frost::sm90::gdn
