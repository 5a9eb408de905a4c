// CPU reference of the MXFP8 attention: dequantize every operand with its block scales, then run the
// FP8 attention's forward and backward math with the MXFP8 recipe at the quantization points.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "common/dtype_convert.h"
#include "ops/common/fp8_scaling.h"
#include "ops/quantize/quantize_node.h"
#include "ops/sdpa_backward/attention_backward_core.h"
#include "ops/sdpa/attention_forward_core.h"
#include "ops/sdpa_fp8/fp8_attention_operands.h"
#include "ops/sdpa_mxfp8/sdpa_mxfp8_nodes.h"

namespace frost::detail {

using FwdIn = graph::SdpaFp8Input;
using FwdOut = graph::SdpaFp8Output;
using BwdIn = graph::SdpaFp8BackwardInput;
using BwdOut = graph::SdpaFp8BackwardOutput;

namespace {

// The fixed scales cuDNN's MXFP8 kernels give the probabilities before rounding them to FP8: 16 for
// exp(S - max) in the forward, 256 for the normalized P of the backward's dV.
constexpr double kForwardPScale = 16, kBackwardPScale = 256;

enum class BlocksAlong { HEAD_DIM, SEQUENCE };

// Real values of an MXFP8 operand [b, h, s, d]: each code times the scale of its block, scale[b, h, s, d / 32]
// for blocks along d, scale[b, h, s / 32, d] for blocks along s.
template <class T>
Array<T> load_block_scaled(const RefExec& ex, const TensorPtr& codes, const TensorPtr& scales, BlocksAlong along) {
  Array<T> a = ex.load<T>(codes);
  const Array<T> sc = ex.load<T>(scales);
  const int64_t planes = a.dim[0] * a.dim[1], s = a.dim[2], d = a.dim[3], sc_rows = sc.dim[2], sc_cols = sc.dim[3];
  const bool seq = along == BlocksAlong::SEQUENCE;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < d; ++j)
        a[(p * s + i) * d + j] *= sc[(p * sc_rows + (seq ? i / kMxBlock : i)) * sc_cols + (seq ? j : j / kMxBlock)];
  return a;
}

// Quantizes and dequantizes n values x[0], x[stride], ... in MXFP8 blocks of 32 (the last one may be
// shorter) with block_scale_quantize's rule. A block holding a NaN or an infinity becomes NaN.
template <class T>
void mx_round_trip(T* x, int64_t n, int64_t stride, DataType_t values) {
  const ElementFormat fmt = element_format(values);
  for (int64_t start = 0; start < n; start += kMxBlock) {
    const int64_t count = std::min(kMxBlock, n - start);
    T amax = 0;
    bool finite = true;
    for (int64_t t = 0; t < count; ++t) {
      const T v = x[(start + t) * stride];
      finite = finite && std::isfinite(v);
      amax = std::max(amax, std::fabs(v));
    }
    const double scale = finite ? mx_block_scale(static_cast<double>(amax), fmt) : NAN;
    for (int64_t t = 0; t < count; ++t) {
      T& v = x[(start + t) * stride];
      v = static_cast<T>(round_to_saturated(values, static_cast<double>(v) / scale) * scale);
    }
  }
}

template <class T>
T fp8_at_scale(DataType_t dt, T x, double scale) {
  return static_cast<T>(round_to_saturated(dt, static_cast<double>(x) * scale) / scale);
}

}  // namespace

error_t SdpaMxfp8Node::run_reference(RefExec& ex) const {
  const auto& qd = in(FwdIn::Q)->get_dim();
  const DataType_t p_type = in(FwdIn::Q)->get_data_type();
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    AttentionForwardOperands<T> op;
    op.ext = attention_extents(qd, in(FwdIn::K)->get_dim(), in(FwdIn::V)->get_dim());
    FROST_CHECK(load_padding_lengths(*this, ex, attr.padding_mask ? in(FwdIn::SEQ_LEN_Q) : nullptr,
                             attr.padding_mask ? in(FwdIn::SEQ_LEN_KV) : nullptr, op.ext, op.len_q, op.len_kv));
    auto operand = [&](FwdIn codes, FwdIn scales, BlocksAlong along) {
      return dense_operand(load_block_scaled<T>(ex, in(codes), in(scales), along));
    };
    const Operand<T> q = operand(FwdIn::Q, FwdIn::DESCALE_Q, BlocksAlong::HEAD_DIM);
    const Operand<T> k = operand(FwdIn::K, FwdIn::DESCALE_K, BlocksAlong::HEAD_DIM);
    const Operand<T> v = operand(FwdIn::V, FwdIn::DESCALE_V, BlocksAlong::SEQUENCE);
    op.q = &q, op.k = &k, op.v = &v;
    op.scale = attr.attn_scale_value ? static_cast<T>(*attr.attn_scale_value) : T(1);
    if (const TensorPtr t = in(FwdIn::ATTN_SCALE)) op.scale = ex.load<T>(t)[0];
    op.mask = {attr.diagonal_alignment, attr.left_bound, attr.right_bound};
    AttentionForwardResult<T> r =
        attention_forward(op, [&](T e, T denom) { return fp8_at_scale(p_type, e, kForwardPScale) / denom; });
    const T amax_o = amax_of(r.o.v);
    scale_for_store(r.o.v, T(1), out(FwdOut::O)->get_data_type());
    ex.store(out(FwdOut::O), r.o);
    if (const TensorPtr st = out(FwdOut::STATS)) ex.store(st, r.stats);
    ex.store(out(FwdOut::AMAX_O), Array<T>({1, 1, 1, 1}, amax_o));
    return {};
  });
}

