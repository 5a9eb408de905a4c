// Shape and stride helpers shared by ops, engines and serialization.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frost/error.h"
#include "frost/tensor.h"

namespace frost::detail {

// Largest extent or element count frost accepts: products stay far from int64 overflow.
constexpr int64_t kMaxElements = int64_t{1} << 48;

// Row-major strides (last dim contiguous).
std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims);
// Strides for `dims` that order the axes as `like_strides` orders them (ties: later axis inner).
std::vector<int64_t> strides_like(const std::vector<int64_t>& dims, const std::vector<int64_t>& like_strides);
// Product of dims, or nullopt on overflow past kMaxElements or a non-positive extent.
std::optional<int64_t> checked_volume(const std::vector<int64_t>& dims);
// One past the largest element offset the tensor touches (span of its buffer, in elements).
int64_t element_span(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);
// Checks a fully described tensor: rank, positive extents, matching non-negative strides, sizes
// that cannot overflow, a storable data type. `where` prefixes the message.
error_t check_tensor(const graph::Tensor_attributes& t, std::string_view where);

}  // namespace frost::detail
