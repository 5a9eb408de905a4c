#include "ops/sdpa_fp8/sdpa_fp8_node.h"

#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"
#include "ops/common/fp8_scaling.h"
#include "ops/sdpa/sdpa_common_checks.h"
#include "ops/sdpa_fp8/fp8_attention_checks.h"

namespace frost::detail {

using graph::SdpaFp8Input;
using graph::SdpaFp8Output;

error_t SdpaFp8Node::validate_qkv() const {
  return check_attention_operands(*this, in(SdpaFp8Input::Q), in(SdpaFp8Input::K), in(SdpaFp8Input::V), is_fp8,
                                  "FP8_E4M3 or FP8_E5M2 (plain floating types use sdpa)");
}

error_t SdpaFp8Node::validate_scalars_and_masks() const {
  using I = SdpaFp8Input;
  const std::pair<const char*, I> scales[6] = {{"DESCALE_Q", I::DESCALE_Q}, {"DESCALE_K", I::DESCALE_K},
                                               {"DESCALE_V", I::DESCALE_V}, {"DESCALE_S", I::DESCALE_S},
                                               {"SCALE_S", I::SCALE_S},     {"SCALE_O", I::SCALE_O}};
  for (const auto& [port, e] : scales) FROST_CHECK(check_scale_scalar(*this, port, in(e), true));
  FROST_CHECK(check_attn_scale(*this, in(I::ATTN_SCALE), attr.attn_scale_value));
  return check_attention_mask(*this, attr.padding_mask, in(I::SEQ_LEN_Q), in(I::SEQ_LEN_KV),
                              in(I::Q)->get_dim()[0], attr.left_bound, attr.right_bound);
}

error_t SdpaFp8Node::infer_outputs(const GraphContext& ctx) {
  const TensorPtr q = in(SdpaFp8Input::Q);
  const auto& qd = q->get_dim();
  // O follows the graph's io (or intermediate) type; with none declared, it takes Q's FP8 type.
  FROST_CHECK(infer_output_like(*this, "O", out(SdpaFp8Output::O),
                                {qd[0], qd[1], qd[2], in(SdpaFp8Input::V)->get_dim()[3]}, q->get_stride(),
                                q->get_data_type(), ctx, is_fp8_attention_output_type,
                                "FP8_E4M3, FP8_E5M2, HALF, BFLOAT16 or FLOAT"));
  FROST_CHECK(infer_amax_output(*this, "AMAX_S", out(SdpaFp8Output::AMAX_S)));
  FROST_CHECK(infer_amax_output(*this, "AMAX_O", out(SdpaFp8Output::AMAX_O)));

  return infer_stats_output(*this, attr.generate_stats, out(SdpaFp8Output::STATS), qd);
}

error_t SdpaFp8Node::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"O", "AMAX_S", "AMAX_O"}));
  FROST_CHECK(validate_qkv());
  FROST_CHECK(validate_scalars_and_masks());
  return infer_outputs(ctx);
}

void fp8_attributes_to_json(const graph::SDPA_fp8_attributes& a, json& j) {
  j["generate_stats"] = a.generate_stats;
  write_opt(j, "attn_scale_value", a.attn_scale_value);
  j["padding_mask"] = a.padding_mask;
  j["diagonal_alignment"] = to_string(a.diagonal_alignment);
  write_opt(j, "left_bound", a.left_bound);
  write_opt(j, "right_bound", a.right_bound);
}

error_t fp8_attributes_from_json(graph::SDPA_fp8_attributes& a, const json& j) {
  FROST_CHECK(read_bool(j, "generate_stats", a.generate_stats));
  FROST_CHECK(read_opt_float(j, "attn_scale_value", a.attn_scale_value));
  FROST_CHECK(read_bool(j, "padding_mask", a.padding_mask));
  FROST_CHECK(read_enum(j, "diagonal_alignment", a.diagonal_alignment));
  FROST_CHECK(read_opt_int(j, "left_bound", a.left_bound));
  return read_opt_int(j, "right_bound", a.right_bound);
}

void SdpaFp8Node::attributes_to_json(json& j) const { fp8_attributes_to_json(attr, j); }

error_t SdpaFp8Node::attributes_from_json(const json& j) { return fp8_attributes_from_json(attr, j); }

namespace {

const OpRegistrar kRegister(std::string(SdpaFp8Node::kTag), [] { return std::make_unique<SdpaFp8Node>(); });

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 4> Graph::sdpa_fp8(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr descale_q,
                                         TensorPtr descale_k, TensorPtr descale_v, TensorPtr descale_s,
                                         TensorPtr scale_s, TensorPtr scale_o, SDPA_fp8_attributes attr) {
  using detail::SdpaFp8Node;
  using I = SdpaFp8Input;
  auto& g = state();
  detail::default_name(g, attr, SdpaFp8Node::kTag);
  detail::require_inputs(g, attr.name, SdpaFp8Node::kTag,
                         {{"Q", &q},
                          {"K", &k},
                          {"V", &v},
                          {"DESCALE_Q", &descale_q},
                          {"DESCALE_K", &descale_k},
                          {"DESCALE_V", &descale_v},
                          {"DESCALE_S", &descale_s},
                          {"SCALE_S", &scale_s},
                          {"SCALE_O", &scale_o}});
  const std::pair<I, TensorPtr*> bound[9] = {{I::Q, &q},
                                             {I::K, &k},
                                             {I::V, &v},
                                             {I::DESCALE_Q, &descale_q},
                                             {I::DESCALE_K, &descale_k},
                                             {I::DESCALE_V, &descale_v},
                                             {I::DESCALE_S, &descale_s},
                                             {I::SCALE_S, &scale_s},
                                             {I::SCALE_O, &scale_o}};
  for (const auto& [port, t] : bound) attr.inputs[port] = std::move(*t);
  TensorPtr o = detail::make_output(g, attr.name, "O");
  TensorPtr stats = attr.generate_stats ? detail::make_output(g, attr.name, "STATS") : nullptr;
  TensorPtr amax_s = detail::make_output(g, attr.name, "AMAX_S");
  TensorPtr amax_o = detail::make_output(g, attr.name, "AMAX_O");
  attr.outputs[SdpaFp8Output::O] = o;
  if (stats) attr.outputs[SdpaFp8Output::STATS] = stats;
  attr.outputs[SdpaFp8Output::AMAX_S] = amax_s;
  attr.outputs[SdpaFp8Output::AMAX_O] = amax_o;
  detail::add_node(g, std::make_unique<SdpaFp8Node>(std::move(attr)));
  return {o, stats, amax_s, amax_o};
}

}  // namespace frost::graph
