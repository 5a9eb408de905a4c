#include "ops/sdpa_fp8/sdpa_fp8_backward_node.h"

#include <tuple>

#include "graph/json_util.h"
#include "ops/common/builder_util.h"
#include "ops/common/fp8_scaling.h"
#include "ops/sdpa/sdpa_common_checks.h"
#include "ops/sdpa_fp8/fp8_attention_checks.h"

namespace frost::detail {

using In = graph::SdpaFp8BackwardInput;
using Out = graph::SdpaFp8BackwardOutput;

namespace {

constexpr const char* kFp8 = "FP8_E4M3 or FP8_E5M2";
constexpr const char* kOutputTypes = "FP8_E4M3, FP8_E5M2, HALF, BFLOAT16 or FLOAT";

}  // namespace

error_t SdpaFp8BackwardNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"DQ", "DK", "DV", "AMAX_DQ", "AMAX_DK", "AMAX_DV", "AMAX_DP"}));
  const TensorPtr q = in(In::Q), k = in(In::K), v = in(In::V);
  FROST_CHECK(check_attention_operands(*this, q, k, v, is_fp8, kFp8));
  const auto& qd = q->get_dim();
  const std::vector<int64_t> o_dims{qd[0], qd[1], qd[2], v->get_dim()[3]};
  FROST_CHECK(check_operand(*this, "O", in(In::O), o_dims, is_fp8_attention_output_type, kOutputTypes));
  FROST_CHECK(check_operand(*this, "DO", in(In::DO), o_dims, is_fp8, kFp8));
  FROST_CHECK(check_operand(
      *this, "STATS", in(In::STATS), {qd[0], qd[1], qd[2], 1}, [](DataType_t t) { return t == DataType_t::FLOAT; },
      "FLOAT"));
  const std::pair<const char*, In> scales[12] = {
      {"DESCALE_Q", In::DESCALE_Q},   {"DESCALE_K", In::DESCALE_K},   {"DESCALE_V", In::DESCALE_V},
      {"DESCALE_O", In::DESCALE_O},   {"DESCALE_DO", In::DESCALE_DO}, {"DESCALE_S", In::DESCALE_S},
      {"DESCALE_DP", In::DESCALE_DP}, {"SCALE_S", In::SCALE_S},       {"SCALE_DQ", In::SCALE_DQ},
      {"SCALE_DK", In::SCALE_DK},     {"SCALE_DV", In::SCALE_DV},     {"SCALE_DP", In::SCALE_DP}};
  for (const auto& [port, e] : scales) FROST_CHECK(check_scale_scalar(*this, port, in(e), true));
  FROST_CHECK(check_attn_scale(*this, in(In::ATTN_SCALE), attr.attn_scale_value));
  FROST_CHECK(check_attention_mask(*this, attr.padding_mask, in(In::SEQ_LEN_Q), in(In::SEQ_LEN_KV), qd[0],
                                   attr.left_bound, attr.right_bound));
  // Each gradient takes its operand's dims and stride order; unset types follow the graph, else the
  // operand's FP8 type.
  const std::tuple<const char*, Out, TensorPtr> grads[3] = {{"DQ", Out::DQ, q}, {"DK", Out::DK, k}, {"DV", Out::DV, v}};
  for (const auto& [port, grad, operand] : grads)
    FROST_CHECK(infer_output_like(*this, port, out(grad), operand->get_dim(), operand->get_stride(),
                                  operand->get_data_type(), ctx, is_fp8_attention_output_type, kOutputTypes));
  const std::pair<const char*, Out> amaxes[4] = {
      {"AMAX_DQ", Out::AMAX_DQ}, {"AMAX_DK", Out::AMAX_DK}, {"AMAX_DV", Out::AMAX_DV}, {"AMAX_DP", Out::AMAX_DP}};
  for (const auto& [port, e] : amaxes) FROST_CHECK(infer_amax_output(*this, port, out(e)));
  return {};
}

void fp8_backward_attributes_to_json(const graph::SDPA_fp8_backward_attributes& a, json& j) {
  write_opt(j, "attn_scale_value", a.attn_scale_value);
  j["padding_mask"] = a.padding_mask;
  j["deterministic_algorithm"] = a.deterministic_algorithm;
  j["diagonal_alignment"] = to_string(a.diagonal_alignment);
  write_opt(j, "left_bound", a.left_bound);
  write_opt(j, "right_bound", a.right_bound);
}

