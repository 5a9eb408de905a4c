// The GDN state pass on wgmma: one CTA per (sequence, value head, slice of kWG x 64 value columns) keeps its
// columns of the FP32 state in the registers of its kWG warpgroups (one or two) and runs every per-chunk product
// on the tensor cores with the state (rounded to 16 bits) as the register A operand. It reads q, k, v and, from
// the chunk kernel (gdn_chunk_kernel without kStoreWu), Tu = T diag(beta), P and the row factors, and forms U'
// itself: W and U are never written, so each chunk and head moves 48 KB less through HBM (128 KB instead of 176
// over both kernels). GDN's scalar decay only.
//
// The state is held transposed, St = S^T (value rows x key columns): warpgroup w owns value rows
// [v0 + 64 w, v0 + 64 w + 64), 64 FP32 registers per thread. Per chunk (Q, K: 64 tokens x 128 keys; V: 64
// tokens x 128 values; Tu, P: 64 x 64):
//   G1: A = St K^T  (value x token)              G2: B = St Q^T
//   X^T = V^T - A diag(wf) (wf = exp(G) rk per token column), 16-bit
//   G5: U'^T = X^T Tu^T (= U^T - St W^T); ub = U'^T, ukb = U'^T scaled by the key-row factors kf, both 16-bit
//   G3: St = exp(g_last) St + ukb K              (the chain to the next chunk: G1 -> X -> G5 -> G3)
//   G4: O^T = qf B + ub P^T                      (off the chain; qf per token column)
// O^T goes through shared memory (transposing stmatrix stores) to O's token rows. Loads are cp.async, kStages deep:
// with one state warpgroup a second one issues them ahead (full / empty mbarriers per stage), so the state's warps
// spend their instructions on the chain alone (one loading warp was too few: it could not keep up); with two state
// warpgroups their 255 registers fill the register file, and all threads issue the loads between the chunks.
// kRecord (the GDN backward's recording run): no G2, G4 or O; the state entering each chunk and U' go, rounded to
// 16 bits as the products use them, through shared memory to the PassRecord (the layout the mma.sync recording
// pass writes).
#pragma once
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_types.h>

#include <cute/atom/mma_atom.hpp>
#include <cute/tensor.hpp>

#include "engines/sm90/common/sm90_wgmma_fragments.cuh"
#include "engines/sm90/linear_attention/sm90_gdn_kernels.cuh"

