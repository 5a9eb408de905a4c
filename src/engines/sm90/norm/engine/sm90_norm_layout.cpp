#include "engines/sm90/norm/engine/sm90_norm_layout.h"

#include "graph/node.h"

namespace frost::detail {

std::string normalized_split(const std::vector<int64_t>& x_dims, const std::vector<int64_t>& stats_dims,
                             size_t& split) {
  split = x_dims.size();
  bool normalizing = false;
  for (size_t i = 0; i < x_dims.size(); ++i) {
    if (x_dims[i] == 1) continue;
    const bool normalized = stats_dims[i] == 1;
    if (normalized && !normalizing) {
      split = i;
      normalizing = true;
    } else if (!normalized && normalizing) {
      return "statistics dims " + dims_string(stats_dims) + " normalize axes that are not X's trailing axes " +
             dims_string(x_dims);
    }
  }
  return {};
}

std::string row_layout(const graph::Tensor_attributes& t, const std::string& port, size_t split, RowLayout& out) {
  const auto& d = t.get_dim();
  const auto& s = t.get_stride();
  out = {};
  int64_t expected = 1;
  for (size_t i = d.size(); i-- > split;) {
    if (d[i] == 1) continue;
    if (s[i] != expected)
      return port + " stride " + std::to_string(s[i]) + " on normalized axis " + std::to_string(i) +
             " (the normalized " + "axes must be packed: expected " + std::to_string(expected) + ")";
    expected *= d[i];
  }
  out.cols = expected;
  int64_t inner_stride = 0, inner_dim = 0;
  for (size_t i = split; i-- > 0;) {
    if (d[i] == 1) continue;
    if (s[i] < 0) return port + " stride " + std::to_string(s[i]) + " on axis " + std::to_string(i) + " (negative)";
    if (out.rows == 1) {
      out.row_stride = s[i];
    } else if (s[i] != inner_stride * inner_dim) {
      return port + " stride " + std::to_string(s[i]) + " on axis " + std::to_string(i) +
             " (the row axes must collapse into one row stride: expected " + std::to_string(inner_stride * inner_dim) +
             ")";
    }
    inner_stride = s[i];
    inner_dim = d[i];
    out.rows *= d[i];
  }
  return {};
}

std::string column_layout(const graph::Tensor_attributes& t, const std::string& port, size_t split,
                          const std::vector<int64_t>& x_dims) {
  const auto& d = t.get_dim();
  for (size_t i = 0; i < d.size(); ++i) {
    if (i < split && d[i] != 1)
      return port + " dims " + dims_string(d) + " vary along row axis " + std::to_string(i) +
             " (one value per normalized element only)";
    if (i >= split && d[i] != x_dims[i])
      return port + " dims " + dims_string(d) + " broadcast along normalized axis " + std::to_string(i);
  }
  RowLayout l;
  return row_layout(t, port, split, l);
}

}  // namespace frost::detail
