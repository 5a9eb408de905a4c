#include "ops/sdpa_mxfp8/sdpa_mxfp8_nodes.h"

#include <tuple>

#include "ops/common/builder_util.h"
#include "ops/common/fp8_scaling.h"
#include "ops/sdpa/sdpa_common_checks.h"
#include "ops/sdpa_fp8/fp8_attention_checks.h"
#include "ops/sdpa_fp8/sdpa_fp8_backward_node.h"
#include "ops/sdpa_fp8/sdpa_fp8_node.h"

namespace frost::detail {

using FwdIn = graph::SdpaFp8Input;
using FwdOut = graph::SdpaFp8Output;
using BwdIn = graph::SdpaFp8BackwardInput;
using BwdOut = graph::SdpaFp8BackwardOutput;

namespace {

constexpr const char* kFp8 = "FP8_E4M3 or FP8_E5M2";
constexpr const char* kOutputTypes = "FP8_E4M3, FP8_E5M2, HALF, BFLOAT16 or FLOAT";
constexpr const char* kWideTypes = "HALF, BFLOAT16 or FLOAT";

bool is_wide_type(DataType_t t) { return t == DataType_t::HALF || t == DataType_t::BFLOAT16 || t == DataType_t::FLOAT; }

int64_t blocks(int64_t extent) { return (extent + kMxBlock - 1) / kMxBlock; }

}  // namespace

error_t check_mx_scale(const Node& node, const char* port, const TensorPtr& t, int64_t batch, int64_t heads,
                       int64_t rows, int64_t cols) {
  if (!t) return attr_error(node, port, "null", "the block scales are required", error_code_t::ATTRIBUTE_NOT_SET);
  if (t->get_data_type() != DataType_t::FP8_E8M0)
    return attr_error(node, std::string(port) + ".data_type", to_string(t->get_data_type()),
                      "MXFP8 block scales are FP8_E8M0 (per-tensor FLOAT descales go to sdpa_fp8)");
  const auto& d = t->get_dim();
  if (d.size() != 4 || d[0] != batch || d[1] != heads || d[2] < rows || d[3] < cols)
    return attr_error(node, std::string(port) + ".dim", dims_string(d),
                      "must be [" + std::to_string(batch) + ", " + std::to_string(heads) + ", >= " +
                          std::to_string(rows) + ", >= " + std::to_string(cols) + "] (one scale per 32-element block)");
  return {};
}

error_t SdpaMxfp8Node::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"O", "AMAX_O"}));
  const TensorPtr q = in(FwdIn::Q), k = in(FwdIn::K), v = in(FwdIn::V);
  FROST_CHECK(check_attention_operands(*this, q, k, v, is_fp8, kFp8));
  const auto& qd = q->get_dim();
  const auto& kd = k->get_dim();
  const auto& vd = v->get_dim();
  FROST_CHECK(check_mx_scale(*this, "DESCALE_Q", in(FwdIn::DESCALE_Q), qd[0], qd[1], qd[2], blocks(qd[3])));
  FROST_CHECK(check_mx_scale(*this, "DESCALE_K", in(FwdIn::DESCALE_K), kd[0], kd[1], kd[2], blocks(kd[3])));
  FROST_CHECK(check_mx_scale(*this, "DESCALE_V", in(FwdIn::DESCALE_V), vd[0], vd[1], blocks(vd[2]), vd[3]));
  FROST_CHECK(check_attn_scale(*this, in(FwdIn::ATTN_SCALE), attr.attn_scale_value));
  FROST_CHECK(check_attention_mask(*this, attr.padding_mask, in(FwdIn::SEQ_LEN_Q), in(FwdIn::SEQ_LEN_KV), qd[0],
                                   attr.left_bound, attr.right_bound));
  // No scale_o to bring O into an FP8 range: an unset O type defaults to BFLOAT16.
  FROST_CHECK(infer_output_like(*this, "O", out(FwdOut::O), {qd[0], qd[1], qd[2], vd[3]}, q->get_stride(),
                                DataType_t::BFLOAT16, ctx, is_fp8_attention_output_type, kOutputTypes));
  FROST_CHECK(infer_amax_output(*this, "AMAX_O", out(FwdOut::AMAX_O)));
  return infer_stats_output(*this, attr.generate_stats, out(FwdOut::STATS), qd);
}

