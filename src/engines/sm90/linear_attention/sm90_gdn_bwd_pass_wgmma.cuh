// The GDN backward's reverse state pass on wgmma: one CTA per (sequence, value head, kWG x 64 of the 128 value
// columns), chunks last to first, dS (the gradient of the state leaving the chunk) held transposed, dSt = dS^T
// (value rows x key columns), in the FP32 registers of kWG warpgroups (64 value rows each); one more warpgroup
// issues the loads for all of them. The products of sm90_gdn_bwd_kernels.cuh's mma.sync pass, transposed (K~ =
// diag(kf) K and Q~ = diag(qf) Q, the row factors folded in by the loaders once a stage has landed):
//   R2: U = dO^T P                    (dO, P from shared memory)
//   R1: U += dSt K~^T                 (dSt rounded to 16 bits as the register A operand)  -> U = dU'^T
//   dSt = exp(g_last) dSt
//   R3: dSt += dO^T Q~                (both from shared memory)
//   R4: dSt -= dU'^T W                (dU'^T rounded to 16 bits as the register A operand)
// The chain from one chunk's dS to the next's is R1 -> R4; R2 and R3 do not depend on dS. dS as R1 reads it and
// dU' go, through transposing stmatrix stores into shared memory, to the workspace in the layout of the mma.sync
// pass (BwdWs::dh, BwdWs::dv2), so the chunk gradient kernel reads either. GDN's scalar decay only.
#pragma once
#include "engines/sm90/linear_attention/sm90_gdn_bwd_kernels.cuh"
#include "engines/sm90/linear_attention/sm90_gdn_pass_wgmma.cuh"

namespace frost::sm90::gdn {

namespace wgmma_reverse {

using namespace cute;

template <class E, int kWG_>
struct Traits {
  static constexpr int kWG = kWG_;            // dS's warpgroups, 64 value rows each
  static constexpr int kCols = 64 * kWG;      // value columns of dS this CTA owns
  static constexpr int kThreads = 128 * kWG;  // dS's warpgroups
  static constexpr int kLoadThreads = 128;    // the loading warpgroup
  static constexpr int kCtaThreads = kThreads + kLoadThreads;
  static_assert(kWG == 1 || kWG == 2);
  static constexpr int kLdS = kCols + 8;  // staging rows (8 values of padding: see wgmma_pass::Traits)
  using T = wgmma_pass::CuteElem<E>;
  using V = Int<kCols>;
  using AtomLayout = Layout<Shape<Int<kWG>, _1, _1>>;  // warpgroups stacked along the value rows
  // R1: (values) x (token 64) x (key 128), A = dSt in registers, B = K~ rows (tokens, keys contiguous).
  using MmaByKeys = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<V, _64, _128>, GMMA::Major::K, GMMA::Major::K>(), AtomLayout{}));
  // R2: (values) x (token j 64) x (token i 64), A = dO (values contiguous), B = P (j contiguous).
  using MmaGradP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<T, T, float, Shape<V, _64, _64>, GMMA::Major::MN, GMMA::Major::MN>(), AtomLayout{}));
  // R3: (values) x (key 128) x (token 64), A = dO, B = Q~ rows (keys contiguous).
  using MmaGradQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<T, T, float, Shape<V, _128, _64>, GMMA::Major::MN, GMMA::Major::MN>(), AtomLayout{}));
  // R4: (values) x (key 128) x (token 64), A = -dU'^T in registers, B = W rows (keys contiguous).
  using MmaState = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<V, _128, _64>, GMMA::Major::K, GMMA::Major::MN>(), AtomLayout{}));

  using LayoutTokKey = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{}, Shape<_64, _128>{}));   // K~
  using LayoutKeyTok = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<T>{}, Shape<_128, _64>{}));  // Q~, W
  using LayoutValTok = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<T>{}, Shape<V, _64>{}));     // dO
  using LayoutTokTok = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<T>{}, Shape<_64, _64>{}));   // P (j, i)
  // Staging of dU'^T (value, token) and dSt (value, key) as 16-bit rows of values.
  using StagingValTok = Layout<Shape<V, _64>, Stride<_1, Int<kLdS>>>;
  using StagingValKey = Layout<Shape<V, _128>, Stride<_1, Int<kLdS>>>;
  using StoreAtom = Copy_Atom<SM90_U16x8_STSM_T, T>;

  struct Stage {
    cute::array_aligned<T, cosize_v<LayoutTokKey>, 1024> k;
    cute::array_aligned<T, cosize_v<LayoutKeyTok>, 1024> q, w;
    cute::array_aligned<T, cosize_v<LayoutValTok>, 1024> dout;
    cute::array_aligned<T, cosize_v<LayoutTokTok>, 1024> p;
    alignas(16) float rowf[2 * kC];  // the chunk's qf, then kf: read from here, a global read per piece would wait
  };
  static constexpr int kStagingBytes = (kC + kD) * kLdS * 2;
  static constexpr int kStages = (227 * 1024 - 1024 - kStagingBytes) / sizeof(Stage) >= 3 ? 3 : 2;
  struct Smem {
    Stage st[kStages];
    // One staging buffer: dU'^T of the chunk's tokens, then dSt of every key row.
    cute::array_aligned<T, kC * kLdS, 16> du;
    cute::array_aligned<T, kD * kLdS, 16> ds;
    // A stage has landed and been scaled / every state thread is done with it.
    uint64_t full[kStages], empty[kStages];
  };
};

