// The masks of the attention references (sdpa, sdpa_backward and the FP8/MXFP8 attentions): which
// keys a query row sees (the diagonal band and the block mask) and the dropout factor each
// probability takes in O. The backward reads them exactly as the forward does, so a gradient sees
// the forward's own masks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "engines/reference/ref_exec.h"
#include "frost/types.h"
#include "ops/common/philox.h"
#include "ops/sdpa/sdpa_operands.h"

namespace frost::detail {

// The diagonal band of every attention op: key j is visible from query row i of a batch with len_q
// valid queries and len_kv valid keys (the full extents without a padding mask) when j < len_kv and
// i' - left_bound < j <= i' + right_bound, where i' is i, or i + len_kv - len_q for BOTTOM_RIGHT.
struct AttentionMask {
  DiagonalAlignment_t alignment = DiagonalAlignment_t::TOP_LEFT;
  std::optional<int64_t> left_bound, right_bound;

  // The key on query row i's diagonal (i' above); ALiBi measures distances from it.
  int64_t diagonal(int64_t i, int64_t len_q, int64_t len_kv) const {
    return i + (alignment == DiagonalAlignment_t::BOTTOM_RIGHT ? len_kv - len_q : 0);
  }

  // The visible keys of row i as one range [first, last), possibly empty (first >= last).
  std::pair<int64_t, int64_t> visible_keys(int64_t i, int64_t len_q, int64_t len_kv) const {
    const int64_t diag = diagonal(i, len_q, len_kv);
    int64_t first = 0, last = len_kv;
    if (left_bound) first = std::max(first, diag - *left_bound + 1);
    if (right_bound) last = std::min(last, diag + *right_bound + 1);
    return {first, last};
  }
};

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
