#include "graph/shape_util.h"

#include <algorithm>
#include <numeric>

#include "common/dtype_convert.h"
#include "graph/node.h"

namespace frost::detail {

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * std::max<int64_t>(dims[i + 1], 1);
  return s;
}

std::vector<int64_t> strides_like(const std::vector<int64_t>& dims, const std::vector<int64_t>& like) {
  if (like.size() != dims.size()) return packed_strides(dims);
  std::vector<size_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  // Innermost first: smaller stride is inner; on ties the later axis is inner.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (like[a] != like[b]) return like[a] < like[b];
    return a > b;
  });
  std::vector<int64_t> s(dims.size(), 1);
  int64_t acc = 1;
  for (size_t ax : order) {
    s[ax] = acc;
    acc *= std::max<int64_t>(dims[ax], 1);
  }
  return s;
}

std::optional<int64_t> checked_volume(const std::vector<int64_t>& dims) {
  int64_t v = 1;
  for (int64_t d : dims) {
    if (d <= 0 || d > kMaxElements) return std::nullopt;
    if (v > kMaxElements / d) return std::nullopt;
    v *= d;
  }
  return v;
}

int64_t element_span(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  int64_t last = 0;
  for (size_t i = 0; i < dims.size(); ++i) last += (dims[i] - 1) * strides[i];
  return last + 1;
}

error_t check_tensor(const graph::Tensor_attributes& t, std::string_view where) {
  auto fail = [&](error_code_t c, const std::string& why) {
    return error_t{c, std::string(where) + ": tensor '" + t.get_name() + "': " + why};
  };
  const auto& d = t.get_dim();
  const auto& s = t.get_stride();
  if (d.empty()) return fail(error_code_t::ATTRIBUTE_NOT_SET, "dims are not set");
  if (d.size() > 12) return fail(error_code_t::INVALID_VALUE, "rank " + std::to_string(d.size()) + " exceeds 12");
  for (int64_t e : d)
    if (e <= 0) return fail(error_code_t::INVALID_VALUE, "dims " + dims_string(d) + " must be positive");
  if (!checked_volume(d)) return fail(error_code_t::INVALID_VALUE, "dims " + dims_string(d) + " overflow the element count limit 2^48");
  if (s.size() != d.size())
    return fail(error_code_t::INVALID_VALUE, "stride " + dims_string(s) + " has rank " + std::to_string(s.size()) +
                                                  ", dims have rank " + std::to_string(d.size()));
  for (int64_t e : s)
    if (e < 0 || e > kMaxElements) return fail(error_code_t::INVALID_VALUE, "stride " + dims_string(s) + " must be in [0, 2^48]");
  // Each (d-1)*s term is below 2^96 only in theory; in double it is exact enough to compare with 2^48.
  double span = 0;
  for (size_t i = 0; i < d.size(); ++i) span += static_cast<double>(d[i] - 1) * static_cast<double>(s[i]);
  if (span >= static_cast<double>(kMaxElements))
    return fail(error_code_t::INVALID_VALUE, "dims and strides address more than 2^48 elements");
  if (t.get_data_type() == DataType_t::NOT_SET) return fail(error_code_t::ATTRIBUTE_NOT_SET, "data type is not set");
  if (!is_storable(t.get_data_type()))
    return fail(error_code_t::INVALID_VALUE, "data type " + std::string(to_string(t.get_data_type())) + " is not supported");
  if (t.get_is_pass_by_value() && !t.get_pass_by_value())
    return fail(error_code_t::ATTRIBUTE_NOT_SET, "pass-by-value tensor has no value");
  if (t.get_reordering_type() == TensorReordering_t::F8_128x4) {
    F8_128x4Matrix m;
    if (const error_t e = f8_128x4_matrix(t, m); e.is_bad()) return fail(e.get_code(), e.get_message());
  }
  return {};
}

error_t f8_128x4_matrix(const graph::Tensor_attributes& t, F8_128x4Matrix& m) {
  const auto& d = t.get_dim();
  const auto& s = t.get_stride();
  const auto bad = [&](const std::string& why) {
    return error_t{error_code_t::INVALID_VALUE,
                   "F8_128x4 reordering of dims " + dims_string(d) + " strides " + dims_string(s) + ": " + why};
  };
  if (d.size() < 2 || s.size() != d.size()) return bad("needs rank >= 2");
  const size_t a = d.size() - 2, b = d.size() - 1;
  if (s[b] == 1 && s[a] == d[b]) {
    m = {a, b};
  } else if (s[a] == 1 && s[b] == d[a]) {
    m = {b, a};
  } else {
    return bad("one of the last two dims (the block columns) must have stride 1 and the other its extent");
  }
  if (d[m.row_dim] % 128 != 0 || d[m.col_dim] % 4 != 0)
    return bad("rows (extent " + std::to_string(d[m.row_dim]) + ") must be a multiple of 128 and block columns (" +
               std::to_string(d[m.col_dim]) + ") of 4");
  if (element_bits(t.get_data_type()) != 8) return bad("holds 8-bit scale factors only");
  return {};
}

}  // namespace frost::detail
