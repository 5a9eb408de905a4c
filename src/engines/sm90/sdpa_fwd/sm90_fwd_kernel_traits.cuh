// Compile-time configuration of the sm90 attention-forward kernel: tile shapes, wgmma atoms, shared-memory
// layouts and the shared-storage struct, with the budgets that bound each choice.
#pragma once
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED  // wgmma N = 80 and 176 are "extended" shapes in CuTe
#endif
#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/pipeline.hpp>

#include "sm90_fwd_tail_split.h"
#include "sm90_fwd_timeline.h"
#include "sm90_sdpa_fwd.h"

namespace frost::sm90::fwd {

using namespace cute;

// One CTA = 1 producer warpgroup (one thread issues every TMA) + kBlockM/64 consumer warpgroups; each consumer
// warpgroup owns 64 query rows of the tile, all of them share the K/V stages.
//
// Shared memory (bytes, 16-bit elements), limit 227 KB per CTA:
//   Q kBlockM*d*2 + K kStages*kBlockN*d*2 + V kStages*kBlockN*dv*2 (+ O kBlockM*dv*2 when it has its own buffer)
//   d64  192x128 s2: 24K + 64K  = 88K      d128 128x128 s2: 32K + 128K = 160K
//   d128 128x176 s2: 32K + 176K = 208K     d256 128x80  s2: 64K + 160K = 224K
//   d192/dv128 128x112 s2: 48K + 84K + 56K = 188K (+ O 32K = 220K)
// Registers per consumer thread (fp32 accumulators, 64 rows per warpgroup, 128 threads):
//   S: kBlockN/2, P (16-bit, packed): kBlockN/4, O: dv/2; d128 n176 = 88 + 44 + 64 = 196 of 240.
//   d64 with three consumer warpgroups gets 160 each (S 64 + P 32 + O 32).
// kClusterM_ 2 (TILE_CGA_M): CTAs in pairs on adjacent m-blocks of one head, each loading half of every K and V
// block and multicasting it to both, so K/V cross L2 once per pair (plain kernel, tiles of equal key ranges only).
template <int kHeadDim_, int kHeadDimV_, int kBlockM_, int kBlockN_, int kStages_, class Element_, int kClusterM_ = 1>
struct FwdTraits {
  using Element = Element_;  // cute::bfloat16_t or cute::half_t
  using ElementAccum = float;
  static constexpr int kHeadDim = kHeadDim_;    // d_qk
  static constexpr int kHeadDimV = kHeadDimV_;  // d_v
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr int kClusterM = kClusterM_;
  using ClusterShape = Shape<Int<kClusterM>, _1, _1>;
  template <int kCluster>
  using WithCluster = FwdTraits<kHeadDim, kHeadDimV, kBlockM, kBlockN, kStages, Element, kCluster>;
  static constexpr int kNumMmaWG = kBlockM / 64;
  static constexpr int kNumMmaThreads = kNumMmaWG * 128;
  static constexpr int kNumThreads = kNumMmaThreads + 128;
  // 65536 registers per SM: 2 consumers 2*128*240 + 128*24 = 64512; 3 consumers 3*128*160 + 128*32 = 65536.
  static constexpr int kProducerRegs = kNumMmaWG == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kNumMmaWG == 2 ? 240 : 160;

  static_assert(kBlockM % 64 == 0 && kNumMmaWG >= 2 && kNumMmaWG <= 3, "two or three consumer warpgroups");
  static_assert(kBlockN % 16 == 0, "kBlockN is the K extent of the P*V wgmma (multiple of 16)");
  static_assert(kHeadDim % 64 == 0 && kHeadDimV % 64 == 0, "head dims must fill 128-byte swizzle rows");
  static_assert(kClusterM == 1 || kClusterM == 2, "single CTAs or pairs");

  using TileShapeQK = Shape<Int<kBlockM>, Int<kBlockN>, Int<kHeadDim>>;   // S = Q K^T: M x N x d
  using TileShapePV = Shape<Int<kBlockM>, Int<kHeadDimV>, Int<kBlockN>>;  // O = P V:   M x dv x N
  using AtomLayoutMma = Layout<Shape<Int<kNumMmaWG>, _1, _1>>;           // warpgroups stacked along M

