#include <cmath>

#include "ops/common/fp8_scaling.h"
#include "ops/sdpa/attention_forward_core.h"
#include "ops/sdpa_fp8/fp8_attention_operands.h"
#include "ops/sdpa_fp8/sdpa_fp8_node.h"

namespace frost::detail {

using graph::SdpaFp8Input;
using graph::SdpaFp8Output;

error_t SdpaFp8Node::run_reference(RefExec& ex) const {
  const auto& qd = in(SdpaFp8Input::Q)->get_dim();
  // P is requantized to Q's type for P V, as cuDNN Frontend declares it (the i/o type of the second
  // product).
  const DataType_t p_type = in(SdpaFp8Input::Q)->get_data_type();
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    AttentionForwardOperands<T> op;
    op.ext = attention_extents(qd, in(SdpaFp8Input::K)->get_dim(), in(SdpaFp8Input::V)->get_dim());
    FROST_CHECK(load_padding_lengths(*this, ex, attr.padding_mask ? in(SdpaFp8Input::SEQ_LEN_Q) : nullptr,
                                     attr.padding_mask ? in(SdpaFp8Input::SEQ_LEN_KV) : nullptr, op.ext, op.len_q,
                                     op.len_kv));
    auto scalar = [&](SdpaFp8Input port) { return ex.load<T>(in(port))[0]; };
    const Operand<T> q = dense_operand(load_descaled(ex, in(SdpaFp8Input::Q), scalar(SdpaFp8Input::DESCALE_Q)));
    const Operand<T> k = dense_operand(load_descaled(ex, in(SdpaFp8Input::K), scalar(SdpaFp8Input::DESCALE_K)));
    const Operand<T> v = dense_operand(load_descaled(ex, in(SdpaFp8Input::V), scalar(SdpaFp8Input::DESCALE_V)));
    op.q = &q, op.k = &k, op.v = &v;
    op.scale = attr.attn_scale_value ? static_cast<T>(*attr.attn_scale_value) : T(1);
    if (in(SdpaFp8Input::ATTN_SCALE)) op.scale = scalar(SdpaFp8Input::ATTN_SCALE);
    op.mask = {attr.diagonal_alignment, attr.left_bound, attr.right_bound};
    const T scale_s = scalar(SdpaFp8Input::SCALE_S), descale_s = scalar(SdpaFp8Input::DESCALE_S);
    AttentionForwardResult<T> r = attention_forward(op, [&](T e, T denom) {
      return static_cast<T>(round_to_saturated(p_type, static_cast<double>(e / denom * scale_s))) * descale_s;
    });
    const T amax_o = amax_of(r.o.v);
    scale_for_store(r.o.v, scalar(SdpaFp8Input::SCALE_O), out(SdpaFp8Output::O)->get_data_type());
    ex.store(out(SdpaFp8Output::O), r.o);
    if (const TensorPtr st = out(SdpaFp8Output::STATS)) ex.store(st, r.stats);
    ex.store(out(SdpaFp8Output::AMAX_S), Array<T>({1, 1, 1, 1}, r.amax_p));
    ex.store(out(SdpaFp8Output::AMAX_O), Array<T>({1, 1, 1, 1}, amax_o));
    return {};
  });
}

}  // namespace frost::detail
