// How the sm90 normalization engine sees a tensor: rows of packed columns. Host-only.
#pragma once

#include <string>
#include <vector>

#include "frost/tensor.h"

namespace frost::detail {

// `rows` rows of `cols` packed elements, row r at r * row_stride.
struct RowLayout {
  int64_t rows = 1, cols = 1, row_stride = 0;
};

// The first normalized axis of X: the axes where the statistics have extent 1 (and X does not) must be
// X's trailing axes of extent > 1. Empty on success, else a reason naming the statistics' dims.
std::string normalized_split(const std::vector<int64_t>& x_dims, const std::vector<int64_t>& stats_dims, size_t& split);

// Axes [0, split) of `t` index rows and must collapse into one row stride; axes [split, rank) must be
// packed. Empty on success, else a reason that names `port` and the offending stride.
std::string row_layout(const graph::Tensor_attributes& t, const std::string& port, size_t split, RowLayout& out);

// A per-column operand (scale, bias, their gradients): extent 1 on every row axis, X's extents on the
// normalized axes, packed. Empty on success, else the reason.
std::string column_layout(const graph::Tensor_attributes& t, const std::string& port, size_t split,
                          const std::vector<int64_t>& x_dims);

}  // namespace frost::detail