// The 8 16-bit values of a 16-byte piece times f.
template <class E>
__device__ __forceinline__ uint4 scaled(uint4 x, float f) {
  uint32_t* w = reinterpret_cast<uint32_t*>(&x);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = Mma<E>::unpack(w[i]);
    w[i] = Mma<E>::pack(v.x * f, v.y * f);
  }
  return x;
}

}  // namespace wgmma_reverse

template <class E, int kWG>
__global__ void __launch_bounds__(wgmma_reverse::Traits<E, kWG>::kCtaThreads, 1)
    gdn_bwd_pass_wgmma_kernel(const GdnBwdParams bp, const Workspace ws, const BwdWs bw) {
  using namespace cute;
  using Tr = wgmma_reverse::Traits<E, kWG>;
  using T = typename Tr::T;
  using V = typename Tr::V;
  constexpr int kCols = Tr::kCols, kThreads = Tr::kThreads, kLdS = Tr::kLdS, kStages = Tr::kStages;
  extern __shared__ __align__(1024) unsigned char smem_reverse_pass[];
  auto& s = *reinterpret_cast<typename Tr::Smem*>(smem_reverse_pass);
  const GdnFwdParams& p = bp.fwd;
  // Every CTA of this grid is resident: a gradient kernel launched behind it (GdnPlan::grad_overlap) may take the
  // SMs left, and wait on bw.reversed for chunks these CTAs are sure to finish.
  allow_dependent_launch();
  if (*ws.flag == 0) return;
  const int hvs = static_cast<int>(p.value_heads);
  const PassCta cta = locate_pass_cta<kCols>(p, ws);
  const int hv = cta.hv, h = cta.h, v0 = cta.v0, first = cta.first;
  const SeqInfo si = cta.si;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    for (int i = 0; i < kStages; ++i) {
      cutlass::arch::ClusterBarrier::init(&s.full[i], Tr::kLoadThreads);  // each loader's stores are done
      cutlass::arch::ClusterBarrier::init(&s.empty[i], kThreads);         // each state thread is done
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (tid >= kThreads) {  // the loading warpgroup: up to kStages chunks ahead, last chunk first
    const int ltid = tid - kThreads;
    const E* qb = static_cast<const E*>(p.q) + si.b * p.q_stride[0] + h * p.q_stride[2] + si.t0 * p.q_stride[1];
    const E* kb = static_cast<const E*>(p.k) + si.b * p.k_stride[0] + h * p.k_stride[2] + si.t0 * p.k_stride[1];
    const E* dob =
        static_cast<const E*>(bp.d_o) + si.b * bp.do_stride[0] + hv * bp.do_stride[2] + si.t0 * bp.do_stride[1] + v0;
    // Chunk `it` (from the last) into its stage: the copies, then, once they have landed, the row factors.
    const auto stage_tiles = [&](int it) {
      typename Tr::Stage& d = s.st[it % kStages];
      return make_tuple(make_tensor(make_smem_ptr(d.k.data()), typename Tr::LayoutTokKey{}),
                        make_tensor(make_smem_ptr(d.q.data()), typename Tr::LayoutKeyTok{}),
                        make_tensor(make_smem_ptr(d.w.data()), typename Tr::LayoutKeyTok{}),
                        make_tensor(make_smem_ptr(d.dout.data()), typename Tr::LayoutValTok{}),
                        make_tensor(make_smem_ptr(d.p.data()), typename Tr::LayoutTokTok{}));
    };
    const auto slot_of = [&](int it) { return static_cast<int64_t>(first + si.chunks - 1 - it) * hvs + hv; };
    const auto copy_in = [&](int it) {
      auto [sK, sQ, sW, sDO, sP] = stage_tiles(it);
      const int lc = si.chunks - 1 - it, rows = min(kC, si.len - lc * kC);
      const int64_t slot = slot_of(it);
      const E* qc = qb + static_cast<int64_t>(lc) * kC * p.q_stride[1];
      const E* kc = kb + static_cast<int64_t>(lc) * kC * p.k_stride[1];
      const E* doc = dob + static_cast<int64_t>(lc) * kC * bp.do_stride[1];
      const E* wc = static_cast<const E*>(ws.w) + slot * kC * kD;
      const E* pc = static_cast<const E*>(ws.p) + slot * kC * kC;
      // Rows past the sequence land as zeros (W's and P's are zero already).
      for_each_piece<kC, kD, Tr::kLoadThreads>(ltid, [&](int r, int col) {
        const bool ok = r < rows;
        const int rr = ok ? r : 0;
        cp16(&sK(r, col), kc + rr * p.k_stride[1] + col, ok);
        cp16(&sQ(col, r), qc + rr * p.q_stride[1] + col, ok);
        cp16(&sW(col, r), wc + r * kD + col, true);
      });
      for_each_piece<kC, kCols, Tr::kLoadThreads>(ltid, [&](int r, int col) {
        const bool ok = r < rows;
        cp16(&sDO(col, r), doc + (ok ? r : 0) * bp.do_stride[1] + col, ok);
      });
      for_each_piece<kC, kC, Tr::kLoadThreads>(ltid,
                                               [&](int r, int col) { cp16(&sP(col, r), pc + r * kC + col, true); });
      if (ltid < 2 * kC / 4) cp16(&s.st[it % kStages].rowf[ltid * 4], ws.rowf + slot * 2 * kC + ltid * 4, true);
      cp_commit();
    };
    // K~ = diag(kf) K and Q~ = diag(qf) Q, once every loader's copies have landed (the row factors come from other
    // threads' copies); then the stage is full. A loader reads all of its pieces before it writes any back, so that
    // the reads overlap: the compiler cannot move a read above a write to another tile of the same stage.
    const auto finish = [&](int it) {
      auto [sK, sQ, sW, sDO, sP] = stage_tiles(it);
      const float* rowf = s.st[it % kStages].rowf;
      cutlass::arch::NamedBarrier::sync(Tr::kLoadThreads, 1);
      constexpr int kPerRow = kD / 8, kStep = Tr::kLoadThreads / kPerRow, kPieces = kC / kStep;
      const int r0 = ltid / kPerRow, col = ltid % kPerRow * 8;
      // In batches that fit beside the state warpgroups' registers (two of them leave the loaders fewer).
      constexpr int kBatch = kWG == 1 ? kPieces : kPieces / 2;
#pragma unroll
      for (int j0 = 0; j0 < kPieces; j0 += kBatch) {
        uint4 kx[kBatch], qx[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          kx[j] = *reinterpret_cast<const uint4*>(&sK(r0 + (j0 + j) * kStep, col));
          qx[j] = *reinterpret_cast<const uint4*>(&sQ(col, r0 + (j0 + j) * kStep));
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int r = r0 + (j0 + j) * kStep;
          *reinterpret_cast<uint4*>(&sK(r, col)) = wgmma_reverse::scaled<E>(kx[j], rowf[kC + r]);
          *reinterpret_cast<uint4*>(&sQ(col, r)) = wgmma_reverse::scaled<E>(qx[j], rowf[r]);
        }
      }
      cutlass::arch::fence_view_async_shared();  // the stage's writes -> the state warpgroup's wgmma reads
      cutlass::arch::ClusterBarrier::arrive(&s.full[it % kStages]);
    };
    // One chunk's copies stay in flight while the previous chunk is scaled.
    for (int it = 0; it < si.chunks; ++it) {
      if (it >= kStages) cutlass::arch::ClusterBarrier::wait(&s.empty[it % kStages], (it / kStages - 1) & 1);
      copy_in(it);
      if (it > 0) {
        cp_wait<1>();
        finish(it - 1);
      }
    }
    if (si.chunks > 0) {
      cp_wait<0>();
      finish(si.chunks - 1);
    }
    return;
  }

  typename Tr::MmaByKeys mma_keys;
  typename Tr::MmaGradP mma_grad_p;
  typename Tr::MmaGradQ mma_grad_q;
  typename Tr::MmaState mma_state;
  auto thr_keys = mma_keys.get_thread_slice(tid);
  auto thr_grad_p = mma_grad_p.get_thread_slice(tid);
  auto thr_grad_q = mma_grad_q.get_thread_slice(tid);
  auto thr_state = mma_state.get_thread_slice(tid);
  auto du_store = make_tiled_copy_C(typename Tr::StoreAtom{}, mma_keys);
  auto ds_store = make_tiled_copy_C(typename Tr::StoreAtom{}, mma_state);
  auto thr_du_store = du_store.get_thread_slice(tid);
  auto thr_ds_store = ds_store.get_thread_slice(tid);
  Tensor sDU = make_tensor(make_smem_ptr(s.du.data()), typename Tr::StagingValTok{});
  Tensor sDS = make_tensor(make_smem_ptr(s.ds.data()), typename Tr::StagingValKey{});

  // dSt (value v0 + row, key) and where each of its values sits: dS[key][value] in the state tensors.
  Tensor dst = partition_fragment_C(mma_state, Shape<V, _128>{});
  Tensor dst_coord = thr_state.partition_C(make_identity_tensor(Shape<V, _128>{}));
  const int64_t state_at = (static_cast<int64_t>(si.row) * hvs + hv) * kD * kD + v0;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(dst); ++i) {
    const int value = get<0>(dst_coord(i)), key = get<1>(dst_coord(i));
    dst(i) = bp.d_final_state ? bp.d_final_state[state_at + key * kD + value] : 0.f;
  }

  // Once a barrier has ordered every state thread's stores of a chunk before it: that chunk's flag for the gradient
  // kernel running beside this pass.
  const auto release_reversed = [&](int64_t slot, bool on) {
    fence_add_release_if(on && bw.reversed && tid == 0, bw.reversed + slot, kCols);
  };
  // Each chunk's log decay is read one chunk ahead, so that its latency stays off the chain.
  const auto glast_of = [&](int it) {
    return __ldcg(&ws.glast[static_cast<int64_t>(first + si.chunks - 1 - it) * hvs + hv]);
  };
  float glast = si.chunks > 0 ? glast_of(0) : 0.f;
  for (int it = 0; it < si.chunks; ++it) {
    const int lc = si.chunks - 1 - it, stage = it % kStages;
    const int64_t slot = static_cast<int64_t>(first + lc) * hvs + hv;
    const float decay = expf(glast);
    glast = glast_of(min(it + 1, si.chunks - 1));  // no branch: one with wgmma in flight serializes them (C7518)
    typename Tr::Stage& d = s.st[stage];
    Tensor sK = make_tensor(make_smem_ptr(d.k.data()), typename Tr::LayoutTokKey{});
    Tensor sQ = make_tensor(make_smem_ptr(d.q.data()), typename Tr::LayoutKeyTok{});
    Tensor sW = make_tensor(make_smem_ptr(d.w.data()), typename Tr::LayoutKeyTok{});
    Tensor sDO = make_tensor(make_smem_ptr(d.dout.data()), typename Tr::LayoutValTok{});
    Tensor sP = make_tensor(make_smem_ptr(d.p.data()), typename Tr::LayoutTokTok{});

    // dS as R1 reads it, 16-bit, to the staging once every thread has copied the previous chunk's out; then the
    // decay, while no wgmma runs (reading an accumulator with one in flight makes ptxas serialize them all).
    Tensor dst16 = make_tensor<T>(acc_as_a_operand(dst.layout()));
    convert_fragment(dst, dst16);
    cutlass::arch::NamedBarrier::sync(kThreads, 0);
    release_reversed(slot + hvs, it > 0);  // every thread's stores of the chunk after this one are issued
    copy(ds_store, thr_ds_store.retile_S(make_tensor(dst16.data(), dst.layout())), thr_ds_store.partition_D(sDS));
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(dst); ++i) dst(i) *= decay;

    cutlass::arch::ClusterBarrier::wait(&s.full[stage], (it / kStages) & 1);
    cutlass::arch::fence_view_async_shared();
    // R2, R1: dU'^T; R3 into dSt behind them.
    Tensor u = partition_fragment_C(mma_keys, Shape<V, _64>{});
    wg_gemm<true, -1, false>(mma_grad_p, thr_grad_p.partition_fragment_A(sDO), thr_grad_p.partition_fragment_B(sP), u);
    wg_gemm<false, -1, true>(mma_keys, dst16, thr_keys.partition_fragment_B(sK), u);
    wg_gemm<false, -1, false>(mma_grad_q, thr_grad_q.partition_fragment_A(sDO), thr_grad_q.partition_fragment_B(sQ),
                              dst);
    warpgroup_wait<1>();  // R2 and R1 have landed (R3 runs on)
    warpgroup_fence_operand(u);

    // R4: dSt -= dU'^T W; dU'^T to the staging while it runs.
    Tensor ub = make_tensor<T>(acc_as_a_operand(u.layout()));
    convert_fragment(u, ub);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(u); ++i) u(i) = -u(i);
    Tensor nub = make_tensor<T>(acc_as_a_operand(u.layout()));
    convert_fragment(u, nub);
    wg_gemm<false, -1, true>(mma_state, nub, thr_state.partition_fragment_B(sW), dst);
    copy(du_store, thr_du_store.retile_S(make_tensor(ub.data(), u.layout())), thr_du_store.partition_D(sDU));
    warpgroup_wait<0>();
    warpgroup_fence_operand(dst);
    cutlass::arch::ClusterBarrier::arrive(&s.empty[stage]);  // the stage's last read

    // dS and dU' out in 16-byte rows (every row of dU': zero past the sequence).
    cutlass::arch::NamedBarrier::sync(kThreads, 0);
    E* const dh = static_cast<E*>(bw.dh) + slot * kD * kD + v0;
    E* const dv = static_cast<E*>(bw.dv2) + slot * kC * kD + v0;
    for_each_piece<kD, kCols, kThreads>(tid, [&](int r, int col) {
      *reinterpret_cast<uint4*>(dh + r * kD + col) = *reinterpret_cast<const uint4*>(&s.ds[r * kLdS + col]);
    });
    for_each_piece<kC, kCols, kThreads>(tid, [&](int r, int col) {
      *reinterpret_cast<uint4*>(dv + r * kD + col) = *reinterpret_cast<const uint4*>(&s.du[r * kLdS + col]);
    });
  }

  if (si.chunks > 0) {
    cutlass::arch::NamedBarrier::sync(kThreads, 0);
    release_reversed(static_cast<int64_t>(first) * hvs + hv, true);
  }
  if (bp.d_initial_state) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(dst); ++i) {
      const int value = get<0>(dst_coord(i)), key = get<1>(dst_coord(i));
      bp.d_initial_state[state_at + key * kD + value] = dst(i);
    }
  }
}

}  // namespace frost::sm90::gdn