namespace frost::sm90::gdn {

namespace wgmma_pass {

using namespace cute;

// CUTLASS's 16-bit types for the CUDA ones the family uses (same bits).
template <class E>
using CuteElem = cute::conditional_t<cute::is_same_v<E, __nv_bfloat16>, cutlass::bfloat16_t, cutlass::half_t>;

template <class E, int kWG_, bool kRecord_ = false>
struct Traits {
  static constexpr int kWG = kWG_;                 // warpgroups, 64 value rows each
  static constexpr bool kRecord = kRecord_;        // the backward's recording run
  static constexpr int kCols = 64 * kWG;           // value columns of the state this CTA owns
  static constexpr int kThreads = 128 * kWG;       // the state's warpgroups
  static constexpr bool kLoadingGroup = kWG == 1;  // a second warpgroup issues the loads
  static constexpr int kLoadThreads = 128;
  static constexpr int kCtaThreads = kThreads + (kLoadingGroup ? kLoadThreads : 0);
  static constexpr int kOBuffers = kLoadingGroup ? 2 : 1;  // O staging; two spare the barrier before its writes
  static constexpr int kLdV = kCols + 8;                   // V rows (read element by element)
  static constexpr int kLdO = kCols + 8;                   // O (or U') staging rows, one per token
  static constexpr int kLdH = kCols + 8;                   // state staging rows (kRecord), one per key
  static_assert(kWG == 1 || kWG == 2);
  using T = CuteElem<E>;
  using V = Int<kCols>;
  using AtomLayout = Layout<Shape<Int<kWG>, _1, _1>>;  // warpgroups stacked along the value rows
  // G1 / G2: (values) x (token 64) x (key 128), B = K or Q rows (tokens, keys contiguous): K-major.
  using MmaByKeys = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<V, _64, _128>, GMMA::Major::K, GMMA::Major::K>(), AtomLayout{}));
  // G4 / G5: (values) x (token i 64) x (token j 64), B = P or Tu rows (i, j contiguous): K-major.
  using MmaByTokens = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<V, _64, _64>, GMMA::Major::K, GMMA::Major::K>(), AtomLayout{}));
  // G3: (values) x (key 128) x (token 64), B = K rows (tokens, keys contiguous): MN-major.
  using MmaState = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<V, _128, _64>, GMMA::Major::K, GMMA::Major::MN>(), AtomLayout{}));

  using LayoutTokKey = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{}, Shape<_64, _128>{}));   // Q
  using LayoutKeyTok = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<T>{}, Shape<_128, _64>{}));  // K
  using LayoutTokTok = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{}, Shape<_64, _64>{}));    // P, Tu
  // The same K bytes as G1's K-major B (token, key): (t, k) -> LayoutKeyTok(k, t).
  using LayoutKeyTokAsTokKey = decltype(composition(LayoutKeyTok{}, Layout<Shape<_64, _128>, Stride<_128, _1>>{}));
  // Staging of the accumulators as 16-bit rows of values: (value, token) for O^T or U'^T, (value, key) for St.
  // stmatrix .trans writes 8 values of one row per lane; the 8-value padding puts the 8 rows of each store in
  // distinct banks.
  using LayoutValTok = Layout<Shape<V, _64>, Stride<_1, Int<kLdO>>>;
  using LayoutValKey = Layout<Shape<V, _128>, Stride<_1, Int<kLdH>>>;
  using StoreAtom = Copy_Atom<SM90_U16x8_STSM_T, T>;

  struct Stage {
    // Q and P feed O alone: placeholders in the recording run.
    cute::array_aligned<T, kRecord ? 8 : cosize_v<LayoutTokKey>, 1024> q;
    cute::array_aligned<T, cosize_v<LayoutKeyTok>, 1024> k;
    cute::array_aligned<T, kRecord ? 8 : cosize_v<LayoutTokTok>, 1024> p;
    cute::array_aligned<T, cosize_v<LayoutTokTok>, 1024> tu;
    cute::array_aligned<T, kC * kLdV, 16> v;      // this slice's value columns
    cute::array_aligned<float, 3 * kC, 16> rowf;  // qf for the 64 tokens, then kf, then wf
  };
  static constexpr int kStagingBytes = kOBuffers * (kC * kLdO + (kRecord ? kD * kLdH : 8)) * 2;
  // As deep as fits one CTA per SM (three stages: ~200 KB at 128 columns).
  static constexpr int kStages = (227 * 1024 - 1024 - kStagingBytes) / sizeof(Stage) >= 3 ? 3 : 2;
  struct Smem {
    Stage st[kStages];
    // O (or U') staging: this slice's value columns of the chunk's tokens.
    cute::array_aligned<T, kC * kLdO, 16> o[kOBuffers];
    // kRecord: the state entering the chunk, this slice's value columns of every key row.
    cute::array_aligned<T, kRecord ? kD * kLdH : 8, 16> h[kOBuffers];
    // With the loading warpgroup: a stage has landed / every state thread is done with it.
    uint64_t full[kStages], empty[kStages];
    // The CTA's first rows of q, k, v and o, read per chunk from here: in registers they cost the state's
    // warpgroups spills.
    const E *q_rows, *k_rows, *v_rows;
    E* o_rows;
  };
};

}  // namespace wgmma_pass

