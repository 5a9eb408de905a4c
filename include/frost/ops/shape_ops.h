// Data-movement ops: reduction, reshape, transpose, slice, concatenate.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class UnaryInput { X };
enum class UnaryOutput { Y };

// Y has X's rank; every dim where Y's extent is 1 and X's is not is reduced with `mode`.
class Reduction_attributes : public Attributes<Reduction_attributes, UnaryInput, UnaryOutput> {
 public:
  ReductionMode_t mode = ReductionMode_t::NOT_SET;
  bool is_deterministic = false;
  Reduction_attributes& set_mode(ReductionMode_t v) { mode = v; return *this; }
  Reduction_attributes& set_is_deterministic(bool v) { is_deterministic = v; return *this; }
  ReductionMode_t get_mode() const { return mode; }
};

// Same elements in the same row-major order, new dims (and optionally strides) for Y.
class Reshape_attributes : public Attributes<Reshape_attributes, UnaryInput, UnaryOutput> {
 public:
  std::vector<int64_t> dim, stride;
  Reshape_attributes& set_dim(std::vector<int64_t> v) { dim = std::move(v); return *this; }
  Reshape_attributes& set_stride(std::vector<int64_t> v) { stride = std::move(v); return *this; }
};

// Y.dim[i] = X.dim[permutation[i]]; Y[j...] = X[i...] with i[permutation[k]] = j[k].
class Transpose_attributes : public Attributes<Transpose_attributes, UnaryInput, UnaryOutput> {
 public:
  std::vector<int64_t> permutation;
  Transpose_attributes& set_permutation(std::vector<int64_t> v) { permutation = std::move(v); return *this; }
};

// Y = X[start_0:end_0, start_1:end_1, ...] (half-open ranges, one per dim).
class Slice_attributes : public Attributes<Slice_attributes, UnaryInput, UnaryOutput> {
 public:
  std::vector<std::pair<int64_t, int64_t>> slices;
  Slice_attributes& set_slices(std::vector<std::pair<int64_t, int64_t>> v) { slices = std::move(v); return *this; }
};

enum class ConcatenateInput { X };
// Y = inputs joined along `axis`. in_place_index names the input that already sits inside Y's buffer
// (the CPU reference copies it anyway; it is a hint for GPU engines).
class Concatenate_attributes : public Attributes<Concatenate_attributes, ConcatenateInput, UnaryOutput> {
 public:
  int64_t axis = -1;
  std::optional<int64_t> in_place_index;
  Concatenate_attributes& set_axis(int64_t v) { axis = v; return *this; }
  Concatenate_attributes& set_in_place_index(int64_t v) { in_place_index = v; return *this; }
};

}  // namespace frost::graph
