// The heavy GDN forward kernels (see sm90_gdn.h for the algorithm): the per-chunk WY transform (4 warps;
// warp w owns token rows [16 w, 16 w + 16) of a chunk) and the sequential state pass (8 warps), with the
// pieces KDA's chunk kernel (sm90_kda_chunk.cuh) shares; the state pass serves both.
#pragma once
#include "engines/sm90/linear_attention/sm90_gdn.h"
#include "engines/sm90/linear_attention/sm90_gdn_mma.cuh"

namespace frost::sm90::gdn {

constexpr int kD = kGdnHeadDim, kC = kGdnChunk, kThreads = 128, kPassThreads = 256;
constexpr int kLdD = kD + 8;   // shared rows of 128 elements (272 bytes)
constexpr int kLdC = kC + 8;   // shared rows of 64 elements (144 bytes)
constexpr int kLdAt = kC + 4;  // FP32 rows of 64 (272 bytes: the epilogue's column writes miss bank conflicts)

struct SeqInfo {
  int64_t t0;  // first token on the T axis
  int32_t b, len, row, chunks;
};

// Device views of the workspace (sm90_gdn_fwd.cu carves it).
struct Workspace {
  int32_t* flag;         // 1 when offsets and indices checked out
  SeqInfo* seqs;         // [N]
  int32_t* chunk_first;  // [N + 1], exclusive prefix sum of chunks
  uint32_t* bitmap;      // state rows named by state_indices
  void* w;               // [chunks, HV, 64, 128] WY factor of K
  void* u;               // [chunks, HV, 64, 128] WY factor of V
  void* p;               // [chunks, HV, 64, 64] causal gated scores, scale folded in
  float* rowf;           // GDN: [chunks, HV, 128]: 64 query-row factors, then 64 key-row factors
  float* glast;          // GDN: [chunks, HV] cumulative log decay of the chunk's last token;
                         // KDA: [chunks, HV, 128] its exp per key channel (the state rows' decay)
  void* qg;              // KDA: [chunks, HV, 64, 128] scale rq Q exp(G)
  void* kd;              // KDA: [chunks, HV, 64, 128] rk K exp(G_last - G)
  float* kk;             // KDA backward: [chunks, HV, 64, 64] KK transposed (FP32, no beta), null otherwise
  void* t = nullptr;     // backward: [chunks, HV, 64, 64] T = (I + A)^-1 (16-bit), null otherwise
  // The forward on the wgmma pass, which forms U' itself (w and u unused there):
  void* tu = nullptr;   // [chunks, HV, 64, 64] T diag(beta) (16-bit)
  float* wf = nullptr;  // [chunks, HV, 64] W's key-row factors without beta: exp(G) rk
  // With the chunk kernel and the wgmma pass running at once: [chunks, HV], 1 once the chunk kernel has stored
  // that chunk's pieces (zeroed before each run); null otherwise.
  int32_t* ready = nullptr;
};

__device__ __forceinline__ float load_scalar(const void* p, int64_t i, GdnDtype dt) {
  if (dt == GdnDtype::FP32) return static_cast<const float*>(p)[i];
  if (dt == GdnDtype::BF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return __half2float(static_cast<const __half*>(p)[i]);
}

// The sequence holding global chunk c: the last n with chunk_first[n] <= c (never an empty one).
__device__ __forceinline__ int sequence_of_chunk(const int32_t* chunk_first, int sequences, int c) {
  int lo = 0, hi = sequences - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (chunk_first[mid] <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The ready flags between two kernels that run at once (Workspace::ready): the writer's stores, then release; the
// reader's acquire, then its loads.
__device__ __forceinline__ int32_t load_acquire(const int32_t* p) {
  int32_t v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(int32_t* p, int32_t v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// Where `on`: a fence, then p += v with release. Predicated, not branched: inside a loop of wgmma a branch can make
// ptxas wait for every product in flight.
__device__ __forceinline__ void fence_add_release_if(bool on, int32_t* p, int32_t v) {
  asm volatile(
      "{\n .reg .pred on;\n setp.ne.b32 on, %2, 0;\n @on fence.sc.gpu;\n"
      " @on red.release.gpu.global.add.s32 [%0], %1;\n}\n" ::"l"(p),
      "r"(v), "r"(static_cast<int>(on))
      : "memory");
}

// Programmatic dependent launch: a kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization behind
// this grid may start once every CTA of this grid has called allow_dependent_launch (or exited), so its CTAs can only
// take the SMs this grid's CTAs leave. wait_for_prior_grids returns once the grid launched before has completed and
// its stores are visible (at once without such a launch).
__device__ __forceinline__ void allow_dependent_launch() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
__device__ __forceinline__ void wait_for_prior_grids() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

// Where chunk c (of grid row blockIdx.x) lies: its sequence and its index in it; false when c is past the
// packed sequences' chunks or the prologue's checks failed. Without cu_seqlens the place is arithmetic and
// nothing here needs the prologue (the chunk kernels write only the workspace), so the loads start at once.
__device__ __forceinline__ bool locate_chunk(const GdnFwdParams& p, const Workspace& ws, int c, SeqInfo& si,
                                             int& local) {
  if (p.cu_seqlens) {
    if (*ws.flag == 0 || c >= ws.chunk_first[p.sequences]) return false;
    const int n = sequence_of_chunk(ws.chunk_first, static_cast<int>(p.sequences), c);
    si = ws.seqs[n];
    local = c - ws.chunk_first[n];
  } else {
    const int per_seq = static_cast<int>((p.len + kC - 1) / kC);
    local = c % per_seq;
    si = {0, c / per_seq, static_cast<int32_t>(p.len), 0, per_seq};
  }
  return true;
}

// 1 / |row| (with FLA's 1e-6 inside the root) when the op normalizes q and k, else 1.
template <class E>
__device__ __forceinline__ float row_inv_norm(const E* row, bool l2norm) {
  if (!l2norm) return 1.f;
  float sum = 0.f;
#pragma unroll
  for (int d = 0; d < kD; d += 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(row + d);
    const E* e = reinterpret_cast<const E*>(&raw);
#pragma unroll
    for (int x = 0; x < 8; ++x) sum = fmaf(Mma<E>::to_float(e[x]), Mma<E>::to_float(e[x]), sum);
  }
  return rsqrtf(sum + 1e-6f);
}

// Token `row` of the chunk from t0 (of `rows` valid; zeros past them): its log decay g and beta for value head hv.
__device__ __forceinline__ float2 gates_of(const GdnFwdParams& p, const SeqInfo& si, int64_t t0, int rows, int hv,
                                           int row) {
  if (row >= rows) return make_float2(0.f, 0.f);
  const int64_t t = t0 + row;
  return make_float2(
      load_scalar(p.g, si.b * p.g_stride[0] + t * p.g_stride[1] + hv * p.g_stride[2], p.g_dtype),
      load_scalar(p.beta, si.b * p.beta_stride[0] + t * p.beta_stride[1] + hv * p.beta_stride[2], p.beta_dtype));
}
__device__ __forceinline__ void load_gates(const GdnFwdParams& p, const SeqInfo& si, int64_t t0, int rows, int hv,
                                           int row, float* g, float* beta) {
  const float2 x = gates_of(p, si, t0, rows, hv, row);
  g[row] = x.x, beta[row] = x.y;
}

// g becomes G, the cumulative log decay of the chunk's 64 tokens: an inclusive scan by one warp (lane l holds
// tokens l and l + 32).
__device__ __forceinline__ void scan_gates(float* g, int lane) {
  float x0 = g[lane], x1 = g[lane + 32];
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const float y0 = __shfl_up_sync(0xffffffffu, x0, off), y1 = __shfl_up_sync(0xffffffffu, x1, off);
    if (lane >= off) x0 += y0, x1 += y1;
  }
  x1 += __shfl_sync(0xffffffffu, x0, 31);
  g[lane] = x0, g[lane + 32] = x1;
}

// T = (I + A)^-1 in FP32, blocked by 16: the four diagonal blocks by forward substitution, the others by products
// of 16 x 16 blocks, T_ij = -T_ii sum_k A_ik T_kj, in two doubling steps: the 32 x 32 diagonal halves
// (T_10 = -T_11 A_10 T_00 and T_32 = -T_33 A_32 T_22), then the lower-left quarter -T_b (A_ba T_a). The products run
// on the tensor cores as 3xTF32 (each FP32 operand split into two TF32 parts, the product of the small parts left
// out), close to FP32 accuracy. Against substitution over all 64 columns (2,100 instructions per thread, most
// of them shared-memory loads of A's columns) each thread runs a fraction. `at` holds A transposed (A[i][j] at
// at[j][i], zero on and above the diagonal); T goes into the other triangle (T[i][j] at at[i][j], i >= j), the
// diagonal blocks whole (their upper parts, A's diagonal blocks, are dead once substituted). Every thread of the
// CTA calls it; on return thread (warp, lane) holds column 16 warp + lane % 16 of T, rows 32 (lane / 16) to + 32,
// in t.
namespace solve {

// Element (r, c) of block (bi, bj) of A (stored transposed) and of T (or of an intermediate kept where T goes).
__device__ __forceinline__ float& a_at(float* at, int bi, int bj, int r, int c) {
  return at[(16 * bj + c) * kLdAt + 16 * bi + r];
}
__device__ __forceinline__ float& t_at(float* at, int bi, int bj, int r, int c) {
  return at[(16 * bi + r) * kLdAt + 16 * bj + c];
}

// x = hi + lo with both parts TF32.
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(hi) : "f"(x));
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(lo) : "f"(x - __uint_as_float(hi)));
}

__device__ __forceinline__ void mma_tf32(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// acc += L R for 16 x 16 blocks, L(r, k) and R(k, n) read from shared memory; acc[nt] is the m16n8 accumulator
// of columns [8 nt, 8 nt + 8) (rows g and g + 8, columns 2 t and 2 t + 1 of it; g = lane / 4, t = lane % 4).
template <class L, class R>
__device__ __forceinline__ void mma_block(L l, R r, int lane, float acc[2][4]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int k0 = 0; k0 < 16; k0 += 8) {
    uint32_t ah[4], al[4];
    split_tf32(l(g, k0 + t), ah[0], al[0]);
    split_tf32(l(g + 8, k0 + t), ah[1], al[1]);
    split_tf32(l(g, k0 + t + 4), ah[2], al[2]);
    split_tf32(l(g + 8, k0 + t + 4), ah[3], al[3]);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      uint32_t bh[2], bl[2];
      split_tf32(r(k0 + t, 8 * nt + g), bh[0], bl[0]);
      split_tf32(r(k0 + t + 4, 8 * nt + g), bh[1], bl[1]);
      mma_tf32(acc[nt], al, bh);
      mma_tf32(acc[nt], ah, bl);
      mma_tf32(acc[nt], ah, bh);
    }
  }
}

// sign * acc into block (bi, bj) where T goes.
__device__ __forceinline__ void store_acc(float* at, int bi, int bj, int lane, const float acc[2][4], float sign) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<float2*>(&t_at(at, bi, bj, g + 8 * h, 8 * nt + 2 * t)) =
          make_float2(sign * acc[nt][2 * h], sign * acc[nt][2 * h + 1]);
}

}  // namespace solve

