// Persistent tile schedulers and the per-tile view of the problem.
//
// Grid = min(#tiles, #SMs). Static (SCHED_POLICY 1-3): wave w hands tiles [w*grid, (w+1)*grid) to the CTAs, in CTA
// order on even waves and in reverse order on odd waves (zig-zag), so that with tiles sorted longest first no CTA
// takes the longest tile of every wave: under a causal mask (s16384, 16 heads) plain round-robin leaves the busiest
// CTA ~17% over the mean, zig-zag < 1% (simulated). SCHED_POLICY 4 hands them out as CTAs come free instead. The
// order of the tiles: sm90_fwd_tile_order.h.
#pragma once
#include "sm90_fwd_kernel_traits.cuh"
#include "sm90_fwd_tile_order.h"

namespace frost::sm90::fwd {

// One tile's view of its batch: lengths, diagonal, the key blocks it visits and where its rows start.
struct TileInfo {
  int m_block, head, batch;
  int len_q, len_kv;
  int diag;        // row i's diagonal key is i + diag
  int n_lo, n_hi;  // key blocks [n_lo, n_hi) hold every key a valid row of the tile sees; empty when n_hi <= n_lo
};

// Tile index served by this CTA in wave `wave` (may be >= num_tiles: then the CTA is done). kCluster > 1: the
// waves hand out units of kCluster consecutive tiles, one per cluster, and CTA rank r takes tile r of its unit.
template <int kCluster>
__device__ __forceinline__ int tile_of_wave(int wave) {
  int const clusters = int(gridDim.x) / kCluster, c = int(blockIdx.x) / kCluster;
  int const cc = (wave & 1) ? clusters - 1 - c : c;
  return (wave * clusters + cc) * kCluster + int(blockIdx.x) % kCluster;
}

__device__ __forceinline__ int seq_length(SeqLens const& s, int b, int extent) {
  int const v = s.seq_len ? s.seq_len[b] : s.cu ? s.cu[b + 1] - s.cu[b] : extent;
  return min(max(v, 0), extent);
}

// Element offset of batch b's row 0 in a packed tensor (kind != 0).
__device__ __forceinline__ int64_t packed_start(DevRowStarts const& r, int b) {
  if (r.kind == int(RowStartKind::OFFSETS_I32)) return static_cast<int32_t const*>(r.ptr)[b];
  if (r.kind == int(RowStartKind::OFFSETS_I64)) return static_cast<int64_t const*>(r.ptr)[b];
  return int64_t(static_cast<int32_t const*>(r.ptr)[b]) * r.stride_s;
}

// Row coordinate of batch b's row 0 in a tensor's TMA view: its token for a packed tensor, 0 for a dense one.
__device__ __forceinline__ int tma_row0(DevRowStarts const& r, int b) {
  return r.kind == 0 ? 0 : int(packed_start(r, b) / r.stride_s);
}

// Query positions a tile covers: kBlockM, or with PACK_GQA kBlockM / group (the group's heads share the tile).
template <int kBlockM, bool kPack, class Params>
__device__ __forceinline__ int tile_rows(Params const& p) {
  if constexpr (kPack)
    return p.pack_rows;
  else
    return kBlockM;
}

// kGeneral = false is the plain kernel: dense tensors without padding and without a left band bound, so the
// lengths are s_q and s_kv and every tile starts at key block 0. With kPack the tile's head is a K/V head and its
// rows are the positions [m_block * rows, (m_block + 1) * rows) of each query head of the group.
template <int kBlockM, int kBlockN, bool kGeneral, bool kPack, class Params>
__device__ __forceinline__ TileInfo tile_info(int tile, Params const& p) {
  TileCoord const c = decode_tile(tile, p);
  TileInfo t{c.m_block, c.head, c.batch, p.s_q, p.s_kv, 0, 0, 0};
  if constexpr (kGeneral) {
    t.len_q = seq_length(p.len_q, c.batch, p.s_q);
    t.len_kv = seq_length(p.len_kv, c.batch, p.s_kv);
  }
  t.diag = p.bottom_right ? t.len_kv - t.len_q : 0;
  int const rows = tile_rows<kBlockM, kPack>(p);
  int const row_lo = c.m_block * rows;
  int const row_hi = min(t.len_q, row_lo + rows);  // valid rows [row_lo, row_hi)
  if (row_hi <= row_lo) return t;
  int const key_lo = kGeneral ? max(0, row_lo + t.diag - p.left + 1) : 0;
  int const key_hi = min(t.len_kv, row_hi - 1 + t.diag + p.right + 1);
  if (key_hi <= key_lo) return t;
  t.n_lo = key_lo / kBlockN;
  t.n_hi = (key_hi + kBlockN - 1) / kBlockN;
  return t;
}

// What the key-block loop keeps of a tile (few registers: the loop runs next to the accumulators). Row r of the
// tile sees keys [r + diag0 - left + 1, min(len_kv, r + diag0 + right + 1)).
struct KeyRange {
  int n_lo, n_hi;
  int diag0;  // diagonal key of the tile's first row
  int len_kv;
};

template <int kBlockM, bool kPack, class Params>
__device__ __forceinline__ KeyRange key_range(TileInfo const& t, Params const& p) {
  return {t.n_lo, t.n_hi, t.m_block * tile_rows<kBlockM, kPack>(p) + t.diag, t.len_kv};
}

// True when some element of key block n is masked for some row of the tile (sequence end or band).
template <int kBlockM, int kBlockN, class Params>
__device__ __forceinline__ bool key_block_needs_mask(KeyRange const& k, int n, Params const& p) {
  int const k0 = n * kBlockN, k1 = k0 + kBlockN;
  return k1 > k.len_kv || k1 - 1 > k.diag0 + p.right || k0 < k.diag0 + kBlockM - 1 - p.left + 1;
}

// Without a left bound the masked key blocks are the top ones: block n needs the mask iff its last key passes the
// sequence end or the first row's right band edge, i.e. n >= (that edge) / kBlockN. The key-block loop, which walks
// the blocks downwards, masks only until it reaches this block.
template <int kBlockN, class Params>
__device__ __forceinline__ int first_masked_block(KeyRange const& k, Params const& p) {
  return max(0, min(k.len_kv, k.diag0 + p.right + 1)) / kBlockN;
}

// Work units. Without the split (SCHED_POLICY 1, 2): the tile of wave iter. With it (3): waves [0, full_waves) are
// whole tiles as above; then CTA c takes the flattened (tail tile, key block) pairs [total * c / G,
// total * (c + 1) / G), at most two units since a range is shorter than a tile: the end of one tile and the start
// of the next. A unit that starts at key block 0 is the tile's owner (it finishes the tile); any other is a piece.
enum UnitKind : int { kWholeTile = 0, kOwner = 1, kPiece = 2 };

struct WorkUnit {
  int tile;        // < 0: the CTA is done
  int n_lo, n_hi;  // key blocks of a tail unit (whole-wave tiles take the tile's own range)
  int kind;
};

// First flattened tail pair of CTA c.
__device__ __forceinline__ int64_t tail_begin(TailSplitParams const& s, int c) {
  return s.total * c / int64_t(gridDim.x);
}

// SCHED_POLICY 4, the hand-out (plain single-CTA kernel): the scheduler's tiles go to the CTAs as they come free,
// so heads can stay grouped for L2 (as under policy 1) while the longest-first order inside each group still
// balances the CTAs. A CTA's first tile is its own index; later ones come from the workspace's counter (zeroed
// before the launch), taken by the producer's lane 0 and broadcast over its warp. -1: the CTA is done.
template <class Params>
__device__ __forceinline__ int handed_out_tile(int iter, Params const& p, int lane) {
  int tile = int(blockIdx.x);
  if (iter > 0 && lane == 0) tile = int(gridDim.x) + atomicAdd(p.tile_counter, 1);
  tile = __shfl_sync(0xffffffff, tile, 0);
  return tile < p.num_tiles ? tile : -1;
}

// The iter-th unit of this CTA. Without the split: the tile of wave iter.
template <bool kSplit, class Params>
__device__ __forceinline__ WorkUnit work_unit(int iter, Params const& p) {
  if (!kSplit || iter < p.split.full_waves) {
    int const tile = tile_of_wave<Params::kClusterM>(iter);
    return {tile < p.num_tiles ? tile : -1, 0, 0, kWholeTile};
  }
  int const j = iter - p.split.full_waves;
  int64_t const lo = tail_begin(p.split, blockIdx.x), hi = tail_begin(p.split, blockIdx.x + 1);
  int64_t const a = lo / p.split.blocks + j;  // tail tile of this unit
  int64_t const first = a * p.split.blocks;
  int64_t const b = max(lo, first), e = min(hi, first + p.split.blocks);
  if (j > 1 || b >= e) return {-1, 0, 0, kWholeTile};
  int const n_lo = int(b - first), n_hi = int(e - first);
  int const kind = n_lo > 0 ? kPiece : n_hi == p.split.blocks ? kWholeTile : kOwner;
  return {int(p.split.full_waves * int64_t(gridDim.x) + a), n_lo, n_hi, kind};
}

// The tile's view, narrowed to the unit's key blocks for a tail unit.
template <int kBlockM, int kBlockN, bool kGeneral, bool kPack, bool kSplit, class Params>
__device__ __forceinline__ TileInfo unit_info(WorkUnit const& u, int iter, Params const& p) {
  TileInfo t = tile_info<kBlockM, kBlockN, kGeneral, kPack>(u.tile, p);
  if (kSplit && iter >= p.split.full_waves) {
    t.n_lo = u.n_lo;
    t.n_hi = u.n_hi;
  }
  return t;
}

}  // namespace frost::sm90::fwd
