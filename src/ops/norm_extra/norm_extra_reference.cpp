// CPU reference of the batch/instance/group/adaptive normalization family. Every op maps each element
// of X to its statistics group (`group_of`) and to its scale/bias element (`scale_of`); sums run per
// group in T. Batchnorm's groups are the channels, instance norm's the (n, c) pairs, group norm's the
// (n, group) pairs and AdaLN's the rows of the statistics tensor.
#include <algorithm>
#include <cmath>

#include "engines/reference/ref_exec.h"
#include "ops/common/broadcast.h"
#include "ops/norm_extra/norm_extra_nodes.h"
#include "ops/norm_extra/norm_extra_shape.h"

namespace frost::detail {
namespace {

// For X of dims [N, C, spatial...]: the index n * groups + c / (C / groups) of each element's group.
std::vector<int64_t> channel_group_map(const std::vector<int64_t>& x_dims, int64_t groups) {
  int64_t spatial = 1;
  for (size_t k = 2; k < x_dims.size(); ++k) spatial *= x_dims[k];
  const int64_t channels = x_dims[1], per_group = channels / groups;
  std::vector<int64_t> map(static_cast<size_t>(x_dims[0] * channels * spatial));
  for (size_t n = 0; n < map.size(); ++n) {
    const int64_t c = static_cast<int64_t>(n) / spatial % channels;
    const int64_t batch = static_cast<int64_t>(n) / (spatial * channels);
    map[n] = batch * groups + c / per_group;
  }
  return map;
}

template <class T>
struct Moments {
  Array<T> mean, var;  // var is the biased variance (divided by the group size)
};

// Mean and variance per group, in two passes (accurate when |mean| >> stddev).
template <class T>
Moments<T> group_moments(const Array<T>& x, const std::vector<int64_t>& group_of, const std::vector<int64_t>& dims) {
  Moments<T> m{Array<T>(dims), Array<T>(dims)};
  const T count = static_cast<T>(x.size() / m.mean.size());
  for (int64_t n = 0; n < x.size(); ++n) m.mean[group_of[n]] += x[n];
  for (T& v : m.mean.v) v /= count;
  for (int64_t n = 0; n < x.size(); ++n) {
    const T d = x[n] - m.mean[group_of[n]];
    m.var[group_of[n]] += d * d;
  }
  for (T& v : m.var.v) v /= count;
  return m;
}

struct ForwardPorts {
  TensorPtr x, scale, bias, epsilon;  // bias may be null
  TensorPtr y, mean, inv_variance;    // statistics are null in INFERENCE
};

// y = (x - mean) * inv * scale + bias over the groups of `group_of` (stats of dims `stats_dims`).
// Returns the statistics in T (batchnorm's running update needs them unrounded).
template <class T>
Moments<T> normalize_forward(RefExec& ex, const ForwardPorts& p, const std::vector<int64_t>& stats_dims,
                             const std::vector<int64_t>& group_of) {
  const Array<T> x = ex.load<T>(p.x);
  const Array<T> scale = ex.load<T>(p.scale);
  const T epsilon = ex.load<T>(p.epsilon)[0];
  Moments<T> m = group_moments(x, group_of, stats_dims);
  const Array<T>& mean = m.mean;
  Array<T> inv(stats_dims);
  for (int64_t k = 0; k < inv.size(); ++k) inv[k] = T(1) / std::sqrt(m.var[k] + epsilon);
  const std::vector<int64_t> scale_of = broadcast_map(x.dim, scale.dim);
  Array<T> y(x.dim);
  for (int64_t n = 0; n < x.size(); ++n) y[n] = (x[n] - mean[group_of[n]]) * inv[group_of[n]] * scale[scale_of[n]];
  if (p.bias) {
    const Array<T> bias = ex.load<T>(p.bias);
    const std::vector<int64_t> bias_of = broadcast_map(x.dim, bias.dim);
    for (int64_t n = 0; n < x.size(); ++n) y[n] += bias[bias_of[n]];
  }
  ex.store(p.y, y);
  if (p.mean) ex.store(p.mean, mean);
  if (p.inv_variance) ex.store(p.inv_variance, inv);
  return m;
}

struct BackwardPorts {
  TensorPtr dy, x, scale, mean, inv_variance;
  TensorPtr dx, dscale, dbias;
};

// With xhat = (x - mean) * inv and g = dy * scale, per group of size M:
//   dx = inv * (g - sum(g) / M - xhat * sum(g * xhat) / M)
// dscale = sum(dy * xhat) and dbias = sum(dy) over the axes where scale broadcasts.
template <class T>
void normalize_backward(RefExec& ex, const BackwardPorts& p, const std::vector<int64_t>& group_of) {
  const Array<T> dy = ex.load<T>(p.dy);
  const Array<T> x = ex.load<T>(p.x);
  const Array<T> scale = ex.load<T>(p.scale);
  const Array<T> mean = ex.load<T>(p.mean);
  const Array<T> inv = ex.load<T>(p.inv_variance);
  const std::vector<int64_t> scale_of = broadcast_map(x.dim, scale.dim);
  const T group_size = static_cast<T>(x.size() / inv.size());
  Array<T> sum_g(inv.dim), sum_g_xhat(inv.dim), dscale(scale.dim), dbias(scale.dim), dx(x.dim);
  for (int64_t n = 0; n < x.size(); ++n) {
    const int64_t k = group_of[n];
    const T xhat = (x[n] - mean[k]) * inv[k];
    const T g = dy[n] * scale[scale_of[n]];
    sum_g[k] += g;
    sum_g_xhat[k] += g * xhat;
    dscale[scale_of[n]] += dy[n] * xhat;
    dbias[scale_of[n]] += dy[n];
  }
  for (int64_t n = 0; n < x.size(); ++n) {
    const int64_t k = group_of[n];
    const T xhat = (x[n] - mean[k]) * inv[k];
    const T g = dy[n] * scale[scale_of[n]];
    dx[n] = inv[k] * (g - sum_g[k] / group_size - xhat * sum_g_xhat[k] / group_size);
  }
  ex.store(p.dx, dx);
  ex.store(p.dscale, dscale);
  ex.store(p.dbias, dbias);
}

struct RunningPorts {
  TensorPtr prev_mean, prev_var, momentum, next_mean, next_var;  // all null when not requested
};

template <class NodeT>
RunningPorts running_ports(const NodeT& node) {
  return {node.in(ExIn::PREV_RUNNING_MEAN), node.in(ExIn::PREV_RUNNING_VAR), node.in(ExIn::MOMENTUM),
          node.out(ExOut::NEXT_RUNNING_MEAN), node.out(ExOut::NEXT_RUNNING_VAR)};
}

// next = (1 - momentum) * prev + momentum * current, with the unbiased variance (factor M / (M - 1)).
template <class T>
void update_running_stats(RefExec& ex, const RunningPorts& p, const Moments<T>& batch, T count) {
  if (!p.next_mean) return;
  const T momentum = ex.load<T>(p.momentum)[0];
  Array<T> next_mean = ex.load<T>(p.prev_mean);
  Array<T> next_var = ex.load<T>(p.prev_var);
  for (int64_t k = 0; k < next_mean.size(); ++k) {
    next_mean[k] = (T(1) - momentum) * next_mean[k] + momentum * batch.mean[k];
    next_var[k] = (T(1) - momentum) * next_var[k] + momentum * batch.var[k] * count / (count - T(1));
  }
  ex.store(p.next_mean, next_mean);
  ex.store(p.next_var, next_var);
}

template <class F>
error_t in_precision(RefExec& ex, F&& f) {
  return with_precision(ex, [&](auto zero) -> error_t {
    f(zero);
    return {};
  });
}

}  // namespace

error_t BatchnormNode::run_reference(RefExec& ex) const {
  const ForwardPorts p{in(ExIn::X),   in(ExIn::SCALE),  in(ExIn::BIAS),          in(ExIn::EPSILON),
                       out(ExOut::Y), out(ExOut::MEAN), out(ExOut::INV_VARIANCE)};
  const std::vector<int64_t> ch = channel_dims(p.x->get_dim());
  return in_precision(ex, [&](auto zero) {
    using T = decltype(zero);
    const std::vector<int64_t> group_of = broadcast_map(p.x->get_dim(), ch);
    const Moments<T> batch = normalize_forward<T>(ex, p, ch, group_of);
    update_running_stats(ex, running_ports(*this), batch, static_cast<T>(p.x->get_volume() / ch[1]));
  });
}

error_t BatchnormInferenceNode::run_reference(RefExec& ex) const {
  return in_precision(ex, [&](auto zero) {
    using T = decltype(zero);
    const Array<T> x = ex.load<T>(in(ExIn::X));
    const Array<T> mean = ex.load<T>(in(ExIn::MEAN)), inv = ex.load<T>(in(ExIn::INV_VARIANCE));
    const Array<T> scale = ex.load<T>(in(ExIn::SCALE)), bias = ex.load<T>(in(ExIn::BIAS));
    const std::vector<int64_t> c_of = broadcast_map(x.dim, mean.dim);
    Array<T> y(x.dim);
    for (int64_t n = 0; n < x.size(); ++n) {
      const int64_t c = c_of[n];
      y[n] = (x[n] - mean[c]) * inv[c] * scale[c] + bias[c];
    }
    ex.store(out(ExOut::Y), y);
  });
}

error_t BatchnormBackwardNode::run_reference(RefExec& ex) const {
  const BackwardPorts p{in(ExIn::DY),           in(ExIn::X),    in(ExIn::SCALE),    in(ExIn::MEAN),
                        in(ExIn::INV_VARIANCE), out(ExOut::DX), out(ExOut::DSCALE), out(ExOut::DBIAS)};
  const std::vector<int64_t> group_of = broadcast_map(p.x->get_dim(), channel_dims(p.x->get_dim()));
  return in_precision(ex, [&](auto zero) { normalize_backward<decltype(zero)>(ex, p, group_of); });
}

error_t InstancenormNode::run_reference(RefExec& ex) const {
  const ForwardPorts p{in(ExIn::X),   in(ExIn::SCALE),  in(ExIn::BIAS),          in(ExIn::EPSILON),
                       out(ExOut::Y), out(ExOut::MEAN), out(ExOut::INV_VARIANCE)};
  const auto& x_dims = p.x->get_dim();
  const std::vector<int64_t> group_of = channel_group_map(x_dims, x_dims[1]);
  std::vector<int64_t> stats = channel_dims(x_dims);
  stats[0] = x_dims[0];
  return in_precision(ex, [&](auto zero) { normalize_forward<decltype(zero)>(ex, p, stats, group_of); });
}

error_t InstancenormBackwardNode::run_reference(RefExec& ex) const {
  const BackwardPorts p{in(ExIn::DY),           in(ExIn::X),    in(ExIn::SCALE),    in(ExIn::MEAN),
                        in(ExIn::INV_VARIANCE), out(ExOut::DX), out(ExOut::DSCALE), out(ExOut::DBIAS)};
  const std::vector<int64_t> group_of = channel_group_map(p.x->get_dim(), p.x->get_dim()[1]);
  return in_precision(ex, [&](auto zero) { normalize_backward<decltype(zero)>(ex, p, group_of); });
}

error_t GroupnormNode::run_reference(RefExec& ex) const {
  const ForwardPorts p{in(ExIn::X),   in(ExIn::SCALE),  in(ExIn::BIAS),          in(ExIn::EPSILON),
                       out(ExOut::Y), out(ExOut::MEAN), out(ExOut::INV_VARIANCE)};
  const auto& x_dims = p.x->get_dim();
  const std::vector<int64_t> group_of = channel_group_map(x_dims, attr.group_count);
  std::vector<int64_t> stats(x_dims.size(), 1);
  stats[0] = x_dims[0];
  stats[1] = attr.group_count;
  return in_precision(ex, [&](auto zero) { normalize_forward<decltype(zero)>(ex, p, stats, group_of); });
}

error_t GroupnormBackwardNode::run_reference(RefExec& ex) const {
  const BackwardPorts p{in(ExIn::DY),           in(ExIn::X),    in(ExIn::SCALE),    in(ExIn::MEAN),
                        in(ExIn::INV_VARIANCE), out(ExOut::DX), out(ExOut::DSCALE), out(ExOut::DBIAS)};
  const std::vector<int64_t> group_of = channel_group_map(p.x->get_dim(), p.mean->get_dim()[1]);
  return in_precision(ex, [&](auto zero) { normalize_backward<decltype(zero)>(ex, p, group_of); });
}

error_t AdaLayernormNode::run_reference(RefExec& ex) const {
  const ForwardPorts p{in(ExIn::X),   in(ExIn::SCALE),  in(ExIn::BIAS),          in(ExIn::EPSILON),
                       out(ExOut::Y), out(ExOut::MEAN), out(ExOut::INV_VARIANCE)};
  const auto& x_dims = p.x->get_dim();
  std::vector<int64_t> stats = x_dims;
  if (p.inv_variance) {
    stats = p.inv_variance->get_dim();
  } else {  // INFERENCE: the default axes, those where scale spans X
    for (size_t k = 1; k < stats.size(); ++k)
      if (p.scale->get_dim()[k] != 1) stats[k] = 1;
  }
  const std::vector<int64_t> group_of = broadcast_map(x_dims, stats);
  return in_precision(ex, [&](auto zero) { normalize_forward<decltype(zero)>(ex, p, stats, group_of); });
}

error_t AdaLayernormBackwardNode::run_reference(RefExec& ex) const {
  const BackwardPorts p{in(ExIn::DY),           in(ExIn::X),    in(ExIn::SCALE),    in(ExIn::MEAN),
                        in(ExIn::INV_VARIANCE), out(ExOut::DX), out(ExOut::DSCALE), out(ExOut::DBIAS)};
  const std::vector<int64_t> group_of = broadcast_map(p.x->get_dim(), p.inv_variance->get_dim());
  return in_precision(ex, [&](auto zero) { normalize_backward<decltype(zero)>(ex, p, group_of); });
}

error_t GenstatsNode::run_reference(RefExec& ex) const {
  return in_precision(ex, [&](auto zero) {
    using T = decltype(zero);
    const Array<T> x = ex.load<T>(in(ExIn::X));
    const std::vector<int64_t> ch = channel_dims(x.dim);
    const std::vector<int64_t> c_of = broadcast_map(x.dim, ch);
    Array<T> sum(ch), sq_sum(ch);
    for (int64_t n = 0; n < x.size(); ++n) {
      sum[c_of[n]] += x[n];
      sq_sum[c_of[n]] += x[n] * x[n];
    }
    ex.store(out(ExOut::SUM), sum);
    ex.store(out(ExOut::SQ_SUM), sq_sum);
  });
}

error_t BnFinalizeNode::run_reference(RefExec& ex) const {
  return in_precision(ex, [&](auto zero) {
    using T = decltype(zero);
    const Array<T> sum = ex.load<T>(in(ExIn::SUM)), sq_sum = ex.load<T>(in(ExIn::SQ_SUM));
    const Array<T> scale = ex.load<T>(in(ExIn::SCALE)), bias = ex.load<T>(in(ExIn::BIAS));
    const T epsilon = ex.load<T>(in(ExIn::EPSILON))[0];
    const T count = ex.load<T>(in(ExIn::ACCUM_COUNT))[0];
    Moments<T> batch{Array<T>(sum.dim), Array<T>(sum.dim)};
    Array<T> inv(sum.dim), eq_scale(sum.dim), eq_bias(sum.dim);
    for (int64_t k = 0; k < sum.size(); ++k) {
      const T mean = batch.mean[k] = sum[k] / count;
      // E[x^2] - E[x]^2 can round below zero when the variance is tiny against the mean.
      batch.var[k] = std::max(T(0), sq_sum[k] / count - mean * mean);
      inv[k] = T(1) / std::sqrt(batch.var[k] + epsilon);
      eq_scale[k] = scale[k] * inv[k];
      eq_bias[k] = bias[k] - mean * eq_scale[k];
    }
    ex.store(out(ExOut::EQ_SCALE), eq_scale);
    ex.store(out(ExOut::EQ_BIAS), eq_bias);
    ex.store(out(ExOut::MEAN), batch.mean);
    ex.store(out(ExOut::INV_VARIANCE), inv);
    update_running_stats(ex, running_ports(*this), batch, count);
  });
}

error_t DbnWeightNode::run_reference(RefExec& ex) const {
  return in_precision(ex, [&](auto zero) {
    using T = decltype(zero);
    const Array<T> dy = ex.load<T>(in(ExIn::DY)), x = ex.load<T>(in(ExIn::X));
    const Array<T> scale = ex.load<T>(in(ExIn::SCALE));
    const Array<T> mean = ex.load<T>(in(ExIn::MEAN)), inv = ex.load<T>(in(ExIn::INV_VARIANCE));
    const std::vector<int64_t> c_of = broadcast_map(x.dim, mean.dim);
    const T count = static_cast<T>(x.size() / mean.size());
    Array<T> dscale(mean.dim), dbias(mean.dim), eq_dy(mean.dim), eq_x(mean.dim), eq_bias(mean.dim);
    for (int64_t n = 0; n < x.size(); ++n) {
      const int64_t c = c_of[n];
      dscale[c] += dy[n] * (x[n] - mean[c]) * inv[c];
      dbias[c] += dy[n];
    }
    // dx = scale * inv * (dy - dbias / M - xhat * dscale / M), regrouped as a * dy + b * x + c.
    for (int64_t c = 0; c < mean.size(); ++c) {
      eq_dy[c] = scale[c] * inv[c];
      eq_x[c] = -scale[c] * inv[c] * inv[c] * dscale[c] / count;
      eq_bias[c] = scale[c] * inv[c] * (inv[c] * mean[c] * dscale[c] - dbias[c]) / count;
    }
    ex.store(out(ExOut::DSCALE), dscale);
    ex.store(out(ExOut::DBIAS), dbias);
    ex.store(out(ExOut::EQ_SCALE_DY), eq_dy);
    ex.store(out(ExOut::EQ_SCALE_X), eq_x);
    ex.store(out(ExOut::EQ_BIAS), eq_bias);
  });
}

}  // namespace frost::detail