__device__ __forceinline__ void solve_unit_lower(float* at, int lane, int warp, float t[32]) {
  using namespace solve;
  const int c = lane & 15, h = lane >> 4;
  // Diagonal block `warp`, right-looking (a lane holds column c, rows 8 h to + 8): x[m] is final when step m starts;
  // rows at or above the pivot subtract the zeros A holds there.
  {
    float x[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) x[r] = 8 * h + r == c ? 1.f : 0.f;
#pragma unroll
    for (int m = 0; m < 16; ++m) {
      const float xm = __shfl_sync(0xffffffffu, x[m & 7], c + 16 * (m >> 3));
      const float* col = &a_at(at, warp, warp, 8 * h, m);
      const float4 lo = *reinterpret_cast<const float4*>(col), hi = *reinterpret_cast<const float4*>(col + 4);
      const float a[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int r = 0; r < 8; ++r) x[r] = fmaf(-a[r], xm, x[r]);
    }
    __syncwarp();  // the block's A is read: T_ww (zeros above its diagonal) takes its place
#pragma unroll
    for (int r = 0; r < 8; ++r) t_at(at, warp, warp, 8 * h + r, c) = x[r];
  }
  __syncthreads();
  auto a_block = [at](int bi, int bj) { return [at, bi, bj](int r, int k) { return a_at(at, bi, bj, r, k); }; };
  auto t_block = [at](int bi, int bj) { return [at, bi, bj](int r, int k) { return t_at(at, bi, bj, r, k); }; };
  float acc[2][4];
  auto clear = [&acc] {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
  };
  // The 32 x 32 diagonal halves: warps 1 and 3; X = A_ba T_aa waits where T_ba goes.
  if (warp & 1) {
    const int b = warp, a = warp - 1;
    clear();
    mma_block(a_block(b, a), t_block(a, a), lane, acc);
    store_acc(at, b, a, lane, acc, 1.f);
    __syncwarp();
    clear();
    mma_block(t_block(b, b), t_block(b, a), lane, acc);
    __syncwarp();
    store_acc(at, b, a, lane, acc, -1.f);
  }
  __syncthreads();
  // The lower-left quarter: Y = A_ba T_a, block (p, q) by warp 2 p + q, kept where T_{2+p, q} goes; then
  // -T_b Y, each warp its block again.
  const int p = warp >> 1, q = warp & 1;
  clear();
  for (int s = q; s < 2; ++s) mma_block(a_block(2 + p, s), t_block(s, q), lane, acc);
  store_acc(at, 2 + p, q, lane, acc, 1.f);
  __syncthreads();
  clear();
  for (int s = 0; s <= p; ++s) mma_block(t_block(2 + p, 2 + s), t_block(2 + s, q), lane, acc);
  __syncthreads();  // every warp has read Y
  store_acc(at, 2 + p, q, lane, acc, -1.f);
  __syncthreads();
  // This thread's half column; above the diagonal the array holds A.
  const int col = 16 * warp + c;
#pragma unroll
  for (int r = 0; r < 32; ++r) t[r] = 32 * h + r >= col ? at[(32 * h + r) * kLdAt + col] : 0.f;
}

