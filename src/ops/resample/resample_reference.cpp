// CPU reference of RESAMPLE: a direct loop over output elements and window positions.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engines/reference/ref_exec.h"
#include "ops/resample/resample_node.h"

namespace frost::detail {

using RM = ResampleMode_t;
using PM = PaddingMode_t;

error_t ResampleNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const TensorPtr x = in(graph::ResampleInput::X), y = out(graph::ResampleOutput::Y);
    const TensorPtr index = out(graph::ResampleOutput::INDEX);
    const Array<T> xa = ex.load<T>(x);
    const auto& xd = xa.dim;
    const auto& yd = y->get_dim();
    const size_t spatial = xd.size() - 2;
    // Pad 2-D problems to 3-D with a unit depth axis so one loop nest serves both.
    auto as3 = [&](const std::vector<int64_t>& v, size_t first, int64_t fill) {
      std::array<int64_t, 3> r{fill, fill, fill};
      for (size_t k = 0; k < spatial; ++k) r[3 - spatial + k] = v.empty() ? fill : v[first + k];
      return r;
    };
    const auto ext = as3(xd, 2, 1), outd = as3(yd, 2, 1), win = as3(attr.window, 0, 1);
    const auto stride = as3(attr.stride.empty() ? attr.window : attr.stride, 0, 1);
    const auto pre = as3(attr.pre_padding, 0, 0);
    const RM mode = attr.resampling_mode;
    const PM pad = effective_padding_mode();
    const int64_t planes = xd[0] * xd[1];
    const int64_t in_plane = ext[0] * ext[1] * ext[2], out_plane = outd[0] * outd[1] * outd[2];
    Array<T> ya(yd);
    Array<T> ia(yd);
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t o = 0; o < out_plane; ++o) {
        const int64_t od = o / (outd[1] * outd[2]), oh = (o / outd[2]) % outd[1], ow = o % outd[2];
        T sum = 0, best = -std::numeric_limits<T>::infinity();
        int64_t count = 0, best_at = -1, position = 0;
        for (int64_t a = 0; a < win[0]; ++a)
          for (int64_t b = 0; b < win[1]; ++b)
            for (int64_t c = 0; c < win[2]; ++c, ++position) {
              int64_t i[3] = {od * stride[0] - pre[0] + a, oh * stride[1] - pre[1] + b, ow * stride[2] - pre[2] + c};
              bool inside = true;
              for (int k = 0; k < 3; ++k) inside = inside && i[k] >= 0 && i[k] < ext[k];
              T v;
              if (inside || pad == PM::EDGE_VAL_PAD) {
                for (int k = 0; k < 3; ++k) i[k] = std::clamp<int64_t>(i[k], 0, ext[k] - 1);
                v = xa[p * in_plane + (i[0] * ext[1] + i[1]) * ext[2] + i[2]];
              } else {
                v = pad == PM::ZERO_PAD ? T(0) : -std::numeric_limits<T>::infinity();
              }
              if (mode == RM::MAXPOOL) {
                if (best_at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) best = v, best_at = position;
              } else if (inside || mode == RM::AVGPOOL_INCLUDE_PADDING) {
                sum += v;
                ++count;
              }
            }
        ya[p * out_plane + o] = mode == RM::MAXPOOL ? best : sum / static_cast<T>(count);
        ia[p * out_plane + o] = static_cast<T>(best_at);
      }
    ex.store(y, ya);
    if (index) ex.store(index, ia);
    return {};
  });
}

}  // namespace frost::detail
