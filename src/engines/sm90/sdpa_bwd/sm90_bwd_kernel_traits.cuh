// Compile-time configuration of the sm90 attention-backward kernel: tile shapes, wgmma atoms, shared-memory layouts,
// shared storage and kernel parameters, with the budgets that bound each choice.
#pragma once
#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "sm90_bwd_mask.cuh"

namespace frost::sm90::bwd {

using namespace cute;

// One CTA owns kBlockN keys of one (batch, kv head) and walks every query block of every query head of the GQA
// group that sees them. Warpgroup 0 is the producer (warp 0: TMA loads of Q, dO and their statistics; warp 1: adds
// the FP32 dQ partials into global memory with bulk reduce-adds); warpgroups 1 and 2 are consumers, each owning 64
// of the keys: their dK and dV accumulators stay in registers for the whole CTA.
//
// Per query block (kBlockM rows), each consumer warpgroup runs five wgmmas:
//   S^T = K Q^T and dP^T = V dO^T   (SS, 64 keys x kBlockM)         -> P^T, dS^T in registers
//   dV += P^T dO and dK += dS^T Q   (RS: P^T, dS^T are the A operand, 64 keys x d)
//   dQ  = dS K                      (SS: dS through shared memory; per warpgroup kBlockM x d/2, or 64 x d)
// Computing S and dP transposed puts P^T and dS^T in exactly the register layout the dK/dV wgmmas take as A.
//
// Shared memory (bytes, 16-bit elements, limit 227 KB): K, V: 2 * kBlockN*d*2; Q, dO: 2 stages each of kBlockM*d*2;
// dS^T: 2 stages of kBlockN*kBlockM*2; dQ partials: kDqBufs of kBlockM*d*4; statistics: 2 * 2 stages * kBlockM*4.
//   d128, 64 x 128: 64K + 64K + 32K + 2 x 32K + 1K = 225K      d64, 64 x 128: 32K + 32K + 32K + 16K + 1K = 113K
//   d64, 128 x 128: 32K + 64K + 64K + 32K + 2K = 194K
// Registers per consumer thread (240 after setmaxnreg): dK, dV: 2 * 64*d/128; S^T, dP^T: 2 * 64*kBlockM/128;
// dQ: kBlockM*d/256; d128, kBlockM 64: 128 + 64 + 32 and the per-column statistics (16 + 16); d64, kBlockM 128:
// 64 + 128 + 32 (the statistics are read from smem where they are used).
template <int kHeadDim_, int kBlockM_, int kBlockN_, class Element_>
struct BwdTraits {
  using Element = Element_;  // cute::bfloat16_t or cute::half_t
  using ElementAccum = float;
  static constexpr bool kSplitD = false;    // BwdTraitsSplitD (large head dims) splits the work differently
  static constexpr bool kDqViaSmem = true;  // dQ partials go out through smem and the writer warp
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kHeadDimV = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = 2;    // Q / dO (with their statistics) pipeline depth
  static constexpr int kStagesDS = 2;  // dS^T buffers: one barrier per step suffices with two (see the mainloop)
  // dP^T issued after P^T is formed instead of beside S^T (register budget of 128-row blocks, see the mainloop).
  static constexpr bool kSerialSdP = kBlockM == 128;
  static constexpr int kNumMmaWG = 2;
  static constexpr int kNumMmaThreads = kNumMmaWG * 128;
  static constexpr int kNumThreads = kNumMmaThreads + 128;
  // setmaxnreg moves registers only inside the CTA's own allocation, 384 threads x 168 at launch = 64512: the
  // producer must give back exactly what the consumers take, 128 * (168 - 24) = 256 * (240 - 168). (Any larger
  // producer share leaves the last consumer warp waiting in setmaxnreg forever.)
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static_assert(kProducerRegs * 128 + kConsumerRegs * kNumMmaThreads <= (65536 / kNumThreads / 8 * 8) * kNumThreads,
                "setmaxnreg cannot hand out more registers than the CTA holds at launch");

  static_assert(kBlockN == 64 * kNumMmaWG, "each consumer warpgroup owns 64 keys");
  static_assert(kBlockM % 64 == 0, "kBlockM rows of dS^T fill 128-byte swizzle rows");
  static_assert(kHeadDim % 64 == 0, "head dim must fill 128-byte swizzle rows");

  using TileShapeSdP = Shape<Int<kBlockN>, Int<kBlockM>, Int<kHeadDim>>;  // S^T = K Q^T:  keys x queries x d
  using TileShapedKV = Shape<Int<kBlockN>, Int<kHeadDim>, Int<kBlockM>>;  // dV = P^T dO:  keys x d x queries
  using TileShapedQ = Shape<Int<kBlockM>, Int<kHeadDim>, Int<kBlockN>>;   // dQ = dS K:    queries x d x keys

