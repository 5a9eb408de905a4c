#include "ops/resample/resample_node.h"

#include <array>

#include "common/dtype_convert.h"
#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"
#include "ops/resample/resample_pooling.h"

namespace frost {
namespace {

constexpr std::array<std::pair<ResampleMode_t, std::string_view>, 6> kResampleModes{{
    {ResampleMode_t::NOT_SET, "NOT_SET"},
    {ResampleMode_t::AVGPOOL_EXCLUDE_PADDING, "AVGPOOL_EXCLUDE_PADDING"},
    {ResampleMode_t::AVGPOOL_INCLUDE_PADDING, "AVGPOOL_INCLUDE_PADDING"},
    {ResampleMode_t::BILINEAR, "BILINEAR"},
    {ResampleMode_t::NEAREST, "NEAREST"},
    {ResampleMode_t::MAXPOOL, "MAXPOOL"},
}};
constexpr std::array<std::pair<PaddingMode_t, std::string_view>, 4> kPaddingModes{{
    {PaddingMode_t::NOT_SET, "NOT_SET"},
    {PaddingMode_t::EDGE_VAL_PAD, "EDGE_VAL_PAD"},
    {PaddingMode_t::NEG_INF_PAD, "NEG_INF_PAD"},
    {PaddingMode_t::ZERO_PAD, "ZERO_PAD"},
}};

template <class E, size_t N>
std::string_view name_in(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [v, n] : table)
    if (v == e) return n;
  return "UNKNOWN";
}
template <class E, size_t N>
std::optional<E> value_in(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view name) {
  for (const auto& [v, n] : table)
    if (n == name) return v;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(ResampleMode_t m) { return name_in(kResampleModes, m); }
std::string_view to_string(PaddingMode_t m) { return name_in(kPaddingModes, m); }
template <>
std::optional<ResampleMode_t> from_string<ResampleMode_t>(std::string_view n) {
  return value_in(kResampleModes, n);
}
template <>
std::optional<PaddingMode_t> from_string<PaddingMode_t>(std::string_view n) {
  return value_in(kPaddingModes, n);
}

}  // namespace frost

namespace frost::detail {

using graph::ResampleInput;
using graph::ResampleOutput;
using RM = ResampleMode_t;
using PM = PaddingMode_t;

PaddingMode_t effective_padding_mode(ResampleMode_t mode, PaddingMode_t padding) {
  if (padding != PM::NOT_SET) return padding;
  return mode == RM::MAXPOOL ? PM::NEG_INF_PAD : PM::ZERO_PAD;
}

namespace {

std::string list_string(const std::vector<int64_t>& v) { return dims_string(v); }

// Every spatial list must hold one value per spatial axis, each at least `min`.
error_t check_spatial_list(const Node& n, const char* name, const std::vector<int64_t>& v, size_t spatial,
                           int64_t min) {
  if (v.size() != spatial)
    return attr_error(n, name, list_string(v), "needs one value per spatial axis (" + std::to_string(spatial) + ")");
  for (int64_t e : v)
    if (e < min) return attr_error(n, name, list_string(v), "values must be >= " + std::to_string(min));
  return {};
}

}  // namespace

error_t check_index_type(const Node& n, const char* port, DataType_t dt, const std::vector<int64_t>& window) {
  int64_t volume = 1;
  for (int64_t w : window) volume *= w;
  const int64_t limit = dt == DataType_t::INT8    ? 127
                        : dt == DataType_t::UINT8 ? 255
                        : dt == DataType_t::INT32 ? INT32_MAX
                        : dt == DataType_t::INT64 ? INT64_MAX
                                                  : 0;
  if (volume - 1 > limit)
    return attr_error(n, std::string(port) + ".data_type", to_string(dt),
                      "must be an integer type that holds window positions up to " + std::to_string(volume - 1));
  return {};
}

error_t check_pooling(const Node& n, const PoolingSpec& s, const char* x_port, const std::vector<int64_t>& xd,
                      std::vector<int64_t>& yd) {
  const RM mode = s.mode;
  if (mode == RM::NOT_SET)
    return attr_error(n, "resampling_mode", "NOT_SET",
                      "set AVGPOOL_INCLUDE_PADDING, AVGPOOL_EXCLUDE_PADDING or MAXPOOL",
                      error_code_t::ATTRIBUTE_NOT_SET);
  if (mode == RM::BILINEAR || mode == RM::NEAREST)
    return attr_error(n, "resampling_mode", to_string(mode), "only pooling modes are served",
                      error_code_t::GRAPH_NOT_SUPPORTED);
  if (xd.size() != 4 && xd.size() != 5)
    return attr_error(n, std::string(x_port) + ".dim", dims_string(xd), "must be [N, C, H, W] or [N, C, D, H, W]",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  const size_t spatial = xd.size() - 2;
  if (s.window.empty()) return attr_error(n, "window", "[]", "set the window", error_code_t::ATTRIBUTE_NOT_SET);
  FROST_CHECK(check_spatial_list(n, "window", s.window, spatial, 1));
  FROST_CHECK(check_spatial_list(n, "stride", s.stride, spatial, 1));
  FROST_CHECK(check_spatial_list(n, "pre_padding", s.pre, spatial, 0));
  FROST_CHECK(check_spatial_list(n, "post_padding", s.post, spatial, 0));
  if (mode != RM::MAXPOOL && s.padding == PM::NEG_INF_PAD)
    return attr_error(n, "padding_mode", to_string(s.padding), "average pooling needs ZERO_PAD or EDGE_VAL_PAD");
  yd = {xd[0], xd[1]};
  for (size_t k = 0; k < spatial; ++k) {
    // Every window must start inside the padded input and overlap X (else it averages nothing).
    if (s.window[k] > xd[k + 2] + s.pre[k] + s.post[k])
      return attr_error(n, "window", list_string(s.window),
                        "is larger than the padded input along spatial axis " + std::to_string(k),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
    if (s.pre[k] >= s.window[k] || s.post[k] >= s.window[k])
      return attr_error(n, s.pre[k] >= s.window[k] ? "pre_padding" : "post_padding",
                        list_string(s.pre[k] >= s.window[k] ? s.pre : s.post),
                        "padding must be smaller than the window, so every window overlaps X");
    yd.push_back((xd[k + 2] + s.pre[k] + s.post[k] - s.window[k]) / s.stride[k] + 1);
  }
  return {};
}

error_t ResampleNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"Y", "X"}));
  const TensorPtr x = in(ResampleInput::X);
  const PoolingSpec spec = pooling_spec(attr);
  if (spec.mode != RM::NOT_SET && spec.mode != RM::BILINEAR && spec.mode != RM::NEAREST &&
      !is_floating(x->get_data_type()))
    return attr_error(*this, "X.data_type", to_string(x->get_data_type()), "pooling takes floating-point data");
  std::vector<int64_t> yd;
  FROST_CHECK(check_pooling(*this, spec, "X", x->get_dim(), yd));
  auto fill = [&](const char* port, graph::Tensor_attributes& t) -> error_t {
    if (t.get_dim().empty()) {
      t.set_dim(yd);
    } else if (t.get_dim() != yd) {
      return attr_error(*this, std::string(port) + ".dim", dims_string(t.get_dim()), "expected " + dims_string(yd),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
    }
    if (t.get_stride().empty()) t.set_stride(strides_like(yd, x->get_stride()));
    return {};
  };
  FROST_CHECK(fill("Y", *out(ResampleOutput::Y)));
  const TensorPtr index = out(ResampleOutput::INDEX);
  if (outputs_index() && !index)
    return attr_error(*this, "INDEX", "null", "max pooling in training outputs the index",
                      error_code_t::ATTRIBUTE_NOT_SET);
  if (!outputs_index() && index)
    return attr_error(*this, "INDEX", describe(index), "only MAXPOOL with is_inference false outputs an index");
  if (index) {
    FROST_CHECK(fill("INDEX", *index));
    if (index->get_data_type() == DataType_t::NOT_SET) index->set_data_type(DataType_t::INT32);
    FROST_CHECK(check_index_type(*this, "INDEX", index->get_data_type(), spec.window));
  }
  return {};
}

void ResampleNode::attributes_to_json(json& j) const {
  j["resampling_mode"] = to_string(attr.resampling_mode);
  j["padding_mode"] = to_string(attr.padding_mode);
  j["window"] = attr.window;
  j["stride"] = attr.stride;
  j["pre_padding"] = attr.pre_padding;
  j["post_padding"] = attr.post_padding;
  j["is_inference"] = attr.is_inference;
}

error_t ResampleNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_enum(j, "resampling_mode", attr.resampling_mode, true));
  FROST_CHECK(read_enum(j, "padding_mode", attr.padding_mode));
  FROST_CHECK(read_int_list(j, "window", attr.window, true));
  FROST_CHECK(read_int_list(j, "stride", attr.stride));
  FROST_CHECK(read_int_list(j, "pre_padding", attr.pre_padding));
  FROST_CHECK(read_int_list(j, "post_padding", attr.post_padding));
  FROST_CHECK(read_bool(j, "is_inference", attr.is_inference));
  return {};
}

namespace {
const OpRegistrar kRegister(std::string(ResampleNode::kTag), [] { return std::make_unique<ResampleNode>(); });
}  // namespace

}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 2> Graph::resample(TensorPtr x, Resample_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::ResampleNode::kTag);
  detail::require_inputs(g, a.name, detail::ResampleNode::kTag, {{"X", &x}});
  a.inputs[ResampleInput::X] = std::move(x);
  const TensorPtr y = a.outputs[ResampleOutput::Y] = detail::make_output(g, a.name, "Y");
  TensorPtr index;
  if (a.resampling_mode == ResampleMode_t::MAXPOOL && !a.is_inference)
    index = a.outputs[ResampleOutput::INDEX] = detail::make_output(g, a.name, "INDEX");
  detail::add_node(g, std::make_unique<detail::ResampleNode>(std::move(a)));
  return {y, index};
}

}  // namespace frost::graph
