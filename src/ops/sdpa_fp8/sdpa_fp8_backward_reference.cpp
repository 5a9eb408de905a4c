#include <algorithm>
#include <cmath>
#include <tuple>

#include "ops/common/fp8_scaling.h"
#include "ops/sdpa_backward/attention_backward_core.h"
#include "ops/sdpa_fp8/fp8_attention_operands.h"
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
    op.ext = attention_extents(qd, in(In::K)->get_dim(), in(In::V)->get_dim());
    FROST_CHECK(load_padding_lengths(*this, ex, attr.padding_mask ? in(In::SEQ_LEN_Q) : nullptr,
                                     attr.padding_mask ? in(In::SEQ_LEN_KV) : nullptr, op.ext, op.len_q, op.len_kv));
    auto scalar = [&](In port) { return ex.load<T>(in(port))[0]; };
    auto descaled = [&](In codes, In descale) { return dense_operand(load_descaled(ex, in(codes), scalar(descale))); };
    const Operand<T> q = descaled(In::Q, In::DESCALE_Q), k = descaled(In::K, In::DESCALE_K);
    const Operand<T> v = descaled(In::V, In::DESCALE_V), o = descaled(In::O, In::DESCALE_O);
    const Operand<T> d_o = descaled(In::DO, In::DESCALE_DO), stats = dense_operand(ex.load<T>(in(In::STATS)));
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
