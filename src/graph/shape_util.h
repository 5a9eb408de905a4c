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
// TensorReordering_t::F8_128x4, the scale-factor layout of block-scaled MMA (cuDNN, cuBLAS): the last two
// dims form a matrix of R rows by C block columns, the column dim contiguous (stride 1) and the row dim of
// stride C, with R a multiple of 128 and C of 4. Storage runs in 512-byte tiles of 128 x 4, tiles in
// row-major order; inside a tile, element (r, c) sits at (r % 32) * 16 + (r / 32) * 4 + c. The dims before
// the last two place each matrix through their strides.
struct F8_128x4Matrix {
  size_t row_dim = 0, col_dim = 0;  // which of the last two dims are R and C
};
// The row and column dims of a tensor declared F8_128x4, or an error naming what is wrong.
error_t f8_128x4_matrix(const graph::Tensor_attributes& t, F8_128x4Matrix& m);
// Offset of element (r, c) from the start of its matrix, C = cols.
inline int64_t f8_128x4_offset(int64_t r, int64_t c, int64_t cols) {
  return ((r / 128) * (cols / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

// Checks a fully described tensor: rank, positive extents, matching non-negative strides, sizes
// that cannot overflow, a storable data type, a valid F8_128x4 layout. `where` prefixes the message.
error_t check_tensor(const graph::Tensor_attributes& t, std::string_view where);

}  // namespace frost::detail