void SdpaMxfp8Node::attributes_to_json(json& j) const { fp8_attributes_to_json(attr, j); }

error_t SdpaMxfp8Node::attributes_from_json(const json& j) { return fp8_attributes_from_json(attr, j); }

error_t SdpaMxfp8BackwardNode::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"DQ", "DK", "DV", "AMAX_DQ", "AMAX_DK", "AMAX_DV"}));
  const TensorPtr q = in(BwdIn::Q), k = in(BwdIn::K), v = in(BwdIn::V);
  FROST_CHECK(check_attention_operands(*this, q, k, v, is_fp8, kFp8));
  const auto& qd = q->get_dim();
  const auto& kd = k->get_dim();
  const auto& vd = v->get_dim();
  const std::vector<int64_t> o_dims{qd[0], qd[1], qd[2], vd[3]};
  FROST_CHECK(check_operand(*this, "Q_T", in(BwdIn::Q_T), qd, is_fp8, kFp8));
  FROST_CHECK(check_operand(*this, "K_T", in(BwdIn::K_T), kd, is_fp8, kFp8));
  FROST_CHECK(check_operand(*this, "DO", in(BwdIn::DO), o_dims, is_fp8, kFp8));
  FROST_CHECK(check_operand(*this, "DO_T", in(BwdIn::DO_T), o_dims, is_fp8, kFp8));
  FROST_CHECK(check_operand(*this, "O", in(BwdIn::O), o_dims, is_wide_type, kWideTypes));
  FROST_CHECK(check_operand(*this, "DO_F16", in(BwdIn::DO_F16), o_dims, is_wide_type, kWideTypes));
  FROST_CHECK(check_operand(
      *this, "STATS", in(BwdIn::STATS), {qd[0], qd[1], qd[2], 1}, [](DataType_t t) { return t == DataType_t::FLOAT; },
      "FLOAT"));
  const std::tuple<const char*, BwdIn, const std::vector<int64_t>*, int64_t, int64_t> scales[7] = {
      {"DESCALE_Q", BwdIn::DESCALE_Q, &qd, qd[2], blocks(qd[3])},
      {"DESCALE_Q_T", BwdIn::DESCALE_Q_T, &qd, blocks(qd[2]), qd[3]},
      {"DESCALE_K", BwdIn::DESCALE_K, &kd, kd[2], blocks(kd[3])},
      {"DESCALE_K_T", BwdIn::DESCALE_K_T, &kd, blocks(kd[2]), kd[3]},
      {"DESCALE_V", BwdIn::DESCALE_V, &vd, blocks(vd[2]), vd[3]},
      {"DESCALE_DO", BwdIn::DESCALE_DO, &o_dims, o_dims[2], blocks(o_dims[3])},
      {"DESCALE_DO_T", BwdIn::DESCALE_DO_T, &o_dims, blocks(o_dims[2]), o_dims[3]}};
  for (const auto& [port, e, dims, rows, cols] : scales)
    FROST_CHECK(check_mx_scale(*this, port, in(e), (*dims)[0], (*dims)[1], rows, cols));
  FROST_CHECK(check_attn_scale(*this, in(BwdIn::ATTN_SCALE), attr.attn_scale_value));
  FROST_CHECK(check_attention_mask(*this, attr.padding_mask, in(BwdIn::SEQ_LEN_Q), in(BwdIn::SEQ_LEN_KV), qd[0],
                                   attr.left_bound, attr.right_bound));
  // Without per-tensor output scales the gradients default to the wide type of O.
  const DataType_t fallback = in(BwdIn::O)->get_data_type();
  const std::tuple<const char*, BwdOut, TensorPtr> grads[3] = {
      {"DQ", BwdOut::DQ, q}, {"DK", BwdOut::DK, k}, {"DV", BwdOut::DV, v}};
  for (const auto& [port, grad, operand] : grads)
    FROST_CHECK(infer_output_like(*this, port, out(grad), operand->get_dim(), operand->get_stride(), fallback, ctx,
                                  is_fp8_attention_output_type, kOutputTypes));
  const std::pair<const char*, BwdOut> amaxes[3] = {
      {"AMAX_DQ", BwdOut::AMAX_DQ}, {"AMAX_DK", BwdOut::AMAX_DK}, {"AMAX_DV", BwdOut::AMAX_DV}};
  for (const auto& [port, e] : amaxes) FROST_CHECK(infer_amax_output(*this, port, out(e)));
  return {};
}

