#include "ops/conv/conv_geometry.h"

#include <string>

#include "graph/shape_util.h"

namespace frost::detail {
namespace {

// Padding, stride or dilation as given, or `fallback` on every spatial axis when unset.
std::vector<int64_t> per_axis(const std::vector<int64_t>& given, size_t spatial_rank, int64_t fallback) {
  return given.empty() ? std::vector<int64_t>(spatial_rank, fallback) : given;
}

error_t check_axis_values(const Node& node, const char* name, const std::vector<int64_t>& v, size_t spatial_rank,
                          int64_t minimum) {
  if (v.size() != spatial_rank)
    return attr_error(node, name, dims_string(v),
                      "needs " + std::to_string(spatial_rank) + " values, one per spatial axis of the operands");
  for (int64_t e : v)
    if (e < minimum) return attr_error(node, name, dims_string(v), "every value must be >= " + std::to_string(minimum));
  return {};
}

error_t check_rank(const Node& node, const char* port, const std::vector<int64_t>& dims, size_t rank) {
  if (dims.size() == rank) return {};
  return attr_error(node, std::string(port) + ".dim", dims_string(dims),
                    "must have rank " + std::to_string(rank) + " like the data operand ([N, C, spatial...])",
                    error_code_t::SHAPE_DEDUCTION_FAILED);
}

bool is_storage_type(DataType_t t, bool allow_fp8) {
  switch (t) {
    case DataType_t::FLOAT:
    case DataType_t::DOUBLE:
    case DataType_t::HALF:
    case DataType_t::BFLOAT16:
      return true;
    case DataType_t::FP8_E4M3:
    case DataType_t::FP8_E5M2:
      return allow_fp8;
    default:
      return false;
  }
}

error_t check_data_type(const Node& node, const char* port, DataType_t t, bool allow_fp8) {
  if (is_storage_type(t, allow_fp8)) return {};
  return attr_error(node, std::string(port) + ".data_type", to_string(t),
                    allow_fp8 ? "must be FLOAT, DOUBLE, HALF, BFLOAT16, FP8_E4M3 or FP8_E5M2"
                              : "must be FLOAT, DOUBLE, HALF or BFLOAT16");
}

template <class Attr>
error_t check_attributes(const Node& node, const Attr& attr, size_t spatial_rank) {
  if (attr.convolution_mode != ConvolutionMode_t::CROSS_CORRELATION &&
      attr.convolution_mode != ConvolutionMode_t::CONVOLUTION)
    return attr_error(node, "convolution_mode", to_string(attr.convolution_mode),
                      "set CROSS_CORRELATION or CONVOLUTION", error_code_t::ATTRIBUTE_NOT_SET);
  FROST_CHECK(check_axis_values(node, "pre_padding", per_axis(attr.pre_padding, spatial_rank, 0), spatial_rank, 0));
  FROST_CHECK(check_axis_values(node, "post_padding", per_axis(attr.post_padding, spatial_rank, 0), spatial_rank, 0));
  FROST_CHECK(check_axis_values(node, "stride", per_axis(attr.stride, spatial_rank, 1), spatial_rank, 1));
  FROST_CHECK(check_axis_values(node, "dilation", per_axis(attr.dilation, spatial_rank, 1), spatial_rank, 1));
  return {};
}

// Channel counts and output extents of a geometry whose ranks and attributes are already checked.
error_t check_geometry(const Node& node, const ConvRoles& roles, const ConvGeometry& g) {
  const int64_t weight_channels = roles.weight->get_dim()[1];
  if (g.in_channels % weight_channels != 0)
    return attr_error(node, std::string(roles.weight_port) + ".dim", dims_string(roles.weight->get_dim()),
                      "its C / groups = " + std::to_string(weight_channels) + " does not divide the " +
                          std::to_string(g.in_channels) + " channels of " + roles.data_port,
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (g.out_channels % g.groups != 0)
    return attr_error(node, std::string(roles.weight_port) + ".dim", dims_string(roles.weight->get_dim()),
                      "its K = " + std::to_string(g.out_channels) + " output channels do not split into " +
                          std::to_string(g.groups) + " groups",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  for (size_t axis = 3 - g.spatial_rank; axis < 3; ++axis)
    if (g.out[axis] < 1)
      return attr_error(node, std::string(roles.data_port) + ".dim", dims_string(roles.data->get_dim()),
                        "spatial axis " + std::to_string(axis + g.spatial_rank - 3) + ": the dilated filter spans " +
                            std::to_string(g.dilation[axis] * (g.filter[axis] - 1) + 1) +
                            " positions, more than the padded input's " +
                            std::to_string(g.in[axis] + g.pre[axis] + g.post[axis]),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
  return {};
}

// The response, when given or user-set, must match the geometry; otherwise it is filled in.
error_t check_or_infer_response(const Node& node, const ConvRoles& roles, const std::vector<int64_t>& want) {
  auto& y = *roles.response;
  if (y.get_dim().empty()) {
    y.set_dim(want);
    return {};
  }
  if (y.get_dim() == want) return {};
  return attr_error(node, std::string(roles.response_port) + ".dim", dims_string(y.get_dim()),
                    std::string(roles.data_port) + " " + dims_string(roles.data->get_dim()) + " and " +
                        roles.weight_port + " " + dims_string(roles.weight->get_dim()) + " give " + dims_string(want),
                    error_code_t::SHAPE_DEDUCTION_FAILED);
}

}  // namespace

std::vector<int64_t> ConvGeometry::response_dims() const {
  std::vector<int64_t> d{batch, out_channels};
  d.insert(d.end(), out.end() - static_cast<std::ptrdiff_t>(spatial_rank), out.end());
  return d;
}

template <class Attr>
ConvGeometry geometry_of(const Attr& attr, const std::vector<int64_t>& data_dims,
                         const std::vector<int64_t>& weight_dims) {
  ConvGeometry g;
  g.spatial_rank = data_dims.size() - 2;
  g.batch = data_dims[0];
  g.in_channels = data_dims[1];
  g.out_channels = weight_dims[0];
  g.groups = data_dims[1] / weight_dims[1];
  g.flip = attr.convolution_mode == ConvolutionMode_t::CONVOLUTION;
  const size_t r = g.spatial_rank, skip = 3 - r;
  const auto pre = per_axis(attr.pre_padding, r, 0), post = per_axis(attr.post_padding, r, 0);
  const auto stride = per_axis(attr.stride, r, 1), dilation = per_axis(attr.dilation, r, 1);
  for (size_t i = 0; i < r; ++i) {
    const size_t a = skip + i;
    g.in[a] = data_dims[2 + i];
    g.filter[a] = weight_dims[2 + i];
    g.pre[a] = pre[i];
    g.post[a] = post[i];
    g.stride[a] = stride[i];
    g.dilation[a] = dilation[i];
    const int64_t reach = g.in[a] + g.pre[a] + g.post[a] - g.dilation[a] * (g.filter[a] - 1) - 1;
    // Floor division; a negative reach means no output position fits (reported by validation).
    g.out[a] = reach < 0 ? 0 : reach / g.stride[a] + 1;
  }
  return g;
}

template <class Attr>
error_t validate_convolution(const Node& node, const GraphContext& ctx, const Attr& attr, const ConvRoles& roles,
                             const char* output_port, bool allow_fp8_inputs) {
  const std::pair<const char*, TensorPtr> all[] = {
      {roles.data_port, roles.data}, {roles.weight_port, roles.weight}, {roles.response_port, roles.response}};
  for (const auto& [port, t] : all) {
    for (int64_t e : t->get_dim())
      if (e < 1)
        return attr_error(node, std::string(port) + ".dim", dims_string(t->get_dim()), "every extent must be >= 1",
                          error_code_t::SHAPE_DEDUCTION_FAILED);
    const bool is_output = std::string_view(port) == output_port;
    if (is_output && t->get_dim().empty() && std::string_view(port) != roles.response_port)
      return attr_error(node, std::string(port) + ".dim", "unset",
                        "set the dims of the gradient output (the input extent is ambiguous when stride > 1)",
                        error_code_t::ATTRIBUTE_NOT_SET);
    if (!is_output) {
      FROST_CHECK(check_data_type(node, port, t->get_data_type(), allow_fp8_inputs));
      continue;
    }
    // Outputs take their type from the context where the user set none (as the graph fills it later).
    DataType_t dt = t->get_data_type();
    if (dt == DataType_t::NOT_SET) dt = t->get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
    if (dt != DataType_t::NOT_SET) FROST_CHECK(check_data_type(node, port, dt, false));
  }
  const auto& x_dims = roles.data->get_dim();
  if (x_dims.size() < 3 || x_dims.size() > 5)
    return attr_error(node, std::string(roles.data_port) + ".dim", dims_string(x_dims),
                      "must be [N, C, spatial...] with 1 to 3 spatial axes (rank 3, 4 or 5)",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  FROST_CHECK(check_rank(node, roles.weight_port, roles.weight->get_dim(), x_dims.size()));
  if (!roles.response->get_dim().empty())
    FROST_CHECK(check_rank(node, roles.response_port, roles.response->get_dim(), x_dims.size()));
  FROST_CHECK(check_attributes(node, attr, x_dims.size() - 2));
  const ConvGeometry g = geometry_of(attr, x_dims, roles.weight->get_dim());
  FROST_CHECK(check_geometry(node, roles, g));
  FROST_CHECK(check_or_infer_response(node, roles, g.response_dims()));
  // Output strides follow the layout of the data operand (for DX: of DY), so NHWC stays NHWC.
  for (const auto& [port, t] : all)
    if (std::string_view(port) == output_port && t->get_stride().empty()) {
      const TensorPtr& like = t == roles.data ? roles.response : roles.data;
      t->set_stride(strides_like(t->get_dim(), like->get_stride()));
    }
  return {};
}

#define FROST_CONV_INSTANTIATE(Attr)                                                                               \
  template ConvGeometry geometry_of(const graph::Attr&, const std::vector<int64_t>&, const std::vector<int64_t>&); \
  template error_t validate_convolution(const Node&, const GraphContext&, const graph::Attr&, const ConvRoles&,    \
                                        const char*, bool);
FROST_CONV_INSTANTIATE(Conv_fprop_attributes)
FROST_CONV_INSTANTIATE(Conv_dgrad_attributes)
FROST_CONV_INSTANTIATE(Conv_wgrad_attributes)
#undef FROST_CONV_INSTANTIATE

}  // namespace frost::detail
