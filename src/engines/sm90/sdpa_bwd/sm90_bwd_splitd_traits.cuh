// Compile-time configuration of the split-d attention backward (large head dims: d_qk = d_v = 256, d_qk 192 with
// d_v 128), where a warpgroup cannot hold 64 x d FP32 accumulators of both dK and dV.
#pragma once
#include "sm90_bwd_kernel_traits.cuh"

namespace frost::sm90::bwd {

using namespace cute;

// One CTA owns 64 keys (kBlockN) of one (batch, kv head) and walks 64-row query blocks, as in BwdTraits, but the two
// consumer warpgroups split the work differently:
//   S^T = K Q^T and dP^T = V dO^T   (SS, 64 keys x 64 queries): each warpgroup computes 32 of the queries
//   P^T, dS^T                       -> 16 bits -> shared memory (stmatrix), one barrier: both halves visible
//   dV += P^T dO, dK += dS^T Q      (SS, A = P^T / dS^T from smem): each warpgroup owns half of d_v / d
//   dQ  = dS K                      (SS): each warpgroup computes half of d, added into the FP32 workspace straight
//                                   from registers (vector red.add; no smem buffer, no writer warp)
// Registers per consumer thread (240): dK 64*d/256 + dV 64*d_v/256 + one dQ chunk at the peak (d256: 64 + 64 + 32;
// 192/128: 48 + 32 + 48), S^T and dP^T 2 x 16 only before it (dead once P^T / dS^T are in smem).
// Shared memory (bytes): K 64*d*2, V 64*d_v*2, Q and dO 2 stages of 64*d*2 / 64*d_v*2, P^T and dS^T 2 stages each
// of 64*64*2, statistics 2 * 2 * 64*4:
//   d256:    32K + 32K + 64K + 64K + 16K + 16K + 1K = 225K (sizeof with barriers and 1K alignment: 231424 bytes,
//            226K of 227K)
//   192/128: 24K + 16K + 48K + 32K + 16K + 16K + 1K = 153K (sizeof: 157696 bytes, 154K)
// P^T and dS^T have two buffers each, reused under the rule of BwdConsumer (one barrier per step suffices).
// kRoles (knob WARP_SPEC_CFG 2) changes only the first half of the step: warpgroup 0 computes all of S^T and P^T,
// warpgroup 1 all of dP^T and dS^T (64 keys x 64 queries each, N = 64 instead of two N = 32 halves that each read
// all of K or V from smem); P^T reaches warpgroup 1 through its smem buffer.
// kDeterministic (WARP_SPEC_CFG 1 only): the dQ adds of the key blocks land in a fixed order (BwdConsumerSplitD's
// turns); a separate instantiation, so the default kernel's loop keeps its code.
template <int kHeadDim_, int kHeadDimV_, class Element_, bool kRoles_ = false, bool kDeterministic_ = false>
struct BwdTraitsSplitD {
  using Element = Element_;
  using ElementAccum = float;
  static constexpr bool kSplitD = true;
  static constexpr bool kDqViaSmem = false;
  static constexpr bool kRoles = kRoles_;
  static constexpr bool kDeterministic = kDeterministic_;
  static_assert(!(kRoles && kDeterministic), "the deterministic order is built for WARP_SPEC_CFG 1");
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = 64;
  static constexpr int kStages = 2;
  static constexpr int kNumMmaWG = 2;
  static constexpr int kNumMmaThreads = kNumMmaWG * 128;
  static constexpr int kNumThreads = kNumMmaThreads + 128;
  static constexpr int kProducerRegs = 24;  // see BwdTraits: 128 * (168 - 24) = 256 * (240 - 168)
  static constexpr int kConsumerRegs = 240;
  static_assert(kHeadDim % 64 == 0 && kHeadDimV % 64 == 0, "head dims fill whole swizzle rows");
  static_assert((kHeadDim / 2) % 32 == 0 && (kHeadDimV / 2) % 32 == 0, "each warpgroup's half of d fills atoms");

  // The wgmmas that read a half of d as an MN-major B operand need the half to start on a swizzle atom: 128-byte
  // swizzle (64 elements) when the half is a multiple of 64, else 64-byte swizzle (32 elements; d = 192).
  template <int kDim>
  using AtomFor =
      std::conditional_t<(kDim / 2) % 64 == 0, GMMA::Layout_K_SW128_Atom<Element>, GMMA::Layout_K_SW64_Atom<Element>>;
  using SmemAtomQK = AtomFor<kHeadDim>;
  using SmemAtomV = AtomFor<kHeadDimV>;

