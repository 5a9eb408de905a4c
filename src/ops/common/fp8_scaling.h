// Checks and numerics shared by the ops that take per-tensor FP8 scaling (matmul_fp8, sdpa_fp8 and its
// backward, the MXFP8 attention): FLOAT scalar descales and scales, FLOAT [1, 1, 1, 1] amax outputs, and
// the saturating store of a scaled result.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/dtype_convert.h"
#include "graph/node.h"

namespace frost::detail {

bool is_fp8(DataType_t t);

// A FLOAT scalar of dims [1, 1, 1, 1] (or a [1] pass-by-value scalar). A null tensor is an
// ATTRIBUTE_NOT_SET error when `required`, else accepted.
error_t check_scale_scalar(const Node& node, const char* port, const TensorPtr& t, bool required);

// Fills an amax output (FLOAT [1, 1, 1, 1]) where unset and checks it where set.
error_t infer_amax_output(const Node& node, const char* port, const TensorPtr& t);

// The largest |x| over `values` (0 when empty; NaN entries do not count).
template <class T>
T amax_of(const std::vector<T>& values) {
  T m = 0;
  for (T x : values) m = std::max(m, std::fabs(x));
  return m;
}

// Multiplies every value by `scale` for a store to `dt`. FP8 destinations saturate: the values are
// rounded here with the satfinite conversion that FP8 recipes, cuDNN's fused FP8 kernels and
// CUTLASS's FP8 epilogues store with. Other types are rounded by the store as usual.
template <class T>
void scale_for_store(std::vector<T>& values, T scale, DataType_t dt) {
  for (T& x : values) {
    x *= scale;
    if (is_fp8(dt)) x = static_cast<T>(round_to_saturated(dt, static_cast<double>(x)));
  }
}

}  // namespace frost::detail
