// Shape rules shared by the three convolution nodes and the loop nest their references share.
#pragma once

#include <array>
#include <vector>

#include "frost/ops/conv.h"
#include "graph/node.h"

namespace frost::detail {

// One convolution's extents, with the spatial axes left-padded to three (extent 1, no padding, unit
// stride and dilation on the added axes) so one loop nest serves 1-D, 2-D and 3-D.
struct ConvGeometry {
  int64_t batch = 0, in_channels = 0, out_channels = 0, groups = 1;
  std::array<int64_t, 3> in{1, 1, 1}, filter{1, 1, 1}, out{1, 1, 1};
  std::array<int64_t, 3> pre{0, 0, 0}, post{0, 0, 0}, stride{1, 1, 1}, dilation{1, 1, 1};
  bool flip = false;
  size_t spatial_rank = 0;

  // [N, K, out...] in the declared spatial rank.
  std::vector<int64_t> response_dims() const;
};

// The tensors of one node in the roles of forward convolution: the data X [N, C, in...], the
// weight W [K, C / groups, filter...] and the response Y [N, K, out...]. For dgrad the data is the
// output DX, for wgrad the weight is the output DW, for both the response is the input DY.
struct ConvRoles {
  const char* data_port;
  TensorPtr data;
  const char* weight_port;
  TensorPtr weight;
  const char* response_port;
  TensorPtr response;
};

// The geometry of declared, validated roles (used by the references).
template <class Attr>
ConvGeometry geometry_of(const Attr& attr, const std::vector<int64_t>& data_dims,
                         const std::vector<int64_t>& weight_dims);

// Checks every attribute and operand of a convolution node and fills the output's dims (fprop only;
// dgrad and wgrad require them), strides and data type checks. `output` names the output role.
template <class Attr>
error_t validate_convolution(const Node& node, const GraphContext& ctx, const Attr& attr, const ConvRoles& roles,
                             const char* output_port, bool allow_fp8_inputs);

// Calls visit(data_index, weight_index, response_index) for every product of forward convolution,
// indices into dense row-major arrays of the three roles. Padding taps are skipped.
template <class Visit>
void for_each_product(const ConvGeometry& g, Visit&& visit) {
  const int64_t c_per_group = g.in_channels / g.groups, k_per_group = g.out_channels / g.groups;
  const auto [in_d, in_h, in_w] = g.in;
  const auto [f_d, f_h, f_w] = g.filter;
  const auto [out_d, out_h, out_w] = g.out;
  // The filter index a tap reads: flipped on every axis in CONVOLUTION mode.
  auto tap = [&](int axis, int64_t t) { return g.flip ? g.filter[axis] - 1 - t : t; };
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t k = 0; k < g.out_channels; ++k)
      for (int64_t cl = 0; cl < c_per_group; ++cl) {
        const int64_t c = (k / k_per_group) * c_per_group + cl;
        for (int64_t od = 0; od < out_d; ++od)
          for (int64_t oh = 0; oh < out_h; ++oh)
            for (int64_t ow = 0; ow < out_w; ++ow) {
              const int64_t response = (((n * g.out_channels + k) * out_d + od) * out_h + oh) * out_w + ow;
              for (int64_t td = 0; td < f_d; ++td) {
                const int64_t id = od * g.stride[0] - g.pre[0] + td * g.dilation[0];
                if (id < 0 || id >= in_d) continue;
                for (int64_t th = 0; th < f_h; ++th) {
                  const int64_t ih = oh * g.stride[1] - g.pre[1] + th * g.dilation[1];
                  if (ih < 0 || ih >= in_h) continue;
                  for (int64_t tw = 0; tw < f_w; ++tw) {
                    const int64_t iw = ow * g.stride[2] - g.pre[2] + tw * g.dilation[2];
                    if (iw < 0 || iw >= in_w) continue;
                    const int64_t data = (((n * g.in_channels + c) * in_d + id) * in_h + ih) * in_w + iw;
                    const int64_t weight =
                        (((k * c_per_group + cl) * f_d + tap(0, td)) * f_h + tap(1, th)) * f_w + tap(2, tw);
                    visit(data, weight, response);
                  }
                }
              }
            }
      }
}

}  // namespace frost::detail
