// Shape rules shared by the normalization nodes: statistics dims (which fix the normalized axes),
// operands that broadcast to X, and output inference.
#pragma once

#include <utility>
#include <vector>

#include "graph/node.h"

namespace frost::detail {

// [x.dim[0], 1, ..., 1]: every axis but the first is normalized.
std::vector<int64_t> default_stats_dims(const std::vector<int64_t>& x_dims);

// A required input port must hold a tensor.
error_t require_input(const Node& n, std::string_view port, const TensorPtr& t);

// X and DY must hold floating-point values.
error_t require_floating(const Node& n, std::string_view port, const TensorPtr& t);

// `dims` must have X's rank and, per axis, X's extent or 1.
error_t check_broadcasts_to_x(const Node& n, std::string_view port, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& x_dims);

// Epsilon holds exactly one element.
error_t check_epsilon(const Node& n, const TensorPtr& epsilon);

// The statistics dims shared by `stats` (port name, tensor; null tensors are skipped): every tensor
// whose dims are set must broadcast to X and agree with the others; with none set, the default.
error_t resolve_stats_dims(const Node& n, const std::vector<int64_t>& x_dims,
                           const std::vector<std::pair<const char*, TensorPtr>>& stats, std::vector<int64_t>& dims);

// Fills an output's dims (a user-set value must equal `dims`), its strides (ordered like
// `like_strides`) and, when `data_type` is set and the user chose none, its data type.
error_t infer_output(const Node& n, std::string_view port, graph::Tensor_attributes& t,
                     const std::vector<int64_t>& dims, const std::vector<int64_t>& like_strides,
                     DataType_t data_type = DataType_t::NOT_SET);

}  // namespace frost::detail
