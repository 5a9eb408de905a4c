// Shape rules shared by the batch/instance/group/adaptive normalization nodes (on top of the
// normalization family's rules in ops/norm/norm_shape.h).
#pragma once

#include <vector>

#include "graph/node.h"

namespace frost::detail {

// [1, C, 1, ..., 1] for X of dims [N, C, ...]: the dims of every per-channel tensor.
std::vector<int64_t> channel_dims(const std::vector<int64_t>& x_dims);

// X holds floating-point values and has at least the two axes N and C.
error_t check_nc_input(const Node& n, const TensorPtr& x);

// The tensor's dims equal `want`.
error_t check_dims(const Node& n, std::string_view port, const TensorPtr& t, const std::vector<int64_t>& want);

// The tensor holds exactly one element (epsilon, momentum, accum_count).
error_t check_one_element(const Node& n, std::string_view port, const TensorPtr& t);

// Running statistics come as a whole: the previous mean, variance and momentum and the two next
// outputs are all set (then `present` is true) or all null.
error_t check_running_stats_complete(const Node& n, const std::vector<std::pair<const char*, TensorPtr>>& ports,
                                     bool& present);

}  // namespace frost::detail
