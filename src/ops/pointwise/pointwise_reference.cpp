#include "engines/reference/ref_exec.h"
#include "ops/common/broadcast.h"
#include "ops/pointwise/pointwise_math.h"
#include "ops/pointwise/pointwise_node.h"

namespace frost::detail {

error_t PointwiseNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const auto& y = out(graph::PointwiseOutput::OUT_0);
    Array<T> result(y->get_dim());
    if (attr.mode == PointwiseMode_t::GEN_INDEX) {
      const auto& d = y->get_dim();
      const int64_t axis = *attr.axis;
      int64_t inner = 1;
      for (size_t k = static_cast<size_t>(axis) + 1; k < d.size(); ++k) inner *= d[k];
      for (int64_t n = 0; n < result.size(); ++n) result[n] = static_cast<T>((n / inner) % d[static_cast<size_t>(axis)]);
      ex.store(y, result);
      return {};
    }
    PointwiseParams<T> p;
    if (attr.relu_lower_clip) p.relu_lower = *attr.relu_lower_clip;
    if (attr.relu_upper_clip) p.relu_upper = *attr.relu_upper_clip;
    if (attr.relu_lower_clip_slope) p.relu_slope = *attr.relu_lower_clip_slope;
    if (attr.swish_beta) p.swish_beta = *attr.swish_beta;
    if (attr.elu_alpha) p.elu_alpha = *attr.elu_alpha;
    if (attr.softplus_beta) p.softplus_beta = *attr.softplus_beta;
    const int arity = pointwise_arity(attr.mode);
    const graph::PointwiseInput ports[3] = {graph::PointwiseInput::IN_0, graph::PointwiseInput::IN_1,
                                            graph::PointwiseInput::IN_2};
    Array<T> ins[3];
    std::vector<int64_t> maps[3];
    for (int i = 0; i < arity; ++i) {
      ins[i] = ex.load<T>(in(ports[i]));
      maps[i] = broadcast_map(y->get_dim(), ins[i].dim);
    }
    for (int64_t n = 0; n < result.size(); ++n) {
      const T a = ins[0][maps[0][n]];
      const T b = arity > 1 ? ins[1][maps[1][n]] : T(0);
      const T c = arity > 2 ? ins[2][maps[2][n]] : T(0);
      pointwise_apply(attr.mode, p, a, b, c, result[n]);
    }
    ex.store(y, result);
    return {};
  });
}

}  // namespace frost::detail
