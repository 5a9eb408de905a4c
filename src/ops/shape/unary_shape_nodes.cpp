// Shape inference, validation, JSON and builders of reshape, transpose and slice.
#include <algorithm>

#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/shape/shape_nodes.h"

namespace frost::detail {

using graph::UnaryInput;
using graph::UnaryOutput;

error_t infer_output_dims(const Node& node, graph::Tensor_attributes& y, const std::vector<int64_t>& dims) {
  if (y.get_dim().empty()) {
    y.set_dim(dims);
    return {};
  }
  if (y.get_dim() != dims)
    return attr_error(node, "Y.dim", dims_string(y.get_dim()), "the op gives " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  return {};
}

namespace {

error_t require_x(const Node& node, const TensorPtr& x) {
  if (!x) return attr_error(node, "X", "null", "the op needs an input", error_code_t::ATTRIBUTE_NOT_SET);
  return {};
}

bool is_int64(const json& v) {
  return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX));
}

std::string range_string(const std::pair<int64_t, int64_t>& r) {
  return "[" + std::to_string(r.first) + ", " + std::to_string(r.second) + ")";
}

}  // namespace

// ---- reshape ----

error_t ReshapeNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"Y"}));
  const TensorPtr x = in(UnaryInput::X);
  FROST_CHECK(require_x(*this, x));
  auto& y = *out(UnaryOutput::Y);
  if (attr.dim.empty() && y.get_dim().empty())
    return attr_error(*this, "dim", "unset", "set Reshape_attributes::dim or Y's dims",
                      error_code_t::ATTRIBUTE_NOT_SET);
  const std::vector<int64_t> dims = attr.dim.empty() ? y.get_dim() : attr.dim;
  FROST_CHECK(infer_output_dims(*this, y, dims));
  const auto volume = checked_volume(dims);
  if (!volume || *volume != x->get_volume())
    return attr_error(*this, "dim", dims_string(dims),
                      "must hold as many elements as X " + describe(x) + " (" + std::to_string(x->get_volume()) + ")",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (!attr.stride.empty()) {
    if (attr.stride.size() != dims.size())
      return attr_error(*this, "stride", dims_string(attr.stride), "must have the rank of dim " + dims_string(dims));
    if (y.get_stride().empty()) {
      y.set_stride(attr.stride);
    } else if (y.get_stride() != attr.stride) {
      return attr_error(*this, "Y.stride", dims_string(y.get_stride()),
                        "disagrees with Reshape_attributes::stride " + dims_string(attr.stride));
    }
  }
  if (y.get_stride().empty()) y.set_stride(packed_strides(dims));
  return {};
}

void ReshapeNode::attributes_to_json(json& j) const {
  j["dim"] = attr.dim;
  j["stride"] = attr.stride;
}

error_t ReshapeNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_int_list(j, "dim", attr.dim));
  return read_int_list(j, "stride", attr.stride);
}

// ---- transpose ----

error_t TransposeNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"Y"}));
  const TensorPtr x = in(UnaryInput::X);
  FROST_CHECK(require_x(*this, x));
  const auto& xd = x->get_dim();
  const auto& perm = attr.permutation;
  std::vector<bool> seen(xd.size(), false);
  bool ok = perm.size() == xd.size();
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < static_cast<int64_t>(xd.size()) && !seen[static_cast<size_t>(perm[i])];
    if (ok) seen[static_cast<size_t>(perm[i])] = true;
  }
  if (!ok)
    return attr_error(*this, "permutation", dims_string(perm),
                      "must be a permutation of 0.." + std::to_string(static_cast<int64_t>(xd.size()) - 1) + " (X is " +
                          describe(x) + ")",
                      perm.empty() ? error_code_t::ATTRIBUTE_NOT_SET : error_code_t::INVALID_VALUE);
  std::vector<int64_t> dims(xd.size());
  for (size_t i = 0; i < perm.size(); ++i) dims[i] = xd[static_cast<size_t>(perm[i])];
  // Y's strides stay the packed default: a transpose exists to produce the new layout in memory.
  return infer_output_dims(*this, *out(UnaryOutput::Y), dims);
}

