#include "ops/conv/conv_node.h"

#include "graph/json_util.h"
#include "ops/common/builder_util.h"
#include "ops/conv/conv_geometry.h"

namespace frost {

namespace {
constexpr std::pair<ConvolutionMode_t, std::string_view> kConvolutionModes[] = {
    {ConvolutionMode_t::NOT_SET, "NOT_SET"},
    {ConvolutionMode_t::CONVOLUTION, "CONVOLUTION"},
    {ConvolutionMode_t::CROSS_CORRELATION, "CROSS_CORRELATION"}};
}  // namespace

std::string_view to_string(ConvolutionMode_t mode) {
  for (const auto& [m, name] : kConvolutionModes)
    if (m == mode) return name;
  return "UNKNOWN";
}

template <>
std::optional<ConvolutionMode_t> from_string(std::string_view name) {
  for (const auto& [m, n] : kConvolutionModes)
    if (n == name) return m;
  return std::nullopt;
}

}  // namespace frost

namespace frost::detail {

using graph::ConvDgradInput;
using graph::ConvDgradOutput;
using graph::ConvFpropInput;
using graph::ConvFpropOutput;
using graph::ConvWgradInput;
using graph::ConvWgradOutput;

namespace {

template <class Attr>
void write_convolution_json(const Attr& attr, json& j) {
  j["pre_padding"] = attr.pre_padding;
  j["post_padding"] = attr.post_padding;
  j["stride"] = attr.stride;
  j["dilation"] = attr.dilation;
  j["convolution_mode"] = to_string(attr.convolution_mode);
}

template <class Attr>
error_t read_convolution_json(const json& j, Attr& attr) {
  FROST_CHECK(read_int_list(j, "pre_padding", attr.pre_padding));
  FROST_CHECK(read_int_list(j, "post_padding", attr.post_padding));
  FROST_CHECK(read_int_list(j, "stride", attr.stride));
  FROST_CHECK(read_int_list(j, "dilation", attr.dilation));
  return read_enum(j, "convolution_mode", attr.convolution_mode);
}

const OpRegistrar kFprop(std::string(ConvFpropNode::kTag), [] { return std::make_unique<ConvFpropNode>(); });
const OpRegistrar kDgrad(std::string(ConvDgradNode::kTag), [] { return std::make_unique<ConvDgradNode>(); });
const OpRegistrar kWgrad(std::string(ConvWgradNode::kTag), [] { return std::make_unique<ConvWgradNode>(); });

}  // namespace

error_t ConvFpropNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"Y", "X", "W"}));
  const ConvRoles roles{"X", in(ConvFpropInput::X), "W", in(ConvFpropInput::W), "Y", out(ConvFpropOutput::Y)};
  return validate_convolution(*this, ctx, attr, roles, "Y", true);
}

error_t ConvDgradNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"DX", "DY", "W"}));
  const ConvRoles roles{"DX", out(ConvDgradOutput::DX), "W", in(ConvDgradInput::W), "DY", in(ConvDgradInput::DY)};
  return validate_convolution(*this, ctx, attr, roles, "DX", false);
}

error_t ConvWgradNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"DW", "DY", "X"}));
  const ConvRoles roles{"X", in(ConvWgradInput::X), "DW", out(ConvWgradOutput::DW), "DY", in(ConvWgradInput::DY)};
  return validate_convolution(*this, ctx, attr, roles, "DW", false);
}

void ConvFpropNode::attributes_to_json(json& j) const { write_convolution_json(attr, j); }
void ConvDgradNode::attributes_to_json(json& j) const { write_convolution_json(attr, j); }
void ConvWgradNode::attributes_to_json(json& j) const { write_convolution_json(attr, j); }
error_t ConvFpropNode::attributes_from_json(const json& j) { return read_convolution_json(j, attr); }
error_t ConvDgradNode::attributes_from_json(const json& j) { return read_convolution_json(j, attr); }
error_t ConvWgradNode::attributes_from_json(const json& j) { return read_convolution_json(j, attr); }

}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::conv_fprop(TensorPtr image, TensorPtr weight, Conv_fprop_attributes attr) {
  auto& g = state();
  detail::default_name(g, attr, detail::ConvFpropNode::kTag);
  detail::require_inputs(g, attr.name, detail::ConvFpropNode::kTag, {{"X", &image}, {"W", &weight}});
  attr.inputs[ConvFpropInput::X] = std::move(image);
  attr.inputs[ConvFpropInput::W] = std::move(weight);
  auto y = attr.outputs[ConvFpropOutput::Y] = detail::make_output(g, attr.name, "Y");
  detail::add_node(g, std::make_unique<detail::ConvFpropNode>(std::move(attr)));
  return y;
}

TensorPtr Graph::conv_dgrad(TensorPtr dy, TensorPtr weight, Conv_dgrad_attributes attr) {
  auto& g = state();
  detail::default_name(g, attr, detail::ConvDgradNode::kTag);
  detail::require_inputs(g, attr.name, detail::ConvDgradNode::kTag, {{"DY", &dy}, {"W", &weight}});
  attr.inputs[ConvDgradInput::DY] = std::move(dy);
  attr.inputs[ConvDgradInput::W] = std::move(weight);
  auto dx = attr.outputs[ConvDgradOutput::DX] = detail::make_output(g, attr.name, "DX");
  detail::add_node(g, std::make_unique<detail::ConvDgradNode>(std::move(attr)));
  return dx;
}

TensorPtr Graph::conv_wgrad(TensorPtr dy, TensorPtr image, Conv_wgrad_attributes attr) {
  auto& g = state();
  detail::default_name(g, attr, detail::ConvWgradNode::kTag);
  detail::require_inputs(g, attr.name, detail::ConvWgradNode::kTag, {{"DY", &dy}, {"X", &image}});
  attr.inputs[ConvWgradInput::DY] = std::move(dy);
  attr.inputs[ConvWgradInput::X] = std::move(image);
  auto dw = attr.outputs[ConvWgradOutput::DW] = detail::make_output(g, attr.name, "DW");
  detail::add_node(g, std::make_unique<detail::ConvWgradNode>(std::move(attr)));
  return dw;
}

}  // namespace frost::graph
