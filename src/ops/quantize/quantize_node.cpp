#include "ops/quantize/quantize_node.h"

#include <algorithm>
#include <cmath>

#include "common/dtype_convert.h"
#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"

namespace frost::detail {

using DT = DataType_t;

ElementFormat element_format(DataType_t values) {
  switch (values) {
    case DT::FP8_E4M3:
      return {448.0, 8};
    case DT::FP8_E5M2:
      return {57344.0, 15};
    default:
      return {6.0, 2};  // FP4_E2M1
  }
}

double mx_block_scale(double amax, const ElementFormat& values) {
  // floor(log2) comes exactly from the binary exponent, never from a rounded logarithm.
  const int exponent = amax > 0 ? std::ilogb(amax) - values.emax : -127;
  return std::ldexp(1.0, std::clamp(exponent, -127, 127));
}

int64_t block_axis(const std::optional<int64_t>& axis, size_t rank) {
  return !axis || *axis == -1 ? static_cast<int64_t>(rank) - 1 : *axis;
}

namespace {

bool is_value_type(DT t) { return t == DT::FP8_E4M3 || t == DT::FP8_E5M2 || t == DT::FP4_E2M1; }

// Checks block_size and axis against X and returns the dims of the scale tensor.
template <class NodeT>
error_t block_geometry(const NodeT& n, const std::vector<int64_t>& xd, std::vector<int64_t>& scale_dims) {
  const auto& a = n.attr;
  if (a.block_size == 0) return attr_error(n, "block_size", "0", "set the block size", error_code_t::ATTRIBUTE_NOT_SET);
  if (a.block_size < 0) return attr_error(n, "block_size", std::to_string(a.block_size), "must be positive");
  const int64_t axis = block_axis(a.axis, xd.size());
  if (axis < 0 || axis >= static_cast<int64_t>(xd.size()))
    return attr_error(n, "axis", std::to_string(a.axis.value_or(-1)), "must name a dim of X " + dims_string(xd));
  const auto k = static_cast<size_t>(axis);
  if (xd[k] % a.block_size != 0)
    return attr_error(n, "block_size", std::to_string(a.block_size),
                      "must divide X's extent " + std::to_string(xd[k]) + " along axis " + std::to_string(axis),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  scale_dims = xd;
  scale_dims[k] /= a.block_size;
  return {};
}

// Values and scale types must form a recipe: FP8 or FP4 values with E8M0 scales (MX), or FP4_E2M1
// values with E4M3 scales (NVFP4). A global scale belongs to the E4M3 recipe only.
error_t check_recipe(const Node& n, DT values, DT scale, const TensorPtr& global) {
  if (!is_value_type(values))
    return attr_error(n, "values.data_type", to_string(values), "must be FP8_E4M3, FP8_E5M2 or FP4_E2M1");
  if (scale != DT::FP8_E8M0 && scale != DT::FP8_E4M3)
    return attr_error(n, "SCALE.data_type", to_string(scale), "must be FP8_E8M0 (MX) or FP8_E4M3 (NVFP4)");
  if (scale == DT::FP8_E4M3 && values != DT::FP4_E2M1)
    return attr_error(n, "SCALE.data_type", to_string(scale), "FP8_E4M3 scales go with FP4_E2M1 values (NVFP4)");
  if (global) {
    if (scale != DT::FP8_E4M3)
      return attr_error(n, "GLOBAL_SCALE", describe(global),
                        "a global scale belongs to the NVFP4 recipe (E4M3 scales)");
    if (global->get_volume() != 1)
      return attr_error(n, "GLOBAL_SCALE.dim", dims_string(global->get_dim()), "must hold exactly one element");
    if (!is_floating(global->get_data_type()))
      return attr_error(n, "GLOBAL_SCALE.data_type", to_string(global->get_data_type()), "must be floating point");
  }
  return {};
}

error_t fill_output(const Node& n, const char* port, graph::Tensor_attributes& t, const std::vector<int64_t>& dims,
                    const std::vector<int64_t>& like_strides, DT default_type) {
  if (t.get_dim().empty()) {
    t.set_dim(dims);
  } else if (t.get_dim() != dims) {
    return attr_error(n, std::string(port) + ".dim", dims_string(t.get_dim()), "expected " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  if (t.get_stride().empty()) t.set_stride(strides_like(dims, like_strides));
  if (t.get_data_type() == DT::NOT_SET) t.set_data_type(default_type);
  return {};
}

}  // namespace

error_t BlockScaleQuantizeNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"Y", "SCALE", "X"}));
  const TensorPtr x = in(BlockIn::X), global = in(BlockIn::GLOBAL_SCALE);
  auto &y = *out(BlockOut::Y), &scale = *out(BlockOut::SCALE);
  if (attr.transpose)
    return attr_error(*this, "transpose", "true", "the column-wise (transposed) layout is not served yet",
                      error_code_t::GRAPH_NOT_SUPPORTED);
  if (!is_floating(x->get_data_type()))
    return attr_error(*this, "X.data_type", to_string(x->get_data_type()), "quantization takes floating-point data");
  std::vector<int64_t> scale_dims;
  FROST_CHECK(block_geometry(*this, x->get_dim(), scale_dims));
  DT values = y.get_data_type();
  if (values == DT::NOT_SET) {
    if (attr.block_size != 16 && attr.block_size != 32)
      return attr_error(*this, "Y.data_type", "NOT_SET",
                        "set it: only blocks of 16 (NVFP4) and 32 (MXFP8) have a default",
                        error_code_t::ATTRIBUTE_NOT_SET);
    values = attr.block_size == 32 ? DT::FP8_E4M3 : DT::FP4_E2M1;
  }
  const DT default_scale = values == DT::FP4_E2M1 && attr.block_size == 16 ? DT::FP8_E4M3 : DT::FP8_E8M0;
  const DT scale_type = scale.get_data_type() == DT::NOT_SET ? default_scale : scale.get_data_type();
  FROST_CHECK(check_recipe(*this, values, scale_type, global));
  FROST_CHECK(fill_output(*this, "Y", y, x->get_dim(), x->get_stride(), values));
  FROST_CHECK(fill_output(*this, "SCALE", scale, scale_dims, x->get_stride(), scale_type));
  return {};
}

