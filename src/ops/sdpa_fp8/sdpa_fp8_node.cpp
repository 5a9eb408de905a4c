#include "ops/sdpa_fp8/sdpa_fp8_node.h"

#include <algorithm>
#include <cstdio>

#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"

namespace frost::detail {

using graph::SdpaFp8Input;
using graph::SdpaFp8Output;

namespace {

bool is_fp8(DataType_t t) { return t == DataType_t::FP8_E4M3 || t == DataType_t::FP8_E5M2; }

bool is_o_type(DataType_t t) {
  return is_fp8(t) || t == DataType_t::HALF || t == DataType_t::BFLOAT16 || t == DataType_t::FLOAT;
}

// A FLOAT scalar: dims [1, 1, 1, 1] (or a [1] pass-by-value scalar).
error_t check_scalar(const Node& node, const char* port, const TensorPtr& t, bool required) {
  if (!t) {
    if (!required) return {};
    return attr_error(node, port, "null", "this scale is required", error_code_t::ATTRIBUTE_NOT_SET);
  }
  const auto& d = t->get_dim();
  const bool all_ones = std::all_of(d.begin(), d.end(), [](int64_t e) { return e == 1; });
  if (!all_ones || (d.size() != 1 && d.size() != 4))
    return attr_error(node, port, describe(t), "must be a scalar of dims [1, 1, 1, 1] (or [1])");
  if (t->get_data_type() != DataType_t::FLOAT) return attr_error(node, port, describe(t), "must be FLOAT");
  return {};
}

error_t infer_scalar_output(const Node& node, const char* port, const TensorPtr& t) {
  const std::vector<int64_t> dims{1, 1, 1, 1};
  if (t->get_dim().empty()) t->set_dim(dims);
  if (t->get_stride().empty()) t->set_stride(packed_strides(dims));
  if (t->get_data_type() == DataType_t::NOT_SET) t->set_data_type(DataType_t::FLOAT);
  if (t->get_dim() != dims || t->get_data_type() != DataType_t::FLOAT)
    return attr_error(node, port, describe(t), "an amax is FLOAT [1, 1, 1, 1]", error_code_t::SHAPE_DEDUCTION_FAILED);
  return {};
}

}  // namespace

error_t SdpaFp8Node::validate_qkv() const {
  const std::pair<const char*, TensorPtr> qkv[3] = {
      {"Q", in(SdpaFp8Input::Q)}, {"K", in(SdpaFp8Input::K)}, {"V", in(SdpaFp8Input::V)}};
  for (const auto& [port, t] : qkv) {
    if (!t) return attr_error(*this, port, "null", "Q, K and V are required", error_code_t::ATTRIBUTE_NOT_SET);
    if (t->get_dim().size() != 4)
      return attr_error(*this, std::string(port) + ".dim", dims_string(t->get_dim()), "must have rank 4 [b, h, s, d]");
    if (!is_fp8(t->get_data_type()))
      return attr_error(*this, std::string(port) + ".data_type", to_string(t->get_data_type()),
                        "must be FP8_E4M3 or FP8_E5M2 (plain floating types use sdpa)");
  }
  const auto& q = in(SdpaFp8Input::Q)->get_dim();
  const auto& k = in(SdpaFp8Input::K)->get_dim();
  const auto& v = in(SdpaFp8Input::V)->get_dim();
  if (k[0] != q[0] || v[0] != q[0])
    return attr_error(*this, k[0] != q[0] ? "K.dim" : "V.dim", dims_string(k[0] != q[0] ? k : v),
                      "batch must equal Q's " + std::to_string(q[0]));
  if (q[1] % k[1] != 0 || q[1] % v[1] != 0)
    return attr_error(*this, q[1] % k[1] != 0 ? "K.dim" : "V.dim", dims_string(q[1] % k[1] != 0 ? k : v),
                      "heads must divide Q's " + std::to_string(q[1]) + " heads");
  if (k[3] != q[3])
    return attr_error(*this, "K.dim", dims_string(k), "head dim must equal Q's " + std::to_string(q[3]));
  if (v[2] != k[2])
    return attr_error(*this, "V.dim", dims_string(v), "sequence length must equal K's " + std::to_string(k[2]));
  return {};
}

error_t SdpaFp8Node::validate_scalars_and_masks() const {
  using I = SdpaFp8Input;
  const std::pair<const char*, I> scales[6] = {{"DESCALE_Q", I::DESCALE_Q}, {"DESCALE_K", I::DESCALE_K},
                                               {"DESCALE_V", I::DESCALE_V}, {"DESCALE_S", I::DESCALE_S},
                                               {"SCALE_S", I::SCALE_S},     {"SCALE_O", I::SCALE_O}};
  for (const auto& [port, e] : scales) FROST_CHECK(check_scalar(*this, port, in(e), true));
  FROST_CHECK(check_scalar(*this, "ATTN_SCALE", in(I::ATTN_SCALE), false));
  if (in(I::ATTN_SCALE) && attr.attn_scale_value) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", static_cast<double>(*attr.attn_scale_value));
    return attr_error(*this, "attn_scale", value, "set either a float or a tensor ATTN_SCALE, not both");
  }
  const int64_t b = in(I::Q)->get_dim()[0];
  const std::pair<const char*, TensorPtr> lens[2] = {{"SEQ_LEN_Q", in(I::SEQ_LEN_Q)},
                                                     {"SEQ_LEN_KV", in(I::SEQ_LEN_KV)}};
  for (const auto& [port, t] : lens) {
    if (attr.padding_mask && !t)
      return attr_error(*this, port, "null", "padding_mask needs both SEQ_LEN_Q and SEQ_LEN_KV",
                        error_code_t::ATTRIBUTE_NOT_SET);
    if (!t) continue;
    if (!attr.padding_mask)
      return attr_error(*this, port, describe(t), "sequence lengths are read only with padding_mask on");
    if (t->get_dim() != std::vector<int64_t>{b, 1, 1, 1} || t->get_data_type() != DataType_t::INT32)
      return attr_error(*this, port, describe(t), "must be INT32 [" + std::to_string(b) + ", 1, 1, 1]");
  }
  if (attr.left_bound && *attr.left_bound < 0)
    return attr_error(*this, "diagonal_band_left_bound", std::to_string(*attr.left_bound), "must be non-negative");
  if (attr.right_bound && *attr.right_bound < 0)
    return attr_error(*this, "diagonal_band_right_bound", std::to_string(*attr.right_bound), "must be non-negative");
  return {};
}

