// Nodes of block-scaled quantization: BLOCK_SCALE_QUANTIZE and BLOCK_SCALE_DEQUANTIZE.
#pragma once

#include <array>

#include "frost/ops/quantize.h"
#include "graph/attr_node.h"

namespace frost::detail {

using BlockIn = graph::BlockScaleInput;
using BlockOut = graph::BlockScaleOutput;

template <>
struct PortNames<graph::Block_scale_quantize_attributes> {
  static constexpr std::array<std::pair<BlockIn, const char*>, 2> inputs{
      {{BlockIn::X, "X"}, {BlockIn::GLOBAL_SCALE, "GLOBAL_SCALE"}}};
  static constexpr std::array<std::pair<BlockOut, const char*>, 2> outputs{
      {{BlockOut::Y, "Y"}, {BlockOut::SCALE, "SCALE"}}};
};

template <>
struct PortNames<graph::Block_scale_dequantize_attributes> {
  static constexpr std::array<std::pair<BlockIn, const char*>, 3> inputs{
      {{BlockIn::X, "X"}, {BlockIn::SCALE, "SCALE"}, {BlockIn::GLOBAL_SCALE, "GLOBAL_SCALE"}}};
  static constexpr std::array<std::pair<BlockOut, const char*>, 1> outputs{{{BlockOut::Y, "Y"}}};
};

class BlockScaleQuantizeNode final : public AttrNode<graph::Block_scale_quantize_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "BLOCK_SCALE_QUANTIZE";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

class BlockScaleDequantizeNode final : public AttrNode<graph::Block_scale_dequantize_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "BLOCK_SCALE_DEQUANTIZE";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

// Largest finite value and largest exponent (emax, OCP MX) of a block-scaled element type.
struct ElementFormat {
  double max_finite;
  int emax;
};
ElementFormat element_format(DataType_t values);

// The E8M0 scale of an MX block (OCP Microscaling v1.0): 2^(floor(log2(amax)) - emax) with the exponent
// clamped to E8M0's [-127, 127]; an all-zero block gets 2^-127. Finite amax only.
double mx_block_scale(double amax, const ElementFormat& values);

// The block axis after defaulting (-1 or unset: the last axis).
int64_t block_axis(const std::optional<int64_t>& axis, size_t rank);

}  // namespace frost::detail
