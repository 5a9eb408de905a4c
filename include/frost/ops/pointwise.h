#pragma once

#include <optional>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class PointwiseInput { IN_0, IN_1, IN_2 };
enum class PointwiseOutput { OUT_0 };

// Elementwise op with numpy-style broadcasting over extent-1 dims.
// Backward modes (*_BWD) take IN_0 = dy (the incoming gradient) and IN_1 = x (the forward input).
// BINARY_SELECT returns IN_0 where IN_2 is non-zero, else IN_1.
// GEN_INDEX writes the index along `axis` of each element of IN_0's shape.
class Pointwise_attributes : public Attributes<Pointwise_attributes, PointwiseInput, PointwiseOutput> {
 public:
  PointwiseMode_t mode = PointwiseMode_t::NOT_SET;
  std::optional<int64_t> axis;
  std::optional<float> relu_lower_clip, relu_upper_clip, relu_lower_clip_slope;
  std::optional<float> swish_beta, elu_alpha, softplus_beta;

  Pointwise_attributes& set_mode(PointwiseMode_t v) { mode = v; return *this; }
  Pointwise_attributes& set_axis(int64_t v) { axis = v; return *this; }
  Pointwise_attributes& set_relu_lower_clip(float v) { relu_lower_clip = v; return *this; }
  Pointwise_attributes& set_relu_upper_clip(float v) { relu_upper_clip = v; return *this; }
  Pointwise_attributes& set_relu_lower_clip_slope(float v) { relu_lower_clip_slope = v; return *this; }
  Pointwise_attributes& set_swish_beta(float v) { swish_beta = v; return *this; }
  Pointwise_attributes& set_elu_alpha(float v) { elu_alpha = v; return *this; }
  Pointwise_attributes& set_softplus_beta(float v) { softplus_beta = v; return *this; }
  PointwiseMode_t get_mode() const { return mode; }
};

}  // namespace frost::graph
