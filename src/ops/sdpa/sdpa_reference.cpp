#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa/sdpa_node.h"

namespace frost::detail {

using graph::SdpaInput;
using graph::SdpaOutput;

namespace {

// Per-batch valid lengths: the padding mask's values, or the full extents without it. Checked
// before any output is written, so a bad length leaves the caller's buffers untouched.
error_t load_lengths(const SdpaNode& node, const RefExec& ex, const TensorPtr& t, const char* port, int64_t batch,
                     int64_t extent, std::vector<int64_t>& out) {
  out.assign(static_cast<size_t>(batch), extent);
  if (!t) return {};
  const Array<double> a = ex.load<double>(t);
  for (int64_t b = 0; b < batch; ++b) {
    const double v = a[b];
    if (!(v >= 0 && v <= static_cast<double>(extent)))
      return attr_error(node, port, std::to_string(static_cast<int64_t>(v)) + " at batch " + std::to_string(b),
                        "must be in [0, " + std::to_string(extent) + "]");
    out[static_cast<size_t>(b)] = static_cast<int64_t>(v);
  }
  return {};
}

}  // namespace

error_t SdpaNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const auto& qd = in(SdpaInput::Q)->get_dim();
    const int64_t batch = qd[0], h_q = qd[1], s_q = qd[2], d_qk = qd[3];
    const int64_t h_k = in(SdpaInput::K)->get_dim()[1], s_kv = in(SdpaInput::K)->get_dim()[2];
    const int64_t h_v = in(SdpaInput::V)->get_dim()[1], d_v = in(SdpaInput::V)->get_dim()[3];
    const TensorPtr seq_q = attr.padding_mask ? in(SdpaInput::SEQ_LEN_Q) : nullptr;
    const TensorPtr seq_kv = attr.padding_mask ? in(SdpaInput::SEQ_LEN_KV) : nullptr;
    std::vector<int64_t> len_q, len_kv;
    FROST_CHECK(load_lengths(*this, ex, seq_q, "SEQ_LEN_Q", batch, s_q, len_q));
    FROST_CHECK(load_lengths(*this, ex, seq_kv, "SEQ_LEN_KV", batch, s_kv, len_kv));

    const Array<T> q = ex.load<T>(in(SdpaInput::Q));
    const Array<T> k = ex.load<T>(in(SdpaInput::K));
    const Array<T> v = ex.load<T>(in(SdpaInput::V));
    T scale = T(1);
    if (attr.attn_scale_value) scale = static_cast<T>(*attr.attn_scale_value);
    if (const TensorPtr t = in(SdpaInput::ATTN_SCALE)) scale = ex.load<T>(t)[0];
    const TensorPtr bias_t = in(SdpaInput::BIAS);
    const Array<T> bias = bias_t ? ex.load<T>(bias_t) : Array<T>();
    const int64_t bias_b = bias_t ? bias.dim[0] : 1, bias_h = bias_t ? bias.dim[1] : 1;
    const TensorPtr sink_t = in(SdpaInput::SINK_TOKEN);
    const Array<T> sink = sink_t ? ex.load<T>(sink_t) : Array<T>();
    const std::vector<double> slopes = attr.alibi_mask ? alibi_slopes(h_q) : std::vector<double>();
    const bool bottom_right = attr.diagonal_alignment == DiagonalAlignment_t::BOTTOM_RIGHT;
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const T stats_factor = attr.stats_use_log2 ? static_cast<T>(1.0 / std::log(2.0)) : T(1);

    Array<T> o({batch, h_q, s_q, d_v});
    Array<T> stats({batch, h_q, s_q, 1});
    std::vector<T> logits(static_cast<size_t>(s_kv));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < h_q; ++h) {
        const T* k_head = &k[(b * h_k + h / (h_q / h_k)) * s_kv * d_qk];
        const T* v_head = &v[(b * h_v + h / (h_q / h_v)) * s_kv * d_v];
        const T* bias_head =
            bias_t ? &bias[((bias_b == 1 ? 0 : b) * bias_h + (bias_h == 1 ? 0 : h)) * s_q * s_kv] : nullptr;
        for (int64_t i = 0; i < s_q; ++i) {
          const int64_t row = (b * h_q + h) * s_q + i;
          T* o_row = &o[row * d_v];
          // o starts zeroed: padding rows and rows with nothing to attend keep O = 0.
          if (i >= len_q[static_cast<size_t>(b)]) {
            stats[row] = kNegInf;
            continue;
          }
          // Visible keys form the range [first, last): the padding mask, then the diagonal band.
          const int64_t diag = i + (bottom_right ? len_kv[static_cast<size_t>(b)] - len_q[static_cast<size_t>(b)] : 0);
          int64_t first = 0, last = len_kv[static_cast<size_t>(b)];
          if (attr.left_bound) first = std::max(first, diag - *attr.left_bound + 1);
          if (attr.right_bound) last = std::min(last, diag + *attr.right_bound + 1);
          const T* q_row = &q[row * d_qk];
          T row_max = sink_t ? sink[h] : kNegInf;
          for (int64_t j = first; j < last; ++j) {
            const T* k_row = k_head + j * d_qk;
            T dot = 0;
            for (int64_t d = 0; d < d_qk; ++d) dot += q_row[d] * k_row[d];
            T s = scale * dot;
            if (bias_head) s += bias_head[i * s_kv + j];
            if (attr.alibi_mask) s += static_cast<T>(slopes[static_cast<size_t>(h)] * static_cast<double>(j - diag));
            logits[static_cast<size_t>(j)] = s;
            row_max = std::max(row_max, s);
          }
          // No visible key with a finite logit and no sink: the softmax is empty.
          if (row_max == kNegInf) {
            stats[row] = kNegInf;
            continue;
          }
          T denom = sink_t ? std::exp(sink[h] - row_max) : T(0);
          for (int64_t j = first; j < last; ++j) {
            const T p = std::exp(logits[static_cast<size_t>(j)] - row_max);
            denom += p;
            const T* v_row = v_head + j * d_v;
            for (int64_t d = 0; d < d_v; ++d) o_row[d] += p * v_row[d];
          }
          for (int64_t d = 0; d < d_v; ++d) o_row[d] /= denom;
          stats[row] = (row_max + std::log(denom)) * stats_factor;
        }
      }
    ex.store(out(SdpaOutput::O), o);
    if (const TensorPtr st = out(SdpaOutput::STATS)) ex.store(st, stats);
    return {};
  });
}

}  // namespace frost::detail