  // Q in registers (S = Q K^T with the register-A wgmma) where the budget allows it: d128 with 128-wide key blocks,
  // S 64 + P 32 + O 64 + Q 32 = 192 of 240 registers, 0 spills. Q is read from shared memory once per tile instead
  // of once per key block (an m64n128k16 wgmma with both operands there reads 6 KB in 64 cycles, 96 B/clk of the
  // 128, beside the TMA writes of K and V), and its buffer is released to the next tile at once. H200, same run
  // (NOTES.md v6): s16384 676.0 vs 667.6 TFLOP/s, s4096 677.6 vs 675.3: the port was not the limit.
  static constexpr bool kQInRegs = kHeadDim == 128 && kBlockN == 128 && kNumMmaWG == 2;
  static constexpr bool kLazyRescale = kHeadDimV >= 256;  // see kRescaleLog2 (sm90_fwd_softmax_online.cuh)
  using TiledMmaQK = decltype(make_tiled_mma(
      cute::conditional_t<kQInRegs, decltype(GMMA::rs_op_selector<Element, Element, ElementAccum, TileShapeQK>()),
                          decltype(GMMA::ss_op_selector<Element, Element, ElementAccum, TileShapeQK>())>{},
      AtomLayoutMma{}));
  using SmemCopyAtomQ = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  // P comes from registers (K-major A), V^T is read MN-major from the K/V smem layout.
  using TiledMmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, ElementAccum, TileShapePV, GMMA::Major::K, GMMA::Major::MN>(),
      AtomLayoutMma{}));

  // Head dims are multiples of 64 16-bit elements, so every row of Q/K/V/O fills 128-byte swizzle atoms.
  using SmemAtom = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  // PACK_GQA lands Q with one TMA box of kBlockM 128-byte rows per 64 columns: the unswizzled Q layout must be
  // those slices one after the other (the swizzle is TMA's 128-byte pattern on 1024-byte aligned atoms).
  static_assert(get_nonswizzle_portion(SmemLayoutQ{})(1, 8) == 64 + 8 &&
                    get_nonswizzle_portion(SmemLayoutQ{})(kBlockM - 1, kHeadDim - 1) == kBlockM * kHeadDim - 1 &&
                    get_nonswizzle_portion(SmemLayoutQ{})(0, kHeadDim - 64) == kBlockM * (kHeadDim - 64),
                "Q's shared-memory layout is kBlockM x 64 slices");
  // O: one contiguous 64-row block per consumer warpgroup, so each warpgroup stores its rows with its own TMA copy.
  using SmemLayoutOWG = decltype(tile_to_shape(SmemAtom{}, Shape<_64, Int<kHeadDimV>>{}));
  using SmemLayoutO = decltype(tile_to_shape(SmemLayoutOWG{}, Shape<Int<kBlockM>, Int<kHeadDimV>>{}));
  using SmemLayoutK = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutV = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kHeadDimV>, Int<kStages>>{}));
  // V viewed as (dv, kBlockN, stage) for the B operand of O = P V.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutV{}, make_ordered_layout(Shape<Int<kHeadDimV>, Int<kBlockN>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  static_assert(cosize_v<SmemLayoutO> <= cosize_v<SmemLayoutQ>, "O may reuse Q's buffer");

  using SmemCopyAtomO = Copy_Atom<SM90_U32x4_STSM_N, Element>;

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  using PipelineState = typename Pipeline::PipelineState;

  // O gets its own buffer when it fits (d64; d128 with kBlockN = 128: 160K + 32K; d192): the next tile's Q then loads
  // while this tile finishes its last P V and epilogue. Otherwise (d128 n176, d256) O reuses Q's buffer and the
  // next Q waits until the O store has read it.
  static constexpr int kSmemQKVBytes =
      int(sizeof(Element)) * int(cosize_v<SmemLayoutQ> + cosize_v<SmemLayoutK> + cosize_v<SmemLayoutV>);
  static constexpr bool kSeparateO = kSmemQKVBytes + int(sizeof(Element)) * int(cosize_v<SmemLayoutO>) + 1024 <=
                                     227 * 1024;
  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> smem_q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>, 1024> smem_k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>, 1024> smem_v;
    cute::array_aligned<Element, kSeparateO ? cute::cosize_v<SmemLayoutO> : 8, kSeparateO ? 1024 : 16> smem_o;
    alignas(16) cutlass::arch::ClusterTransactionBarrier barrier_q;  // Q tile landed
    cutlass::arch::ClusterBarrier barrier_o;  // Q buffer free again (last Q K^T done, or O store read it)
    cutlass::arch::ClusterTransactionBarrier barrier_v_tail;  // a V block whose rows past the keys get zeroed
    float scale_log2;  // softmax scale * log2(e), from the host or the device tensor
    int tiles[2];      // SCHED_POLICY 4: the tile of unit iter in slot iter % 2, published with its Q barrier
    typename Pipeline::SharedStorage pipeline_k;
    typename Pipeline::SharedStorage pipeline_v;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "shared memory over the 227 KB a CTA can hold");

  static constexpr uint32_t kTmaBytesQ = uint32_t(kBlockM * kHeadDim * sizeof(Element));
  static constexpr uint32_t kTmaBytesK = uint32_t(kBlockN * kHeadDim * sizeof(Element));
  static constexpr uint32_t kTmaBytesV = uint32_t(kBlockN * kHeadDimV * sizeof(Element));

  // Global tensors are viewed as (seq, dim, head, batch) with element strides.
  using ShapeT = cute::Shape<int32_t, int32_t, int32_t, int32_t>;
  using StrideT = cute::Stride<int64_t, _1, int64_t, int64_t>;
  using GTensorIn = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeT{}, StrideT{}));
  using GTensorOut = decltype(make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)), ShapeT{}, StrideT{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GTensorIn{}, SmemLayoutQ{}, select<0, 2>(TileShapeQK{}), _1{}));
  using TmaLoadKV = cute::conditional_t<kClusterM == 1, SM90_TMA_LOAD, SM90_TMA_LOAD_MULTICAST>;
  using TmaK = decltype(make_tma_copy(TmaLoadKV{}, GTensorIn{}, take<0, 2>(SmemLayoutK{}), select<1, 2>(TileShapeQK{}),
                                      Int<kClusterM>{}));
  using TmaV = decltype(make_tma_copy(TmaLoadKV{}, GTensorIn{}, take<0, 2>(SmemLayoutV{}), select<2, 1>(TileShapePV{}),
                                      Int<kClusterM>{}));
  using TmaO = decltype(make_tma_copy(SM90_TMA_STORE{}, GTensorOut{}, SmemLayoutOWG{}, Shape<_64, Int<kHeadDimV>>{},
                                      _1{}));
};

