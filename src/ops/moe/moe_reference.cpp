#include "engines/reference/ref_exec.h"
#include "ops/moe/moe_node.h"

namespace frost::detail {

error_t MoeGroupedMatmulNode::run_reference(RefExec& ex) const {
  const MoeOperands ops = operands();
  MoeExtents ext;
  FROST_CHECK(validate_moe_operands(*this, ops, ext));
  MoeRouting routing;
  FROST_CHECK(load_moe_routing(*this, ex, ops, ext, routing));
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const Array<T> token = ex.load<T>(ops.token), weight = ex.load<T>(ops.weight);
    // Zero-filled: rows outside every expert and untargeted SCATTER slots stay zero.
    Array<T> output({1, ext.rows, ext.n});
    for (int64_t r = 0; r < ext.rows; ++r) {
      const int64_t e = routing.expert[static_cast<size_t>(r)];
      if (e < 0) continue;
      const T* x = &token[routing.in_row[static_cast<size_t>(r)] * ext.k];
      T* y = &output[routing.out_row[static_cast<size_t>(r)] * ext.n];
      for (int64_t kk = 0; kk < ext.k; ++kk) {
        const T* w_row = &weight[(e * ext.k + kk) * ext.n];
        for (int64_t j = 0; j < ext.n; ++j) y[j] += x[kk] * w_row[j];
      }
    }
    ex.store(out(graph::MoeGroupedMatmulOutput::OUTPUT), output);
    return {};
  });
}

// With Y[r] = X[in_row(r)] W[e(r)] written to OUTPUT[out_row(r)]:
//   dToken[in_row(r)] += dOutput[out_row(r)] W[e]^T   and   dWeight[e] += X[in_row(r)]^T dOutput[out_row(r)].
error_t MoeGroupedMatmulBackwardNode::run_reference(RefExec& ex) const {
  const MoeOperands ops = operands();
  MoeExtents ext;
  FROST_CHECK(validate_moe_operands(*this, ops, ext));
  MoeRouting routing;
  FROST_CHECK(load_moe_routing(*this, ex, ops, ext, routing));
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const Array<T> token = ex.load<T>(ops.token), weight = ex.load<T>(ops.weight);
    const Array<T> dout = ex.load<T>(in(graph::MoeGroupedMatmulBackwardInput::DOUTPUT));
    Array<T> dtoken(ops.token->get_dim()), dweight(ops.weight->get_dim());
    for (int64_t r = 0; r < ext.rows; ++r) {
      const int64_t e = routing.expert[static_cast<size_t>(r)];
      if (e < 0) continue;
      const T* x = &token[routing.in_row[static_cast<size_t>(r)] * ext.k];
      T* dx = &dtoken[routing.in_row[static_cast<size_t>(r)] * ext.k];
      const T* dy = &dout[routing.out_row[static_cast<size_t>(r)] * ext.n];
      for (int64_t kk = 0; kk < ext.k; ++kk) {
        const T* w_row = &weight[(e * ext.k + kk) * ext.n];
        T* dw_row = &dweight[(e * ext.k + kk) * ext.n];
        T sum = 0;
        for (int64_t j = 0; j < ext.n; ++j) {
          sum += dy[j] * w_row[j];
          dw_row[j] += x[kk] * dy[j];
        }
        dx[kk] += sum;
      }
    }
    ex.store(out(graph::MoeGroupedMatmulBackwardOutput::DTOKEN), dtoken);
    ex.store(out(graph::MoeGroupedMatmulBackwardOutput::DWEIGHT), dweight);
    return {};
  });
}

}  // namespace frost::detail
