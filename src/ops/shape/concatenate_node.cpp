#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/shape/shape_nodes.h"

namespace frost::detail {

namespace {
// Bounds the node a JSON document can ask for before any tensor is seen.
constexpr int64_t kMaxConcatenateInputs = int64_t{1} << 16;

std::string input_port(size_t i) { return "X_" + std::to_string(i); }
}  // namespace

std::vector<Port> ConcatenateNode::ports() {
  std::vector<Port> p;
  for (size_t i = 0; i < xs_.size(); ++i) p.push_back({input_port(i), &xs_[i], false});
  p.push_back({"Y", &attr.outputs[graph::UnaryOutput::Y], true});
  return p;
}

error_t ConcatenateNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"Y"}));
  if (xs_.empty())
    return attr_error(*this, "inputs", "0 tensors", "concatenate needs at least one input",
                      error_code_t::ATTRIBUTE_NOT_SET);
  for (size_t i = 0; i < xs_.size(); ++i)
    if (!xs_[i])
      return attr_error(*this, input_port(i), "null", "every input must be a tensor", error_code_t::ATTRIBUTE_NOT_SET);
  const auto& first = xs_[0]->get_dim();
  const int64_t rank = static_cast<int64_t>(first.size());
  const int64_t axis = normalized_axis(rank);
  if (axis < 0 || axis >= rank)
    return attr_error(*this, "axis", std::to_string(attr.axis),
                      "must be in [" + std::to_string(-rank) + ", " + std::to_string(rank) + ") for inputs of rank " +
                          std::to_string(rank));
  std::vector<int64_t> dims = first;
  dims[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < xs_.size(); ++i) {
    const auto& d = xs_[i]->get_dim();
    bool same = d.size() == first.size();
    for (size_t k = 0; same && k < d.size(); ++k) same = static_cast<int64_t>(k) == axis || d[k] == first[k];
    if (!same)
      return attr_error(*this, input_port(i) + ".dim", dims_string(d),
                        "must match X_0 " + dims_string(first) + " in every dim but axis " + std::to_string(axis),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
    dims[static_cast<size_t>(axis)] += d[static_cast<size_t>(axis)];
  }
  if (attr.in_place_index && (*attr.in_place_index < 0 || *attr.in_place_index >= static_cast<int64_t>(xs_.size())))
    return attr_error(*this, "in_place_index", std::to_string(*attr.in_place_index),
                      "must name one of the " + std::to_string(xs_.size()) + " inputs");
  auto& y = *out(graph::UnaryOutput::Y);
  FROST_CHECK(infer_output_dims(*this, y, dims));
  if (y.get_stride().empty()) y.set_stride(strides_like(dims, xs_[0]->get_stride()));
  return {};
}

void ConcatenateNode::attributes_to_json(json& j) const {
  j["axis"] = attr.axis;
  write_opt(j, "in_place_index", attr.in_place_index);
  j["num_inputs"] = xs_.size();
}

// Runs before the ports are bound: num_inputs sizes the X_i ports the "inputs" object then fills.
error_t ConcatenateNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_int(j, "axis", attr.axis));
  FROST_CHECK(read_opt_int(j, "in_place_index", attr.in_place_index));
  int64_t n = 0;
  FROST_CHECK(read_int(j, "num_inputs", n, true));
  if (n < 1 || n > kMaxConcatenateInputs)
    return json_format_error("num_inputs",
                             std::to_string(n) + " is not in [1, " + std::to_string(kMaxConcatenateInputs) + "]");
  xs_.assign(static_cast<size_t>(n), nullptr);
  return {};
}

namespace {
const OpRegistrar kRegister(std::string(ConcatenateNode::kTag), [] { return std::make_unique<ConcatenateNode>(); });
}  // namespace

}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::concatenate(std::vector<TensorPtr> xs, Concatenate_attributes a) {
  auto& g = state();
  detail::default_name(g, a, detail::ConcatenateNode::kTag);
  for (size_t i = 0; i < xs.size(); ++i)
    if (!xs[i])
      g.note_error({error_code_t::ATTRIBUTE_NOT_SET,
                    "node '" + a.name + "' (CONCATENATE): input X_" + std::to_string(i) + " is null"});
  auto y = detail::make_output(g, a.name, "Y");
  a.outputs[UnaryOutput::Y] = y;
  detail::add_node(g, std::make_unique<detail::ConcatenateNode>(std::move(a), std::move(xs)));
  return y;
}

}  // namespace frost::graph