// "No bound" for the diagonal band: sequences are limited to 2^29, so row + diagonal + bound stays in int32.
constexpr int kUnbounded = 1 << 29;

// Per-batch lengths of one side: seq_len[b], else cu[b + 1] - cu[b], else the full extent.
struct SeqLens {
  int32_t const* seq_len;
  int32_t const* cu;
};

// Where batch b's rows start in one tensor (see RowStarts in sm90_sdpa_fwd.h); kind 0 is dense.
struct DevRowStarts {
  void const* ptr;
  int kind;
  int64_t stride_s;  // the tensor's s stride: cu_seq_len tokens to elements, element offsets to tokens
};

// Everything the kernel reads, passed by value as a __grid_constant__ parameter (the TMA descriptors inside must
// live in parameter/constant space).
template <class Traits>
struct FwdKernelParams {
  static constexpr int kClusterM = Traits::kClusterM;
  typename Traits::TmaQ tma_q;
  typename Traits::TmaK tma_k;
  typename Traits::TmaV tma_v;
  typename Traits::TmaO tma_o;
  typename Traits::ShapeT shape_q, shape_k, shape_v, shape_o;
  float* lse;
  int64_t lse_stride_b, lse_stride_h, lse_stride_s;
  typename Traits::Element* o_ptr;  // packed O tiles that end past their sequence are stored row by row
  int64_t o_stride_b, o_stride_h, o_stride_s;
  int s_q, s_kv, h_q, h_ratio, batch;
  int left, right;   // diagonal band bounds, kUnbounded when absent
  int bottom_right;  // diagonal i' = i + len_kv - len_q instead of i
  int lse_log2;
  float scale_log2;  // softmax scale * log2(e); replaced by *scale_dev * log2(e) when scale_dev is set
  float const* scale_dev;
  float const* sink;  // [h_q] or null
  SeqLens len_q, len_kv;
  DevRowStarts rows_q, rows_k, rows_v, rows_o, rows_lse;
  int kv_tail_garbage;  // rows past a batch's keys may hold anything (padding or packed): zero V's last block
  // persistent scheduler
  int num_m_blocks, num_tiles, heads_per_group;
  int last_group_bh0;  // first (batch, head) of the final group; b * heads when there is none
  // PACK_GQA (plain kernel only): Q viewed as (d, s_q, group, h_kv, b) with a (64, pack_rows, group, 1, 1) box, so
  // one TMA per 64 columns lands a tile's rows query head by query head (tile row = g * pack_rows + position).
  // The scheduler's heads are then K/V heads: h_q above counts K/V heads and h_ratio is 1.
  cute::TmaDescriptor tma_q_packed;
  int pack_group, pack_rows;
  TailSplitParams split;  // SCHED_POLICY 3 only
  int* tile_counter;      // SCHED_POLICY 4 only: tiles handed out past the first wave, zeroed before the launch
#ifdef FROST_FWD_TIMELINE
  TimelineRecord* timeline;
#endif
};

}  // namespace frost::sm90::fwd
