// The visible-key rule of sdpa (frost/ops/sdpa.h), shared by attention references that mask the way
// sdpa does: a padding mask by per-batch lengths, then a diagonal band, leave each query row one
// contiguous range of visible keys.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engines/reference/ref_exec.h"
#include "frost/types.h"

namespace frost::detail {

struct AttentionMask {
  DiagonalAlignment_t alignment = DiagonalAlignment_t::TOP_LEFT;
  std::optional<int64_t> left_bound, right_bound;

  // The key on query row i's diagonal: i, or i + len_kv - len_q for BOTTOM_RIGHT.
  int64_t diagonal(int64_t i, int64_t len_q, int64_t len_kv) const {
    return i + (alignment == DiagonalAlignment_t::BOTTOM_RIGHT ? len_kv - len_q : 0);
  }

  // Keys [first, last) visible from query row i of a batch with len_q valid queries and len_kv valid
  // keys (the full extents without a padding mask). Key j is visible when j < len_kv and
  // i' - left_bound < j <= i' + right_bound, with i' = i, or i + len_kv - len_q for BOTTOM_RIGHT.
  // The range may be empty (first >= last).
  std::pair<int64_t, int64_t> visible_keys(int64_t i, int64_t len_q, int64_t len_kv) const {
    const int64_t diag = diagonal(i, len_q, len_kv);
    int64_t first = 0, last = len_kv;
    if (left_bound) first = std::max(first, diag - *left_bound + 1);
    if (right_bound) last = std::min(last, diag + *right_bound + 1);
    return {first, last};
  }
};

// Per-batch valid lengths from an INT32 [b, 1, 1, 1] tensor, or `extent` everywhere when `t` is null.
// Every value is checked (in [0, extent]) before the caller writes anything.
inline error_t load_sequence_lengths(const Node& node, const RefExec& ex, const TensorPtr& t, const char* port,
                                     int64_t batch, int64_t extent, std::vector<int64_t>& lengths) {
  lengths.assign(static_cast<size_t>(batch), extent);
  if (!t) return {};
  const Array<double> a = ex.load<double>(t);
  for (int64_t b = 0; b < batch; ++b) {
    const double v = a[b];
    if (!(v >= 0 && v <= static_cast<double>(extent)))
      return attr_error(node, port, std::to_string(static_cast<int64_t>(v)) + " at batch " + std::to_string(b),
                        "must be in [0, " + std::to_string(extent) + "]");
    lengths[static_cast<size_t>(b)] = static_cast<int64_t>(v);
  }
  return {};
}

}  // namespace frost::detail
