#include "engines/reference/ref_exec.h"

#include "common/dtype_convert.h"
#include "graph/shape_util.h"

namespace frost::detail {
namespace {

// Visits each element of a strided tensor in row-major order of its dims.
template <class F>
void for_each_offset(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, F&& f) {
  const size_t r = dims.size();
  std::vector<int64_t> idx(r, 0);
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  int64_t off = 0;
  for (int64_t n = 0; n < total; ++n) {
    f(n, off);
    for (size_t k = r; k-- > 0;) {
      if (++idx[k] < dims[k]) {
        off += strides[k];
        break;
      }
      off -= (dims[k] - 1) * strides[k];
      idx[k] = 0;
    }
  }
}

// for_each_offset over a tensor's storage: strided, or F8_128x4-reordered (validate checked its layout).
template <class F>
void for_each_storage_offset(const graph::Tensor_attributes& t, F&& f) {
  F8_128x4Matrix m;
  if (t.get_reordering_type() != TensorReordering_t::F8_128x4 || f8_128x4_matrix(t, m).is_bad()) {
    for_each_offset(t.get_dim(), t.get_stride(), f);
    return;
  }
  // Matrices are placed by the strides of the leading dims; inside one, by the tile rule.
  std::vector<int64_t> leading(t.get_dim()), strides(t.get_stride());
  const int64_t rows = leading[m.row_dim], cols = leading[m.col_dim];
  leading.resize(leading.size() - 2);
  strides.resize(strides.size() - 2);
  const bool row_major = m.col_dim > m.row_dim;  // logical order of the last two dims
  int64_t n = 0;
  for_each_offset(leading, strides, [&](int64_t, int64_t base) {
    for (int64_t x = 0; x < (row_major ? rows : cols); ++x)
      for (int64_t y = 0; y < (row_major ? cols : rows); ++y)
        f(n++, base + (row_major ? f8_128x4_offset(x, y, cols) : f8_128x4_offset(y, x, cols)));
  });
}

}  // namespace

template <class T>
Array<T> RefExec::load(const TensorPtr& t) const {
  Array<T> a(t->get_dim());
  if (t->get_is_pass_by_value()) {
    const double v = t->get_pass_by_value().value_or(0.0);
    for (auto& x : a.v) x = static_cast<T>(v);
    return a;
  }
  if (t->get_is_virtual()) {
    auto it = virtuals_.find(t.get());
    if (it != virtuals_.end())
      for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<T>(it->second[static_cast<size_t>(i)]);
    return a;
  }
  const void* base = pack_.at(t->get_uid());
  const DataType_t dt = t->get_data_type();
  for_each_storage_offset(*t, [&](int64_t n, int64_t off) { a[n] = static_cast<T>(read_element(base, dt, off)); });
  return a;
}

template <class T>
void RefExec::store(const TensorPtr& t, const Array<T>& a) {
  const DataType_t dt = t->get_data_type();
  if (t->get_is_virtual()) {
    auto& dst = virtuals_[t.get()];
    dst.resize(a.v.size());
    for (size_t i = 0; i < a.v.size(); ++i)
      dst[i] = precision_ == Precision::F64 ? static_cast<double>(a.v[i]) : round_to(dt, static_cast<double>(a.v[i]));
    return;
  }
  void* base = pack_.at(t->get_uid());
  for_each_storage_offset(*t, [&](int64_t n, int64_t off) { write_element(base, dt, off, static_cast<double>(a[n])); });
}

template Array<float> RefExec::load<float>(const TensorPtr&) const;
template Array<double> RefExec::load<double>(const TensorPtr&) const;
template void RefExec::store<float>(const TensorPtr&, const Array<float>&);
template void RefExec::store<double>(const TensorPtr&, const Array<double>&);

error_t RefExec::run() {
  for (const auto& node : graph_.nodes) FROST_CHECK(node->run_reference(*this));
  return {};
}

error_t reference_execute(const GraphState& g, const VariantPack& pack, Precision p) {
  RefExec ex(g, pack, p);
  return ex.run();
}

}  // namespace frost::detail