// The backward's recording run (ws.t set): this lane's half column of T to the workspace, so that the chunk
// gradient kernels start from the T the recorded W and U were formed with instead of solving again (the solve is
// about half of their code; unrolled, it kept them waiting on instruction fetch).
template <class E>
__device__ __forceinline__ void record_t(const Workspace& ws, int64_t slot, int half, int col, const float t[32]) {
  if (!ws.t) return;
  E* const tg = static_cast<E*>(ws.t) + slot * kC * kC;
#pragma unroll
  for (int x = 0; x < 32; ++x) tg[(half * 32 + x) * kC + col] = E(t[x]);
}

// Starts the cp.async copies of the recorded T of chunk slot `slot` into tm (rows of kLdC).
template <class E, int kThreadsOfCta>
__device__ __forceinline__ void copy_recorded_t(const Workspace& ws, int64_t slot, E* tm) {
  const E* ts = static_cast<const E*>(ws.t) + slot * kC * kC;
  for (int i = static_cast<int>(threadIdx.x); i < kC * (kC / 8); i += kThreadsOfCta) {
    const int r = i >> 3, col = (i & 7) * 8;
    cp16(&tm[r * kLdC + col], ts + r * kC + col, true);
  }
}

// Tw and Tu are 64 x 64 without padding, 16-byte chunks XOR-swizzled by row (conflict-free ldmatrix).
__device__ __forceinline__ int sw64(int row, int col) { return row * kC + (((col >> 3) ^ row) & 7) * 8 + (col & 7); }

