// The masks of the attention references (sdpa and sdpa_backward): which keys a query row sees (the
// diagonal band and the block mask) and the dropout factor each probability takes in O. The
// backward reads them exactly as the forward does, so a gradient sees the forward's own masks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "engines/reference/ref_exec.h"
#include "ops/common/philox.h"
#include "ops/sdpa/sdpa_operands.h"

namespace frost::detail {

// Keys [first, last) of query row i pass the padding mask and the band i' - left < j <= i' + right,
// where i' = diag is i shifted by the alignment (keys - rows for BOTTOM_RIGHT, else 0).
struct KeyRange {
  int64_t diag, first, last;
};
inline KeyRange key_range(int64_t i, int64_t rows, int64_t keys, bool bottom_right,
                          const std::optional<int64_t>& left_bound, const std::optional<int64_t>& right_bound) {
  const int64_t diag = i + (bottom_right ? keys - rows : 0);
  int64_t first = 0, last = keys;
  if (left_bound) first = std::max(first, diag - *left_bound + 1);
  if (right_bound) last = std::min(last, diag + *right_bound + 1);
  return {diag, first, last};
}

// BLOCK_MASK [b or 1, h or 1, tiles_q, tiles_kv]: key j is visible from query i where tile
// (i / tile_q, j / tile_kv) is nonzero. Without a mask every key is visible.
struct BlockMask {
  Array<double> tiles;
  int64_t tile_q = 1, tile_kv = 1;
  bool present = false;

  bool visible(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (!present) return true;
    const auto& d = tiles.dim;
    const int64_t at =
        ((d[0] == 1 ? 0 : b) * d[1] + (d[1] == 1 ? 0 : h)) * d[2] * d[3] + (i / tile_q) * d[3] + j / tile_kv;
    return tiles[at] != 0;
  }
};

inline BlockMask load_block_mask(const RefExec& ex, const TensorPtr& t, int64_t tile_q, int64_t tile_kv) {
  BlockMask m;
  if (!t) return m;
  m.tiles = ex.load<double>(t), m.tile_q = tile_q, m.tile_kv = tile_kv, m.present = true;
  return m;
}

// The factor probability P_ij takes in O = sum_j P_ij * factor_ij * V_j: 1 without dropout; with a
// probability p, 1 / (1 - p) where Philox word n = ((b * h_q + h) * s_q + i) * s_kv + j (declared
// extents, positions inside the sequence) has u = word * 2^-32 >= p, else 0; with a mask, scale
// where the mask is nonzero, else 0.
template <class T>
struct DropoutFactor {
  bool philox = false, masked = false;
  double probability = 0;
  T keep_scale = T(1);
  uint64_t seed = 0, offset = 0;
  Array<double> mask;
  int64_t h_q = 1, s_q = 1, s_kv = 1;

  bool present() const { return philox || masked; }
  T at(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (philox) {
      const auto n = static_cast<uint64_t>(((b * h_q + h) * s_q + i) * s_kv + j);
      return philox_uniform(seed, offset, n) >= probability ? keep_scale : T(0);
    }
    if (masked) {
      const auto& d = mask.dim;
      const int64_t m = (((d[0] == 1 ? 0 : b) * d[1] + (d[1] == 1 ? 0 : h)) * s_q + i) * s_kv + j;
      return mask[m] != 0 ? keep_scale : T(0);
    }
    return T(1);
  }
};

template <class T>
DropoutFactor<T> load_dropout(const RefExec& ex, const std::optional<float>& probability, const TensorPtr& seed,
                              const TensorPtr& offset, const TensorPtr& mask, const TensorPtr& scale, int64_t h_q,
                              int64_t s_q, int64_t s_kv) {
  DropoutFactor<T> f;
  f.h_q = h_q, f.s_q = s_q, f.s_kv = s_kv;
  if (probability) {
    f.philox = true;
    f.probability = static_cast<double>(*probability);
    f.keep_scale = T(1) / (T(1) - static_cast<T>(*probability));
    f.seed = load_u64_scalar(ex, seed), f.offset = load_u64_scalar(ex, offset);
  } else if (mask) {
    f.masked = true;
    f.mask = ex.load<double>(mask);
    f.keep_scale = ex.load<T>(scale)[0];
  }
  return f;
}

}  // namespace frost::detail
