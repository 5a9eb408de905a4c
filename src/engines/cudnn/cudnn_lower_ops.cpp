// Nodes that map to one backend operation each: pointwise, matmul, reduction, RMSNorm and LayerNorm
// (forward and backward), and convolution (fprop, dgrad, wgrad).
#include "engines/cudnn/cudnn_lowering.h"
#include "ops/conv/conv_node.h"
#include "ops/matmul/matmul_node.h"
#include "ops/norm/norm_node.h"
#include "ops/pointwise/pointwise_node.h"
#include "ops/reduction/reduction_node.h"

namespace frost::detail {
namespace {
namespace A = cudnn_abi::attr;
namespace D = cudnn_abi::desc;
namespace T = cudnn_abi::type;
using graph::NormInput;
using graph::NormOutput;

DataType_t compute_of(const Node& n) {
  return n.compute_data_type() == DataType_t::NOT_SET ? DataType_t::FLOAT : n.compute_data_type();
}

error_t lower_pointwise(Lowering& l, const PointwiseNode& n) {
  using I = graph::PointwiseInput;
  int32_t mode = 0;
  if (!backend_pointwise_mode(n.attr.mode, mode)) return l.unsupported(n, "pointwise mode NOT_SET");
  const int arity = pointwise_arity(n.attr.mode);
  BTensor x, b, t, y;
  FROST_CHECK(l.tensor(n.in(I::IN_0), x));
  if (arity >= 2) FROST_CHECK(l.tensor(n.in(I::IN_1), b));
  if (arity >= 3) FROST_CHECK(l.tensor(n.in(I::IN_2), t));
  FROST_CHECK(l.tensor(n.out(graph::PointwiseOutput::OUT_0), y));
  const int64_t axis = n.attr.axis ? l.descriptor_axis(n.in(I::IN_0), *n.attr.axis) : -1;
  // Comparisons and logic writing BOOLEAN compute in BOOLEAN, as the backend's fused kernels expect.
  const bool logical = mode >= cudnn_abi::pw::CMP_EQ && mode <= cudnn_abi::pw::LOGICAL_NOT;
  const DataType_t compute = logical && y.dtype == DataType_t::BOOLEAN ? DataType_t::BOOLEAN : compute_of(n);
  return l.pointwise("pointwise node '" + n.name() + "'", mode, x, arity >= 2 ? &b : nullptr, arity >= 3 ? &t : nullptr,
                     y, &n.attr, axis, compute);
}

// cuDNN's matmul and convolution engines may read FLOAT operands as TF32 whatever their notes say
// (an FP32 matmul on the H200 showed TF32-sized errors from an engine without tensor-core notes);
// frost's FLOAT means FP32 arithmetic, so those graphs are declined.
error_t check_not_fp32(Lowering& l, const Node& n, const TensorPtr& a, const TensorPtr& b) {
  for (const auto& t : {a, b})
    if (t->get_data_type() == DataType_t::FLOAT)
      return l.unsupported(n, "FLOAT operand '" + t->get_name() + "': the backend may compute it in TF32");
  return {};
}

error_t lower_matmul(Lowering& l, const MatmulNode& n) {
  using I = graph::MatmulInput;
  FROST_CHECK(check_not_fp32(l, n, n.in(I::A), n.in(I::B)));
  BTensor a, b, c, m, nn, k;
  FROST_CHECK(l.tensor(n.in(I::A), a));
  FROST_CHECK(l.tensor(n.in(I::B), b));
  FROST_CHECK(l.tensor(n.out(graph::MatmulOutput::C), c));
  const bool has_m = n.in(I::M_OVERRIDE) != nullptr, has_n = n.in(I::N_OVERRIDE) != nullptr;
  const bool has_k = n.in(I::K_OVERRIDE) != nullptr;
  if (has_m) FROST_CHECK(l.tensor(n.in(I::M_OVERRIDE), m));
  if (has_n) FROST_CHECK(l.tensor(n.in(I::N_OVERRIDE), nn));
  if (has_k) FROST_CHECK(l.tensor(n.in(I::K_OVERRIDE), k));
  return l.matmul("matmul node '" + n.name() + "'", a, b, c, has_m ? &m : nullptr, has_n ? &nn : nullptr,
                  has_k ? &k : nullptr, n.attr.padding_value);
}

error_t lower_reduction(Lowering& l, const ReductionNode& n) {
  int32_t mode = 0;
  if (!backend_reduction_mode(n.attr.mode, mode)) return l.unsupported(n, "reduction mode NOT_SET");
  BTensor x, y;
  FROST_CHECK(l.tensor(n.in(graph::UnaryInput::X), x));
  FROST_CHECK(l.tensor(n.out(graph::UnaryOutput::Y), y));
  return l.reduction("reduction node '" + n.name() + "'", mode, x, y, n.attr.is_deterministic);
}

// The backend normalizes every axis but the first, with statistics [N, 1, ...] and scale and bias
// [1, rest of X]. frost allows other axes and broadcast scales: those are declined here.
error_t check_norm_shapes(Lowering& l, const Node& n, const BTensor& x, const BTensor* stats, const BTensor* scale,
                          const BTensor* bias) {
  auto want_stats = x.dims;
  std::fill(want_stats.begin() + 1, want_stats.end(), 1);
  auto want_affine = x.dims;
  want_affine[0] = 1;
  if (stats && stats->dims != want_stats)
    return l.unsupported(n, "statistics dims " + dims_string(stats->dims) +
                                "; the backend normalizes all but the first "
                                "axis (statistics " +
                                dims_string(want_stats) + ")");
  if (scale && scale->dims != want_affine)
    return l.unsupported(n,
                         "scale dims " + dims_string(scale->dims) + "; the backend takes " + dims_string(want_affine));
  if (bias && bias->dims != want_affine)
    return l.unsupported(n, "bias dims " + dims_string(bias->dims) + "; the backend takes " + dims_string(want_affine));
  return {};
}

template <class N>
error_t lower_norm_forward(Lowering& l, const N& n, int32_t mode) {
  const bool layer = mode == cudnn_abi::kLayerNorm;
  if (!n.in(NormInput::SCALE)) return l.unsupported(n, "no scale; the backend's normalization needs one");
  if (layer && !n.in(NormInput::BIAS)) return l.unsupported(n, "no bias; the backend's LayerNorm needs one");
  const bool training = n.attr.forward_phase == NormFwdPhase_t::TRAINING;
  BTensor x, scale, bias, eps, y, mean, inv;
  FROST_CHECK(l.tensor(n.in(NormInput::X), x));
  FROST_CHECK(l.tensor(n.in(NormInput::SCALE), scale));
  const bool has_bias = n.in(NormInput::BIAS) != nullptr;
  if (has_bias) FROST_CHECK(l.tensor(n.in(NormInput::BIAS), bias));
  FROST_CHECK(l.tensor(n.in(NormInput::EPSILON), eps));
  FROST_CHECK(l.tensor(n.out(NormOutput::Y), y));
  if (training) {
    FROST_CHECK(l.tensor(n.out(NormOutput::INV_VARIANCE), inv));
    if (layer) FROST_CHECK(l.tensor(n.out(NormOutput::MEAN), mean));
  }
  FROST_CHECK(check_norm_shapes(l, n, x, training ? &inv : nullptr, &scale, has_bias ? &bias : nullptr));
  DescBuilder op(l.lib(), D::OPERATION_NORM_FORWARD, "normalization node '" + n.name() + "'");
  op.enumeration(A::OPERATION_NORM_FWD_MODE, T::NORM_MODE, mode)
      .enumeration(A::OPERATION_NORM_FWD_PHASE, T::NORM_FWD_PHASE,
                   training ? cudnn_abi::kNormTraining : cudnn_abi::kNormInference)
      .desc(A::OPERATION_NORM_FWD_XDESC, x.desc)
      .desc(A::OPERATION_NORM_FWD_SCALE_DESC, scale.desc)
      .desc(A::OPERATION_NORM_FWD_EPSILON_DESC, eps.desc)
      .desc(A::OPERATION_NORM_FWD_YDESC, y.desc);
  if (has_bias) op.desc(A::OPERATION_NORM_FWD_BIAS_DESC, bias.desc);
  if (training) {
    op.desc(A::OPERATION_NORM_FWD_INV_VARIANCE_DESC, inv.desc);
    if (layer) op.desc(A::OPERATION_NORM_FWD_MEAN_DESC, mean.desc);
  }
  DescPtr d;
  FROST_CHECK(op.finalize(d));
  l.add_op(d);
  return {};
}

template <class N>
error_t lower_norm_backward(Lowering& l, const N& n, int32_t mode) {
  const bool layer = mode == cudnn_abi::kLayerNorm;
  BTensor dy, x, scale, mean, inv, dx, dscale, dbias;
  FROST_CHECK(l.tensor(n.in(NormInput::DY), dy));
  FROST_CHECK(l.tensor(n.in(NormInput::X), x));
  FROST_CHECK(l.tensor(n.in(NormInput::SCALE), scale));
  FROST_CHECK(l.tensor(n.in(NormInput::INV_VARIANCE), inv));
  if (layer) FROST_CHECK(l.tensor(n.in(NormInput::MEAN), mean));
  FROST_CHECK(l.tensor(n.out(NormOutput::DX), dx));
  FROST_CHECK(l.tensor(n.out(NormOutput::DSCALE), dscale));
  const bool has_dbias = n.out(NormOutput::DBIAS) != nullptr;
  if (has_dbias) FROST_CHECK(l.tensor(n.out(NormOutput::DBIAS), dbias));
  FROST_CHECK(check_norm_shapes(l, n, x, &inv, &scale, nullptr));
  DescBuilder op(l.lib(), D::OPERATION_NORM_BACKWARD, "normalization backward node '" + n.name() + "'");
  op.enumeration(A::OPERATION_NORM_BWD_MODE, T::NORM_MODE, mode)
      .desc(A::OPERATION_NORM_BWD_XDESC, x.desc)
      .desc(A::OPERATION_NORM_BWD_DYDESC, dy.desc)
      .desc(A::OPERATION_NORM_BWD_SCALE_DESC, scale.desc)
      .desc(A::OPERATION_NORM_BWD_INV_VARIANCE_DESC, inv.desc)
      .desc(A::OPERATION_NORM_BWD_DSCALE_DESC, dscale.desc)
      .desc(A::OPERATION_NORM_BWD_DXDESC, dx.desc);
  if (layer) op.desc(A::OPERATION_NORM_BWD_MEAN_DESC, mean.desc);
  if (has_dbias) op.desc(A::OPERATION_NORM_BWD_DBIAS_DESC, dbias.desc);
  DescPtr d;
  FROST_CHECK(op.finalize(d));
  l.add_op(d);
  return {};
}

// A 1-D convolution runs as 2-D with a spatial axis of extent 1 in front.
std::pair<std::vector<int64_t>, std::vector<int64_t>> conv_view(const TensorPtr& t) {
  auto d = t->get_dim();
  auto s = t->get_stride();
  if (d.size() == 3) {
    d.insert(d.begin() + 2, 1);
    s.insert(s.begin() + 2, s[2] * d[3]);
  }
  return {d, s};
}

template <class N>
error_t lower_conv(Lowering& l, const N& n, int32_t op_type, const TensorPtr& in0, const TensorPtr& in1,
                   const TensorPtr& out, std::array<int32_t, 6> attrs) {
  const size_t rank = out->get_dim().size();
  if (rank < 3 || rank > 5) return l.unsupported(n, "rank " + std::to_string(rank) + " tensors");
  FROST_CHECK(check_not_fp32(l, n, in0, in1));
  const size_t spatial = rank - 2;
  auto param = [&](const std::vector<int64_t>& v, int64_t fill) {
    std::vector<int64_t> r = v.empty() ? std::vector<int64_t>(spatial, fill) : v;
    if (spatial == 1) r.insert(r.begin(), fill);
    return r;
  };
  const auto& a = n.attr;
  BTensor t0, t1, t2;
  auto [d0, s0] = conv_view(in0);
  auto [d1, s1] = conv_view(in1);
  auto [d2, s2] = conv_view(out);
  FROST_CHECK(l.tensor_view(in0, d0, s0, t0));
  FROST_CHECK(l.tensor_view(in1, d1, s1, t1));
  FROST_CHECK(l.tensor_view(out, d2, s2, t2));
  int32_t comp = 0;
  backend_dtype(compute_of(n), comp);
  const std::string what = "convolution node '" + n.name() + "'";
  DescBuilder cd(l.lib(), D::CONVOLUTION, what);
  cd.enumeration(A::CONVOLUTION_COMP_TYPE, T::DATA_TYPE, comp)
      .enumeration(
          A::CONVOLUTION_CONV_MODE, T::CONVOLUTION_MODE,
          a.convolution_mode == ConvolutionMode_t::CONVOLUTION ? cudnn_abi::kConvolution : cudnn_abi::kCrossCorrelation)
      .i64(A::CONVOLUTION_SPATIAL_DIMS, static_cast<int64_t>(std::max<size_t>(spatial, 2)))
      .i64s(A::CONVOLUTION_PRE_PADDINGS, param(a.pre_padding, 0))
      .i64s(A::CONVOLUTION_POST_PADDINGS, param(a.post_padding, 0))
      .i64s(A::CONVOLUTION_FILTER_STRIDES, param(a.stride, 1))
      .i64s(A::CONVOLUTION_DILATIONS, param(a.dilation, 1));
  DescPtr conv;
  FROST_CHECK(cd.finalize(conv));
  l.keep(conv);
  // attrs: alpha, beta, conv desc, then the descriptors of in0, in1 and out.
  DescBuilder op(l.lib(), op_type, what);
  op.f32(attrs[0], 1.0f).f32(attrs[1], 0.0f).desc(attrs[2], conv);
  op.desc(attrs[3], t0.desc).desc(attrs[4], t1.desc).desc(attrs[5], t2.desc);
  DescPtr d;
  FROST_CHECK(op.finalize(d));
  l.add_op(d);
  return {};
}

}  // namespace

error_t lower_basic_node(Lowering& l, const Node& node, bool& handled) {
  handled = true;
  if (const auto* n = dynamic_cast<const PointwiseNode*>(&node)) return lower_pointwise(l, *n);
  if (const auto* n = dynamic_cast<const MatmulNode*>(&node)) return lower_matmul(l, *n);
  if (const auto* n = dynamic_cast<const ReductionNode*>(&node)) return lower_reduction(l, *n);
  if (const auto* n = dynamic_cast<const RmsnormNode*>(&node)) return lower_norm_forward(l, *n, cudnn_abi::kRmsNorm);
  if (const auto* n = dynamic_cast<const LayernormNode*>(&node))
    return lower_norm_forward(l, *n, cudnn_abi::kLayerNorm);
  if (const auto* n = dynamic_cast<const RmsnormBackwardNode*>(&node))
    return lower_norm_backward(l, *n, cudnn_abi::kRmsNorm);
  if (const auto* n = dynamic_cast<const LayernormBackwardNode*>(&node))
    return lower_norm_backward(l, *n, cudnn_abi::kLayerNorm);
  if (const auto* n = dynamic_cast<const ConvFpropNode*>(&node)) {
    using I = graph::ConvFpropInput;
    return lower_conv(l, *n, D::OPERATION_CONVOLUTION_FORWARD, n->in(I::X), n->in(I::W),
                      n->out(graph::ConvFpropOutput::Y),
                      {A::OPERATION_CONVOLUTION_FORWARD_ALPHA, A::OPERATION_CONVOLUTION_FORWARD_BETA,
                       A::OPERATION_CONVOLUTION_FORWARD_CONV_DESC, A::OPERATION_CONVOLUTION_FORWARD_X,
                       A::OPERATION_CONVOLUTION_FORWARD_W, A::OPERATION_CONVOLUTION_FORWARD_Y});
  }
  if (const auto* n = dynamic_cast<const ConvDgradNode*>(&node)) {
    using I = graph::ConvDgradInput;
    return lower_conv(l, *n, D::OPERATION_CONVOLUTION_BACKWARD_DATA, n->in(I::DY), n->in(I::W),
                      n->out(graph::ConvDgradOutput::DX),
                      {A::OPERATION_CONVOLUTION_BWD_DATA_ALPHA, A::OPERATION_CONVOLUTION_BWD_DATA_BETA,
                       A::OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, A::OPERATION_CONVOLUTION_BWD_DATA_DY,
                       A::OPERATION_CONVOLUTION_BWD_DATA_W, A::OPERATION_CONVOLUTION_BWD_DATA_DX});
  }
  if (const auto* n = dynamic_cast<const ConvWgradNode*>(&node)) {
    using I = graph::ConvWgradInput;
    return lower_conv(l, *n, D::OPERATION_CONVOLUTION_BACKWARD_FILTER, n->in(I::DY), n->in(I::X),
                      n->out(graph::ConvWgradOutput::DW),
                      {A::OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, A::OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                       A::OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, A::OPERATION_CONVOLUTION_BWD_FILTER_DY,
                       A::OPERATION_CONVOLUTION_BWD_FILTER_X, A::OPERATION_CONVOLUTION_BWD_FILTER_DW});
  }
  handled = false;
  return {};
}

}  // namespace frost::detail
