// What the resample forward and backward share: the pooling parameters with their defaults
// resolved, their validation and output extents, and the walk over one window that both
// references take (so the backward sends each gradient exactly where the forward read).
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "frost/ops/resample.h"
#include "graph/node.h"

namespace frost::detail {

// Pooling parameters with defaults applied: stride = window, paddings 0, the padding mode resolved.
struct PoolingSpec {
  ResampleMode_t mode = ResampleMode_t::NOT_SET;
  PaddingMode_t padding = PaddingMode_t::NOT_SET;
  std::vector<int64_t> window, stride, pre, post;
};

// An unset padding mode means NEG_INF_PAD for max pooling and ZERO_PAD for average pooling.
PaddingMode_t effective_padding_mode(ResampleMode_t mode, PaddingMode_t padding);

template <class Attr>
PoolingSpec pooling_spec(const Attr& a) {
  PoolingSpec s;
  s.mode = a.resampling_mode;
  s.padding = effective_padding_mode(a.resampling_mode, a.padding_mode);
  s.window = a.window;
  s.stride = a.stride.empty() ? a.window : a.stride;
  const std::vector<int64_t> zeros(a.window.size(), 0);
  s.pre = a.pre_padding.empty() ? zeros : a.pre_padding;
  s.post = a.post_padding.empty() ? zeros : a.post_padding;
  return s;
}

// Checks the mode and the spatial lists against X's dims [N, C, (D,) H, W] (of the given port name)
// and gives the pooled dims [N, C, out...].
error_t check_pooling(const Node& n, const PoolingSpec& s, const char* x_port, const std::vector<int64_t>& xd,
                      std::vector<int64_t>& yd);

// INDEX types: INT8, UINT8, INT32 or INT64 that hold every window position (0 .. volume - 1).
error_t check_index_type(const Node& n, const char* port, DataType_t dt, const std::vector<int64_t>& window);

// The windows of one [N, C] plane, 2-D problems seen as 3-D with a unit depth axis.
struct PoolWindows {
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, window{1, 1, 1}, stride{1, 1, 1}, pre{0, 0, 0};
  bool edge = false;  // EDGE_VAL_PAD: padded positions read the nearest element

  PoolWindows(const PoolingSpec& s, const std::vector<int64_t>& xd, const std::vector<int64_t>& yd) {
    const size_t spatial = xd.size() - 2;
    for (size_t k = 0; k < spatial; ++k) {
      const size_t a = 3 - spatial + k;
      in[a] = xd[k + 2], out[a] = yd[k + 2], window[a] = s.window[k], stride[a] = s.stride[k], pre[a] = s.pre[k];
    }
    edge = s.padding == PaddingMode_t::EDGE_VAL_PAD;
  }
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t volume() const { return window[0] * window[1] * window[2]; }

  // Calls f(position, inside, element) for every window position of output o (row-major order):
  // `inside` says whether it lies in X; `element` is the offset in the plane of the element it
  // reads (its nearest element under EDGE_VAL_PAD), or -1 for a constant padding value.
  template <class F>
  void walk(int64_t o, F&& f) const {
    const int64_t origin[3] = {o / (out[1] * out[2]) * stride[0] - pre[0], (o / out[2]) % out[1] * stride[1] - pre[1],
                               o % out[2] * stride[2] - pre[2]};
    int64_t position = 0;
    for (int64_t a = 0; a < window[0]; ++a)
      for (int64_t b = 0; b < window[1]; ++b)
        for (int64_t c = 0; c < window[2]; ++c, ++position) {
          int64_t i[3] = {origin[0] + a, origin[1] + b, origin[2] + c};
          bool inside = true;
          for (int k = 0; k < 3; ++k) inside = inside && i[k] >= 0 && i[k] < in[k];
          int64_t element = -1;
          if (inside || edge) {
            for (int k = 0; k < 3; ++k) i[k] = std::clamp<int64_t>(i[k], 0, in[k] - 1);
            element = (i[0] * in[1] + i[1]) * in[2] + i[2];
          }
          f(position, inside, element);
        }
  }
};

}  // namespace frost::detail