error_t fp8_backward_attributes_from_json(graph::SDPA_fp8_backward_attributes& a, const json& j) {
  FROST_CHECK(read_opt_float(j, "attn_scale_value", a.attn_scale_value));
  FROST_CHECK(read_bool(j, "padding_mask", a.padding_mask));
  FROST_CHECK(read_bool(j, "deterministic_algorithm", a.deterministic_algorithm));
  FROST_CHECK(read_enum(j, "diagonal_alignment", a.diagonal_alignment));
  FROST_CHECK(read_opt_int(j, "left_bound", a.left_bound));
  return read_opt_int(j, "right_bound", a.right_bound);
}

void SdpaFp8BackwardNode::attributes_to_json(json& j) const { fp8_backward_attributes_to_json(attr, j); }

error_t SdpaFp8BackwardNode::attributes_from_json(const json& j) { return fp8_backward_attributes_from_json(attr, j); }

namespace {

const OpRegistrar kRegister(std::string(SdpaFp8BackwardNode::kTag),
                            [] { return std::make_unique<SdpaFp8BackwardNode>(); });

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 7> Graph::sdpa_fp8_backward(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr o, TensorPtr dO,
                                                  TensorPtr stats, TensorPtr descale_q, TensorPtr descale_k,
                                                  TensorPtr descale_v, TensorPtr descale_o, TensorPtr descale_dO,
                                                  TensorPtr descale_s, TensorPtr descale_dP, TensorPtr scale_s,
                                                  TensorPtr scale_dQ, TensorPtr scale_dK, TensorPtr scale_dV,
                                                  TensorPtr scale_dP, SDPA_fp8_backward_attributes attr) {
  using detail::SdpaFp8BackwardNode;
  using I = SdpaFp8BackwardInput;
  using O = SdpaFp8BackwardOutput;
  auto& g = state();
  detail::default_name(g, attr, SdpaFp8BackwardNode::kTag);
  const std::tuple<const char*, I, TensorPtr*> bound[18] = {{"Q", I::Q, &q},
                                                            {"K", I::K, &k},
                                                            {"V", I::V, &v},
                                                            {"O", I::O, &o},
                                                            {"DO", I::DO, &dO},
                                                            {"STATS", I::STATS, &stats},
                                                            {"DESCALE_Q", I::DESCALE_Q, &descale_q},
                                                            {"DESCALE_K", I::DESCALE_K, &descale_k},
                                                            {"DESCALE_V", I::DESCALE_V, &descale_v},
                                                            {"DESCALE_O", I::DESCALE_O, &descale_o},
                                                            {"DESCALE_DO", I::DESCALE_DO, &descale_dO},
                                                            {"DESCALE_S", I::DESCALE_S, &descale_s},
                                                            {"DESCALE_DP", I::DESCALE_DP, &descale_dP},
                                                            {"SCALE_S", I::SCALE_S, &scale_s},
                                                            {"SCALE_DQ", I::SCALE_DQ, &scale_dQ},
                                                            {"SCALE_DK", I::SCALE_DK, &scale_dK},
                                                            {"SCALE_DV", I::SCALE_DV, &scale_dV},
                                                            {"SCALE_DP", I::SCALE_DP, &scale_dP}};
  for (const auto& [port, e, t] : bound) {
    detail::require_inputs(g, attr.name, SdpaFp8BackwardNode::kTag, {{port, t}});
    attr.inputs[e] = std::move(*t);
  }
  const std::pair<O, const char*> made[7] = {{O::DQ, "DQ"},           {O::DK, "DK"},           {O::DV, "DV"},
                                             {O::AMAX_DQ, "AMAX_DQ"}, {O::AMAX_DK, "AMAX_DK"}, {O::AMAX_DV, "AMAX_DV"},
                                             {O::AMAX_DP, "AMAX_DP"}};
  std::array<TensorPtr, 7> outs;
  for (size_t i = 0; i < 7; ++i)
    outs[i] = attr.outputs[made[i].first] = detail::make_output(g, attr.name, made[i].second);
  detail::add_node(g, std::make_unique<SdpaFp8BackwardNode>(std::move(attr)));
  return outs;
}

}  // namespace frost::graph
