// RMSNorm and LayerNorm, forward and backward.
// Normalized axes: every axis where the statistics tensor has extent 1 and X does not. By default
// the statistics are [x.dim[0], 1, ..., 1], so all but the first axis are normalized.
// Scale and bias broadcast to X over their extent-1 axes. Statistics are FP32.
#pragma once

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class NormInput { X, SCALE, BIAS, EPSILON, DY, MEAN, INV_VARIANCE };
enum class NormOutput { Y, MEAN, INV_VARIANCE, DX, DSCALE, DBIAS };

// y = x * inv_rms * scale (+ bias), inv_rms = 1 / sqrt(mean(x^2) + epsilon).
class Rmsnorm_attributes : public Attributes<Rmsnorm_attributes, NormInput, NormOutput> {
 public:
  NormFwdPhase_t forward_phase = NormFwdPhase_t::NOT_SET;
  Rmsnorm_attributes& set_forward_phase(NormFwdPhase_t v) { forward_phase = v; return *this; }
  Rmsnorm_attributes& set_epsilon(TensorPtr t) { inputs[NormInput::EPSILON] = std::move(t); return *this; }
  Rmsnorm_attributes& set_bias(TensorPtr t) { inputs[NormInput::BIAS] = std::move(t); return *this; }
};

// y = (x - mean) * inv_variance * scale + bias, inv_variance = 1 / sqrt(var(x) + epsilon).
class Layernorm_attributes : public Attributes<Layernorm_attributes, NormInput, NormOutput> {
 public:
  NormFwdPhase_t forward_phase = NormFwdPhase_t::NOT_SET;
  Layernorm_attributes& set_forward_phase(NormFwdPhase_t v) { forward_phase = v; return *this; }
  Layernorm_attributes& set_epsilon(TensorPtr t) { inputs[NormInput::EPSILON] = std::move(t); return *this; }
};

// dx, dscale (and dbias when has_dbias) from dy, x, scale and the saved inv_rms.
class Rmsnorm_backward_attributes : public Attributes<Rmsnorm_backward_attributes, NormInput, NormOutput> {
 public:
  bool has_dbias = false;
  Rmsnorm_backward_attributes& has_dbias_output(bool v) { has_dbias = v; return *this; }
};

// dx, dscale, dbias from dy, x, scale and the saved mean and inv_variance.
class Layernorm_backward_attributes : public Attributes<Layernorm_backward_attributes, NormInput, NormOutput> {
 public:
  Layernorm_backward_attributes& set_saved_mean_and_inv_variance(TensorPtr mean, TensorPtr inv_variance) {
    inputs[NormInput::MEAN] = std::move(mean);
    inputs[NormInput::INV_VARIANCE] = std::move(inv_variance);
    return *this;
  }
  Layernorm_backward_attributes& set_epsilon(TensorPtr t) { inputs[NormInput::EPSILON] = std::move(t); return *this; }
};

}  // namespace frost::graph
