#include <algorithm>
#include <cmath>
#include <tuple>

#include "ops/common/fp8_scaling.h"
#include "ops/sdpa_backward/attention_backward_core.h"
#include "ops/sdpa_fp8/attention_forward_core.h"
#include "ops/sdpa_fp8/sdpa_fp8_backward_node.h"

namespace frost::detail {

using In = graph::SdpaFp8BackwardInput;
using Out = graph::SdpaFp8BackwardOutput;

// The dense backward on dequantized operands, with the per-tensor recipe at its two quantization
// points: P as the left operand of dV, dS as the left operand of dQ and dK.
error_t SdpaFp8BackwardNode::run_reference(RefExec& ex) const {
  const auto& qd = in(In::Q)->get_dim();
  const DataType_t p_type = in(In::Q)->get_data_type(), ds_type = in(In::DO)->get_data_type();
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    AttentionBackwardOperands<T> op;
    FROST_CHECK(load_sequence_lengths(*this, ex, attr.padding_mask ? in(In::SEQ_LEN_Q) : nullptr, "SEQ_LEN_Q", qd[0],
                                      qd[2], op.len_q));
    FROST_CHECK(load_sequence_lengths(*this, ex, attr.padding_mask ? in(In::SEQ_LEN_KV) : nullptr, "SEQ_LEN_KV", qd[0],
                                      in(In::K)->get_dim()[2], op.len_kv));
    auto scalar = [&](In port) { return ex.load<T>(in(port))[0]; };
    const Array<T> q = load_descaled(ex, in(In::Q), scalar(In::DESCALE_Q));
    const Array<T> k = load_descaled(ex, in(In::K), scalar(In::DESCALE_K));
    const Array<T> v = load_descaled(ex, in(In::V), scalar(In::DESCALE_V));
    const Array<T> o = load_descaled(ex, in(In::O), scalar(In::DESCALE_O));
    const Array<T> d_o = load_descaled(ex, in(In::DO), scalar(In::DESCALE_DO));
    const Array<T> stats = ex.load<T>(in(In::STATS));
    op.q = &q, op.k = &k, op.v = &v, op.o = &o, op.d_o = &d_o, op.stats = &stats;
    if (attr.attn_scale_value) op.scale = static_cast<T>(*attr.attn_scale_value);
    if (in(In::ATTN_SCALE)) op.scale = scalar(In::ATTN_SCALE);
    op.mask = {attr.diagonal_alignment, attr.left_bound, attr.right_bound};

    const T scale_s = scalar(In::SCALE_S), descale_s = scalar(In::DESCALE_S);
    const T scale_dp = scalar(In::SCALE_DP), descale_dp = scalar(In::DESCALE_DP);
    T amax_dp = 0;
    auto fp8 = [](DataType_t dt, T x) { return static_cast<T>(round_to_saturated(dt, static_cast<double>(x))); };
    AttentionGradients<T> g = attention_backward(op, [&](HeadGradientInputs<T>& m) {
      for (T& p : m.p_dv) p = fp8(p_type, p * scale_s) * descale_s;
      for (T& ds : m.ds_dq) {
        amax_dp = std::max(amax_dp, std::fabs(ds));
        ds = fp8(ds_type, ds * scale_dp) * descale_dp;
      }
      m.ds_dk = m.ds_dq;
    });
    const std::tuple<Array<T>*, Out, Out, In> grads[3] = {{&g.dq, Out::DQ, Out::AMAX_DQ, In::SCALE_DQ},
                                                          {&g.dk, Out::DK, Out::AMAX_DK, In::SCALE_DK},
                                                          {&g.dv, Out::DV, Out::AMAX_DV, In::SCALE_DV}};
    for (const auto& [grad, port, amax_port, scale] : grads) {
      ex.store(out(amax_port), Array<T>({1, 1, 1, 1}, amax_of(grad->v)));
      scale_for_store(grad->v, scalar(scale), out(port)->get_data_type());
      ex.store(out(port), *grad);
    }
    ex.store(out(Out::AMAX_DP), Array<T>({1, 1, 1, 1}, amax_dp));
    return {};
  });
}

}  // namespace frost::detail
