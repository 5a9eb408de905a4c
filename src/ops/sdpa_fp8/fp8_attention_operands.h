// Operands of the FP8 attention references: codes with one per-tensor descale become real values.
#pragma once

#include <utility>
#include <vector>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa/sdpa_operands.h"

namespace frost::detail {

// Dense real values of an FP8 tensor stored as codes with one per-tensor descale.
template <class T>
Array<T> load_descaled(const RefExec& ex, const TensorPtr& codes, T descale) {
  Array<T> a = ex.load<T>(codes);
  for (T& x : a.v) x *= descale;
  return a;
}

// Per-batch valid lengths from the SEQ_LEN tensors (null without a padding mask: the full extents).
inline error_t load_padding_lengths(const Node& node, const RefExec& ex, const TensorPtr& seq_q,
                                    const TensorPtr& seq_kv, const AttentionExtents& ext, std::vector<int64_t>& len_q,
                                    std::vector<int64_t>& len_kv) {
  SideLengths q, kv;
  FROST_CHECK(load_side(node, ex, seq_q, nullptr, "SEQ_LEN_Q", "", ext.batch, ext.s_q, q));
  FROST_CHECK(load_side(node, ex, seq_kv, nullptr, "SEQ_LEN_KV", "", ext.batch, ext.s_kv, kv));
  len_q = std::move(q.lengths), len_kv = std::move(kv.lengths);
  return {};
}

}  // namespace frost::detail
