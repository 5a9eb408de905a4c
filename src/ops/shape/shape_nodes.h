// Data-movement ops: reshape, transpose, slice and concatenate. They copy elements as stored (no
// arithmetic), so any data type passes through; a Y of another type rounds on store.
#pragma once

#include "frost/ops/shape_ops.h"
#include "graph/attr_node.h"
#include "ops/common/builder_util.h"

namespace frost::detail {

struct UnaryPortNames {
  using I = graph::UnaryInput;
  using O = graph::UnaryOutput;
  static constexpr std::array<std::pair<I, const char*>, 1> inputs{{{I::X, "X"}}};
  static constexpr std::array<std::pair<O, const char*>, 1> outputs{{{O::Y, "Y"}}};
};
template <>
struct PortNames<graph::Reshape_attributes> : UnaryPortNames {};
template <>
struct PortNames<graph::Transpose_attributes> : UnaryPortNames {};
template <>
struct PortNames<graph::Slice_attributes> : UnaryPortNames {};
// Concatenate's inputs are a list (ports X_0 .. X_{n-1}), so its node lists them itself.
template <>
struct PortNames<graph::Concatenate_attributes> {
  static constexpr std::array<std::pair<graph::ConcatenateInput, const char*>, 0> inputs{};
  static constexpr std::array<std::pair<graph::UnaryOutput, const char*>, 1> outputs{{{graph::UnaryOutput::Y, "Y"}}};
};

// Y: X's elements in row-major order under new dims (and strides).
class ReshapeNode final : public AttrNode<graph::Reshape_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "RESHAPE";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

// Y.dim[i] = X.dim[permutation[i]]; Y is written packed unless the user gave strides.
class TransposeNode final : public AttrNode<graph::Transpose_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "TRANSPOSE";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

// Y = X[start_0:end_0, ...]; dims past the given slices keep their full range.
class SliceNode final : public AttrNode<graph::Slice_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "SLICE";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
  // One [start, end) per dim of X.
  std::vector<std::pair<int64_t, int64_t>> ranges(const std::vector<int64_t>& x_dims) const;
};

// Y = X_0, ..., X_{n-1} joined along axis.
class ConcatenateNode final : public AttrNode<graph::Concatenate_attributes> {
 public:
  static constexpr std::string_view kTag = "CONCATENATE";
  ConcatenateNode() = default;
  ConcatenateNode(graph::Concatenate_attributes a, std::vector<TensorPtr> xs)
      : AttrNode(std::move(a)), xs_(std::move(xs)) {}
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
  std::vector<Port> ports() override;
  const std::vector<TensorPtr>& xs() const { return xs_; }
  // The axis counted from the front, given the inputs' rank.
  int64_t normalized_axis(int64_t rank) const { return attr.axis < 0 ? attr.axis + rank : attr.axis; }

 private:
  std::vector<TensorPtr> xs_;
};

// Shared builder of the one-input shape ops.
template <class NodeT, class Attr>
TensorPtr build_unary_shape_op(GraphState& g, TensorPtr x, Attr a) {
  default_name(g, a, NodeT::kTag);
  require_inputs(g, a.name, NodeT::kTag, {{"X", &x}});
  a.inputs[graph::UnaryInput::X] = std::move(x);
  auto y = make_output(g, a.name, "Y");
  a.outputs[graph::UnaryOutput::Y] = y;
  add_node(g, std::make_unique<NodeT>(std::move(a)));
  return y;
}

// Checks a user-set Y dim against the inferred one, or fills it in.
error_t infer_output_dims(const Node& node, graph::Tensor_attributes& y, const std::vector<int64_t>& dims);

}  // namespace frost::detail
