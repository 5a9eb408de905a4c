#include <algorithm>
#include <cmath>
#include <limits>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa_backward/sdpa_backward_node.h"

namespace frost::detail {

using In = graph::SdpaBackwardInput;
using Out = graph::SdpaBackwardOutput;

namespace {

// Per-batch valid lengths: the padding mask's values, or the full extents without it. Checked
// before any output is written, so a bad length leaves the caller's buffers untouched.
error_t load_lengths(const SdpaBackwardNode& node, const RefExec& ex, const TensorPtr& t, const char* port,
                     int64_t batch, int64_t extent, std::vector<int64_t>& out) {
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

// One pass over every (batch, query head, row) in a fixed order: the row's probabilities come back
// from the saved Stats, and each row adds its share to dQ, dK, dV, dBias and dSink. Sums over the
// heads of a GQA group, the bias's broadcast dims and the rows of a head thus run in one order
// every time: the result is deterministic by construction.
error_t SdpaBackwardNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const auto& qd = in(In::Q)->get_dim();
    const int64_t batch = qd[0], h_q = qd[1], s_q = qd[2], d_qk = qd[3];
    const int64_t h_k = in(In::K)->get_dim()[1], s_kv = in(In::K)->get_dim()[2];
    const int64_t h_v = in(In::V)->get_dim()[1], d_v = in(In::V)->get_dim()[3];
    std::vector<int64_t> len_q, len_kv;
    FROST_CHECK(
        load_lengths(*this, ex, attr.padding_mask ? in(In::SEQ_LEN_Q) : nullptr, "SEQ_LEN_Q", batch, s_q, len_q));
    FROST_CHECK(
        load_lengths(*this, ex, attr.padding_mask ? in(In::SEQ_LEN_KV) : nullptr, "SEQ_LEN_KV", batch, s_kv, len_kv));

    const Array<T> q = ex.load<T>(in(In::Q));
    const Array<T> k = ex.load<T>(in(In::K));
    const Array<T> v = ex.load<T>(in(In::V));
    const Array<T> o = ex.load<T>(in(In::O));
    const Array<T> d_o = ex.load<T>(in(In::DO));
    const Array<T> stats = ex.load<T>(in(In::STATS));
    T scale = T(1);
    if (attr.attn_scale_value) scale = static_cast<T>(*attr.attn_scale_value);
    if (const TensorPtr t = in(In::ATTN_SCALE)) scale = ex.load<T>(t)[0];
    const TensorPtr bias_t = in(In::BIAS);
    const Array<T> bias = bias_t ? ex.load<T>(bias_t) : Array<T>();
    const int64_t bias_b = bias_t ? bias.dim[0] : 1, bias_h = bias_t ? bias.dim[1] : 1;
    const TensorPtr sink_t = in(In::SINK_TOKEN);
    const Array<T> sink = sink_t ? ex.load<T>(sink_t) : Array<T>();
    const std::vector<double> slopes = attr.alibi_mask ? alibi_slopes(h_q) : std::vector<double>();
    const bool bottom_right = attr.diagonal_alignment == DiagonalAlignment_t::BOTTOM_RIGHT;
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    // Stats in base 2 hold lse / ln 2; the probabilities need the natural-log value.
    const T stats_to_natural = attr.stats_use_log2 ? static_cast<T>(std::log(2.0)) : T(1);

    Array<T> dq(qd), dk(in(In::K)->get_dim()), dv(in(In::V)->get_dim());
    Array<T> dbias(bias_t ? bias.dim : std::vector<int64_t>{});
    Array<T> dsink({1, h_q, 1, 1});
    std::vector<T> prob(static_cast<size_t>(s_kv)), dlogit(static_cast<size_t>(s_kv));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < h_q; ++h) {
        const int64_t k_head = (b * h_k + h / (h_q / h_k)) * s_kv, v_head = (b * h_v + h / (h_q / h_v)) * s_kv;
        const int64_t bias_head = ((bias_b == 1 ? 0 : b) * bias_h + (bias_h == 1 ? 0 : h)) * s_q * s_kv;
        for (int64_t i = 0; i < s_q; ++i) {
          const int64_t row = (b * h_q + h) * s_q + i;
          const T lse = stats[row] * stats_to_natural;
          // Padding rows and rows with an empty softmax have no gradient: dQ stays 0. The saved Stats
          // decide emptiness, so a row they mark -inf never turns into exp(+inf) * 0 = NaN.
          if (i >= len_q[static_cast<size_t>(b)] || lse == kNegInf) continue;
          const int64_t diag = i + (bottom_right ? len_kv[static_cast<size_t>(b)] - len_q[static_cast<size_t>(b)] : 0);
          int64_t first = 0, last = len_kv[static_cast<size_t>(b)];
          if (attr.left_bound) first = std::max(first, diag - *attr.left_bound + 1);
          if (attr.right_bound) last = std::min(last, diag + *attr.right_bound + 1);
          const T* q_row = &q[row * d_qk];
          const T* do_row = &d_o[row * d_v];
          T delta = 0;  // D = rowsum(dO * O) = sum_j P_ij dP_ij, since the sink carries no value
          for (int64_t d = 0; d < d_v; ++d) delta += do_row[d] * o[row * d_v + d];
          for (int64_t j = first; j < last; ++j) {
            const T* k_row = &k[(k_head + j) * d_qk];
            T dot = 0;
            for (int64_t d = 0; d < d_qk; ++d) dot += q_row[d] * k_row[d];
            T s = scale * dot;
            if (bias_t) s += bias[bias_head + i * s_kv + j];
            if (attr.alibi_mask) s += static_cast<T>(slopes[static_cast<size_t>(h)] * static_cast<double>(j - diag));
            const T p = std::exp(s - lse);
            const T* v_row = &v[(v_head + j) * d_v];
            T dp = 0;
            for (int64_t d = 0; d < d_v; ++d) dp += do_row[d] * v_row[d];
            prob[static_cast<size_t>(j)] = p;
            dlogit[static_cast<size_t>(j)] = p * (dp - delta);
          }
          T* dq_row = &dq[row * d_qk];
          for (int64_t j = first; j < last; ++j) {
            const T p = prob[static_cast<size_t>(j)], ds = dlogit[static_cast<size_t>(j)];
            T* dk_row = &dk[(k_head + j) * d_qk];
            const T* k_row = &k[(k_head + j) * d_qk];
            for (int64_t d = 0; d < d_qk; ++d) {
              dq_row[d] += scale * ds * k_row[d];
              dk_row[d] += scale * ds * q_row[d];
            }
            T* dv_row = &dv[(v_head + j) * d_v];
            for (int64_t d = 0; d < d_v; ++d) dv_row[d] += p * do_row[d];
            if (bias_t) dbias[bias_head + i * s_kv + j] += ds;
          }
          if (sink_t) dsink[h] -= std::exp(sink[h] - lse) * delta;
        }
      }
    ex.store(out(Out::DQ), dq);
    ex.store(out(Out::DK), dk);
    ex.store(out(Out::DV), dv);
    if (const TensorPtr t = out(Out::DBIAS)) ex.store(t, dbias);
    if (const TensorPtr t = out(Out::DSINK_TOKEN)) ex.store(t, dsink);
    return {};
  });
}

}  // namespace frost::detail