error_t BlockScaleDequantizeNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"Y", "X", "SCALE"}));
  const TensorPtr x = in(BlockIn::X), scale = in(BlockIn::SCALE), global = in(BlockIn::GLOBAL_SCALE);
  std::vector<int64_t> scale_dims;
  FROST_CHECK(block_geometry(*this, x->get_dim(), scale_dims));
  FROST_CHECK(check_recipe(*this, x->get_data_type(), scale->get_data_type(), global));
  if (scale->get_dim() != scale_dims)
    return attr_error(*this, "SCALE.dim", dims_string(scale->get_dim()), "expected " + dims_string(scale_dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  return fill_output(*this, "Y", *out(BlockOut::Y), x->get_dim(), x->get_stride(), DT::FLOAT);
}

namespace {

template <class A>
void block_attributes_to_json(const A& a, json& j) {
  j["block_size"] = a.block_size;
  write_opt(j, "axis", a.axis);
}

template <class A>
error_t block_attributes_from_json(A& a, const json& j) {
  int64_t block = 0;
  FROST_CHECK(read_int(j, "block_size", block, true));
  if (block < INT32_MIN || block > INT32_MAX) return json_format_error("block_size", "out of range");
  a.block_size = static_cast<int32_t>(block);
  return read_opt_int(j, "axis", a.axis);
}

const OpRegistrar kQuantize(std::string(BlockScaleQuantizeNode::kTag),
                            [] { return std::make_unique<BlockScaleQuantizeNode>(); });
const OpRegistrar kDequantize(std::string(BlockScaleDequantizeNode::kTag),
                              [] { return std::make_unique<BlockScaleDequantizeNode>(); });

}  // namespace

void BlockScaleQuantizeNode::attributes_to_json(json& j) const {
  block_attributes_to_json(attr, j);
  j["transpose"] = attr.transpose;
}
error_t BlockScaleQuantizeNode::attributes_from_json(const json& j) {
  FROST_CHECK(block_attributes_from_json(attr, j));
  return read_bool(j, "transpose", attr.transpose);
}

void BlockScaleDequantizeNode::attributes_to_json(json& j) const { block_attributes_to_json(attr, j); }
error_t BlockScaleDequantizeNode::attributes_from_json(const json& j) { return block_attributes_from_json(attr, j); }

}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 2> Graph::block_scale_quantize(TensorPtr x, Block_scale_quantize_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::BlockScaleQuantizeNode::kTag);
  detail::require_inputs(g, a.name, detail::BlockScaleQuantizeNode::kTag, {{"X", &x}});
  a.inputs[BlockScaleInput::X] = std::move(x);
  const TensorPtr y = a.outputs[BlockScaleOutput::Y] = detail::make_output(g, a.name, "Y");
  const TensorPtr scale = a.outputs[BlockScaleOutput::SCALE] = detail::make_output(g, a.name, "SCALE");
  detail::add_node(g, std::make_unique<detail::BlockScaleQuantizeNode>(std::move(a)));
  return {y, scale};
}

TensorPtr Graph::block_scale_dequantize(TensorPtr x, TensorPtr scale, Block_scale_dequantize_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::BlockScaleDequantizeNode::kTag);
  detail::require_inputs(g, a.name, detail::BlockScaleDequantizeNode::kTag, {{"X", &x}, {"SCALE", &scale}});
  a.inputs[BlockScaleInput::X] = std::move(x);
  a.inputs[BlockScaleInput::SCALE] = std::move(scale);
  const TensorPtr y = a.outputs[BlockScaleOutput::Y] = detail::make_output(g, a.name, "Y");
  detail::add_node(g, std::make_unique<detail::BlockScaleDequantizeNode>(std::move(a)));
  return y;
}

}  // namespace frost::graph
