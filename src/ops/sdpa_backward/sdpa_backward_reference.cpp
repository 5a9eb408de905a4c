#include <cmath>
#include <limits>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa/sdpa_masks.h"
#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa/sdpa_operands.h"
#include "ops/sdpa_backward/sdpa_backward_node.h"

namespace frost::detail {

using In = graph::SdpaBackwardInput;
using Out = graph::SdpaBackwardOutput;

namespace {

// A gradient output: rows are summed in T (FP32, or FP64 in the fp64 mode) at the output's own
// addressing, then copied into the rows that exist. A packed output keeps every other element as
// the caller left it; a dense one is zero outside the rows.
template <class T>
struct GradientRows {
  OutputRows out;
  std::vector<T> sum;

  T& at(int64_t b, int64_t h, int64_t s, int64_t d) { return sum[static_cast<size_t>(out.data.addr.at(b, h, s, d))]; }

  void finish(const std::vector<int64_t>& dim, const std::vector<int64_t>& lengths) {
    for (int64_t b = 0; b < dim[0]; ++b)
      for (int64_t h = 0; h < dim[1]; ++h)
        for (int64_t s = 0; s < lengths[static_cast<size_t>(b)]; ++s)
          for (int64_t d = 0; d < dim[3]; ++d) out.set(b, h, s, d, static_cast<double>(at(b, h, s, d)));
  }
};

template <class T>
error_t prepare_gradient(const Node& node, const RefExec& ex, const TensorPtr& t, const char* port,
                         const PackedStarts& packed, const std::vector<int64_t>& lengths, GradientRows<T>& g) {
  FROST_CHECK(prepare_output(node, ex, t, port, packed, lengths, 0.0, g.out));
  g.sum.assign(g.out.data.values.v.size(), T(0));
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
    const bool padding = attr.padding_mask;
    // Everything that can fail is read and checked before the first output is written.
    SideLengths side_q, side_kv;
    FROST_CHECK(load_side(*this, ex, padding ? in(In::SEQ_LEN_Q) : nullptr, padding ? in(In::CU_SEQ_LEN_Q) : nullptr,
                          "SEQ_LEN_Q", "CU_SEQ_LEN_Q", batch, s_q, side_q));
    FROST_CHECK(load_side(*this, ex, padding ? in(In::SEQ_LEN_KV) : nullptr, padding ? in(In::CU_SEQ_LEN_KV) : nullptr,
                          "SEQ_LEN_KV", "CU_SEQ_LEN_KV", batch, s_kv, side_kv));
    const std::vector<int64_t>& len_q = side_q.lengths;
    const std::vector<int64_t>& len_kv = side_kv.lengths;
    auto starts_q = [&](const TensorPtr& t) { return packed_starts(ex, t, side_q, attr.max_total_seq_len_q); };
    auto starts_kv = [&](const TensorPtr& t) { return packed_starts(ex, t, side_kv, attr.max_total_seq_len_kv); };

    Operand<T> q, k, v, o, d_o, stats;
    const TensorPtr q_t = in(In::Q), k_t = in(In::K), v_t = in(In::V), o_t = in(In::O), do_t = in(In::DO);
    const TensorPtr stats_t = in(In::STATS);
    FROST_CHECK(load_operand(*this, ex, q_t, "Q", starts_q(q_t), len_q, q));
    FROST_CHECK(load_operand(*this, ex, k_t, "K", starts_kv(k_t), len_kv, k));
    FROST_CHECK(load_operand(*this, ex, v_t, "V", starts_kv(v_t), len_kv, v));
    FROST_CHECK(load_operand(*this, ex, o_t, "O", starts_q(o_t), len_q, o));
    FROST_CHECK(load_operand(*this, ex, do_t, "DO", starts_q(do_t), len_q, d_o));
    FROST_CHECK(load_operand(*this, ex, stats_t, "STATS", starts_q(stats_t), len_q, stats));
    const TensorPtr dq_t = out(Out::DQ), dk_t = out(Out::DK), dv_t = out(Out::DV);
    GradientRows<T> dq, dk, dv;
    FROST_CHECK(prepare_gradient(*this, ex, dq_t, "DQ", starts_q(dq_t), len_q, dq));
    FROST_CHECK(prepare_gradient(*this, ex, dk_t, "DK", starts_kv(dk_t), len_kv, dk));
    FROST_CHECK(prepare_gradient(*this, ex, dv_t, "DV", starts_kv(dv_t), len_kv, dv));

    T scale = T(1);
    if (attr.attn_scale_value) scale = static_cast<T>(*attr.attn_scale_value);
    if (const TensorPtr t = in(In::ATTN_SCALE)) scale = ex.load<T>(t)[0];
    const TensorPtr bias_t = in(In::BIAS);
    const Array<T> bias = bias_t ? ex.load<T>(bias_t) : Array<T>();
    const int64_t bias_b = bias_t ? bias.dim[0] : 1, bias_h = bias_t ? bias.dim[1] : 1;
    const TensorPtr sink_t = in(In::SINK_TOKEN);
    const Array<T> sink = sink_t ? ex.load<T>(sink_t) : Array<T>();
    const BlockMask block = load_block_mask(ex, in(In::BLOCK_MASK), attr.block_mask_tile_q, attr.block_mask_tile_kv);
    const DropoutFactor<T> drop =
        load_dropout<T>(ex, attr.dropout_probability, in(In::DROPOUT_SEED), in(In::DROPOUT_OFFSET),
                        in(In::DROPOUT_MASK), in(In::DROPOUT_SCALE), h_q, s_q, s_kv);
    if (const TensorPtr inv_t = in(In::DROPOUT_SCALE_INV)) {
      // Both scalars are FLOAT: their product is 1 within a few float roundings when they agree.
      const double scale_value = ex.load<double>(in(In::DROPOUT_SCALE))[0], inv = ex.load<double>(inv_t)[0];
      if (!(std::fabs(scale_value * inv - 1.0) <= 1e-6))
        return attr_error(*this, "DROPOUT_SCALE_INV", std::to_string(inv),
                          "must be 1 / DROPOUT_SCALE = 1 / " + std::to_string(scale_value));
    }
    const std::vector<double> slopes = attr.alibi_mask ? alibi_slopes(h_q) : std::vector<double>();
    const bool bottom_right = attr.diagonal_alignment == DiagonalAlignment_t::BOTTOM_RIGHT;
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    // Stats in base 2 hold lse / ln 2; the probabilities need the natural-log value.
    const T stats_to_natural = attr.stats_use_log2 ? static_cast<T>(std::log(2.0)) : T(1);

    Array<T> dbias(bias_t ? bias.dim : std::vector<int64_t>{});
    Array<T> dsink({1, h_q, 1, 1});
    // Per key of the current row: P * F (the probability as O used it) and dS; 0 for masked keys.
    std::vector<T> kept_prob(static_cast<size_t>(s_kv)), dlogit(static_cast<size_t>(s_kv));
    std::vector<T> dq_row(static_cast<size_t>(d_qk));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < h_q; ++h) {
        const int64_t kh = h / (h_q / h_k), vh = h / (h_q / h_v);
        const int64_t bias_head = ((bias_b == 1 ? 0 : b) * bias_h + (bias_h == 1 ? 0 : h)) * s_q * s_kv;
        const int64_t rows = len_q[static_cast<size_t>(b)], keys = len_kv[static_cast<size_t>(b)];
        for (int64_t i = 0; i < rows; ++i) {
          const T lse = stats.at(b, h, i, 0) * stats_to_natural;
          // Rows with an empty softmax have no gradient: dQ stays 0. The saved Stats decide
          // emptiness, so a row they mark -inf never turns into exp(+inf) * 0 = NaN.
          if (lse == kNegInf) continue;
          const auto [diag, first, last] = key_range(i, rows, keys, bottom_right, attr.left_bound, attr.right_bound);
          T delta = 0;  // D = rowsum(dO * O) = sum_j P_ij dP_ij, since the sink carries no value
          for (int64_t d = 0; d < d_v; ++d) delta += d_o.at(b, h, i, d) * o.at(b, h, i, d);
          for (int64_t j = first; j < last; ++j) {
            if (!block.visible(b, h, i, j)) {
              kept_prob[static_cast<size_t>(j)] = dlogit[static_cast<size_t>(j)] = T(0);
              continue;
            }
            T dot = 0;
            for (int64_t d = 0; d < d_qk; ++d) dot += q.at(b, h, i, d) * k.at(b, kh, j, d);
            T s = scale * dot;
            if (bias_t) s += bias[bias_head + i * s_kv + j];
            if (attr.alibi_mask) s += static_cast<T>(slopes[static_cast<size_t>(h)] * static_cast<double>(j - diag));
            const T p = std::exp(s - lse);
            const T factor = drop.at(b, h, i, j);
            T dp = 0;
            for (int64_t d = 0; d < d_v; ++d) dp += d_o.at(b, h, i, d) * v.at(b, vh, j, d);
            kept_prob[static_cast<size_t>(j)] = p * factor;
            dlogit[static_cast<size_t>(j)] = p * (dp * factor - delta);
          }
          std::fill(dq_row.begin(), dq_row.end(), T(0));
          for (int64_t j = first; j < last; ++j) {
            const T pf = kept_prob[static_cast<size_t>(j)], ds = dlogit[static_cast<size_t>(j)];
            for (int64_t d = 0; d < d_qk; ++d) {
              dq_row[static_cast<size_t>(d)] += scale * ds * k.at(b, kh, j, d);
              dk.at(b, kh, j, d) += scale * ds * q.at(b, h, i, d);
            }
            for (int64_t d = 0; d < d_v; ++d) dv.at(b, vh, j, d) += pf * d_o.at(b, h, i, d);
            if (bias_t) dbias[bias_head + i * s_kv + j] += ds;
          }
          for (int64_t d = 0; d < d_qk; ++d) dq.at(b, h, i, d) = dq_row[static_cast<size_t>(d)];
          if (sink_t) dsink[h] -= std::exp(sink[h] - lse) * delta;
        }
      }
    dq.finish(qd, len_q);
    dk.finish(k_t->get_dim(), len_kv);
    dv.finish(v_t->get_dim(), len_kv);
    store_output(ex, dq_t, dq.out);
    store_output(ex, dk_t, dk.out);
    store_output(ex, dv_t, dv.out);
    if (const TensorPtr t = out(Out::DBIAS)) ex.store(t, dbias);
    if (const TensorPtr t = out(Out::DSINK_TOKEN)) ex.store(t, dsink);
    return {};
  });
}

}  // namespace frost::detail
