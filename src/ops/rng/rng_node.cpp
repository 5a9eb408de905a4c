#include "ops/rng/rng_node.h"

#include <cmath>

#include "common/dtype_convert.h"
#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"

namespace frost {
namespace {
constexpr std::array<std::pair<RngDistribution_t, std::string_view>, 4> kDistributions{{
    {RngDistribution_t::NOT_SET, "NOT_SET"},
    {RngDistribution_t::BERNOULLI, "BERNOULLI"},
    {RngDistribution_t::UNIFORM, "UNIFORM"},
    {RngDistribution_t::NORMAL, "NORMAL"},
}};
}  // namespace

std::string_view to_string(RngDistribution_t d) {
  for (const auto& [v, n] : kDistributions)
    if (v == d) return n;
  return "UNKNOWN";
}
template <>
std::optional<RngDistribution_t> from_string<RngDistribution_t>(std::string_view name) {
  for (const auto& [v, n] : kDistributions)
    if (n == name) return v;
  return std::nullopt;
}

}  // namespace frost

namespace frost::detail {

using graph::RngInput;
using graph::RngOutput;

namespace {

bool is_integer_type(DataType_t t) {
  return t == DataType_t::INT32 || t == DataType_t::INT64 || t == DataType_t::UINT8 || t == DataType_t::INT8;
}

error_t check_counter_input(const Node& n, const char* port, const TensorPtr& t) {
  if (t->get_volume() != 1)
    return attr_error(n, std::string(port) + ".dim", dims_string(t->get_dim()), "must hold exactly one element");
  if (!is_integer_type(t->get_data_type()))
    return attr_error(n, std::string(port) + ".data_type", to_string(t->get_data_type()), "must be an integer type");
  if (t->get_is_pass_by_value()) {
    const double v = t->get_pass_by_value().value_or(0.0);
    if (!(v >= 0.0 && v < 0x1p53) || v != std::floor(v))
      return attr_error(n, port, std::to_string(v), "must be an integer in [0, 2^53)");
  }
  return {};
}

}  // namespace

error_t RngNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"Y", "SEED", "OFFSET"}));
  if (attr.distribution == RngDistribution_t::NOT_SET)
    return attr_error(*this, "distribution", "NOT_SET", "set BERNOULLI", error_code_t::ATTRIBUTE_NOT_SET);
  if (attr.distribution != RngDistribution_t::BERNOULLI)
    return attr_error(*this, "distribution", to_string(attr.distribution), "only BERNOULLI is served",
                      error_code_t::GRAPH_NOT_SUPPORTED);
  if (!attr.bernoulli_probability)
    return attr_error(*this, "bernoulli_probability", "unset", "BERNOULLI needs a probability",
                      error_code_t::ATTRIBUTE_NOT_SET);
  const double p = *attr.bernoulli_probability;
  if (!(p >= 0.0 && p <= 1.0))
    return attr_error(*this, "bernoulli_probability", std::to_string(p), "must lie in [0, 1]");
  FROST_CHECK(check_counter_input(*this, "SEED", in(RngInput::SEED)));
  FROST_CHECK(check_counter_input(*this, "OFFSET", in(RngInput::OFFSET)));
  auto& y = *out(RngOutput::Y);
  if (y.get_dim().empty()) {
    if (attr.dim.empty())
      return attr_error(*this, "dim", "[]", "set the output dims (on the attributes or on Y)",
                        error_code_t::ATTRIBUTE_NOT_SET);
    y.set_dim(attr.dim);
  } else if (!attr.dim.empty() && y.get_dim() != attr.dim) {
    return attr_error(*this, "Y.dim", dims_string(y.get_dim()),
                      "disagrees with the attributes' dim " + dims_string(attr.dim),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  if (y.get_stride().empty() && !attr.stride.empty()) y.set_stride(attr.stride);
  return {};
}

void RngNode::attributes_to_json(json& j) const {
  j["distribution"] = to_string(attr.distribution);
  write_opt(j, "bernoulli_probability", attr.bernoulli_probability);
  j["dim"] = attr.dim;
  j["stride"] = attr.stride;
}

error_t RngNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_enum(j, "distribution", attr.distribution, true));
  if (j.contains("bernoulli_probability")) {
    double p = 0;
    FROST_CHECK(read_double(j, "bernoulli_probability", p));
    attr.bernoulli_probability = p;
  }
  FROST_CHECK(read_int_list(j, "dim", attr.dim));
  FROST_CHECK(read_int_list(j, "stride", attr.stride));
  return {};
}

namespace {
const OpRegistrar kRegister(std::string(RngNode::kTag), [] { return std::make_unique<RngNode>(); });
}  // namespace

}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::rng(TensorPtr seed, TensorPtr offset, Rng_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::RngNode::kTag);
  detail::require_inputs(g, a.name, detail::RngNode::kTag, {{"SEED", &seed}, {"OFFSET", &offset}});
  a.inputs[RngInput::SEED] = std::move(seed);
  a.inputs[RngInput::OFFSET] = std::move(offset);
  const TensorPtr y = a.outputs[RngOutput::Y] = detail::make_output(g, a.name, "Y");
  detail::add_node(g, std::make_unique<detail::RngNode>(std::move(a)));
  return y;
}

}  // namespace frost::graph