  using TiledMmaSdP =
      decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, ElementAccum, Shape<_64, _32, Int<kHeadDim>>>(),
                              Layout<Shape<_1, _2, _1>>{}));
  // kRoles: one warpgroup per product, 64 keys x 64 queries (thread index within the warpgroup).
  using TiledMmaSdPRole =
      decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, ElementAccum, Shape<_64, _64, Int<kHeadDim>>>(),
                              Layout<Shape<_1, _1, _1>>{}));
  using TiledMmadK =
      decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, ElementAccum, Shape<_64, Int<kHeadDim / 2>, _64>,
                                                   GMMA::Major::K, GMMA::Major::MN>(),
                              Layout<Shape<_1, _2, _1>>{}));
  using TiledMmadV =
      decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, ElementAccum, Shape<_64, Int<kHeadDimV / 2>, _64>,
                                                   GMMA::Major::K, GMMA::Major::MN>(),
                              Layout<Shape<_1, _2, _1>>{}));
  // dQ in kDqChunks column chunks (each warpgroup half of each), one after the other, so that only one chunk's
  // accumulator is live beside dK and dV: d256 in two (64 + 64 + 32 registers instead of 64 + 64 + 64, which spilled
  // 768 bytes and serialized the wgmmas); d192 in one (its 96-column half is no multiple of a swizzle atom's 64).
  static constexpr int kDqChunks = (kHeadDim / 2) % 128 == 0 ? 2 : 1;
  static constexpr int kDqChunkCols = kHeadDim / kDqChunks;
  using TiledMmadQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, ElementAccum, Shape<_64, Int<kDqChunkCols / 2>, _64>, GMMA::Major::MN,
                           GMMA::Major::MN>(),
      Layout<Shape<_1, _2, _1>>{}));

  using SmemLayoutQ = decltype(tile_to_shape(SmemAtomQK{}, Shape<Int<kBlockM>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutdO = decltype(tile_to_shape(SmemAtomV{}, Shape<Int<kBlockM>, Int<kHeadDimV>, Int<kStages>>{}));
  using SmemLayoutK = decltype(tile_to_shape(SmemAtomQK{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  using SmemLayoutV = decltype(tile_to_shape(SmemAtomV{}, Shape<Int<kBlockN>, Int<kHeadDimV>>{}));
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockM>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  using SmemLayoutdOt = decltype(composition(
      SmemLayoutdO{}, make_ordered_layout(Shape<Int<kHeadDimV>, Int<kBlockM>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  using SmemLayoutKt =
      decltype(composition(SmemLayoutK{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{})));
  // P^T and dS^T as computed (keys x queries, queries contiguous); dS is the (queries, keys) view for dQ.
  using SmemLayoutPt =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<Int<kBlockN>, Int<kBlockM>, Int<kStages>>{}));
  using SmemLayoutdSt = SmemLayoutPt;
  using SmemLayoutdS = decltype(composition(
      SmemLayoutdSt{}, make_ordered_layout(Shape<Int<kBlockM>, Int<kBlockN>, Int<kStages>>{}, Step<_2, _1, _3>{})));

  using SmemCopyAtom = Copy_Atom<SM90_U32x4_STSM_N, Element>;
  using SmemLoadAtom = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  using PipelineState = typename Pipeline::PipelineState;

  // dQ partials in the workspace, fragment order as in BwdTraits (the post-kernel reads them the same way).
  static constexpr int kDqHalf = kBlockM * kHeadDim / kNumMmaWG;
  static constexpr int kDqFrag = kDqHalf / 128;
  static_assert(kDqFrag % 4 == 0);

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> smem_k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> smem_v;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> smem_q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutdO>, 1024> smem_do;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutPt>, 1024> smem_p;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutdSt>, 1024> smem_ds;
    cute::array_aligned<float, kBlockM * kStages, 128> smem_lse;
    cute::array_aligned<float, kBlockM * kStages, 128> smem_delta;
    alignas(16) cutlass::arch::ClusterTransactionBarrier barrier_kv;
    typename Pipeline::SharedStorage pipeline_q;
    typename Pipeline::SharedStorage pipeline_do;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "shared memory over the 227 KB a CTA can hold");

  static constexpr uint32_t kTmaBytesQ = uint32_t(kBlockM * kHeadDim * sizeof(Element) + kBlockM * sizeof(float));
  static constexpr uint32_t kTmaBytesdO = uint32_t(kBlockM * kHeadDimV * sizeof(Element) + kBlockM * sizeof(float));
  static constexpr uint32_t kTmaBytesKV = uint32_t(kBlockN * (kHeadDim + kHeadDimV) * sizeof(Element));

  using ShapeT = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using StrideT = cute::Stride<int64_t, _1, int64_t, int64_t>;
  using GTensorIn = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeT{}, StrideT{}));
  using GTensorOut = decltype(make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)), ShapeT{}, StrideT{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GTensorIn{}, take<0, 2>(SmemLayoutQ{}),
                                      Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaDO = decltype(make_tma_copy(SM90_TMA_LOAD{}, GTensorIn{}, take<0, 2>(SmemLayoutdO{}),
                                       Shape<Int<kBlockM>, Int<kHeadDimV>>{}, _1{}));
  using TmaK =
      decltype(make_tma_copy(SM90_TMA_LOAD{}, GTensorIn{}, SmemLayoutK{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));
  using TmaV =
      decltype(make_tma_copy(SM90_TMA_LOAD{}, GTensorIn{}, SmemLayoutV{}, Shape<Int<kBlockN>, Int<kHeadDimV>>{}, _1{}));
  using TmadK = decltype(make_tma_copy(SM90_TMA_STORE{}, GTensorOut{}, SmemLayoutK{},
                                       Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));
  using TmadV = decltype(make_tma_copy(SM90_TMA_STORE{}, GTensorOut{}, SmemLayoutV{},
                                       Shape<Int<kBlockN>, Int<kHeadDimV>>{}, _1{}));
};

}  // namespace frost::sm90::bwd
