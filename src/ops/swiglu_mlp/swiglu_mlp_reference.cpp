// CPU reference of SWIGLU_MLP: the two projections, the gate, one rounding of the intermediate to X's type,
// the down projection.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/dtype_convert.h"
#include "engines/reference/ref_exec.h"
#include "ops/swiglu_mlp/swiglu_mlp_node.h"

namespace frost::detail {

error_t SwigluMlpNode::run_reference(RefExec& ex) const {
  using I = graph::SwigluMlpInput;
  SwigluMlpExtents ext;
  FROST_CHECK(validate_inputs(ext));
  const int64_t t = ext.t, h = ext.h, f = ext.f;
  const DataType_t x_type = in(I::X)->get_data_type();
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const Array<T> x = ex.load<T>(in(I::X)), down = ex.load<T>(in(I::W_DOWN));
    // Gate and up as [H, F] each, whichever form is bound.
    Array<T> gate({h, f}), up({h, f});
    if (interleaved()) {
      const Array<T> both = ex.load<T>(in(I::W_GATE_UP));
      const int64_t b = kSwigluMlpBlock;
      for (int64_t r = 0; r < h; ++r)
        for (int64_t j = 0; j < f; ++j) {
          const int64_t col = (j / b) * 2 * b + j % b;
          gate[r * f + j] = both[r * 2 * f + col];
          up[r * f + j] = both[r * 2 * f + col + b];
        }
    } else {
      gate = ex.load<T>(in(I::W_GATE));
      up = ex.load<T>(in(I::W_UP));
    }
    Array<T> mid({t, f}), y({t, h});
    std::vector<T> g(static_cast<size_t>(f)), u(static_cast<size_t>(f));
    for (int64_t row = 0; row < t; ++row) {
      std::fill(g.begin(), g.end(), T(0));
      std::fill(u.begin(), u.end(), T(0));
      for (int64_t kk = 0; kk < h; ++kk) {
        const T xv = x[row * h + kk];
        for (int64_t j = 0; j < f; ++j) {
          g[static_cast<size_t>(j)] += xv * gate[kk * f + j];
          u[static_cast<size_t>(j)] += xv * up[kk * f + j];
        }
      }
      for (int64_t j = 0; j < f; ++j) {
        const T gv = g[static_cast<size_t>(j)];
        const T silu = gv / (T(1) + std::exp(-gv));
        mid[row * f + j] = static_cast<T>(round_to(x_type, static_cast<double>(silu * u[static_cast<size_t>(j)])));
      }
      for (int64_t j = 0; j < f; ++j) {
        const T m = mid[row * f + j];
        for (int64_t c = 0; c < h; ++c) y[row * h + c] += m * down[j * h + c];
      }
    }
    ex.store(out(graph::SwigluMlpOutput::Y), y);
    return {};
  });
}

}  // namespace frost::detail
