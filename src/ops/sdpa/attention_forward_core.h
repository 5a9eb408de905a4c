// The math of the attention forward, shared by sdpa and the FP8 and MXFP8 attentions (which
// dequantize their operands first). For each (batch, query head, row) over the visible keys:
//   S_j = scale * Q K_j^T (+ bias, + ALiBi)    m = max(max_j S_j, sink)    e_j = exp(S_j - m)
//   denom = sum_j e_j (+ exp(sink - m))         Stats = m + log(denom)
//   O = sum_j weight(e_j, denom) * dropout_j * V_j
// where `weight` is where a recipe quantizes P; the exact softmax is weight(e, denom) = e / denom.
// Dropout removes probability mass from O only: the denominator and Stats keep it.
// Padding rows and rows whose softmax is empty (no visible key and no sink) give O = 0, Stats = -inf.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa/sdpa_masks.h"
#include "ops/sdpa/sdpa_operands.h"

namespace frost::detail {

template <class T>
struct AttentionForwardOperands {
  AttentionExtents ext;
  const Operand<T>* q = nullptr;  // real values, read through their addressing (dense, packed or paged)
  const Operand<T>* k = nullptr;
  const Operand<T>* v = nullptr;
  T scale = 1;
  AttentionMask mask;
  std::vector<int64_t> len_q, len_kv;                 // valid lengths per batch
  const Array<T>* bias = nullptr;                     // [b or 1, h_q or 1, s_q, s_kv]
  const std::vector<double>* alibi_slopes = nullptr;  // one per query head
  const Array<T>* sink = nullptr;                     // [1, h_q, 1, 1]
  BlockMask block;                                    // none by default
  DropoutFactor<T> dropout;                           // none by default
};

template <class T>
struct AttentionForwardResult {
  Array<T> o, stats;  // dense [b, h_q, s_q, d_v] and [b, h_q, s_q, 1] (natural logarithm)
  T amax_p = 0;       // the largest probability e / denom
};

template <class T, class Weight>
AttentionForwardResult<T> attention_forward(const AttentionForwardOperands<T>& op, Weight&& weight) {
  const Operand<T>&q = *op.q, &k = *op.k, &v = *op.v;
  const auto [batch, h_q, h_k, h_v, s_q, s_kv, d_qk, d_v] = op.ext;
  const int64_t bias_b = op.bias ? op.bias->dim[0] : 1, bias_h = op.bias ? op.bias->dim[1] : 1;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  AttentionForwardResult<T> r{Array<T>({batch, h_q, s_q, d_v}), Array<T>({batch, h_q, s_q, 1}, kNegInf)};
  std::vector<T> e(static_cast<size_t>(s_kv));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len_q = op.len_q[static_cast<size_t>(b)], len_kv = op.len_kv[static_cast<size_t>(b)];
    for (int64_t h = 0; h < h_q; ++h) {
      const int64_t kh = h / (h_q / h_k), vh = h / (h_q / h_v);
      const int64_t bias_head = ((bias_b == 1 ? 0 : b) * bias_h + (bias_h == 1 ? 0 : h)) * s_q * s_kv;
      const T sink = op.sink ? (*op.sink)[h] : kNegInf;
      for (int64_t i = 0; i < len_q; ++i) {
        const int64_t row = (b * h_q + h) * s_q + i;
        const auto [first, last] = op.mask.visible_keys(i, len_q, len_kv);
        const int64_t diag = op.mask.diagonal(i, len_q, len_kv);
        T row_max = sink;
        for (int64_t j = first; j < last; ++j) {
          T& s = e[static_cast<size_t>(j)];
          if (!op.block.visible(b, h, i, j)) {
            s = kNegInf;
            continue;
          }
          T dot = 0;
          for (int64_t d = 0; d < d_qk; ++d) dot += q.at(b, h, i, d) * k.at(b, kh, j, d);
          s = op.scale * dot;
          if (op.bias) s += (*op.bias)[bias_head + i * s_kv + j];
          if (op.alibi_slopes)
            s += static_cast<T>((*op.alibi_slopes)[static_cast<size_t>(h)] * static_cast<double>(j - diag));
          row_max = std::max(row_max, s);
        }
        if (row_max == kNegInf) continue;  // empty softmax: O stays 0, Stats -inf
        T denom = op.sink ? std::exp(sink - row_max) : T(0);
        for (int64_t j = first; j < last; ++j)
          denom += (e[static_cast<size_t>(j)] = std::exp(e[static_cast<size_t>(j)] - row_max));
        r.stats[row] = row_max + std::log(denom);
        T* o_row = &r.o[row * d_v];
        for (int64_t j = first; j < last; ++j) {
          const T ej = e[static_cast<size_t>(j)];
          r.amax_p = std::max(r.amax_p, ej / denom);
          const T w = weight(ej, denom) * op.dropout.at(b, h, i, j);
          for (int64_t d = 0; d < d_v; ++d) o_row[d] += w * v.at(b, vh, j, d);
        }
      }
    }
  }
  return r;
}

}  // namespace frost::detail
