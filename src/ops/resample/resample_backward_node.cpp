// RESAMPLE_BACKWARD: attributes, inference and validation (semantics in frost/ops/resample.h).
#include "common/dtype_convert.h"
#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"
#include "ops/resample/resample_node.h"
#include "ops/resample/resample_pooling.h"

namespace frost::detail {

using graph::ResampleBackwardInput;
using graph::ResampleBackwardOutput;
using RM = ResampleMode_t;

error_t ResampleBackwardNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"DX", "DY"}));
  const TensorPtr dy = in(ResampleBackwardInput::DY), x = in(ResampleBackwardInput::X);
  const TensorPtr index = in(ResampleBackwardInput::INDEX), dx = out(ResampleBackwardOutput::DX);
  const PoolingSpec spec = pooling_spec(attr);
  const std::pair<const char*, TensorPtr> floating[2] = {{"DY", dy}, {"X", x}};
  for (const auto& [port, t] : floating)
    if (t && !is_floating(t->get_data_type()))
      return attr_error(*this, std::string(port) + ".data_type", to_string(t->get_data_type()),
                        "pooling gradients take floating-point data");
  // dX has X's dims; without X the caller declares them on dX.
  if (x) {
    if (dx->get_dim().empty()) dx->set_dim(x->get_dim());
    if (dx->get_dim() != x->get_dim())
      return attr_error(*this, "DX.dim", dims_string(dx->get_dim()), "X gives " + dims_string(x->get_dim()),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
  } else if (dx->get_dim().empty()) {
    return attr_error(*this, "DX.dim", "[]", "bind X (set_x) or declare dX's dims", error_code_t::ATTRIBUTE_NOT_SET);
  }
  std::vector<int64_t> yd;
  FROST_CHECK(check_pooling(*this, spec, x ? "X" : "DX", dx->get_dim(), yd));
  if (dy->get_dim() != yd)
    return attr_error(*this, "DY.dim", dims_string(dy->get_dim()), "pooling dX's dims gives " + dims_string(yd),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (spec.mode == RM::MAXPOOL && !x && !index)
    return attr_error(*this, "INDEX", "null", "max pooling's gradient needs the forward's INDEX or X",
                      error_code_t::ATTRIBUTE_NOT_SET);
  if (index) {
    if (spec.mode != RM::MAXPOOL) return attr_error(*this, "INDEX", describe(index), "only MAXPOOL reads an index");
    if (index->get_dim() != yd)
      return attr_error(*this, "INDEX.dim", dims_string(index->get_dim()), "DY gives " + dims_string(yd),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
    FROST_CHECK(check_index_type(*this, "INDEX", index->get_data_type(), spec.window));
  }
  if (dx->get_stride().empty()) dx->set_stride(strides_like(dx->get_dim(), (x ? x : dy)->get_stride()));
  const DataType_t context_type = dx->get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
  if (dx->get_data_type() == DataType_t::NOT_SET && context_type == DataType_t::NOT_SET)
    dx->set_data_type(dy->get_data_type());
  const DataType_t dx_type = dx->get_data_type() == DataType_t::NOT_SET ? context_type : dx->get_data_type();
  if (!is_floating(dx_type))
    return attr_error(*this, "DX.data_type", to_string(dx_type), "pooling gradients take floating-point data");
  return {};
}

void ResampleBackwardNode::attributes_to_json(json& j) const {
  j["resampling_mode"] = to_string(attr.resampling_mode);
  j["padding_mode"] = to_string(attr.padding_mode);
  j["window"] = attr.window;
  j["stride"] = attr.stride;
  j["pre_padding"] = attr.pre_padding;
  j["post_padding"] = attr.post_padding;
}

error_t ResampleBackwardNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_enum(j, "resampling_mode", attr.resampling_mode, true));
  FROST_CHECK(read_enum(j, "padding_mode", attr.padding_mode));
  FROST_CHECK(read_int_list(j, "window", attr.window, true));
  FROST_CHECK(read_int_list(j, "stride", attr.stride));
  FROST_CHECK(read_int_list(j, "pre_padding", attr.pre_padding));
  FROST_CHECK(read_int_list(j, "post_padding", attr.post_padding));
  return {};
}

namespace {
const OpRegistrar kRegister(std::string(ResampleBackwardNode::kTag),
                            [] { return std::make_unique<ResampleBackwardNode>(); });
}  // namespace

}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::resample_backward(TensorPtr dy, Resample_backward_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::ResampleBackwardNode::kTag);
  detail::require_inputs(g, a.name, detail::ResampleBackwardNode::kTag, {{"DY", &dy}});
  a.inputs[ResampleBackwardInput::DY] = std::move(dy);
  const TensorPtr dx = a.outputs[ResampleBackwardOutput::DX] = detail::make_output(g, a.name, "DX");
  detail::add_node(g, std::make_unique<detail::ResampleBackwardNode>(std::move(a)));
  return dx;
}

}  // namespace frost::graph
