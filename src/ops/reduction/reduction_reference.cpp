#include <cmath>
#include <limits>

#include "engines/reference/ref_exec.h"
#include "ops/common/broadcast.h"
#include "ops/reduction/reduction_node.h"

namespace frost::detail {

namespace {

using R = ReductionMode_t;

template <class T>
T identity_of(R mode) {
  switch (mode) {
    case R::MUL:
    case R::MUL_NO_ZEROS:
      return T(1);
    case R::MIN:
      return std::numeric_limits<T>::infinity();
    case R::MAX:
      return -std::numeric_limits<T>::infinity();
    default:
      return T(0);
  }
}

// Folds one element into an accumulator. MIN, MAX and AMAX let a NaN through so it is never hidden.
template <class T>
void fold(R mode, T& acc, T v) {
  switch (mode) {
    case R::ADD:
    case R::AVG:
      acc += v;
      break;
    case R::MUL:
      acc *= v;
      break;
    case R::MUL_NO_ZEROS:
      if (v != T(0)) acc *= v;
      break;
    case R::MIN:
      if (v < acc || std::isnan(v)) acc = v;
      break;
    case R::MAX:
      if (v > acc || std::isnan(v)) acc = v;
      break;
    case R::AMAX:
      if (std::fabs(v) > acc || std::isnan(v)) acc = std::fabs(v);
      break;
    case R::NORM1:
      acc += std::fabs(v);
      break;
    case R::NORM2:
      acc += v * v;
      break;
    case R::NOT_SET:
      break;
  }
}

}  // namespace

error_t ReductionNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const TensorPtr x = in(graph::UnaryInput::X);
    const TensorPtr y = out(graph::UnaryOutput::Y);
    const Array<T> xv = ex.load<T>(x);
    // Y's extent-1 dims broadcast against X: the map sends each X element to the Y element it folds into.
    const std::vector<int64_t> to_y = broadcast_map(x->get_dim(), y->get_dim());
    Array<T> acc(y->get_dim(), identity_of<T>(attr.mode));
    for (int64_t i = 0; i < xv.size(); ++i) fold(attr.mode, acc[to_y[static_cast<size_t>(i)]], xv[i]);
    const T count = static_cast<T>(xv.size() / acc.size());
    for (T& a : acc.v) {
      if (attr.mode == R::AVG) a /= count;
      if (attr.mode == R::NORM2) a = std::sqrt(a);
    }
    ex.store(y, acc);
    return {};
  });
}

}  // namespace frost::detail