// Copies a warp's 16 staged rows of `cols` 16-bit elements (shared rows of kLdD) to dst (rows of `cols`) in
// 16-byte pieces, so each warp store covers whole 32-byte sectors. Stored from the mma fragments instead, each
// row's 16-byte run fills half a sector (ncu counted 43 % of the chunk kernel's sectors as excess that way).
template <int cols, class E>
__device__ __forceinline__ void store_staged_rows(const E* staged, E* dst, int lane) {
  constexpr int kPieces = cols / 8;  // 16-byte pieces per row
#pragma unroll
  for (int i = lane; i < 16 * kPieces; i += 32) {
    const int r = i / kPieces, c = (i % kPieces) * 8;
    *reinterpret_cast<uint4*>(&dst[r * cols + c]) = *reinterpret_cast<const uint4*>(&staged[r * kLdD + c]);
  }
}

// dst [64][128] = tm x, for tm 64 x 64 lower triangular (swizzled by sw64) and x [64][kLdD]; this warp's rows
// [m0, m0 + 16) (k-blocks past them are zero in tm). x is dead afterwards: once every warp is done reading it
// (a CTA barrier, so all of the CTA's warps must call this), each warp stages its rows of the result in its rows
// of x and stores them whole.
template <class E>
__device__ __forceinline__ void wy_product(const E* tm, E* x, E* dst, int lane, int m0) {
  using M = Mma<E>;
  float acc[16][4];
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
  for (int k0 = 0; k0 < kC; k0 += 16) {
    if (k0 > m0) break;
    uint32_t a[4];
    ldsm4(a, &tm[sw64(m0 + (lane & 15), k0 + (lane >> 4) * 8)]);
#pragma unroll
    for (int np = 0; np < 8; ++np) {
      uint32_t b[4];
      ldsm4_t(b, &x[frag_b_kn(lane, k0, np * 16, kLdD)]);
      M::run(acc[2 * np], a, b[0], b[1]);
      M::run(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
  __syncthreads();
  E* const staged = x + m0 * kLdD;
#pragma unroll
  for (int nt = 0; nt < 16; ++nt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = (lane >> 2) + half * 8, col = nt * 8 + (lane & 3) * 2;
      *reinterpret_cast<uint32_t*>(&staged[i * kLdD + col]) = M::pack(acc[nt][half * 2], acc[nt][half * 2 + 1]);
    }
  __syncwarp();
  store_staged_rows<kD>(staged, dst + m0 * kD, lane);
}

// The start of a chunk kernel: finds chunk c's sequence (false past the last chunk), its first token t0 and its rows,
// points vb at its v rows for value head hv, and starts the cp.async loads of its q and k rows (rows past the
// sequence read as zeros) into sq and sk (one commit group).
template <class E>
__device__ __forceinline__ bool start_chunk(const GdnFwdParams& p, const Workspace& ws, int c, int hv, E* sq, E* sk,
                                            SeqInfo& si, int64_t& t0, int& rows, const E*& vb) {
  int local;
  if (!locate_chunk(p, ws, c, si, local)) return false;
  t0 = si.t0 + static_cast<int64_t>(local) * kC;
  rows = min(kC, si.len - local * kC);
  const int h = hv / (static_cast<int>(p.value_heads) / static_cast<int>(p.heads));
  const E* qb = static_cast<const E*>(p.q) + si.b * p.q_stride[0] + h * p.q_stride[2] + t0 * p.q_stride[1];
  const E* kb = static_cast<const E*>(p.k) + si.b * p.k_stride[0] + h * p.k_stride[2] + t0 * p.k_stride[1];
  vb = static_cast<const E*>(p.v) + si.b * p.v_stride[0] + hv * p.v_stride[2] + t0 * p.v_stride[1];
  for_each_piece<kC, kD, kThreads>(static_cast<int>(threadIdx.x), [&](int r, int col) {
    const bool ok = r < rows;
    const int rr = ok ? r : 0;
    cp16(&sq[r * kLdD + col], qb + rr * p.q_stride[1] + col, ok);
    cp16(&sk[r * kLdD + col], kb + rr * p.k_stride[1] + col, ok);
  });
  cp_commit();
  return true;
}

template <class E>
struct ChunkSmem {
  E qv[kC * kLdD];  // q, then v (loaded while A is solved)
  E k[kC * kLdD];
  float at[kC * kLdAt];                   // A transposed (column m of A contiguous), FP32; then Tw and Tu
  float g[kC], beta[kC], rq[kC], rk[kC];  // g becomes the cumulative G
};
// 53 KB: four CTAs per SM.
static_assert(sizeof(ChunkSmem<__nv_bfloat16>) <= 227 * 1024 / 4 - 1024);
static_assert(2 * kC * kC * 2 <= kC * kLdAt * 4);

// What the GDN chunk kernel leaves for its state pass (beside P, the row factors and G_last).
enum class ChunkOut {
  kWu,   // W and U (the mma.sync passes)
  kTu,   // T diag(beta) and W's factors exp(G) rk, from which the wgmma pass forms U' = T diag(beta) (V - diag(exp(G)
         // rk) K S) itself: 16 KB per chunk and head written instead of 32, and v, the two WY products and their
         // stores are not needed here
  kTuW,  // kTu and W (the backward's recording on the wgmma pass: its reverse pass reads W)
};

// One CTA per (chunk, value head). 1-D grid of max_chunks x HV, the head fastest, so the CTAs start in chunk
// order (the wgmma pass can run at once and take each chunk as it is ready; batch rows interleaved).
template <class E, ChunkOut kOut = ChunkOut::kWu>
__global__ void __launch_bounds__(kThreads, 4) gdn_chunk_kernel(const GdnFwdParams p, const Workspace ws) {
  constexpr bool kStoreWu = kOut == ChunkOut::kWu;
  using M = Mma<E>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<ChunkSmem<E>*>(smem_raw);
  const int hvs = static_cast<int>(p.value_heads);
  const int at = static_cast<int>(blockIdx.x) / hvs, hv = static_cast<int>(blockIdx.x) % hvs;
  // Packed sequences: chunks in their global order. Batch rows: every row's chunk at one position together, so each
  // row's state pass, running at once, finds its chunks ready in step.
  const int per_row = static_cast<int>((p.len + kC - 1) / kC), batch_rows = static_cast<int>(p.batch);
  const int c = p.cu_seqlens ? at : (at % batch_rows) * per_row + at / batch_rows;
  SeqInfo si;
  int64_t t0;
  int rows;
  const E* vb;
  if (!start_chunk(p, ws, c, hv, s.qv, s.k, si, t0, rows, vb)) return;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  if (tid < kC) load_gates(p, si, t0, rows, hv, tid, s.g, s.beta);
  cp_wait<0>();
  __syncthreads();

  // Row norms (one row per thread: q rows for threads 0-63, k rows for 64-127), then warp 0 scans g.
  (tid < kC ? s.rq[tid] : s.rk[tid - kC]) =
      row_inv_norm(tid < kC ? &s.qv[tid * kLdD] : &s.k[(tid - kC) * kLdD], p.l2norm);
  if (warp == 0) scan_gates(s.g, lane);
  __syncthreads();

  // Per-row factors for the state pass.
  const int64_t slot = static_cast<int64_t>(c) * hvs + hv;
  if (tid < kC) {
    const bool ok = tid < rows;
    const float g_last = s.g[rows - 1];
    ws.rowf[slot * 2 * kC + tid] = ok ? p.scale * s.rq[tid] * expf(s.g[tid]) : 0.f;
    ws.rowf[slot * 2 * kC + kC + tid] = ok ? s.rk[tid] * expf(g_last - s.g[tid]) : 0.f;
    if constexpr (!kStoreWu) ws.wf[slot * kC + tid] = ok ? s.rk[tid] * expf(s.g[tid]) : 0.f;
    if (tid == 0) ws.glast[slot] = g_last;
  }

  // K K^T and Q K^T for this warp's 16 rows; columns past the diagonal block are never needed.
  const int m0 = warp * 16;
  {
    float kk[8][4] = {}, qk[8][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < kD; k0 += 16) {
      uint32_t ak[4], aq[4];
      ldsm4(ak, &s.k[frag_a(lane, m0, k0, kLdD)]);
      ldsm4(aq, &s.qv[frag_a(lane, m0, k0, kLdD)]);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        if (np > warp) break;
        uint32_t b[4];
        ldsm4(b, &s.k[frag_b_nk(lane, np * 16, k0, kLdD)]);
        M::run(kk[2 * np], ak, b[0], b[1]);
        M::run(kk[2 * np + 1], ak, b[2], b[3]);
        M::run(qk[2 * np], aq, b[0], b[1]);
        M::run(qk[2 * np + 1], aq, b[2], b[3]);
      }
    }
    // P goes out through this warp's q rows, which only this warp reads. The factors of this lane's 2 rows and
    // 16 columns are read once: the stores to A in between would make the compiler read them again per element.
    __syncwarp();
    float g_row[2], kk_row[2], qk_row[2], g_col[16], rk_col[16];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = m0 + (lane >> 2) + half * 8;
      g_row[half] = s.g[i], kk_row[half] = s.beta[i] * s.rk[i], qk_row[half] = p.scale * s.rq[i];
    }
#pragma unroll
    for (int x = 0; x < 16; ++x) {
      const int j = (x >> 1) * 8 + (lane & 3) * 2 + (x & 1);
      g_col[x] = s.g[j], rk_col[x] = s.rk[j];
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = m0 + (lane >> 2) + half * 8;
        float out[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = nt * 8 + (lane & 3) * 2 + e, x = nt * 2 + e;
          const float decay = j <= i ? expf(g_row[half] - g_col[x]) : 0.f;
          s.at[j * kLdAt + i] = j < i ? kk_row[half] * rk_col[x] * kk[nt][half * 2 + e] * decay : 0.f;
          out[e] = qk_row[half] * rk_col[x] * qk[nt][half * 2 + e] * decay;
        }
        *reinterpret_cast<uint32_t*>(&s.qv[i * kLdD + nt * 8 + (lane & 3) * 2]) = M::pack(out[0], out[1]);
      }
    __syncwarp();
    store_staged_rows<kC>(&s.qv[m0 * kLdD], static_cast<E*>(ws.p) + slot * kC * kC + m0 * kC, lane);
  }
  __syncthreads();
  if constexpr (kStoreWu) {
    // q is dead: v lands there while A is solved. A runtime loop on purpose: unrolled by for_each_piece, its
    // addresses stayed live across the solve and the kernel spilled 28 bytes instead of 4.
    for (int i = tid; i < kC * (kD / 8); i += kThreads) {
      const int r = i >> 4, col = (i & 15) * 8;
      const bool ok = r < rows;
      cp16(&s.qv[r * kLdD + col], vb + (ok ? r : 0) * p.v_stride[1] + col, ok);
    }
    cp_commit();
  }

  const int col = warp * 16 + (lane & 15), half = lane >> 4;
  float t[32];
  solve_unit_lower(s.at, lane, warp, t);
  record_t<E>(ws, slot, half, col, t);
  __syncthreads();  // every column is done reading A
  E* const tw = reinterpret_cast<E*>(s.at);
  E* const tu = tw + kC * kC;
  if constexpr (!kStoreWu) {
    const float cu = s.beta[col], cw = s.beta[col] * expf(s.g[col]) * s.rk[col];
#pragma unroll
    for (int x = 0; x < 32; ++x) {
      tu[sw64(half * 32 + x, col)] = E(t[x] * cu);
      if constexpr (kOut == ChunkOut::kTuW) tw[sw64(half * 32 + x, col)] = E(t[x] * cw);
    }
    __syncthreads();
    E* const dst = static_cast<E*>(ws.tu) + slot * kC * kC;
    for_each_piece<kC, kC, kThreads>(tid, [&](int r, int c8) {  // whole rows in 16-byte pieces
      *reinterpret_cast<uint4*>(&dst[r * kC + c8]) = *reinterpret_cast<const uint4*>(&tu[sw64(r, c8)]);
    });
    if constexpr (kOut == ChunkOut::kTuW) wy_product(tw, s.k, static_cast<E*>(ws.w) + slot * kC * kD, lane, m0);
    if (ws.ready) {  // every piece of this chunk is stored: the pass may take it
      __syncthreads();
      if (tid == 0) {
        __threadfence();
        store_release(&ws.ready[slot], 1);
      }
    }
    return;
  }
  {
    const float cw = s.beta[col] * expf(s.g[col]) * s.rk[col], cu = s.beta[col];
#pragma unroll
    for (int x = 0; x < 32; ++x) {
      tw[sw64(half * 32 + x, col)] = E(t[x] * cw);
      tu[sw64(half * 32 + x, col)] = E(t[x] * cu);
    }
  }
  cp_wait<0>();  // v (its own copy group) has landed
  __syncthreads();

  // W = Tw K and U = Tu V.
  wy_product(tw, s.k, static_cast<E*>(ws.w) + slot * kC * kD, lane, m0);
  wy_product(tu, s.qv, static_cast<E*>(ws.u) + slot * kC * kD, lane, m0);
}

// Stages of the state pass's pipeline: chunk c + kStages - 1 is in flight while chunk c is computed.
template <int BV>
constexpr int kPassStages = BV == 32 ? 3 : 2;

// q, k and w tiles are 64 x 128 without padding; 16-byte chunks are XOR-swizzled by row so that the
// 8 rows an ldmatrix reads fall in 8 distinct bank groups.
__device__ __forceinline__ int sw(int row, int col) {
  return row * kD + ((((col >> 3) ^ row) & 7) | ((col >> 3) & 8)) * 8 + (col & 7);
}

template <class E, int BV>
struct PassStage {
  E q[kC * kD], k[kC * kD], w[kC * kD], p[kC * kLdC], u[kC * (BV + 8)];
  float rowf[2 * kC];  // GDN: the query- and key-row factors; KDA: the state rows' decay exp(G_last)
};
// One stage of a state pass's pipeline but its U tile: chunk slot `slot`'s q and k rows from lc * 64 (KDA: the
// gated tiles of the workspace), W, P and the row factors (KDA: the state rows' decay). Rows past `rows` read as
// zeros. The forward pass and the backward's reverse pass share it.
template <class E, int BV, bool kPerKey>
__device__ __forceinline__ void load_pass_stage(PassStage<E, BV>& d, const GdnFwdParams& p, const Workspace& ws,
                                                const E* qb, const E* kb, int64_t slot, int lc, int rows, int tid) {
  const E* w = static_cast<const E*>(ws.w) + slot * kC * kD;
  const E* pp = static_cast<const E*>(ws.p) + slot * kC * kC;
  const E* qc = kPerKey ? static_cast<const E*>(ws.qg) + slot * kC * kD : qb + lc * kC * p.q_stride[1];
  const E* kc = kPerKey ? static_cast<const E*>(ws.kd) + slot * kC * kD : kb + lc * kC * p.k_stride[1];
  const int64_t qs = kPerKey ? kD : p.q_stride[1], ks = kPerKey ? kD : p.k_stride[1];
  for_each_piece<kC, kD, kPassThreads>(tid, [&](int r, int col) {
    const bool ok = kPerKey || r < rows;  // KDA's gated tiles hold zeros on padded rows
    const int rr = ok ? r : 0;
    cp16(&d.q[sw(r, col)], qc + rr * qs + col, ok);
    cp16(&d.k[sw(r, col)], kc + rr * ks + col, ok);
    cp16(&d.w[sw(r, col)], w + r * kD + col, true);
  });
  for_each_piece<kC, kC, kPassThreads>(tid,
                                       [&](int r, int col) { cp16(&d.p[r * kLdC + col], pp + r * kC + col, true); });
  if (tid < 2 * kC / 4) cp16(&d.rowf[tid * 4], (kPerKey ? ws.glast : ws.rowf) + slot * 2 * kC + tid * 4, true);
}

template <class E, int BV>
struct PassSmem {
  PassStage<E, BV> st[kPassStages<BV>];
  E sb[kD * (BV + 8)];                      // the state entering the chunk, rounded for the tensor cores
  E ub[kC * (BV + 8)], ukb[kC * (BV + 8)];  // U' = U - W S, and its rows times exp(G_last - G) rk
};
static_assert(sizeof(PassSmem<__nv_bfloat16, 32>) <= 227 * 1024 && sizeof(PassSmem<__nv_bfloat16, 64>) <= 227 * 1024);

// The (sequence, value head, kCols value columns) a state-pass CTA serves. The grids are 1-D with the column slice
// fastest, so the slices of a head read one chunk's data from L2 together.
struct PassCta {
  int hv, h, v0;  // value head, its q / k head, first value column
  SeqInfo si;
  int first;  // the sequence's first chunk
};
template <int kCols>
__device__ __forceinline__ PassCta locate_pass_cta(const GdnFwdParams& p, const Workspace& ws) {
  constexpr int kSlices = kD / kCols;
  const int hvs = static_cast<int>(p.value_heads);
  const int slice = static_cast<int>(blockIdx.x) % kSlices, rest = static_cast<int>(blockIdx.x) / kSlices;
  const int hv = rest % hvs, n = rest / hvs;
  return {hv, hv / (hvs / static_cast<int>(p.heads)), slice * kCols, ws.seqs[n], ws.chunk_first[n]};
}

// What the GDN backward keeps of its forward recomputation (kRecord): per chunk slot, the state entering the
// chunk [128][128] and U' = U - W S [64][128], both rounded to the 16-bit type as the products use them.
struct PassRecord {
  void* h = nullptr;
  void* vnew = nullptr;
};

// One CTA of 8 warps per (sequence, value head, BV value columns), 1-D grid with the column slice fastest
// so the slices of one head read the same chunk data while it is in L2. Warp w works on token rows
// [16 rg, 16 rg + 16) and state rows [32 rg, 32 rg + 32), rg = w % 4, and on the half cg = w / 4 of the
// slice's columns. kPerKey (KDA): the q and k tiles come gated from the chunk kernel (no row factors) and
// each state row decays by its own channel's factor. kRecord (the GDN backward): no O and no final state; the
// state entering each chunk and U' go to rec instead.
template <class E, int BV, bool kPerKey, bool kRecord = false>
__global__ void __launch_bounds__(kPassThreads, 1)
    gdn_pass_kernel(const GdnFwdParams p, const Workspace ws, const PassRecord rec) {
  using M = Mma<E>;
  constexpr int kCw = BV / 2, kNt = kCw / 8, kLdV = BV + 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<PassSmem<E, BV>*>(smem_raw);
  if (*ws.flag == 0) return;
  const int hvs = static_cast<int>(p.value_heads);
  const PassCta cta = locate_pass_cta<BV>(p, ws);
  const int hv = cta.hv, h = cta.h, v0 = cta.v0, first = cta.first;
  const SeqInfo si = cta.si;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int rg = warp & 3, c0 = (warp >> 2) * kCw;
  const E* qb = static_cast<const E*>(p.q) + si.b * p.q_stride[0] + h * p.q_stride[2] + si.t0 * p.q_stride[1];
  const E* kb = static_cast<const E*>(p.k) + si.b * p.k_stride[0] + h * p.k_stride[2] + si.t0 * p.k_stride[1];
  E* ob =
      kRecord ? nullptr : static_cast<E*>(p.o) + si.b * p.o_stride[0] + hv * p.o_stride[2] + si.t0 * p.o_stride[1] + v0;

  auto load = [&](int lc, int stage) {
    PassStage<E, BV>& d = s.st[stage];
    const int64_t slot = static_cast<int64_t>(first + lc) * hvs + hv;
    load_pass_stage<E, BV, kPerKey>(d, p, ws, qb, kb, slot, lc, min(kC, si.len - lc * kC), tid);
    const E* u = static_cast<const E*>(ws.u) + slot * kC * kD + v0;
    for_each_piece<kC, BV, kPassThreads>(tid,
                                         [&](int r, int col) { cp16(&d.u[r * kLdV + col], u + r * kD + col, true); });
  };
  static_assert(2 * kC == kD);

  // The state: rows 32 rg + 16 mt + (lane / 4) (+ 8), columns v0 + c0 + 8 nt + 2 (lane % 4) (+ 1).
  float st[2][kNt][4];
  const int64_t state_at = (static_cast<int64_t>(si.row) * hvs + hv) * kD * kD + v0;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int key = rg * 32 + mt * 16 + (lane >> 2) + half * 8, col = c0 + nt * 8 + (lane & 3) * 2;
        float2 x = make_float2(0.f, 0.f);
        if (p.initial_state) x = *reinterpret_cast<const float2*>(&p.initial_state[state_at + key * kD + col]);
        st[mt][nt][half * 2] = x.x, st[mt][nt][half * 2 + 1] = x.y;
      }

  const int m0 = rg * 16;
  constexpr int kStages = kPassStages<BV>;
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) {
    if (c < si.chunks) load(c, c);
    cp_commit();  // empty groups keep the count uniform
  }
  for (int lc = 0; lc < si.chunks; ++lc) {
    const PassStage<E, BV>& d = s.st[lc % kStages];
    const float g_last = kPerKey ? 0.f : ws.glast[static_cast<int64_t>(first + lc) * hvs + hv];
    const int rows = min(kC, si.len - lc * kC);
    const int64_t rec_slot = static_cast<int64_t>(first + lc) * hvs + hv;
    // The state into sb: its last reader, chunk lc - 1's W S and Q S, finished before that chunk's U' barrier.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int key = rg * 32 + mt * 16 + (lane >> 2) + half * 8, col = c0 + nt * 8 + (lane & 3) * 2;
          const uint32_t packed = M::pack(st[mt][nt][half * 2], st[mt][nt][half * 2 + 1]);
          *reinterpret_cast<uint32_t*>(&s.sb[key * kLdV + col]) = packed;
          if constexpr (kRecord)
            *reinterpret_cast<uint32_t*>(static_cast<E*>(rec.h) + rec_slot * kD * kD + key * kD + v0 + col) = packed;
        }
    cp_wait<kStages - 2>();
    __syncthreads();  // chunk lc has landed and sb is whole; every warp is done with chunk lc - 1 and its stage
    if (lc + kStages - 1 < si.chunks) load(lc + kStages - 1, (lc + kStages - 1) % kStages);
    cp_commit();

    // W S and Q S for this warp's 16 token rows.
    float aw[kNt][4] = {}, aq[kNt][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < kD; k0 += 16) {
      uint32_t a_w[4], a_q[4];
      ldsm4(a_w, &d.w[sw(m0 + (lane & 15), k0 + (lane >> 4) * 8)]);
      if constexpr (!kRecord) ldsm4(a_q, &d.q[sw(m0 + (lane & 15), k0 + (lane >> 4) * 8)]);
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        uint32_t b[4];
        ldsm4_t(b, &s.sb[frag_b_kn(lane, k0, c0 + np * 16, kLdV)]);
        M::run(aw[2 * np], a_w, b[0], b[1]);
        M::run(aw[2 * np + 1], a_w, b[2], b[3]);
        if constexpr (!kRecord) {
          M::run(aq[2 * np], a_q, b[0], b[1]);
          M::run(aq[2 * np + 1], a_q, b[2], b[3]);
        }
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = m0 + (lane >> 2) + half * 8;
      const float qf = kPerKey ? 1.f : d.rowf[i], kf = kPerKey ? 1.f : d.rowf[kC + i];
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        const int col = c0 + nt * 8 + (lane & 3) * 2;
        const float u0 = M::to_float(d.u[i * kLdV + col]) - aw[nt][half * 2];
        const float u1 = M::to_float(d.u[i * kLdV + col + 1]) - aw[nt][half * 2 + 1];
        *reinterpret_cast<uint32_t*>(&s.ub[i * kLdV + col]) = M::pack(u0, u1);
        if constexpr (kRecord)
          *reinterpret_cast<uint32_t*>(static_cast<E*>(rec.vnew) + (rec_slot * kC + i) * kD + v0 + col) =
              M::pack(u0, u1);
        if constexpr (!kPerKey) {
          *reinterpret_cast<uint32_t*>(&s.ukb[i * kLdV + col]) = M::pack(kf * u0, kf * u1);
          aq[nt][half * 2] *= qf, aq[nt][half * 2 + 1] *= qf;
        }
      }
    }
    __syncthreads();

    // O = (scale exp(G) Q S) + P U' (P is causal: k-blocks past the warp's rows are zero).
