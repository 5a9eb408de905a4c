// Static persistent tile scheduler: grid = min(#tiles, #SMs). Wave w hands tiles [w*grid, (w+1)*grid) to the CTAs,
// in CTA order on even waves and in reverse order on odd waves (zig-zag), so that with tiles sorted longest first
// no CTA takes the longest tile of every wave: under a causal mask (s16384, 16 heads) plain round-robin leaves the
// busiest CTA ~17% over the mean, zig-zag < 1% (simulated).
//
// Order: heads are taken in groups (heads_per_group, chosen on the host: K/V within ~24 MB of L2 without a mask,
// all heads under a causal mask so the longest-first order is global); inside a group the m-blocks are walked
// from the last one down with the heads of the group innermost. Under a causal mask the last m-blocks see the most
// keys, so the longest tiles go first and the short ones fill the tail.
#pragma once

namespace frost::sm90::fwd {

struct TileCoord {
  int m_block, head, batch;
};

// Tile index served by this CTA in wave `wave` (may be >= num_tiles: then the CTA is done).
__device__ __forceinline__ int tile_of_wave(int wave) {
  int const c = (wave & 1) ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  return wave * int(gridDim.x) + c;
}

template <class Params>
__device__ __forceinline__ TileCoord decode_tile(int tile, Params const& p) {
  int const per_group = p.heads_per_group * p.num_m_blocks;
  int const group = tile / per_group;
  int const r = tile - group * per_group;
  int const bh0 = group * p.heads_per_group;
  int const total_bh = p.h_q * p.batch;
  int const gsize = min(p.heads_per_group, total_bh - bh0);  // the last group may be short
  int const m_rev = r / gsize;
  int const bh = bh0 + (r - m_rev * gsize);
  int const batch = bh / p.h_q;
  return {p.num_m_blocks - 1 - m_rev, bh - batch * p.h_q, batch};
}

// Number of key blocks tile row-block m_block must visit (blocks [0, result)); 0 when every row is masked.
template <int kBlockM, int kBlockN, class Params>
__device__ __forceinline__ int num_key_blocks(int m_block, Params const& p) {
  int n = (p.s_kv + kBlockN - 1) / kBlockN;
  if (p.causal) {
    int const last_row = min(p.s_q, (m_block + 1) * kBlockM) - 1;
    int const last_key = last_row + p.causal_offset;  // keys <= last_key are visible to the tile's last row
    n = min(n, last_key < 0 ? 0 : last_key / kBlockN + 1);
  }
  return n;
}

// True when some element of key block n_block is masked for some row of the tile (sequence tail or diagonal).
template <int kBlockM, int kBlockN, class Params>
__device__ __forceinline__ bool key_block_needs_mask(int m_block, int n_block, Params const& p) {
  int const end = (n_block + 1) * kBlockN;
  return end > p.s_kv || (p.causal && end - 1 > m_block * kBlockM + p.causal_offset);
}

}  // namespace frost::sm90::fwd