void TransposeNode::attributes_to_json(json& j) const { j["permutation"] = attr.permutation; }

error_t TransposeNode::attributes_from_json(const json& j) {
  return read_int_list(j, "permutation", attr.permutation, true);
}

// ---- slice ----

std::vector<std::pair<int64_t, int64_t>> SliceNode::ranges(const std::vector<int64_t>& x_dims) const {
  std::vector<std::pair<int64_t, int64_t>> r = attr.slices;
  for (size_t i = r.size(); i < x_dims.size(); ++i) r.emplace_back(0, x_dims[i]);
  return r;
}

error_t SliceNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"Y"}));
  const TensorPtr x = in(UnaryInput::X);
  FROST_CHECK(require_x(*this, x));
  const auto& xd = x->get_dim();
  if (attr.slices.size() > xd.size())
    return attr_error(*this, "slices", std::to_string(attr.slices.size()) + " ranges",
                      "X " + describe(x) + " has only " + std::to_string(xd.size()) + " dims");
  const auto r = ranges(xd);
  std::vector<int64_t> dims(xd.size());
  for (size_t i = 0; i < xd.size(); ++i) {
    const auto [start, end] = r[i];
    if (!(start >= 0 && start < end && end <= xd[i]))
      return attr_error(*this, "slices[" + std::to_string(i) + "]", range_string(r[i]),
                        "needs 0 <= start < end <= " + std::to_string(xd[i]) + " (X's extent)");
    dims[i] = end - start;
  }
  auto& y = *out(UnaryOutput::Y);
  FROST_CHECK(infer_output_dims(*this, y, dims));
  if (y.get_stride().empty()) y.set_stride(strides_like(dims, x->get_stride()));
  return {};
}

void SliceNode::attributes_to_json(json& j) const {
  json s = json::array();
  for (const auto& [start, end] : attr.slices) s.push_back({start, end});
  j["slices"] = s;
}

error_t SliceNode::attributes_from_json(const json& j) {
  if (!j.contains("slices")) return json_format_error("slices", "is required");
  const json& s = j["slices"];
  if (!s.is_array()) return json_format_error("slices", "must be an array of [start, end] pairs");
  std::vector<std::pair<int64_t, int64_t>> slices;
  for (const json& e : s) {
    if (!e.is_array() || e.size() != 2 || !is_int64(e[0]) || !is_int64(e[1]))
      return json_format_error("slices", "must be an array of [start, end] pairs");
    slices.emplace_back(e[0].get<int64_t>(), e[1].get<int64_t>());
  }
  attr.slices = std::move(slices);
  return {};
}

namespace {
const OpRegistrar kRegisterReshape(std::string(ReshapeNode::kTag), [] { return std::make_unique<ReshapeNode>(); });
const OpRegistrar kRegisterTranspose(std::string(TransposeNode::kTag),
                                     [] { return std::make_unique<TransposeNode>(); });
const OpRegistrar kRegisterSlice(std::string(SliceNode::kTag), [] { return std::make_unique<SliceNode>(); });
}  // namespace

}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::reshape(TensorPtr x, Reshape_attributes a) {
  return detail::build_unary_shape_op<detail::ReshapeNode>(state(), std::move(x), std::move(a));
}
TensorPtr Graph::transpose(TensorPtr x, Transpose_attributes a) {
  return detail::build_unary_shape_op<detail::TransposeNode>(state(), std::move(x), std::move(a));
}
TensorPtr Graph::slice(TensorPtr x, Slice_attributes a) {
  return detail::build_unary_shape_op<detail::SliceNode>(state(), std::move(x), std::move(a));
}

}  // namespace frost::graph
