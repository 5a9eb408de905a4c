// CPU reference of block-scaled quantization. Every rounding to a storage type is explicit
// (round_to), so virtual outputs hold exactly the stored values in the fp64 mode too.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/dtype_convert.h"
#include "engines/reference/ref_exec.h"
#include "ops/quantize/quantize_node.h"

namespace frost::detail {

using DT = DataType_t;

namespace {

// Visits the blocks of a dense row-major tensor of dims `xd`: f(scale_index, element_indices).
template <class F>
void for_each_block(const std::vector<int64_t>& xd, int64_t axis, int64_t block, F&& f) {
  int64_t inner = 1, outer = 1;
  for (size_t k = static_cast<size_t>(axis) + 1; k < xd.size(); ++k) inner *= xd[k];
  for (size_t k = 0; k < static_cast<size_t>(axis); ++k) outer *= xd[k];
  const int64_t extent = xd[static_cast<size_t>(axis)], blocks = extent / block;
  std::vector<int64_t> elements(static_cast<size_t>(block));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t t = 0; t < block; ++t) elements[static_cast<size_t>(t)] = (o * extent + b * block + t) * inner + i;
        f((o * blocks + b) * inner + i, elements);
      }
}

// The global scale in effect: the GLOBAL_SCALE input or 1. It must be finite and positive.
template <class T>
error_t global_scale(const Node& n, RefExec& ex, const TensorPtr& t, T& g) {
  g = t ? ex.load<T>(t)[0] : T(1);
  if (std::isfinite(g) && g > 0) return {};
  return attr_error(n, "GLOBAL_SCALE", std::to_string(static_cast<double>(g)), "must be finite and positive",
                    error_code_t::GRAPH_EXECUTION_FAILED);
}

}  // namespace

error_t BlockScaleQuantizeNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const TensorPtr x = in(BlockIn::X), y = out(BlockOut::Y), scale = out(BlockOut::SCALE);
    const DT values = y->get_data_type(), scale_type = scale->get_data_type();
    const ElementFormat fmt = element_format(values);
    T g;
    FROST_CHECK(global_scale(*this, ex, in(BlockIn::GLOBAL_SCALE), g));
    const Array<T> xa = ex.load<T>(x);
    Array<T> ya(xa.dim), sa(scale->get_dim());
    const auto quantize = [&](T v) {
      return static_cast<T>(round_to(values, std::clamp<double>(v, -fmt.max_finite, fmt.max_finite)));
    };
    for_each_block(xa.dim, block_axis(attr.axis, xa.dim.size()), attr.block_size,
                   [&](int64_t s, const std::vector<int64_t>& elements) {
                     T amax = 0;
                     bool finite = true;
                     for (int64_t e : elements) {
                       finite = finite && std::isfinite(xa[e]);
                       amax = std::max(amax, std::fabs(xa[e]));
                     }
                     if (!finite) {  // the NaN policy: a NaN scale marks the whole block
                       sa[s] = std::numeric_limits<T>::quiet_NaN();
                       for (int64_t e : elements) ya[e] = static_cast<T>(round_to(values, NAN));
                       return;
                     }
                     T block_scale;
                     if (scale_type == DT::FP8_E8M0) {
                       block_scale = static_cast<T>(mx_block_scale(static_cast<double>(amax), fmt));
                     } else {
                       block_scale = static_cast<T>(round_to(DT::FP8_E4M3, amax / (T(6) * g)));
                     }
                     sa[s] = block_scale;
                     const T divisor = block_scale * g;
                     for (int64_t e : elements) ya[e] = divisor > 0 ? quantize(xa[e] / divisor) : T(0);
                   });
    ex.store(y, ya);
    ex.store(scale, sa);
    return {};
  });
}

error_t BlockScaleDequantizeNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const TensorPtr x = in(BlockIn::X), scale = in(BlockIn::SCALE), y = out(BlockOut::Y);
    T g;
    FROST_CHECK(global_scale(*this, ex, in(BlockIn::GLOBAL_SCALE), g));
    const Array<T> xa = ex.load<T>(x), sa = ex.load<T>(scale);
    Array<T> ya(xa.dim);
    for_each_block(xa.dim, block_axis(attr.axis, xa.dim.size()), attr.block_size,
                   [&](int64_t s, const std::vector<int64_t>& elements) {
                     for (int64_t e : elements) ya[e] = xa[e] * sa[s] * g;
                   });
    ex.store(y, ya);
    return {};
  });
}

}  // namespace frost::detail
