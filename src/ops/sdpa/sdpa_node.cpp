#include "ops/sdpa/sdpa_node.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/builder_util.h"
#include "ops/sdpa/sdpa_common_checks.h"

namespace frost::detail {

using graph::AttentionImplementation_t;
using graph::SdpaInput;
using graph::SdpaOutput;

namespace {

// Q, K, V and O hold real values in one of the plain floating types (FP8 attention is sdpa_fp8).
std::string type_name(DataType_t dt) { return std::string(to_string(dt)); }

}  // namespace

std::vector<double> alibi_slopes(int64_t heads) {
  int64_t n = 1;
  while (n * 2 <= heads) n *= 2;
  std::vector<double> s(static_cast<size_t>(heads));
  for (int64_t h = 0; h < heads; ++h) {
    // Beyond the largest power of two n, heads interleave into the 2n-head sequence (its odd terms).
    const double exponent = h < n ? -8.0 * static_cast<double>(h + 1) / static_cast<double>(n)
                                  : -4.0 * static_cast<double>(2 * (h - n) + 1) / static_cast<double>(n);
    s[static_cast<size_t>(h)] = std::exp2(exponent);
  }
  return s;
}

error_t SdpaNode::validate_qkv() const {
  const std::pair<const char*, TensorPtr> qkv[3] = {
      {"Q", in(SdpaInput::Q)}, {"K", in(SdpaInput::K)}, {"V", in(SdpaInput::V)}};
  for (const auto& [port, t] : qkv) {
    if (!t) return attr_error(*this, port, "null", "Q, K and V are required", error_code_t::ATTRIBUTE_NOT_SET);
    if (t->get_dim().size() != 4)
      return attr_error(*this, std::string(port) + ".dim", dims_string(t->get_dim()), "must have rank 4 [b, h, s, d]");
    if (!is_attention_type(t->get_data_type()))
      return attr_error(*this, std::string(port) + ".data_type", type_name(t->get_data_type()),
                        "must be FLOAT, HALF, BFLOAT16 or DOUBLE");
  }
  const auto& q = in(SdpaInput::Q)->get_dim();
  const auto& k = in(SdpaInput::K)->get_dim();
  const auto& v = in(SdpaInput::V)->get_dim();
  // Paged K and V are page pools: their first extent counts pages, their third is the page size.
  const bool paged = in(SdpaInput::PAGE_TABLE_K) || in(SdpaInput::PAGE_TABLE_V);
  if (!paged && k[0] != q[0])
    return attr_error(*this, "K.dim", dims_string(k), "batch must equal Q's " + std::to_string(q[0]));
  if (!paged && v[0] != q[0])
    return attr_error(*this, "V.dim", dims_string(v), "batch must equal Q's " + std::to_string(q[0]));
  if (q[1] % k[1] != 0)
    return attr_error(*this, "K.dim", dims_string(k), "heads must divide Q's " + std::to_string(q[1]) + " heads");
  if (q[1] % v[1] != 0)
    return attr_error(*this, "V.dim", dims_string(v), "heads must divide Q's " + std::to_string(q[1]) + " heads");
  if (k[3] != q[3])
    return attr_error(*this, "K.dim", dims_string(k), "head dim must equal Q's " + std::to_string(q[3]));
  if (!paged && v[2] != k[2])
    return attr_error(*this, "V.dim", dims_string(v), "sequence length must equal K's " + std::to_string(k[2]));
  return {};
}

error_t SdpaNode::validate_optional_inputs() const {
  const auto& q = in(SdpaInput::Q)->get_dim();
  const int64_t b = q[0], h = q[1], s_q = q[2], s_kv = sdpa_logical_s_kv(attr);
  FROST_CHECK(check_attn_scale(*this, in(SdpaInput::ATTN_SCALE), attr.attn_scale_value));
  FROST_CHECK(check_attn_bias(*this, in(SdpaInput::BIAS), b, h, s_q, s_kv));
  FROST_CHECK(check_attn_lengths(
      *this, attr.padding_mask, b, {"SEQ_LEN_Q", in(SdpaInput::SEQ_LEN_Q), "CU_SEQ_LEN_Q", in(SdpaInput::CU_SEQ_LEN_Q)},
      {"SEQ_LEN_KV", in(SdpaInput::SEQ_LEN_KV), "CU_SEQ_LEN_KV", in(SdpaInput::CU_SEQ_LEN_KV)}));
  if (const TensorPtr sink = in(SdpaInput::SINK_TOKEN)) {
    if (sink->get_dim() != std::vector<int64_t>{1, h, 1, 1} || sink->get_data_type() != DataType_t::FLOAT)
      return attr_error(*this, "SINK_TOKEN", describe(sink), "must be FLOAT [1, " + std::to_string(h) + ", 1, 1]");
  }
  if (attr.left_bound && *attr.left_bound < 0)
    return attr_error(*this, "diagonal_band_left_bound", std::to_string(*attr.left_bound), "must be non-negative");
  if (attr.right_bound && *attr.right_bound < 0)
    return attr_error(*this, "diagonal_band_right_bound", std::to_string(*attr.right_bound), "must be non-negative");
  return {};
}

error_t SdpaNode::infer_outputs(const GraphContext& ctx) {
  const TensorPtr q = in(SdpaInput::Q);
  const auto& qd = q->get_dim();
  const int64_t d_v = in(SdpaInput::V)->get_dim()[3];
  const TensorPtr o = out(SdpaOutput::O);
  if (!o) return attr_error(*this, "O", "null", "the output O is required", error_code_t::ATTRIBUTE_NOT_SET);
  const std::vector<int64_t> o_dims{qd[0], qd[1], qd[2], d_v};
  if (o->get_dim().empty()) o->set_dim(o_dims);
  if (o->get_dim() != o_dims)
    return attr_error(*this, "O.dim", dims_string(o->get_dim()), "Q, K and V give " + dims_string(o_dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (o->get_stride().empty()) o->set_stride(strides_like(o_dims, q->get_stride()));
  // O follows the graph's io (or intermediate) type; with none declared, it takes Q's type.
  const DataType_t context_type = o->get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
  if (o->get_data_type() == DataType_t::NOT_SET && context_type == DataType_t::NOT_SET)
    o->set_data_type(q->get_data_type());
  const DataType_t o_type = o->get_data_type() == DataType_t::NOT_SET ? context_type : o->get_data_type();
  if (!is_attention_type(o_type))
    return attr_error(*this, "O.data_type", type_name(o_type), "must be FLOAT, HALF, BFLOAT16 or DOUBLE");

  const TensorPtr stats = out(SdpaOutput::STATS);
  if (!attr.generate_stats) {
    if (stats) return attr_error(*this, "STATS", describe(stats), "is bound but generate_stats is off");
    return {};
  }
  if (!stats)
    return attr_error(*this, "STATS", "null", "generate_stats needs a STATS output", error_code_t::ATTRIBUTE_NOT_SET);
  const std::vector<int64_t> stats_dims{qd[0], qd[1], qd[2], 1};
  if (stats->get_dim().empty()) stats->set_dim(stats_dims);
  if (stats->get_dim() != stats_dims)
    return attr_error(*this, "STATS.dim", dims_string(stats->get_dim()), "Q gives " + dims_string(stats_dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (stats->get_data_type() == DataType_t::NOT_SET) stats->set_data_type(DataType_t::FLOAT);
  if (stats->get_data_type() != DataType_t::FLOAT)
    return attr_error(*this, "STATS.data_type", type_name(stats->get_data_type()), "softmax statistics are FLOAT");
  return {};
}

error_t SdpaNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"O"}));
  FROST_CHECK(validate_qkv());
  FROST_CHECK(validate_layout_inputs());
  FROST_CHECK(validate_optional_inputs());
  FROST_CHECK(validate_mask_inputs());
  FROST_CHECK(infer_outputs(ctx));
  return validate_output_layout();
}

void SdpaNode::attributes_to_json(json& j) const {
  j["generate_stats"] = attr.generate_stats;
  write_opt(j, "attn_scale_value", attr.attn_scale_value);
  j["alibi_mask"] = attr.alibi_mask;
  j["padding_mask"] = attr.padding_mask;
  j["stats_use_log2"] = attr.stats_use_log2;
  j["diagonal_alignment"] = to_string(attr.diagonal_alignment);
  write_opt(j, "left_bound", attr.left_bound);
  write_opt(j, "right_bound", attr.right_bound);
  j["implementation"] = to_string(attr.implementation);
  write_opt(j, "max_total_seq_len_q", attr.max_total_seq_len_q);
  write_opt(j, "max_total_seq_len_kv", attr.max_total_seq_len_kv);
  write_opt(j, "paged_attention_max_seq_len_kv", attr.paged_attention_max_seq_len_kv);
  write_opt(j, "dropout_probability", attr.dropout_probability);
  j["block_mask_tile_q"] = attr.block_mask_tile_q;
  j["block_mask_tile_kv"] = attr.block_mask_tile_kv;
}

error_t SdpaNode::attributes_from_json(const json& j) {
  FROST_CHECK(read_bool(j, "generate_stats", attr.generate_stats));
  FROST_CHECK(read_opt_float(j, "attn_scale_value", attr.attn_scale_value));
  FROST_CHECK(read_bool(j, "alibi_mask", attr.alibi_mask));
  FROST_CHECK(read_bool(j, "padding_mask", attr.padding_mask));
  FROST_CHECK(read_bool(j, "stats_use_log2", attr.stats_use_log2));
  FROST_CHECK(read_enum(j, "diagonal_alignment", attr.diagonal_alignment));
  FROST_CHECK(read_opt_int(j, "left_bound", attr.left_bound));
  FROST_CHECK(read_opt_int(j, "right_bound", attr.right_bound));
  FROST_CHECK(read_opt_int(j, "max_total_seq_len_q", attr.max_total_seq_len_q));
  FROST_CHECK(read_opt_int(j, "max_total_seq_len_kv", attr.max_total_seq_len_kv));
  FROST_CHECK(read_opt_int(j, "paged_attention_max_seq_len_kv", attr.paged_attention_max_seq_len_kv));
  FROST_CHECK(read_opt_float(j, "dropout_probability", attr.dropout_probability));
  FROST_CHECK(read_int(j, "block_mask_tile_q", attr.block_mask_tile_q));
  FROST_CHECK(read_int(j, "block_mask_tile_kv", attr.block_mask_tile_kv));
  FROST_CHECK(read_enum(j, "implementation", attr.implementation));
  return {};
}

namespace {

const OpRegistrar kRegister(std::string(SdpaNode::kTag), [] { return std::make_unique<SdpaNode>(); });

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 2> Graph::sdpa(TensorPtr q, TensorPtr k, TensorPtr v, SDPA_attributes attr) {
  using detail::SdpaNode;
  auto& g = state();
  detail::default_name(g, attr, SdpaNode::kTag);
  detail::require_inputs(g, attr.name, SdpaNode::kTag, {{"Q", &q}, {"K", &k}, {"V", &v}});
  attr.inputs[SdpaInput::Q] = std::move(q);
  attr.inputs[SdpaInput::K] = std::move(k);
  attr.inputs[SdpaInput::V] = std::move(v);
  TensorPtr o = detail::make_output(g, attr.name, "O");
  TensorPtr stats = attr.generate_stats ? detail::make_output(g, attr.name, "STATS") : nullptr;
  attr.outputs[SdpaOutput::O] = o;
  if (stats) attr.outputs[SdpaOutput::STATS] = stats;
  detail::add_node(g, std::make_unique<SdpaNode>(std::move(attr)));
  return {o, stats};
}

}  // namespace frost::graph