template <class E, int kWG, bool kRecord = false>
__global__ void __launch_bounds__(wgmma_pass::Traits<E, kWG, kRecord>::kCtaThreads, 1)
    gdn_pass_wgmma_kernel(const GdnFwdParams p, const Workspace ws, const PassRecord rec) {
  using namespace cute;
  using namespace wgmma_pass;
  using Tr = Traits<E, kWG, kRecord>;
  using T = typename Tr::T;
  using V = typename Tr::V;
  constexpr int kCols = Tr::kCols, kThreads = Tr::kThreads, kLdV = Tr::kLdV, kLdO = Tr::kLdO, kLdH = Tr::kLdH;
  constexpr int kStages = Tr::kStages;
  constexpr bool kLoadingGroup = Tr::kLoadingGroup;
  extern __shared__ __align__(1024) unsigned char smem_wgmma_pass[];
  auto& s = *reinterpret_cast<typename Tr::Smem*>(smem_wgmma_pass);
  if (*ws.flag == 0) return;
  const int hvs = static_cast<int>(p.value_heads);
  const PassCta cta = locate_pass_cta<kCols>(p, ws);
  const int hv = cta.hv, h = cta.h, v0 = cta.v0, first = cta.first;
  const SeqInfo si = cta.si;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    s.q_rows = static_cast<const E*>(p.q) + si.b * p.q_stride[0] + h * p.q_stride[2] + si.t0 * p.q_stride[1];
    s.k_rows = static_cast<const E*>(p.k) + si.b * p.k_stride[0] + h * p.k_stride[2] + si.t0 * p.k_stride[1];
    s.v_rows = static_cast<const E*>(p.v) + si.b * p.v_stride[0] + hv * p.v_stride[2] + si.t0 * p.v_stride[1] + v0;
    s.o_rows = kRecord ? nullptr
                       : static_cast<E*>(p.o) + si.b * p.o_stride[0] + hv * p.o_stride[2] + si.t0 * p.o_stride[1] + v0;
    if constexpr (kLoadingGroup) {
      for (int i = 0; i < kStages; ++i) {
        cutlass::arch::ClusterBarrier::init(&s.full[i], Tr::kLoadThreads);  // each loader's copies landed
        cutlass::arch::ClusterBarrier::init(&s.empty[i], kThreads);         // each state thread is done
      }
      cutlass::arch::fence_barrier_init();
    }
  }
  __syncthreads();

  // Chunk lc's tiles into stage `stage`, by kLoaders threads (ltid: this one's index among them).
  auto load = [&]<int kLoaders>(int lc, int stage, int ltid) {
    typename Tr::Stage& d = s.st[stage];
    Tensor sQ = make_tensor(make_smem_ptr(d.q.data()), typename Tr::LayoutTokKey{});
    Tensor sK = make_tensor(make_smem_ptr(d.k.data()), typename Tr::LayoutKeyTok{});
    Tensor sP = make_tensor(make_smem_ptr(d.p.data()), typename Tr::LayoutTokTok{});
    Tensor sTu = make_tensor(make_smem_ptr(d.tu.data()), typename Tr::LayoutTokTok{});
    const int rows = min(kC, si.len - lc * kC);
    const int64_t slot = static_cast<int64_t>(first + lc) * hvs + hv;
    [[maybe_unused]] const T* pp = static_cast<const T*>(ws.p) + slot * kC * kC;  // P and q: not when recording
    const T* tu = static_cast<const T*>(ws.tu) + slot * kC * kC;
    [[maybe_unused]] const E* qc = s.q_rows + static_cast<int64_t>(lc) * kC * p.q_stride[1];
    const E* kc = s.k_rows + static_cast<int64_t>(lc) * kC * p.k_stride[1];
    const E* vc = s.v_rows + static_cast<int64_t>(lc) * kC * p.v_stride[1];
    // Rows past the sequence land as zeros.
    for_each_piece<kC, kD, kLoaders>(ltid, [&](int r, int col) {
      const bool ok = r < rows;
      const int rr = ok ? r : 0;
      if constexpr (!kRecord) cp16(&sQ(r, col), qc + rr * p.q_stride[1] + col, ok);
      cp16(&sK(col, r), kc + rr * p.k_stride[1] + col, ok);
    });
    for_each_piece<kC, kCols, kLoaders>(ltid, [&](int r, int col) {  // this slice's value columns of V
      const bool ok = r < rows;
      cp16(&d.v[r * kLdV + col], vc + (ok ? r : 0) * p.v_stride[1] + col, ok);
    });
    for_each_piece<kC, kC, kLoaders>(ltid, [&](int r, int col) {
      if constexpr (!kRecord) cp16(&sP(r, col), pp + r * kC + col, true);
      cp16(&sTu(r, col), tu + r * kC + col, true);
    });
    if (ltid < 2 * kC / 4) cp16(&d.rowf[ltid * 4], ws.rowf + slot * 2 * kC + ltid * 4, true);
    if (ltid < kC / 4) cp16(&d.rowf[2 * kC + ltid * 4], ws.wf + slot * kC + ltid * 4, true);
  };

  if constexpr (kLoadingGroup) {
    if (tid >= kThreads) {  // the loading warpgroup: up to kStages chunks ahead of the state's
      const int ltid = tid - kThreads;
      for (int lc = 0; lc < si.chunks; ++lc) {
        const int stage = lc % kStages;
        if (lc >= kStages) cutlass::arch::ClusterBarrier::wait(&s.empty[stage], (lc / kStages - 1) & 1);
        if (ws.ready) {  // the chunk kernel runs at once: wait until it has stored this chunk
          const int32_t* ready = ws.ready + static_cast<int64_t>(first + lc) * hvs + hv;
          while (load_acquire(ready) == 0) {
          }
        }
        load.template operator()<Tr::kLoadThreads>(lc, stage, ltid);
        cutlass::arch::cpasync_barrier_arrive_noinc(&s.full[stage]);
      }
      cp_wait<0>();
      return;
    }
  }

  typename Tr::MmaByKeys mma_keys;
  typename Tr::MmaByTokens mma_tokens;
  typename Tr::MmaState mma_state;
  auto thr_keys = mma_keys.get_thread_slice(tid);
  auto thr_tokens = mma_tokens.get_thread_slice(tid);
  auto thr_state = mma_state.get_thread_slice(tid);

  // The state's slice St (value v0 + row, key) and where each of its values sits: S[key][value] in the state
  // tensors.
  Tensor st = partition_fragment_C(mma_state, Shape<V, _128>{});
  Tensor st_coord = thr_state.partition_C(make_identity_tensor(Shape<V, _128>{}));
  const int64_t state_at = (static_cast<int64_t>(si.row) * hvs + hv) * kD * kD + v0;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(st); ++i) {
    const int value = get<0>(st_coord(i)), key = get<1>(st_coord(i));
    st(i) = p.initial_state ? p.initial_state[state_at + key * kD + value] : 0.f;
  }

  // (value row, token) coordinates of the by-keys products' values (also the layout of G4's accumulator).
  Tensor vt_coord = thr_keys.partition_C(make_identity_tensor(Shape<V, _64>{}));
  // Accumulators to the staging rows: O^T or U'^T (value, token), St (value, key).
  auto tok_store = make_tiled_copy_C(typename Tr::StoreAtom{}, mma_tokens);
  auto key_store = make_tiled_copy_C(typename Tr::StoreAtom{}, mma_state);
  auto thr_tok_store = tok_store.get_thread_slice(tid);
  auto thr_key_store = key_store.get_thread_slice(tid);

  if constexpr (!kLoadingGroup) {
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kStages - 1; ++c) {
      if (c < si.chunks) load.template operator()<kThreads>(c, c, tid);
      cp_commit();
    }
  }
  for (int lc = 0; lc < si.chunks; ++lc) {
    const int stage = lc % kStages;
    typename Tr::Stage& d = s.st[stage];
    if constexpr (kLoadingGroup) {
      cutlass::arch::ClusterBarrier::wait(&s.full[stage], (lc / kStages) & 1);
      cutlass::arch::fence_view_async_shared();  // cp.async writes -> wgmma reads
    } else {
      cp_wait<kStages - 2>();
      cutlass::arch::fence_view_async_shared();
      __syncthreads();  // chunk lc has landed; every warp is done with chunk lc - 1, its stage and the O staging
      if (lc + kStages - 1 < si.chunks)
        load.template operator()<kThreads>(lc + kStages - 1, (lc + kStages - 1) % kStages, tid);
      cp_commit();
    }

    Tensor sQ = make_tensor(make_smem_ptr(d.q.data()), typename Tr::LayoutTokKey{});
    Tensor sK = make_tensor(make_smem_ptr(d.k.data()), typename Tr::LayoutKeyTok{});
    Tensor sKt = make_tensor(make_smem_ptr(d.k.data()), typename Tr::LayoutKeyTokAsTokKey{});
    Tensor sP = make_tensor(make_smem_ptr(d.p.data()), typename Tr::LayoutTokTok{});
    Tensor sTu = make_tensor(make_smem_ptr(d.tu.data()), typename Tr::LayoutTokTok{});
    const int buffer = lc % Tr::kOBuffers;
    Tensor sO = make_tensor(make_smem_ptr(s.o[buffer].data()), typename Tr::LayoutValTok{});

    // G1, G2 from the 16-bit state.
    Tensor st16 = make_tensor<T>(acc_as_a_operand(st.layout()));
    convert_fragment(st, st16);
    Tensor a = partition_fragment_C(mma_keys, Shape<V, _64>{});
    Tensor b = partition_fragment_C(mma_keys, Shape<V, _64>{});
    wg_gemm<true, -1, true>(mma_keys, st16, thr_keys.partition_fragment_B(sKt), a);
    if constexpr (!kRecord) wg_gemm<true, -1, true>(mma_keys, st16, thr_keys.partition_fragment_B(sQ), b);
    // V^T and wf into registers: with one state warpgroup while G1 runs (the wait below keeps shared memory reads
    // after it), so X^T waits on G1 alone; with two there are no registers to spare. kRecord: the state entering
    // the chunk, as G1 reads it, to its staging.
    float vt[size(a)], wf[size(a)];
    const auto read_v_wf = [&] {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(a); ++i) {
        const int value = get<0>(vt_coord(i)), token = get<1>(vt_coord(i));
        vt[i] = static_cast<float>(d.v[token * kLdV + value]), wf[i] = d.rowf[2 * kC + token];
      }
    };
    if constexpr (kLoadingGroup) read_v_wf();
    if constexpr (kRecord) {
      Tensor sH = make_tensor(make_smem_ptr(s.h[buffer].data()), typename Tr::LayoutValKey{});
      copy(key_store, thr_key_store.retile_S(make_tensor(st16.data(), st.layout())), thr_key_store.partition_D(sH));
    }
    warpgroup_wait<kRecord ? 0 : 1>();  // G1 has landed
    warpgroup_fence_operand(a);
    if constexpr (!kLoadingGroup) read_v_wf();

    // X^T = V^T - A diag(wf), 16-bit; G5: U'^T = X^T Tu^T (G2 lands too).
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(a); ++i) a(i) = vt[i] - a(i) * wf[i];
    Tensor x = make_tensor<T>(acc_as_a_operand(a.layout()));
    convert_fragment(a, x);
    Tensor un = partition_fragment_C(mma_tokens, Shape<V, _64>{});
    float kf[size(un)];  // read before G5, so that the scaling below waits on G5 alone
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(un); ++i) kf[i] = d.rowf[kC + get<1>(vt_coord(i))];
    wg_gemm<true, 0, true>(mma_tokens, x, thr_tokens.partition_fragment_B(sTu), un);
    if constexpr (!kRecord) warpgroup_fence_operand(b);

    // ub = U'^T and ukb (times kf of the token column), 16-bit.
    Tensor ub = make_tensor<T>(acc_as_a_operand(un.layout()));
    Tensor ukb = make_tensor<T>(acc_as_a_operand(un.layout()));
    convert_fragment(un, ub);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(un); ++i) un(i) *= kf[i];
    convert_fragment(un, ukb);

    // G3: St = exp(g_last) St + ukb K.
    // Through L2 (the chunk kernel may have written it after this SM cached its line).
    const float decay = expf(__ldcg(&ws.glast[static_cast<int64_t>(first + lc) * hvs + hv]));
    warpgroup_fence_operand(st);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(st); ++i) st(i) *= decay;
    wg_gemm<false, -1, true>(mma_state, ukb, thr_state.partition_fragment_B(sK), st);

    if constexpr (kRecord) {  // while G3 runs: U'^T to its staging
      copy(tok_store, thr_tok_store.retile_S(make_tensor(ub.data(), un.layout())), thr_tok_store.partition_D(sO));
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(b); ++i) b(i) *= d.rowf[get<1>(vt_coord(i))];
      // G4: O^T = qf B + ub P^T (P is causal: zeros above its diagonal).
      wg_gemm<false, -1, true>(mma_tokens, ub, thr_tokens.partition_fragment_B(sP), b);
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(st);
    if constexpr (!kRecord) warpgroup_fence_operand(b);
    if constexpr (kLoadingGroup) cutlass::arch::ClusterBarrier::arrive(&s.empty[stage]);  // the stage's last read

    // Staged rows out, 16 bytes at a time. With two staging buffers a thread writing one has passed the barrier
    // after every thread's copy-out of the other's last use.
    if constexpr (!kRecord) {
      Tensor o16 = make_tensor<T>(b.layout());
      convert_fragment(b, o16);
      copy(tok_store, thr_tok_store.retile_S(o16), thr_tok_store.partition_D(sO));
    }
    if constexpr (kLoadingGroup)
      cutlass::arch::NamedBarrier::sync(kThreads, 0);  // the state's warpgroup only
    else
      __syncthreads();
    const T* const o = s.o[buffer].data();
    if constexpr (kRecord) {  // U' (every row: zero past the sequence) and the state entering the chunk
      const int64_t slot = static_cast<int64_t>(first + lc) * hvs + hv;
      E* const uc = static_cast<E*>(rec.vnew) + slot * kC * kD + v0;
      E* const hc = static_cast<E*>(rec.h) + slot * kD * kD + v0;
      const T* const hs = s.h[buffer].data();
      for_each_piece<kC, kCols, kThreads>(tid, [&](int r, int col) {
        *reinterpret_cast<uint4*>(uc + r * kD + col) = *reinterpret_cast<const uint4*>(&o[r * kLdO + col]);
      });
      for_each_piece<kD, kCols, kThreads>(tid, [&](int r, int col) {
        *reinterpret_cast<uint4*>(hc + r * kD + col) = *reinterpret_cast<const uint4*>(&hs[r * kLdH + col]);
      });
    } else {  // O's token rows; rows past the sequence are not written
      const int rows = min(kC, si.len - lc * kC);
      E* const oc = s.o_rows + static_cast<int64_t>(lc) * kC * p.o_stride[1];
      for_each_piece<kC, kCols, kThreads>(tid, [&](int r, int col) {
        if (r < rows)
          *reinterpret_cast<uint4*>(oc + r * p.o_stride[1] + col) = *reinterpret_cast<const uint4*>(&o[r * kLdO + col]);
      });
    }
  }

  if (!kRecord && p.final_state) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(st); ++i) {
      const int value = get<0>(st_coord(i)), key = get<1>(st_coord(i));
      p.final_state[state_at + key * kD + value] = st(i);
    }
  }
}

}  // namespace frost::sm90::gdn