void SdpaMxfp8BackwardNode::attributes_to_json(json& j) const { fp8_backward_attributes_to_json(attr, j); }

error_t SdpaMxfp8BackwardNode::attributes_from_json(const json& j) {
  return fp8_backward_attributes_from_json(attr, j);
}

namespace {

const OpRegistrar kForward(std::string(SdpaMxfp8Node::kTag), [] { return std::make_unique<SdpaMxfp8Node>(); });
const OpRegistrar kBackward(std::string(SdpaMxfp8BackwardNode::kTag),
                            [] { return std::make_unique<SdpaMxfp8BackwardNode>(); });

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 3> Graph::sdpa_mxfp8(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr descale_q,
                                           TensorPtr descale_k, TensorPtr descale_v, SDPA_fp8_attributes attr) {
  using detail::SdpaMxfp8Node;
  using I = SdpaFp8Input;
  auto& g = state();
  detail::default_name(g, attr, SdpaMxfp8Node::kTag);
  const std::tuple<const char*, I, TensorPtr*> bound[6] = {{"Q", I::Q, &q},
                                                           {"K", I::K, &k},
                                                           {"V", I::V, &v},
                                                           {"DESCALE_Q", I::DESCALE_Q, &descale_q},
                                                           {"DESCALE_K", I::DESCALE_K, &descale_k},
                                                           {"DESCALE_V", I::DESCALE_V, &descale_v}};
  for (const auto& [port, e, t] : bound) {
    detail::require_inputs(g, attr.name, SdpaMxfp8Node::kTag, {{port, t}});
    attr.inputs[e] = std::move(*t);
  }
  const TensorPtr o = attr.outputs[SdpaFp8Output::O] = detail::make_output(g, attr.name, "O");
  const TensorPtr stats = attr.generate_stats ? detail::make_output(g, attr.name, "STATS") : nullptr;
  if (stats) attr.outputs[SdpaFp8Output::STATS] = stats;
  const TensorPtr amax_o = attr.outputs[SdpaFp8Output::AMAX_O] = detail::make_output(g, attr.name, "AMAX_O");
  detail::add_node(g, std::make_unique<SdpaMxfp8Node>(std::move(attr)));
  return {o, stats, amax_o};
}

std::array<TensorPtr, 3> Graph::sdpa_fp8(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr descale_q,
                                         TensorPtr descale_k, TensorPtr descale_v, SDPA_fp8_attributes attr) {
  return sdpa_mxfp8(std::move(q), std::move(k), std::move(v), std::move(descale_q), std::move(descale_k),
                    std::move(descale_v), std::move(attr));
}

std::array<TensorPtr, 6> Graph::sdpa_mxfp8_backward(TensorPtr q, TensorPtr q_T, TensorPtr k, TensorPtr k_T, TensorPtr v,
                                                    TensorPtr o_f16, TensorPtr dO_f16, TensorPtr dO, TensorPtr dO_T,
                                                    TensorPtr stats, TensorPtr descale_q, TensorPtr descale_q_T,
                                                    TensorPtr descale_k, TensorPtr descale_k_T, TensorPtr descale_v,
                                                    TensorPtr descale_dO, TensorPtr descale_dO_T,
                                                    SDPA_fp8_backward_attributes attr) {
  using detail::SdpaMxfp8BackwardNode;
  using I = SdpaFp8BackwardInput;
  using O = SdpaFp8BackwardOutput;
  auto& g = state();
  detail::default_name(g, attr, SdpaMxfp8BackwardNode::kTag);
  const std::tuple<const char*, I, TensorPtr*> bound[17] = {{"Q", I::Q, &q},
                                                            {"Q_T", I::Q_T, &q_T},
                                                            {"K", I::K, &k},
                                                            {"K_T", I::K_T, &k_T},
                                                            {"V", I::V, &v},
                                                            {"O", I::O, &o_f16},
                                                            {"DO_F16", I::DO_F16, &dO_f16},
                                                            {"DO", I::DO, &dO},
                                                            {"DO_T", I::DO_T, &dO_T},
                                                            {"STATS", I::STATS, &stats},
                                                            {"DESCALE_Q", I::DESCALE_Q, &descale_q},
                                                            {"DESCALE_Q_T", I::DESCALE_Q_T, &descale_q_T},
                                                            {"DESCALE_K", I::DESCALE_K, &descale_k},
                                                            {"DESCALE_K_T", I::DESCALE_K_T, &descale_k_T},
                                                            {"DESCALE_V", I::DESCALE_V, &descale_v},
                                                            {"DESCALE_DO", I::DESCALE_DO, &descale_dO},
                                                            {"DESCALE_DO_T", I::DESCALE_DO_T, &descale_dO_T}};
  for (const auto& [port, e, t] : bound) {
    detail::require_inputs(g, attr.name, SdpaMxfp8BackwardNode::kTag, {{port, t}});
    attr.inputs[e] = std::move(*t);
  }
  const std::pair<O, const char*> made[6] = {{O::DQ, "DQ"},           {O::DK, "DK"},           {O::DV, "DV"},
                                             {O::AMAX_DQ, "AMAX_DQ"}, {O::AMAX_DK, "AMAX_DK"}, {O::AMAX_DV, "AMAX_DV"}};
  std::array<TensorPtr, 6> outs;
  for (size_t i = 0; i < 6; ++i)
    outs[i] = attr.outputs[made[i].first] = detail::make_output(g, attr.name, made[i].second);
  detail::add_node(g, std::make_unique<SdpaMxfp8BackwardNode>(std::move(attr)));
  return outs;
}

std::array<TensorPtr, 6> Graph::sdpa_fp8_backward(TensorPtr q, TensorPtr q_T, TensorPtr k, TensorPtr k_T, TensorPtr v,
                                                  TensorPtr o_f16, TensorPtr dO_f16, TensorPtr dO, TensorPtr dO_T,
                                                  TensorPtr stats, TensorPtr descale_q, TensorPtr descale_q_T,
                                                  TensorPtr descale_k, TensorPtr descale_k_T, TensorPtr descale_v,
                                                  TensorPtr descale_dO, TensorPtr descale_dO_T,
                                                  SDPA_fp8_backward_attributes attr) {
  return sdpa_mxfp8_backward(std::move(q), std::move(q_T), std::move(k), std::move(k_T), std::move(v), std::move(o_f16),
                             std::move(dO_f16), std::move(dO), std::move(dO_T), std::move(stats), std::move(descale_q),
                             std::move(descale_q_T), std::move(descale_k), std::move(descale_k_T), std::move(descale_v),
                             std::move(descale_dO), std::move(descale_dO_T), std::move(attr));
}

}  // namespace frost::graph
