// RMSNorm and LayerNorm, forward and backward.
//
// Normalized axes: every axis where the statistics tensor has extent 1 and X does not. The
// statistics have X's rank and, per axis, X's extent or 1. By default they are [x.dim[0], 1, ..., 1],
// so all but the first axis are normalized. In TRAINING the user may set the dims of the statistics
// outputs to choose other axes; in INFERENCE (no statistics outputs) the default applies. Backward
// nodes take the normalized axes from the saved statistics they are given.
// Statistics are FP32 unless the user sets another data type on them.
// Scale and bias have X's rank and broadcast to X over their extent-1 axes. In the forward ops both are
// optional: a null scale means 1, a null bias means 0.
// Epsilon is a tensor of one element, usually a pass-by-value scalar: graph.tensor(1e-5f).
// JSON tags: RMSNORM, LAYERNORM, RMSNORM_BACKWARD, LAYERNORM_BACKWARD; ports are named as the
// enumerators below (X, SCALE, ..., Y, MEAN, INV_VARIANCE, DX, DSCALE, DBIAS).
#pragma once

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class NormInput { X, SCALE, BIAS, EPSILON, DY, MEAN, INV_VARIANCE };
enum class NormOutput { Y, MEAN, INV_VARIANCE, DX, DSCALE, DBIAS };

// y = x * inv_rms * scale (+ bias), inv_rms = 1 / sqrt(mean(x^2) + epsilon), mean over the
// normalized axes. Inputs X, EPSILON (required), SCALE and BIAS (optional). Outputs Y and, in
// TRAINING, inv_rms on the INV_VARIANCE port. The forward phase must be set.
class Rmsnorm_attributes : public Attributes<Rmsnorm_attributes, NormInput, NormOutput> {
 public:
  NormFwdPhase_t forward_phase = NormFwdPhase_t::NOT_SET;
  Rmsnorm_attributes& set_forward_phase(NormFwdPhase_t v) { forward_phase = v; return *this; }
  Rmsnorm_attributes& set_epsilon(TensorPtr t) { inputs[NormInput::EPSILON] = std::move(t); return *this; }
  Rmsnorm_attributes& set_bias(TensorPtr t) { inputs[NormInput::BIAS] = std::move(t); return *this; }
};

// y = (x - mean) * inv_variance * scale + bias, inv_variance = 1 / sqrt(var(x) + epsilon), with the
// biased variance (divided by the group size). Inputs X, EPSILON (required), SCALE and BIAS (the
// builder's arguments; null means a scale of 1 and no bias). Outputs Y and, in TRAINING, MEAN and INV_VARIANCE.
class Layernorm_attributes : public Attributes<Layernorm_attributes, NormInput, NormOutput> {
 public:
  NormFwdPhase_t forward_phase = NormFwdPhase_t::NOT_SET;
  Layernorm_attributes& set_forward_phase(NormFwdPhase_t v) { forward_phase = v; return *this; }
  Layernorm_attributes& set_epsilon(TensorPtr t) { inputs[NormInput::EPSILON] = std::move(t); return *this; }
};

// dx, dscale (and dbias when has_dbias) from dy, x, scale and the saved inv_rms (INV_VARIANCE port).
// With xhat = x * inv_rms and g = dy * scale: dx = inv_rms * (g - xhat * mean(g * xhat)),
// dscale = sum(dy * xhat) and dbias = sum(dy), summed over every axis where scale has extent 1.
// The saved statistics are used as given, never recomputed from x.
class Rmsnorm_backward_attributes : public Attributes<Rmsnorm_backward_attributes, NormInput, NormOutput> {
 public:
  bool has_dbias = false;
  Rmsnorm_backward_attributes& has_dbias_output(bool v) { has_dbias = v; return *this; }
};

// dx, dscale, dbias from dy, x, scale and the saved mean and inv_variance. With
// xhat = (x - mean) * inv_variance and g = dy * scale:
// dx = inv_variance * (g - mean(g) - xhat * mean(g * xhat)), dscale and dbias as for RMSNorm.
// An epsilon, if set, is checked to hold one element but not used: the saved inv_variance already
// includes it.
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
