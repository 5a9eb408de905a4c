// Which (query, key) pairs the attention backward visits: the band mask (causal, sliding window, bottom-right
// alignment) and the padding mask, at the granularity of tiles and of single elements.
//
// Key j is visible to query i when j < len_kv and off - left < j - i <= off + right (each bound optional), with
// off = len_kv - len_q (bottom-right) or 0 (top-left). Over a rectangle of rows [i0, i1] and keys [j0, j1] the
// differences j - i take every integer in [j0 - i1, j1 - i0], so a tile holds a visible pair exactly when
// j0 - i1 <= off + right and j1 - i0 > off - left. Both tests are monotone in the tile indices: the query blocks a
// key block must visit, and the key blocks that add into one query block's dQ, are contiguous ranges, and the two
// range functions below are exact inverses of each other (the deterministic dQ order relies on that).
#pragma once

namespace frost::sm90::bwd {

// Bounds as ints: extents are limited to 2^28 and bounds clamped to 2^28, so every sum below fits.
struct BandMask {
  int has_left, has_right, left, right, bottom_right;
};

struct SeqInfo {
  int len_q, len_kv, off;
};

__host__ __device__ __forceinline__ int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Query blocks [m_min, m_max) with a visible element in key block n (empty when m_min >= m_max).
template <int kBlockM, int kBlockN>
__device__ __forceinline__ void m_block_range(int n, SeqInfo const& si, BandMask const& mk, int& m_min, int& m_max) {
  m_min = 0;
  m_max = (si.len_q + kBlockM - 1) / kBlockM;
  int const j0 = n * kBlockN;
  if (j0 >= si.len_kv) {
    m_max = 0;
    return;
  }
  int const j1 = min((n + 1) * kBlockN, si.len_kv) - 1;
  if (mk.has_right) {
    int const x = j0 - si.off - mk.right;  // the block's last row must reach x
    if (x > si.len_q - 1) {
      m_max = 0;
      return;
    }
    if (x > 0) m_min = x / kBlockM;
  }
  if (mk.has_left) {
    int const y = j1 - si.off + mk.left;  // the block's first row must stay below y
    m_max = min(m_max, y <= 0 ? 0 : (y + kBlockM - 1) / kBlockM);
  }
}

// Key blocks [n_lo, n_hi] with a visible element in query block m (m < ceil(len_q / kBlockM)).
template <int kBlockM, int kBlockN>
__device__ __forceinline__ void n_block_range(int m, SeqInfo const& si, BandMask const& mk, int& n_lo, int& n_hi) {
  int const i0 = m * kBlockM, i1 = min((m + 1) * kBlockM, si.len_q) - 1;
  n_lo = 0;
  n_hi = (si.len_kv + kBlockN - 1) / kBlockN - 1;
  if (mk.has_right) n_hi = min(n_hi, floor_div(i1 + si.off + mk.right, kBlockN));
  if (mk.has_left) {
    int const w = i0 + si.off - mk.left;  // the block's last key must pass w
    n_lo = si.len_kv - 1 <= w ? n_hi + 1 : max(0, floor_div(w + 1, kBlockN));
  }
}

// True when some pair of tile (m, n) may be masked, so the tile needs the element-wise test.
template <int kBlockM, int kBlockN>
__device__ __forceinline__ bool tile_needs_mask(int m, int n, SeqInfo const& si, BandMask const& mk) {
  int const j_first = n * kBlockN, j_last = (n + 1) * kBlockN - 1;
  int const i_first = m * kBlockM, i_last = (m + 1) * kBlockM - 1;
  return j_last >= si.len_kv || (mk.has_right && j_last - i_first > si.off + mk.right) ||
         (mk.has_left && j_first - i_last <= si.off - mk.left);
}

// The queries key j is visible to: lo <= i < hi (empty when j is past len_kv). The same test as visible(), per
// key once, so a masked tile costs two compares and a select per element instead of a chain of branches. The
// bounds stay within +-2^30 (|j - off -+ bound| <= 2^29 + 2^28), so callers may shift them by a row offset.
__device__ __forceinline__ void visible_queries(int j, SeqInfo const& si, BandMask const& mk, int& lo, int& hi) {
  constexpr int kFar = 1 << 30;
  lo = mk.has_right ? j - si.off - mk.right : -kFar;
  hi = mk.has_left ? j - si.off + mk.left : kFar;
  if (j >= si.len_kv) lo = kFar;
}

__device__ __forceinline__ bool visible(int i, int j, SeqInfo const& si, BandMask const& mk) {
  int const d = j - i;
  return j < si.len_kv && (!mk.has_right || d <= si.off + mk.right) && (!mk.has_left || d > si.off - mk.left);
}

}  // namespace frost::sm90::bwd
