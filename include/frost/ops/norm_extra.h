// Batch, instance, group and adaptive layer normalization, and the split batchnorm pieces (genstats,
// bn_finalize, dbn_weight) that fuse around convolutions.
//
// Layout: X is [N, C, spatial...] by dims (NCHW semantics, rank >= 2); NHWC and other layouts are
// stride choices. Per-channel tensors (scale, bias, batch statistics, running statistics, sums) have
// dims [1, C, 1, ..., 1]. Statistics outputs are FP32 unless the user sets another data type.
// Epsilon, momentum and accum_count are tensors of one element, usually pass-by-value scalars.
// JSON tags: BATCHNORM, BATCHNORM_INFERENCE, BATCHNORM_BACKWARD, INSTANCE_NORM, INSTANCE_NORM_BACKWARD,
// ADA_LAYER_NORM, ADA_LAYER_NORM_BACKWARD, GROUP_NORM, GROUP_NORM_BACKWARD, GENSTATS, BN_FINALIZE,
// DBN_WEIGHT; ports are named as the enumerators below.
#pragma once

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class NormExtraInput {
  X,
  SCALE,
  BIAS,
  EPSILON,
  DY,
  MEAN,
  INV_VARIANCE,
  MOMENTUM,
  PREV_RUNNING_MEAN,
  PREV_RUNNING_VAR,
  SUM,
  SQ_SUM,
  ACCUM_COUNT
};
enum class NormExtraOutput {
  Y,
  MEAN,
  INV_VARIANCE,
  NEXT_RUNNING_MEAN,
  NEXT_RUNNING_VAR,
  DX,
  DSCALE,
  DBIAS,
  SUM,
  SQ_SUM,
  EQ_SCALE,
  EQ_BIAS,
  EQ_SCALE_DY,
  EQ_SCALE_X
};

// Training batchnorm: per channel c, mean and biased variance over N and the spatial axes;
// y = (x - mean) * inv_variance * scale + bias with inv_variance = 1 / sqrt(var + epsilon).
// Outputs Y, MEAN and INV_VARIANCE (the saved statistics). With previous running statistics:
// next_running_mean = (1 - momentum) * prev_running_mean + momentum * mean and
// next_running_var = (1 - momentum) * prev_running_var + momentum * var * M / (M - 1), the unbiased
// variance over the M = N * spatial values of a channel (as PyTorch and cuDNN's legacy API do).
class Batchnorm_attributes : public Attributes<Batchnorm_attributes, NormExtraInput, NormExtraOutput> {
 public:
  Batchnorm_attributes& set_epsilon(TensorPtr t) {
    inputs[NormExtraInput::EPSILON] = std::move(t);
    return *this;
  }
  Batchnorm_attributes& set_previous_running_stats(TensorPtr mean, TensorPtr variance, TensorPtr momentum) {
    inputs[NormExtraInput::PREV_RUNNING_MEAN] = std::move(mean);
    inputs[NormExtraInput::PREV_RUNNING_VAR] = std::move(variance);
    inputs[NormExtraInput::MOMENTUM] = std::move(momentum);
    return *this;
  }
};

// y = (x - mean) * inv_variance * scale + bias with the given per-channel mean and inv_variance
// (no epsilon: the caller folds it into inv_variance).
class Batchnorm_inference_attributes
    : public Attributes<Batchnorm_inference_attributes, NormExtraInput, NormExtraOutput> {};

// dx, dscale, dbias from dy, x, scale and the saved per-channel mean and inv_variance; with
// xhat = (x - mean) * inv_variance and g = dy * scale, over the M values of a channel:
// dx = inv_variance * (g - mean(g) - xhat * mean(g * xhat)), dscale = sum(dy * xhat), dbias = sum(dy).
class Batchnorm_backward_attributes
    : public Attributes<Batchnorm_backward_attributes, NormExtraInput, NormExtraOutput> {
 public:
  Batchnorm_backward_attributes& set_saved_mean_and_inv_variance(TensorPtr mean, TensorPtr inv_variance) {
    inputs[NormExtraInput::MEAN] = std::move(mean);
    inputs[NormExtraInput::INV_VARIANCE] = std::move(inv_variance);
    return *this;
  }
};

// LayerNorm per (n, c) over the spatial axes: statistics [N, C, 1, ..., 1], per-channel scale and bias.
// Outputs Y and, in TRAINING, MEAN and INV_VARIANCE.
class Instancenorm_attributes : public Attributes<Instancenorm_attributes, NormExtraInput, NormExtraOutput> {
 public:
  NormFwdPhase_t forward_phase = NormFwdPhase_t::NOT_SET;
  Instancenorm_attributes& set_forward_phase(NormFwdPhase_t v) {
    forward_phase = v;
    return *this;
  }
  Instancenorm_attributes& set_epsilon(TensorPtr t) {
    inputs[NormExtraInput::EPSILON] = std::move(t);
    return *this;
  }
};

