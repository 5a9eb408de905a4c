// Numpy-style broadcasting over extent-1 dims (shapes right-aligned).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace frost::detail {

// The broadcast shape of all inputs, or nullopt when two extents differ and neither is 1.
std::optional<std::vector<int64_t>> broadcast_dims(const std::vector<std::vector<int64_t>>& shapes);

// For each element of `out_dims` in row-major order, the row-major index of the element of an
// array of shape `in_dims` that broadcasts to it.
std::vector<int64_t> broadcast_map(const std::vector<int64_t>& out_dims, const std::vector<int64_t>& in_dims);

}  // namespace frost::detail
