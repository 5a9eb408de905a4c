#include <cmath>
#include <vector>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa/sdpa_masks.h"
#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa/sdpa_operands.h"
#include "ops/sdpa_backward/attention_backward_core.h"
#include "ops/sdpa_backward/sdpa_backward_node.h"

namespace frost::detail {

using In = graph::SdpaBackwardInput;
using Out = graph::SdpaBackwardOutput;

namespace {

// Copies the valid rows of a dense gradient into its output: a packed output keeps every other
// element as the caller left it; a dense one is zero outside the rows.
template <class T>
void write_rows(const Array<T>& grad, const std::vector<int64_t>& lengths, OutputRows& out) {
  const auto& dim = grad.dim;
  for (int64_t b = 0; b < dim[0]; ++b)
    for (int64_t h = 0; h < dim[1]; ++h)
      for (int64_t s = 0; s < lengths[static_cast<size_t>(b)]; ++s)
        for (int64_t d = 0; d < dim[3]; ++d)
          out.set(b, h, s, d, static_cast<double>(grad[((b * dim[1] + h) * dim[2] + s) * dim[3] + d]));
}

}  // namespace

// The shared attention-backward math (attention_backward_core.h) with no quantization recipe: its
// sums run in one fixed order, so the result is deterministic by construction.
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
    OutputRows dq, dk, dv;
    FROST_CHECK(prepare_output(*this, ex, dq_t, "DQ", starts_q(dq_t), len_q, 0.0, dq));
    FROST_CHECK(prepare_output(*this, ex, dk_t, "DK", starts_kv(dk_t), len_kv, 0.0, dk));
    FROST_CHECK(prepare_output(*this, ex, dv_t, "DV", starts_kv(dv_t), len_kv, 0.0, dv));

    AttentionBackwardOperands<T> op;
    op.ext = {batch, h_q, h_k, h_v, s_q, s_kv, d_qk, d_v};
    op.q = &q, op.k = &k, op.v = &v, op.o = &o, op.d_o = &d_o, op.stats = &stats;
    if (attr.attn_scale_value) op.scale = static_cast<T>(*attr.attn_scale_value);
    if (const TensorPtr t = in(In::ATTN_SCALE)) op.scale = ex.load<T>(t)[0];
    // Stats in base 2 hold lse / ln 2; the probabilities need the natural-log value.
    if (attr.stats_use_log2) op.stats_to_natural = static_cast<T>(std::log(2.0));
    const TensorPtr bias_t = in(In::BIAS), sink_t = in(In::SINK_TOKEN);
    const Array<T> bias = bias_t ? ex.load<T>(bias_t) : Array<T>();
    const Array<T> sink = sink_t ? ex.load<T>(sink_t) : Array<T>();
    const std::vector<double> slopes = attr.alibi_mask ? alibi_slopes(h_q) : std::vector<double>();
    if (bias_t) op.bias = &bias;
    if (sink_t) op.sink = &sink;
    if (attr.alibi_mask) op.alibi_slopes = &slopes;
    op.mask = {attr.diagonal_alignment, attr.left_bound, attr.right_bound};
    op.block = load_block_mask(ex, in(In::BLOCK_MASK), attr.block_mask_tile_q, attr.block_mask_tile_kv);
    op.dropout = load_dropout<T>(ex, attr.dropout_probability, in(In::DROPOUT_SEED), in(In::DROPOUT_OFFSET),
                                 in(In::DROPOUT_MASK), in(In::DROPOUT_SCALE), h_q, s_q, s_kv);
    if (const TensorPtr inv_t = in(In::DROPOUT_SCALE_INV)) {
      // Both scalars are FLOAT: their product is 1 within a few float roundings when they agree.
      const double scale_value = ex.load<double>(in(In::DROPOUT_SCALE))[0], inv = ex.load<double>(inv_t)[0];
      if (!(std::fabs(scale_value * inv - 1.0) <= 1e-6))
        return attr_error(*this, "DROPOUT_SCALE_INV", std::to_string(inv),
                          "must be 1 / DROPOUT_SCALE = 1 / " + std::to_string(scale_value));
    }
    op.len_q = len_q, op.len_kv = len_kv;
    const AttentionGradients<T> g = attention_backward(op, [](HeadGradientInputs<T>&) {});

    write_rows(g.dq, len_q, dq);
    write_rows(g.dk, len_kv, dk);
    write_rows(g.dv, len_kv, dv);
    store_output(ex, dq_t, dq);
    store_output(ex, dk_t, dk);
    store_output(ex, dv_t, dv);
    if (const TensorPtr t = out(Out::DBIAS)) ex.store(t, g.dbias);
    if (const TensorPtr t = out(Out::DSINK_TOKEN)) ex.store(t, g.dsink);
    return {};
  });
}

}  // namespace frost::detail