#pragma unroll
    for (int k0 = 0; k0 < (kRecord ? 0 : kC); k0 += 16) {
      if (k0 > m0) break;
      uint32_t a[4];
      ldsm4(a, &d.p[frag_a(lane, m0, k0, kLdC)]);
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        uint32_t b[4];
        ldsm4_t(b, &s.ub[frag_b_kn(lane, k0, c0 + np * 16, kLdV)]);
        M::run(aq[2 * np], a, b[0], b[1]);
        M::run(aq[2 * np + 1], a, b[2], b[3]);
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = m0 + (lane >> 2) + half * 8;
      if (!kRecord && i < rows) {
        E* orow = ob + (static_cast<int64_t>(lc) * kC + i) * p.o_stride[1];
#pragma unroll
        for (int nt = 0; nt < kNt; ++nt)
          *reinterpret_cast<uint32_t*>(&orow[c0 + nt * 8 + (lane & 3) * 2]) =
              M::pack(aq[nt][half * 2], aq[nt][half * 2 + 1]);
      }
    }

    // S = exp(G_last) S + K^T (rows of U' times exp(G_last - G) rk); KDA: diag(exp(G_last)) S + Kd^T U'.
    if constexpr (kPerKey) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float decay = d.rowf[rg * 32 + mt * 16 + (lane >> 2) + half * 8];
