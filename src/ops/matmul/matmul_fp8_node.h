#pragma once

#include "frost/ops/matmul_fp8.h"
#include "graph/attr_node.h"
#include "ops/matmul/matmul_node.h"

namespace frost::detail {

template <>
struct PortNames<graph::Matmul_fp8_attributes> {
  using I = graph::MatmulFp8Input;
  using O = graph::MatmulFp8Output;
  static constexpr std::array<std::pair<I, const char*>, 8> inputs{{{I::A, "A"},
                                                                    {I::B, "B"},
                                                                    {I::DESCALE_A, "DESCALE_A"},
                                                                    {I::DESCALE_B, "DESCALE_B"},
                                                                    {I::SCALE_C, "SCALE_C"},
                                                                    {I::M_OVERRIDE, "M_OVERRIDE"},
                                                                    {I::N_OVERRIDE, "N_OVERRIDE"},
                                                                    {I::K_OVERRIDE, "K_OVERRIDE"}}};
  static constexpr std::array<std::pair<O, const char*>, 2> outputs{{{O::C, "C"}, {O::AMAX_C, "AMAX_C"}}};
};

// See frost/ops/matmul_fp8.h. The product, its batching and its overrides are MATMUL's.
class MatmulFp8Node final : public AttrNode<graph::Matmul_fp8_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "MATMUL_FP8";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;

 private:
  MatmulTensors operands() const;
  // Heads of the product summed into each head of C (1 without the grouped-query reduction).
  int64_t head_group() const;
};

}  // namespace frost::detail