// The LayerNorm gradient with instance statistics: dscale and dbias are summed over N and spatial.
class Instancenorm_backward_attributes
    : public Attributes<Instancenorm_backward_attributes, NormExtraInput, NormExtraOutput> {
 public:
  Instancenorm_backward_attributes& set_saved_mean_and_inv_variance(TensorPtr mean, TensorPtr inv_variance) {
    inputs[NormExtraInput::MEAN] = std::move(mean);
    inputs[NormExtraInput::INV_VARIANCE] = std::move(inv_variance);
    return *this;
  }
};

// LayerNorm whose scale and bias are per sample: X [N, ..., C] (e.g. [B, S, D]), scale and bias
// [N, 1, ..., C] (any dims that broadcast to X). The normalized axes are the axes after the first where
// scale's extent is not 1 (by default the statistics are [N, S, 1]); in TRAINING the user may set the
// statistics' dims instead, as for LayerNorm. y = (x - mean) * inv_variance * scale + bias.
class AdaLayernorm_attributes : public Attributes<AdaLayernorm_attributes, NormExtraInput, NormExtraOutput> {
 public:
  NormFwdPhase_t forward_phase = NormFwdPhase_t::NOT_SET;
  AdaLayernorm_attributes& set_forward_phase(NormFwdPhase_t v) {
    forward_phase = v;
    return *this;
  }
  AdaLayernorm_attributes& set_epsilon(TensorPtr t) {
    inputs[NormExtraInput::EPSILON] = std::move(t);
    return *this;
  }
};

// The LayerNorm gradient on the saved statistics; dscale and dbias have scale's dims (per sample).
class AdaLayernorm_backward_attributes
    : public Attributes<AdaLayernorm_backward_attributes, NormExtraInput, NormExtraOutput> {
 public:
  AdaLayernorm_backward_attributes& set_saved_mean_and_inv_variance(TensorPtr mean, TensorPtr inv_variance) {
    inputs[NormExtraInput::MEAN] = std::move(mean);
    inputs[NormExtraInput::INV_VARIANCE] = std::move(inv_variance);
    return *this;
  }
};

// GroupNorm (a frost addition): the C channels form group_count consecutive groups; statistics per
// (n, group) over the group's channels and the spatial axes, dims [N, group_count, 1, ..., 1];
// per-channel scale and bias. Outputs Y and, in TRAINING, MEAN and INV_VARIANCE.
class Groupnorm_attributes : public Attributes<Groupnorm_attributes, NormExtraInput, NormExtraOutput> {
 public:
  NormFwdPhase_t forward_phase = NormFwdPhase_t::NOT_SET;
  int64_t group_count = 0;
  Groupnorm_attributes& set_forward_phase(NormFwdPhase_t v) {
    forward_phase = v;
    return *this;
  }
  Groupnorm_attributes& set_epsilon(TensorPtr t) {
    inputs[NormExtraInput::EPSILON] = std::move(t);
    return *this;
  }
  Groupnorm_attributes& set_group_count(int64_t v) {
    group_count = v;
    return *this;
  }
};

// The LayerNorm gradient over each (n, group); the group count comes from the saved statistics' dims.
class Groupnorm_backward_attributes
    : public Attributes<Groupnorm_backward_attributes, NormExtraInput, NormExtraOutput> {
 public:
  Groupnorm_backward_attributes& set_saved_mean_and_inv_variance(TensorPtr mean, TensorPtr inv_variance) {
    inputs[NormExtraInput::MEAN] = std::move(mean);
    inputs[NormExtraInput::INV_VARIANCE] = std::move(inv_variance);
    return *this;
  }
};

// Per-channel SUM of x and SQ_SUM of x * x over N and the spatial axes.
class Genstats_attributes : public Attributes<Genstats_attributes, NormExtraInput, NormExtraOutput> {};

// From per-channel sums over accum_count values: mean = sum / count, var = sq_sum / count - mean^2
// (clamped at 0), inv_variance = 1 / sqrt(var + epsilon), eq_scale = scale * inv_variance,
// eq_bias = bias - mean * eq_scale (so y = eq_scale * x + eq_bias), and with previous running stats
// the running update of Batchnorm_attributes (unbiased variance, factor count / (count - 1)).
class BN_finalize_attributes : public Attributes<BN_finalize_attributes, NormExtraInput, NormExtraOutput> {
 public:
  BN_finalize_attributes& set_previous_running_stats(TensorPtr mean, TensorPtr variance, TensorPtr momentum) {
    inputs[NormExtraInput::PREV_RUNNING_MEAN] = std::move(mean);
    inputs[NormExtraInput::PREV_RUNNING_VAR] = std::move(variance);
    inputs[NormExtraInput::MOMENTUM] = std::move(momentum);
    return *this;
  }
};

// The weight gradients of batchnorm and the per-channel coefficients of its input gradient:
// dscale = sum(dy * xhat), dbias = sum(dy), and dx = eq_scale_dy * dy + eq_scale_x * x + eq_bias with
// eq_scale_dy = scale * inv_variance, eq_scale_x = -scale * inv_variance^2 * dscale / M and
// eq_bias = scale * inv_variance * (inv_variance * mean * dscale - dbias) / M.
class DBN_weight_attributes : public Attributes<DBN_weight_attributes, NormExtraInput, NormExtraOutput> {};

}  // namespace frost::graph
