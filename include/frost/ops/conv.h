// Convolution: forward (fprop), data gradient (dgrad) and weight gradient (wgrad), 1-D to 3-D.
//
// Tensors are declared as [N, C, spatial...] (rank 3, 4 or 5) in dims with any strides: channels-first
// (NCHW) and channels-last (NHWC) are stride choices. The weight is [K, C / groups, filter spatial...];
// groups = C / W.dim[1] (C must be a multiple of it, and K of groups). Per spatial axis i:
//   out[i] = floor((in[i] + pre_padding[i] + post_padding[i] - dilation[i] * (f[i] - 1) - 1) / stride[i]) + 1
// and output position o reads input position o * stride - pre_padding + tap * dilation (zero outside).
// CROSS_CORRELATION (the default) uses the filter as stored; CONVOLUTION flips it on every spatial axis.
// Unset padding, stride and dilation mean 0, 1 and 1 on every spatial axis.
// dgrad and wgrad need their output's dims set by the user (DX and DW), as the input extent cannot be
// recovered from the output when the stride exceeds 1. Accumulation is FP32 (FP64 in the fp64 mode).
// JSON tags: CONV_FPROP, CONV_DGRAD, CONV_WGRAD; ports are named as the enumerators below.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "frost/ops/attributes_base.h"
#include "frost/types.h"

namespace frost {

enum class ConvolutionMode_t { NOT_SET, CONVOLUTION, CROSS_CORRELATION };

std::string_view to_string(ConvolutionMode_t);
template <>
std::optional<ConvolutionMode_t> from_string(std::string_view name);

}  // namespace frost

namespace frost::graph {

enum class ConvFpropInput { X, W };
enum class ConvFpropOutput { Y };
enum class ConvDgradInput { DY, W };
enum class ConvDgradOutput { DX };
enum class ConvWgradInput { DY, X };
enum class ConvWgradOutput { DW };

// Padding, stride, dilation and mode shared by the three convolution ops.
template <class Derived, class InputNames, class OutputNames>
class ConvolutionAttributes : public Attributes<Derived, InputNames, OutputNames> {
 public:
  std::vector<int64_t> pre_padding, post_padding, stride, dilation;
  ConvolutionMode_t convolution_mode = ConvolutionMode_t::CROSS_CORRELATION;

  // The same padding before and after on every spatial axis.
  Derived& set_padding(std::vector<int64_t> v) {
    pre_padding = v;
    post_padding = std::move(v);
    return this->self();
  }
  Derived& set_pre_padding(std::vector<int64_t> v) { pre_padding = std::move(v); return this->self(); }
  Derived& set_post_padding(std::vector<int64_t> v) { post_padding = std::move(v); return this->self(); }
  Derived& set_stride(std::vector<int64_t> v) { stride = std::move(v); return this->self(); }
  Derived& set_dilation(std::vector<int64_t> v) { dilation = std::move(v); return this->self(); }
  Derived& set_convolution_mode(ConvolutionMode_t v) { convolution_mode = v; return this->self(); }

  const std::vector<int64_t>& get_pre_padding() const { return pre_padding; }
  const std::vector<int64_t>& get_post_padding() const { return post_padding; }
  const std::vector<int64_t>& get_stride() const { return stride; }
  const std::vector<int64_t>& get_dilation() const { return dilation; }
  ConvolutionMode_t get_convolution_mode() const { return convolution_mode; }
};

// Y[n, k, o...] = sum over c in k's group and taps t of X[n, c, o * stride - pre + t * dilation] * W[k, c', t].
// Inputs X, W; output Y (dims inferred).
class Conv_fprop_attributes
    : public ConvolutionAttributes<Conv_fprop_attributes, ConvFpropInput, ConvFpropOutput> {};

// DX = the adjoint of fprop in X applied to DY: every product X[...] * W[...] of fprop sends
// DY[n, k, o...] * W[k, c', t] to that X position. Inputs DY, W; output DX (its dims must be set).
class Conv_dgrad_attributes
    : public ConvolutionAttributes<Conv_dgrad_attributes, ConvDgradInput, ConvDgradOutput> {};

// DW = the adjoint of fprop in W: DW[k, c', t] = sum over n and o of DY[n, k, o...] * X[n, c, ...].
// Inputs DY, X; output DW (its dims must be set).
class Conv_wgrad_attributes
    : public ConvolutionAttributes<Conv_wgrad_attributes, ConvWgradInput, ConvWgradOutput> {};

}  // namespace frost::graph