error_t SdpaFp8Node::infer_outputs(const GraphContext& ctx) {
  const TensorPtr q = in(SdpaFp8Input::Q);
  const auto& qd = q->get_dim();
  const TensorPtr o = out(SdpaFp8Output::O);
  const std::vector<int64_t> o_dims{qd[0], qd[1], qd[2], in(SdpaFp8Input::V)->get_dim()[3]};
  if (o->get_dim().empty()) o->set_dim(o_dims);
  if (o->get_dim() != o_dims)
    return attr_error(*this, "O.dim", dims_string(o->get_dim()), "Q, K and V give " + dims_string(o_dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (o->get_stride().empty()) o->set_stride(strides_like(o_dims, q->get_stride()));
  // O follows the graph's io (or intermediate) type; with none declared, it takes Q's FP8 type.
  const DataType_t context_type = o->get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
  if (o->get_data_type() == DataType_t::NOT_SET && context_type == DataType_t::NOT_SET)
    o->set_data_type(q->get_data_type());
  const DataType_t o_type = o->get_data_type() == DataType_t::NOT_SET ? context_type : o->get_data_type();
  if (!is_o_type(o_type))
    return attr_error(*this, "O.data_type", to_string(o_type), "must be FP8_E4M3, FP8_E5M2, HALF, BFLOAT16 or FLOAT");
  FROST_CHECK(infer_scalar_output(*this, "AMAX_S", out(SdpaFp8Output::AMAX_S)));
  FROST_CHECK(infer_scalar_output(*this, "AMAX_O", out(SdpaFp8Output::AMAX_O)));

  const TensorPtr stats = out(SdpaFp8Output::STATS);
  if (!attr.generate_stats) {
    if (stats) return attr_error(*this, "STATS", describe(stats), "is bound but generate_stats is off");
    return {};
  }
  if (!stats)
    return attr_error(*this, "STATS", "null", "generate_stats needs a STATS output", error_code_t::ATTRIBUTE_NOT_SET);
  const std::vector<int64_t> stats_dims{qd[0], qd[1], qd[2], 1};
  if (stats->get_dim().empty()) stats->set_dim(stats_dims);
  if (stats->get_stride().empty()) stats->set_stride(packed_strides(stats_dims));
  if (stats->get_data_type() == DataType_t::NOT_SET) stats->set_data_type(DataType_t::FLOAT);
  if (stats->get_dim() != stats_dims || stats->get_data_type() != DataType_t::FLOAT)
    return attr_error(*this, "STATS", describe(stats), "softmax statistics are FLOAT " + dims_string(stats_dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  return {};
}

error_t SdpaFp8Node::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"O", "AMAX_S", "AMAX_O"}));
  FROST_CHECK(validate_qkv());
  FROST_CHECK(validate_scalars_and_masks());
  return infer_outputs(ctx);
}

void SdpaFp8Node::attributes_to_json(json& j) const {
  j["generate_stats"] = attr.generate_stats;
  write_opt(j, "attn_scale_value", attr.attn_scale_value);
  j["padding_mask"] = attr.padding_mask;
  j["diagonal_alignment"] = to_string(attr.diagonal_alignment);
  write_opt(j, "left_bound", attr.left_bound);
  write_opt(j, "right_bound", attr.right_bound);
}

error_t SdpaFp8Node::attributes_from_json(const json& j) {
  FROST_CHECK(read_bool(j, "generate_stats", attr.generate_stats));
  FROST_CHECK(read_opt_float(j, "attn_scale_value", attr.attn_scale_value));
  FROST_CHECK(read_bool(j, "padding_mask", attr.padding_mask));
  FROST_CHECK(read_enum(j, "diagonal_alignment", attr.diagonal_alignment));
  FROST_CHECK(read_opt_int(j, "left_bound", attr.left_bound));
  return read_opt_int(j, "right_bound", attr.right_bound);
}

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