  using TiledMmaSdP = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, ElementAccum, TileShapeSdP>(),
                                              Layout<Shape<Int<kNumMmaWG>, _1, _1>>{}));
  // A = P^T / dS^T from registers (K-major), B = dO^T / Q^T read MN-major from the row-major Q and dO tiles.
  using TiledMmadKV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, ElementAccum, TileShapedKV, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<kNumMmaWG>, _1, _1>>{}));
  // dQ = dS K: A = dS (queries contiguous in smem: MN-major), B = K^T (MN-major). With 64 query rows the two
  // warpgroups split d (each an N = d/2 wgmma); with 128 rows they split the rows (each 64 rows x d), which keeps
  // N = d: at d64 an N = 32 wgmma reads as many smem bytes per flop as one of N = 64 reads for twice the flops.
  static constexpr bool kDqSplitRows = kBlockM == 64 * kNumMmaWG;
  using TiledMmadQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, ElementAccum,
                           Shape<Int<kDqSplitRows ? 64 : kBlockM>, Int<kDqSplitRows ? kHeadDim : kHeadDim / kNumMmaWG>,
                                 Int<kBlockN>>,
                           GMMA::Major::MN, GMMA::Major::MN>(),
      Layout<Shape<Int<kDqSplitRows ? kNumMmaWG : 1>, Int<kDqSplitRows ? 1 : kNumMmaWG>, _1>>{}));

  using SmemAtom = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutdO = SmemLayoutQ;
  using SmemLayoutK = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  using SmemLayoutV = SmemLayoutK;
  // Transposed views (d, rows, stage) of the same bytes, for the B operands of dK/dV and dQ.
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockM>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  using SmemLayoutdOt = SmemLayoutQt;
  using SmemLayoutKt = decltype(composition(
      SmemLayoutK{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{})));
  // dS^T stored as the consumers hold it (keys x queries, queries contiguous); dS is its (queries, keys) view.
  using SmemLayoutdSt = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kBlockM>, Int<kStagesDS>>{}));
  using SmemLayoutdS = decltype(composition(
      SmemLayoutdSt{}, make_ordered_layout(Shape<Int<kBlockM>, Int<kBlockN>, Int<kStagesDS>>{}, Step<_2, _1, _3>{})));

  using SmemCopyAtom = Copy_Atom<SM90_U32x4_STSM_N, Element>;

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  using PipelineState = typename Pipeline::PipelineState;

  // The dQ partial of one step, FP32, in "fragment order": each consumer warpgroup's half is contiguous, and inside
  // it value v of thread t sits at (v / 4) * 512 + t * 4 + v % 4, so the 16-byte stores of a warp are contiguous.
  static constexpr int kDqHalf = kBlockM * kHeadDim / kNumMmaWG;  // floats per warpgroup
  static constexpr int kDqFrag = kDqHalf / 128;                    // floats per consumer thread
  static_assert(kDqFrag % 4 == 0);
  // dQ staging buffers. d128: two, used by the deterministic mode (its writer waits for each reduce-add to complete
  // and be released to the next key block; the consumers fill the other buffer meanwhile), 1-4 % faster there; the
  // default mode never waits for completion and uses one. d64: one; the second (32 KB more smem) measured 3 %
  // slower without the deterministic mode (NOTES.md v4), and in a kernel of its own for the deterministic mode 2 %
  // slower with it once that mode's tile order stopped its waits (v5).
  static constexpr int kDqBufs = kHeadDim >= 128 ? 2 : 1;

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> smem_k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> smem_v;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> smem_q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutdO>, 1024> smem_do;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutdSt>, 1024> smem_ds;
    cute::array_aligned<float, kBlockM * kHeadDim * kDqBufs, 128> smem_dq;
    cute::array_aligned<float, kBlockM * kStages, 128> smem_lse;    // base-2 LSE per query (+inf: no gradient)
    cute::array_aligned<float, kBlockM * kStages, 128> smem_delta;  // D = rowsum(dO * O) per query
    alignas(16) cutlass::arch::ClusterTransactionBarrier barrier_kv;
    typename Pipeline::SharedStorage pipeline_q;
    typename Pipeline::SharedStorage pipeline_do;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "shared memory over the 227 KB a CTA can hold");

  static constexpr uint32_t kTmaBytesQ = uint32_t(kBlockM * kHeadDim * sizeof(Element) + kBlockM * sizeof(float));
  static constexpr uint32_t kTmaBytesdO = kTmaBytesQ;
  static constexpr uint32_t kTmaBytesKV = uint32_t(2 * kBlockN * kHeadDim * sizeof(Element));

  // Global tensors are viewed as (seq, dim, head, batch) with element strides.
  using ShapeT = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using StrideT = cute::Stride<int64_t, _1, int64_t, int64_t>;
  using GTensorIn = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeT{}, StrideT{}));
  using GTensorOut = decltype(make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)), ShapeT{}, StrideT{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GTensorIn{}, take<0, 2>(SmemLayoutQ{}),
                                      Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GTensorIn{}, SmemLayoutK{},
                                       Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));
  using TmadKV = decltype(make_tma_copy(SM90_TMA_STORE{}, GTensorOut{}, SmemLayoutK{},
                                        Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));
  using TmaDO = TmaQ;
  using TmaK = TmaKV;
  using TmaV = TmaKV;
  using TmadK = TmadKV;
  using TmadV = TmadKV;
};