#pragma unroll
          for (int nt = 0; nt < kNt; ++nt) st[mt][nt][half * 2] *= decay, st[mt][nt][half * 2 + 1] *= decay;
        }
    } else {
      const float decay = expf(g_last);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) st[mt][nt][e] *= decay;
    }
    const E* const ukb = kPerKey ? s.ub : s.ukb;
#pragma unroll
    for (int k0 = 0; k0 < kC; k0 += 16) {
      uint32_t a[2][4];
      const int row = k0 + (lane & 7) + (lane >> 4) * 8, col = rg * 32 + ((lane >> 3) & 1) * 8;
      ldsm4_t(a[0], &d.k[sw(row, col)]);
      ldsm4_t(a[1], &d.k[sw(row, col + 16)]);
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        uint32_t b[4];
        ldsm4_t(b, &ukb[frag_b_kn(lane, k0, c0 + np * 16, kLdV)]);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          M::run(st[mt][2 * np], a[mt], b[0], b[1]);
          M::run(st[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }

  if (!kRecord && p.final_state) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int key = rg * 32 + mt * 16 + (lane >> 2) + half * 8, col = c0 + nt * 8 + (lane & 3) * 2;
          *reinterpret_cast<float2*>(&p.final_state[state_at + key * kD + col]) =
              make_float2(st[mt][nt][half * 2], st[mt][nt][half * 2 + 1]);
        }
  }
}

}  // namespace frost::sm90::gdn
