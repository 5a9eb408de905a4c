#include <algorithm>

#include "engines/reference/ref_exec.h"
#include "ops/common/broadcast.h"
#include "ops/matmul/matmul_node.h"

namespace frost::detail {

using graph::MatmulInput;

namespace {

std::vector<int64_t> leading_dims(const std::vector<int64_t>& dims) { return {dims.begin(), dims.end() - 2}; }

// Per-batch effective extents from an override tensor (or `full` everywhere without one). Every value
// is checked before C is touched, so a bad override leaves the caller's output as it was.
error_t effective_extents(const MatmulNode& node, const RefExec& ex, MatmulInput port, const char* port_name,
                          int64_t full, const std::vector<int64_t>& batch, std::vector<int64_t>& eff) {
  const TensorPtr t = node.in(port);
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

error_t MatmulNode::run_reference(RefExec& ex) const {
  const TensorPtr a = in(MatmulInput::A), b = in(MatmulInput::B);
  const TensorPtr c = out(graph::MatmulOutput::C);
  const auto& cd = c->get_dim();
  const std::vector<int64_t> batch = leading_dims(cd);
  const int64_t m = cd[cd.size() - 2], n = cd[cd.size() - 1], k = a->get_dim().back();
  int64_t batches = 1;
  for (int64_t e : batch) batches *= e;
  std::vector<int64_t> m_eff(static_cast<size_t>(batches), m), n_eff(m_eff.size(), n), k_eff(m_eff.size(), k);
  FROST_CHECK(effective_extents(*this, ex, MatmulInput::M_OVERRIDE, "M_OVERRIDE", m, batch, m_eff));
  FROST_CHECK(effective_extents(*this, ex, MatmulInput::N_OVERRIDE, "N_OVERRIDE", n, batch, n_eff));
  FROST_CHECK(effective_extents(*this, ex, MatmulInput::K_OVERRIDE, "K_OVERRIDE", k, batch, k_eff));
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const Array<T> av = ex.load<T>(a), bv = ex.load<T>(b);
    const std::vector<int64_t> a_map = broadcast_map(batch, leading_dims(a->get_dim()));
    const std::vector<int64_t> b_map = broadcast_map(batch, leading_dims(b->get_dim()));
    Array<T> cv(cd, static_cast<T>(attr.padding_value));
    for (size_t bt = 0; bt < m_eff.size(); ++bt) {
      const T* ap = &av[a_map[bt] * m * k];
      const T* bp = &bv[b_map[bt] * k * n];
      // Row by row, k outer and n inner, so B is read along its rows.
      for (int64_t i = 0; i < m_eff[bt]; ++i) {
        T* row = &cv[(static_cast<int64_t>(bt) * m + i) * n];
        std::fill(row, row + n_eff[bt], T(0));
        for (int64_t kk = 0; kk < k_eff[bt]; ++kk) {
          const T a_ik = ap[i * k + kk];
          const T* b_row = bp + kk * n;
          for (int64_t j = 0; j < n_eff[bt]; ++j) row[j] += a_ik * b_row[j];
        }
      }
    }
    ex.store(c, cv);
    return {};
  });
}

}  // namespace frost::detail