error_t SdpaMxfp8BackwardNode::run_reference(RefExec& ex) const {
  const auto& qd = in(BwdIn::Q)->get_dim();
  const DataType_t p_type = in(BwdIn::Q)->get_data_type(), ds_type = in(BwdIn::DO)->get_data_type();
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    AttentionBackwardOperands<T> op;
    op.ext = attention_extents(qd, in(BwdIn::K)->get_dim(), in(BwdIn::V)->get_dim());
    FROST_CHECK(load_padding_lengths(*this, ex, attr.padding_mask ? in(BwdIn::SEQ_LEN_Q) : nullptr,
                             attr.padding_mask ? in(BwdIn::SEQ_LEN_KV) : nullptr, op.ext, op.len_q, op.len_kv));
    auto operand = [&](BwdIn codes, BwdIn scales, BlocksAlong along) {
      return dense_operand(load_block_scaled<T>(ex, in(codes), in(scales), along));
    };
    const Operand<T> q = operand(BwdIn::Q, BwdIn::DESCALE_Q, BlocksAlong::HEAD_DIM);
    const Operand<T> q_t = operand(BwdIn::Q_T, BwdIn::DESCALE_Q_T, BlocksAlong::SEQUENCE);
    const Operand<T> k = operand(BwdIn::K, BwdIn::DESCALE_K, BlocksAlong::HEAD_DIM);
    const Operand<T> k_t = operand(BwdIn::K_T, BwdIn::DESCALE_K_T, BlocksAlong::SEQUENCE);
    const Operand<T> v = operand(BwdIn::V, BwdIn::DESCALE_V, BlocksAlong::SEQUENCE);
    const Operand<T> d_o = operand(BwdIn::DO, BwdIn::DESCALE_DO, BlocksAlong::HEAD_DIM);
    const Operand<T> d_o_t = operand(BwdIn::DO_T, BwdIn::DESCALE_DO_T, BlocksAlong::SEQUENCE);
    const Operand<T> o = dense_operand(ex.load<T>(in(BwdIn::O)));
    const Operand<T> d_o_wide = dense_operand(ex.load<T>(in(BwdIn::DO_F16)));
    const Operand<T> stats = dense_operand(ex.load<T>(in(BwdIn::STATS)));
    op.q = &q, op.k = &k, op.v = &v, op.o = &o, op.d_o = &d_o, op.stats = &stats;
    op.q_for_dk = &q_t, op.k_for_dq = &k_t, op.d_o_for_dv = &d_o_t, op.d_o_for_delta = &d_o_wide;
    if (attr.attn_scale_value) op.scale = static_cast<T>(*attr.attn_scale_value);
    if (const TensorPtr t = in(BwdIn::ATTN_SCALE)) op.scale = ex.load<T>(t)[0];
    op.mask = {attr.diagonal_alignment, attr.left_bound, attr.right_bound};
    AttentionGradients<T> g = attention_backward(op, [&](HeadGradientInputs<T>& m) {
      for (T& p : m.p_dv) p = fp8_at_scale(p_type, p, kBackwardPScale);
      // dS in blocks along s_kv (each row) for dQ, along s_q (each column) for dK.
      for (int64_t i = 0; i < m.s_q; ++i) mx_round_trip(&m.ds_dq[static_cast<size_t>(i * m.s_kv)], m.s_kv, 1, ds_type);
      for (int64_t j = 0; j < m.s_kv; ++j) mx_round_trip(&m.ds_dk[static_cast<size_t>(j)], m.s_q, m.s_kv, ds_type);
    });
    const std::tuple<Array<T>*, BwdOut, BwdOut> grads[3] = {{&g.dq, BwdOut::DQ, BwdOut::AMAX_DQ},
                                                            {&g.dk, BwdOut::DK, BwdOut::AMAX_DK},
                                                            {&g.dv, BwdOut::DV, BwdOut::AMAX_DV}};
    for (const auto& [grad, port, amax_port] : grads) {
      ex.store(out(amax_port), Array<T>({1, 1, 1, 1}, amax_of(grad->v)));
      scale_for_store(grad->v, T(1), out(port)->get_data_type());
      ex.store(out(port), *grad);
    }
    return {};
  });
}

}  // namespace frost::detail
