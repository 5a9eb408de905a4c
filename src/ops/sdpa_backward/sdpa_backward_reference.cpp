#include <cmath>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa_backward/attention_backward_core.h"
#include "ops/sdpa_backward/sdpa_backward_node.h"

namespace frost::detail {

using In = graph::SdpaBackwardInput;
using Out = graph::SdpaBackwardOutput;

// The plain-precision backward: attention_backward on the operands as stored, with no recipe.
// The per-batch lengths are checked before any output is written, so a bad length leaves the
// caller's buffers untouched.
error_t SdpaBackwardNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const auto& qd = in(In::Q)->get_dim();
    AttentionBackwardOperands<T> op;
    FROST_CHECK(load_sequence_lengths(*this, ex, attr.padding_mask ? in(In::SEQ_LEN_Q) : nullptr, "SEQ_LEN_Q", qd[0],
                                      qd[2], op.len_q));
    FROST_CHECK(load_sequence_lengths(*this, ex, attr.padding_mask ? in(In::SEQ_LEN_KV) : nullptr, "SEQ_LEN_KV", qd[0],
                                      in(In::K)->get_dim()[2], op.len_kv));
    const Array<T> q = ex.load<T>(in(In::Q)), k = ex.load<T>(in(In::K)), v = ex.load<T>(in(In::V));
    const Array<T> o = ex.load<T>(in(In::O)), d_o = ex.load<T>(in(In::DO)), stats = ex.load<T>(in(In::STATS));
    op.q = &q, op.k = &k, op.v = &v, op.o = &o, op.d_o = &d_o, op.stats = &stats;
    if (attr.attn_scale_value) op.scale = static_cast<T>(*attr.attn_scale_value);
    if (const TensorPtr t = in(In::ATTN_SCALE)) op.scale = ex.load<T>(t)[0];
    const TensorPtr bias_t = in(In::BIAS), sink_t = in(In::SINK_TOKEN);
    const Array<T> bias = bias_t ? ex.load<T>(bias_t) : Array<T>();
    const Array<T> sink = sink_t ? ex.load<T>(sink_t) : Array<T>();
    if (bias_t) op.bias = &bias;
    if (sink_t) op.sink = &sink;
    const std::vector<double> slopes = attr.alibi_mask ? alibi_slopes(qd[1]) : std::vector<double>();
    if (attr.alibi_mask) op.alibi_slopes = &slopes;
    // Stats in base 2 hold lse / ln 2; the probabilities need the natural-log value.
    if (attr.stats_use_log2) op.stats_to_natural = static_cast<T>(std::log(2.0));
    op.mask = {attr.diagonal_alignment, attr.left_bound, attr.right_bound};
    const AttentionGradients<T> g = attention_backward(op, [](HeadGradientInputs<T>&) {});
    ex.store(out(Out::DQ), g.dq);
    ex.store(out(Out::DK), g.dk);
    ex.store(out(Out::DV), g.dv);
    if (const TensorPtr t = out(Out::DBIAS)) ex.store(t, g.dbias);
    if (const TensorPtr t = out(Out::DSINK_TOKEN)) ex.store(t, g.dsink);
    return {};
  });
}

}  // namespace frost::detail
