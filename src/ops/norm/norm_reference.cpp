// CPU reference of the normalization family. Each element of X maps to its statistics element
// (its group) and to its scale/bias element through broadcast maps; sums run per group in T.
#include <cmath>

#include "engines/reference/ref_exec.h"
#include "ops/common/broadcast.h"
#include "ops/norm/norm_node.h"
#include "ops/norm/norm_shape.h"

namespace frost::detail {
namespace {

struct ForwardPorts {
  TensorPtr x, scale, bias, epsilon;  // scale and bias may be null (a scale of 1, no bias)
  TensorPtr y, mean, inv_variance;    // statistics are null in INFERENCE; mean is null for RMSNorm
};

// centered: LayerNorm (subtract the mean, divide by the standard deviation); otherwise RMSNorm.
template <class T>
void norm_forward(RefExec& ex, const ForwardPorts& p, bool centered) {
  const Array<T> x = ex.load<T>(p.x);
  const Array<T> scale = p.scale ? ex.load<T>(p.scale) : Array<T>(std::vector<int64_t>(x.dim.size(), 1), T(1));
  const T epsilon = ex.load<T>(p.epsilon)[0];
  const std::vector<int64_t> stats_dims = p.inv_variance ? p.inv_variance->get_dim() : default_stats_dims(x.dim);
  const std::vector<int64_t> group_of = broadcast_map(x.dim, stats_dims);
  const std::vector<int64_t> scale_of = broadcast_map(x.dim, scale.dim);
  Array<T> mean(stats_dims), inv(stats_dims);
  const T group_size = static_cast<T>(x.volume() / mean.volume());
  if (centered) {
    for (int64_t n = 0; n < x.size(); ++n) mean[group_of[n]] += x[n];
    for (T& m : mean.v) m /= group_size;
  }
  // Two passes (mean, then squares about it) keep the variance accurate when |mean| >> stddev.
  for (int64_t n = 0; n < x.size(); ++n) {
    const T d = x[n] - mean[group_of[n]];
    inv[group_of[n]] += d * d;
  }
  for (T& v : inv.v) v = T(1) / std::sqrt(v / group_size + epsilon);
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
}

struct BackwardPorts {
  TensorPtr dy, x, scale, mean, inv_variance;  // mean is null for RMSNorm
  TensorPtr dx, dscale, dbias;                 // dbias may be null
};

// With xhat = (x - mean) * inv and g = dy * scale, per group of size N:
//   dx = inv * (g - sum(g) / N - xhat * sum(g * xhat) / N)   (LayerNorm)
//   dx = inv * (g - xhat * sum(g * xhat) / N)                  (RMSNorm: no mean to differentiate)
// dscale = sum(dy * xhat) and dbias = sum(dy) over the axes where scale broadcasts.
template <class T>
void norm_backward(RefExec& ex, const BackwardPorts& p) {
  const Array<T> dy = ex.load<T>(p.dy);
  const Array<T> x = ex.load<T>(p.x);
  const Array<T> scale = ex.load<T>(p.scale);
  const Array<T> inv = ex.load<T>(p.inv_variance);
  const Array<T> mean = p.mean ? ex.load<T>(p.mean) : Array<T>(inv.dim);
  const std::vector<int64_t> group_of = broadcast_map(x.dim, inv.dim);
  const std::vector<int64_t> scale_of = broadcast_map(x.dim, scale.dim);
  const T group_size = static_cast<T>(x.volume() / inv.volume());
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
    const T mean_g = p.mean ? sum_g[k] / group_size : T(0);
    dx[n] = inv[k] * (g - mean_g - xhat * sum_g_xhat[k] / group_size);
  }
  ex.store(p.dx, dx);
  ex.store(p.dscale, dscale);
  if (p.dbias) ex.store(p.dbias, dbias);
}

}  // namespace

error_t RmsnormNode::run_reference(RefExec& ex) const {
  const ForwardPorts p{in(NormIn::X),   in(NormIn::SCALE), in(NormIn::BIAS),          in(NormIn::EPSILON),
                       out(NormOut::Y), nullptr,           out(NormOut::INV_VARIANCE)};
  return with_precision(ex, [&](auto zero) -> error_t {
    norm_forward<decltype(zero)>(ex, p, false);
    return {};
  });
}

error_t LayernormNode::run_reference(RefExec& ex) const {
  const ForwardPorts p{in(NormIn::X),   in(NormIn::SCALE),  in(NormIn::BIAS),          in(NormIn::EPSILON),
                       out(NormOut::Y), out(NormOut::MEAN), out(NormOut::INV_VARIANCE)};
  return with_precision(ex, [&](auto zero) -> error_t {
    norm_forward<decltype(zero)>(ex, p, true);
    return {};
  });
}

error_t RmsnormBackwardNode::run_reference(RefExec& ex) const {
  const BackwardPorts p{in(NormIn::DY),           in(NormIn::X),    in(NormIn::SCALE),    nullptr,
                        in(NormIn::INV_VARIANCE), out(NormOut::DX), out(NormOut::DSCALE), out(NormOut::DBIAS)};
  return with_precision(ex, [&](auto zero) -> error_t {
    norm_backward<decltype(zero)>(ex, p);
    return {};
  });
}

error_t LayernormBackwardNode::run_reference(RefExec& ex) const {
  const BackwardPorts p{in(NormIn::DY),           in(NormIn::X),    in(NormIn::SCALE),    in(NormIn::MEAN),
                        in(NormIn::INV_VARIANCE), out(NormOut::DX), out(NormOut::DSCALE), out(NormOut::DBIAS)};
  return with_precision(ex, [&](auto zero) -> error_t {
    norm_backward<decltype(zero)>(ex, p);
    return {};
  });
}

}  // namespace frost::detail
