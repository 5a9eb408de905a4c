// The math of the FP8 attention forwards (sdpa_fp8, sdpa_mxfp8) on real (dequantized) operands. For
// each (batch, query head, row) over the visible keys:
//   S = scale * Q K^T      e_j = exp(S_j - max S)      denom = sum_j e_j      Stats = max S + log(denom)
//   O = sum_j weight(e_j, denom) * V_j
// where `weight` is where a recipe quantizes P: the exact softmax is weight(e, denom) = e / denom.
// Padding rows and rows with no visible key give O = 0 and Stats = -inf.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa_fp8/attention_mask.h"

namespace frost::detail {

template <class T>
struct AttentionForwardOperands {
  const Array<T>* q = nullptr;  // [b, h_q, s_q, d_qk] real values
  const Array<T>* k = nullptr;  // [b, h_k, s_kv, d_qk]
  const Array<T>* v = nullptr;  // [b, h_v, s_kv, d_v]
  T scale = 1;
  AttentionMask mask;
  std::vector<int64_t> len_q, len_kv;  // valid lengths per batch (the full extents without padding)
};

template <class T>
struct AttentionForwardResult {
  Array<T> o, stats;
  T amax_p = 0;  // the largest probability e / denom
};

template <class T, class Weight>
AttentionForwardResult<T> attention_forward(const AttentionForwardOperands<T>& op, Weight&& weight) {
  const Array<T>&q = *op.q, &k = *op.k, &v = *op.v;
  const int64_t batch = q.dim[0], h_q = q.dim[1], s_q = q.dim[2], d_qk = q.dim[3];
  const int64_t h_k = k.dim[1], s_kv = k.dim[2], h_v = v.dim[1], d_v = v.dim[3];
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  AttentionForwardResult<T> r{Array<T>({batch, h_q, s_q, d_v}), Array<T>({batch, h_q, s_q, 1}, kNegInf)};
  std::vector<T> e(static_cast<size_t>(s_kv));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len_q = op.len_q[static_cast<size_t>(b)], len_kv = op.len_kv[static_cast<size_t>(b)];
    for (int64_t h = 0; h < h_q; ++h) {
      const T* k_head = &k[(b * h_k + h / (h_q / h_k)) * s_kv * d_qk];
      const T* v_head = &v[(b * h_v + h / (h_q / h_v)) * s_kv * d_v];
      for (int64_t i = 0; i < len_q; ++i) {
        const int64_t row = (b * h_q + h) * s_q + i;
        const auto [first, last] = op.mask.visible_keys(i, len_q, len_kv);
        if (first >= last) continue;  // nothing visible: O stays 0, Stats -inf
        const T* q_row = &q[row * d_qk];
        T row_max = kNegInf;
        for (int64_t j = first; j < last; ++j) {
          T dot = 0;
          for (int64_t d = 0; d < d_qk; ++d) dot += q_row[d] * k_head[j * d_qk + d];
          e[static_cast<size_t>(j)] = op.scale * dot;
          row_max = std::max(row_max, e[static_cast<size_t>(j)]);
        }
        T denom = 0;
        for (int64_t j = first; j < last; ++j)
          denom += (e[static_cast<size_t>(j)] = std::exp(e[static_cast<size_t>(j)] - row_max));
        r.stats[row] = row_max + std::log(denom);
        T* o_row = &r.o[row * d_v];
        for (int64_t j = first; j < last; ++j) {
          r.amax_p = std::max(r.amax_p, e[static_cast<size_t>(j)] / denom);
          const T w = weight(e[static_cast<size_t>(j)], denom);
          for (int64_t d = 0; d < d_v; ++d) o_row[d] += w * v_head[j * d_v + d];
        }
      }
    }
  }
  return r;
}

// Dense real values of an FP8 tensor stored as codes with one per-tensor descale.
template <class T>
Array<T> load_descaled(const RefExec& ex, const TensorPtr& codes, T descale) {
  Array<T> a = ex.load<T>(codes);
  for (T& x : a.v) x *= descale;
  return a;
}

}  // namespace frost::detail
