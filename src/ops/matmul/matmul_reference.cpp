#include <algorithm>

#include "engines/reference/ref_exec.h"
#include "ops/common/broadcast.h"
#include "ops/matmul/matmul_node.h"

namespace frost::detail {

namespace {

std::vector<int64_t> leading_dims(const std::vector<int64_t>& dims) { return {dims.begin(), dims.end() - 2}; }

// Per-batch effective extents from an override tensor (or `full` everywhere without one). Every value
// is checked before C is touched, so a bad override leaves the caller's output as it was.
error_t effective_extents(const Node& node, const RefExec& ex, const TensorPtr& t, const char* port_name, int64_t full,
                          const std::vector<int64_t>& batch, std::vector<int64_t>& eff) {
  if (!t) return {};
  const Array<double> values = ex.load<double>(t);
  const std::vector<int64_t> map = broadcast_map(batch, leading_dims(t->get_dim()));
  for (size_t i = 0; i < eff.size(); ++i) {
    const double v = values[map[i]];
    if (!(v >= 0 && v <= static_cast<double>(full)))
      return attr_error(node, port_name, std::to_string(static_cast<long long>(v)),
                        "batch " + std::to_string(i) + " asks for more than the declared extent " +
                            std::to_string(full) + " (or a negative one)");
    eff[i] = static_cast<int64_t>(v);
  }
  return {};
}

}  // namespace

template <class T>
error_t matmul_reference(const Node& node, const RefExec& ex, const MatmulTensors& t, T padding, Array<T>& c) {
  const std::vector<int64_t>& cd = c.dim;
  const std::vector<int64_t> batch = leading_dims(cd);
  const int64_t m = cd[cd.size() - 2], n = cd[cd.size() - 1], k = t.a->get_dim().back();
  int64_t batches = 1;
  for (int64_t e : batch) batches *= e;
  std::vector<int64_t> m_eff(static_cast<size_t>(batches), m), n_eff(m_eff.size(), n), k_eff(m_eff.size(), k);
  FROST_CHECK(effective_extents(node, ex, t.m_override, "M_OVERRIDE", m, batch, m_eff));
  FROST_CHECK(effective_extents(node, ex, t.n_override, "N_OVERRIDE", n, batch, n_eff));
  FROST_CHECK(effective_extents(node, ex, t.k_override, "K_OVERRIDE", k, batch, k_eff));
  const Array<T> av = ex.load<T>(t.a), bv = ex.load<T>(t.b);
  const std::vector<int64_t> a_map = broadcast_map(batch, leading_dims(t.a->get_dim()));
  const std::vector<int64_t> b_map = broadcast_map(batch, leading_dims(t.b->get_dim()));
  std::fill(c.v.begin(), c.v.end(), padding);
  for (size_t bt = 0; bt < m_eff.size(); ++bt) {
    const T* ap = &av[a_map[bt] * m * k];
    const T* bp = &bv[b_map[bt] * k * n];
    // Row by row, k outer and n inner, so B is read along its rows.
    for (int64_t i = 0; i < m_eff[bt]; ++i) {
      T* row = &c[(static_cast<int64_t>(bt) * m + i) * n];
      std::fill(row, row + n_eff[bt], T(0));
      for (int64_t kk = 0; kk < k_eff[bt]; ++kk) {
        const T a_ik = ap[i * k + kk];
        const T* b_row = bp + kk * n;
        for (int64_t j = 0; j < n_eff[bt]; ++j) row[j] += a_ik * b_row[j];
      }
    }
  }
  return {};
}

template error_t matmul_reference<float>(const Node&, const RefExec&, const MatmulTensors&, float, Array<float>&);
template error_t matmul_reference<double>(const Node&, const RefExec&, const MatmulTensors&, double, Array<double>&);

error_t MatmulNode::run_reference(RefExec& ex) const {
  const TensorPtr c = out(graph::MatmulOutput::C);
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    Array<T> cv(c->get_dim());
    FROST_CHECK(matmul_reference(*this, ex, operands(), static_cast<T>(attr.padding_value), cv));
    ex.store(c, cv);
    return {};
  });
}

}  // namespace frost::detail