// Where batch b's rows start in one tensor (BwdRowStarts on the device; kind 0 is dense).
struct DevRows {
  void const* ptr;
  int kind;          // BwdRowKind
  int64_t stride_b;  // dense: batch stride
  int64_t stride_s;  // packed: cu_seq_len tokens to elements, element offsets to tokens
};

// Element offset of batch b's row 0.
__device__ __forceinline__ int64_t row_start(DevRows const& r, int b) {
  switch (r.kind) {
    case 1:
      return static_cast<int32_t const*>(r.ptr)[b];
    case 2:
      return static_cast<int64_t const*>(r.ptr)[b];
    case 3:
      return int64_t(static_cast<int32_t const*>(r.ptr)[b]) * r.stride_s;
    default:
      return int64_t(b) * r.stride_b;
  }
}

// The TMA coordinates of batch b's row 0 in a (rows, d, h, batch) view: packed tensors are viewed as (tokens, d,
// h, 1) and start at the batch's first token.
__device__ __forceinline__ int tma_row0(DevRows const& r, int b) {
  if (r.kind == 0) return 0;
  if (r.kind == 3) return static_cast<int32_t const*>(r.ptr)[b];
  return int(row_start(r, b) / r.stride_s);
}

// Batch b's length on one side: seq_len[b * stride], else cu[b + 1] - cu[b], else the full extent; within [0, full].
__device__ __forceinline__ int side_len(int32_t const* seq_len, int64_t stride, int32_t const* cu, int b, int full) {
  if (seq_len != nullptr) return min(max(seq_len[b * stride], 0), full);
  if (cu != nullptr) return min(max(cu[b + 1] - cu[b], 0), full);
  return full;
}

// Everything the main kernel reads, passed by value as a __grid_constant__ parameter (the TMA descriptors inside must
// live in parameter space).
template <class Traits>
struct BwdKernelParams {
  typename Traits::TmaQ tma_q;
  typename Traits::TmaDO tma_do;
  typename Traits::TmaK tma_k;
  typename Traits::TmaV tma_v;
  typename Traits::TmadK tma_dk;
  typename Traits::TmadV tma_dv;
  typename Traits::ShapeT shape_q, shape_do, shape_k, shape_v;  // (seq, d, head, batch); d_v for dO and V
  float* dq_acc;                                                // [b][h_q][num_m_blocks][kBlockM * d], fragment order
  float const* lse2;                                            // [b][h_q][num_m_blocks * kBlockM]
  float const* delta;                                           // same layout
  int* sema;                                                    // [b][h_q][num_m_blocks] deterministic-mode counters
  int const* seq_len_q;
  int const* seq_len_kv;
  int64_t seq_len_q_stride, seq_len_kv_stride;
  int const* cu_seq_len_q;
  int const* cu_seq_len_kv;
  DevRows rows_q, rows_do, rows_k, rows_v, rows_dk, rows_dv;
  // Packed dK / dV are stored row by row from smem (a tile's rows past its sequence belong to another one).
  typename Traits::Element* dk_ptr;
  typename Traits::Element* dv_ptr;
  int64_t dk_stride_h, dk_stride_s, dv_stride_h, dv_stride_s;
  int s_q, s_kv, h_q, h_kv, h_ratio, batch, num_m_blocks, num_n_blocks;
  BandMask mask;
  float scale_log2;  // softmax scale * log2(e)
  float scale;       // applied to dK at the end
  int deterministic;
  int n_descending;     // tiles of a head walk key blocks last to first (and dQ adds in that order)
  int heads_per_group;  // tile order: groups of (batch, kv head), key blocks outer inside a group
};

}  // namespace frost::sm90::bwd
