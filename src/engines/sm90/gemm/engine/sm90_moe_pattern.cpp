#include "engines/sm90/gemm/engine/sm90_moe_pattern.h"

#include "ops/pointwise/pointwise_node.h"

namespace frost::detail {
namespace {

using graph::MoeGroupedMatmulMode_t;

bool to_index_type(const TensorPtr& t, sm90::IndexType& out) {
  if (!t) return true;
  if (t->get_data_type() == DataType_t::INT32) out = sm90::IndexType::INT32;
  else if (t->get_data_type() == DataType_t::INT64) out = sm90::IndexType::INT64;
  else return false;
  return true;
}

// The index tensors are [E, 1, 1] or [1, R, 1]: their values must be contiguous along the long axis.
bool index_contiguous(const TensorPtr& t) {
  if (!t) return true;
  const auto& d = t->get_dim();
  const auto& s = t->get_stride();
  return d[0] == 1 ? (d[1] == 1 || s[1] == 1) : s[0] == 1;
}

bool is_scalar(const TensorPtr& t) {
  for (int64_t d : t->get_dim())
    if (d != 1) return false;
  return true;
}

// The descale chain after an FP8 node: up to two MULs of the chain by FLOAT [1, 1, 1] device tensors.
std::string match_descales(const GraphState& g, MoePattern& out) {
  TensorPtr link = out.output;
  std::vector<TensorPtr> scales;
  for (size_t i = 1; i < g.nodes.size(); ++i) {
    const auto* pw = dynamic_cast<const PointwiseNode*>(g.nodes[i].get());
    const std::string at = "node '" + g.nodes[i]->name() + "': ";
    if (!pw || pw->attr.mode != PointwiseMode_t::MUL)
      return at + "only pointwise MULs by descale tensors may follow an FP8 MOE_GROUPED_MATMUL";
    if (i > 2) return at + "at most two descale MULs (token and weight)";
    if (!link->get_is_virtual() || link->get_data_type() != DataType_t::FLOAT)
      return "tensor '" + link->get_name() + "' must be virtual FLOAT: the kernel keeps FP32 until the output";
    const TensorPtr a = pw->in(graph::PointwiseInput::IN_0), b = pw->in(graph::PointwiseInput::IN_1);
    const TensorPtr scale = a == link ? b : (b == link ? a : nullptr);
    if (!scale || scale->get_is_virtual() || scale->get_is_pass_by_value() || !is_scalar(scale) ||
        scale->get_data_type() != DataType_t::FLOAT)
      return at + "the MUL operand must be a FLOAT [1, 1, 1] device tensor (a per-tensor descale)";
    scales.push_back(scale);
    link = pw->out(graph::PointwiseOutput::OUT_0);
  }
  if (link->get_is_virtual()) return "the graph's last tensor '" + link->get_name() + "' is virtual";
  if (link->get_dim() != out.output->get_dim())
    return "tensor '" + link->get_name() + "': the descale chain must keep OUTPUT's dims";
  out.output = link;
  out.descale_token = scales.size() > 0 ? scales[0] : nullptr;
  out.descale_weight = scales.size() > 1 ? scales[1] : nullptr;
  return {};
}

}  // namespace

std::string match_moe_pattern(const GraphState& g, MoePattern& out) {
  out.node = dynamic_cast<const MoeGroupedMatmulNode*>(g.nodes[0].get());
  if (!out.node) return "serves graphs whose node is MOE_GROUPED_MATMUL";
  const std::string where = "node '" + out.node->name() + "': ";
  out.ops = out.node->operands();
  out.output = out.node->out(graph::MoeGroupedMatmulOutput::OUTPUT);
  MoeExtents ext;
  if (validate_moe_operands(*out.node, out.ops, ext).is_bad()) return where + "operands fail validation";
  const DataType_t in_type = out.ops.token->get_data_type();
  const bool fp8 = in_type == DataType_t::FP8_E4M3;
  if (in_type != DataType_t::BFLOAT16 && !fp8)
    return where + "TOKEN is " + std::string(to_string(in_type)) + "; the grouped kernels take BFLOAT16 or FP8_E4M3";
  if (out.ops.weight->get_data_type() != in_type)
    return where + "WEIGHT is " + std::string(to_string(out.ops.weight->get_data_type())) + "; it must be TOKEN's " +
           std::string(to_string(in_type));
  if (g.nodes.size() > 1 && !fp8) return where + "descale MULs follow FP8 inputs only; a BFLOAT16 graph is one node";
  if (fp8)
    if (std::string r = match_descales(g, out); !r.empty()) return r;
  if (out.output->get_data_type() != DataType_t::BFLOAT16)
    return "tensor '" + out.output->get_name() + "' is " + std::string(to_string(out.output->get_data_type())) +
           "; the grouped kernels write BFLOAT16";
  sm90::MoeParams& p = out.params;
  switch (out.ops.mode) {
    case MoeGroupedMatmulMode_t::NONE: p.mode = sm90::MoeMode::NONE; break;
    case MoeGroupedMatmulMode_t::GATHER: p.mode = sm90::MoeMode::GATHER; break;
    case MoeGroupedMatmulMode_t::SCATTER: p.mode = sm90::MoeMode::SCATTER; break;
  }
  if (!to_index_type(out.ops.first_token_offset, p.offset_type) || !to_index_type(out.ops.token_index, p.index_type) ||
      !to_index_type(out.ops.token_ks, p.ks_type))
    return where + "routing tensors must be INT32 or INT64";
  for (const auto& [t, port] : {std::pair{out.ops.first_token_offset, "FIRST_TOKEN_OFFSET"},
                                {out.ops.token_index, "TOKEN_INDEX"}, {out.ops.token_ks, "TOKEN_KS"}})
    if (!index_contiguous(t)) return where + port + ".stride: the routing values must be contiguous";
  const auto& ts = out.ops.token->get_stride();
  const auto& ws = out.ops.weight->get_stride();
  const auto& os = out.output->get_stride();
  if (ts[2] != 1) return where + "TOKEN.stride: K must be contiguous";
  if (os[2] != 1) return where + "OUTPUT.stride: N must be contiguous";
  p.dtype = fp8 ? sm90::GemmDtype::E4M3 : sm90::GemmDtype::BF16;
  p.out_dtype = sm90::GemmDtype::BF16;
  p.rows = ext.rows, p.token_rows = ext.token_rows, p.experts = ext.experts, p.k = ext.k, p.n = ext.n;
  p.top_k = out.ops.top_k;
  p.token_stride_row = ts[1];
  p.w_stride_expert = ws[0], p.w_stride_k = ws[1], p.w_stride_n = ws[2];
  p.out_stride_row = os[1];
  // Placeholders let the kernel's own checks run at planning time (alignment is rechecked at execute).
  void* placeholder = reinterpret_cast<void*>(uintptr_t{256});
  p.token = p.weight = p.first_token_offset = placeholder;
  p.output = placeholder;
  if (out.ops.token_index) p.token_index = placeholder;
  if (out.ops.token_ks) p.token_ks = placeholder;
  if (out.descale_token) p.descale_token = static_cast<const float*>(placeholder);
  if (out.descale_weight) p.descale_weight = static_cast<const float*>(placeholder);
  return {};
}

sm90::MoeParams bind_moe_pointers(const MoePattern& pat, const VariantPack& pack) {
  sm90::MoeParams p = pat.params;
  auto ptr = [&](const TensorPtr& t) -> void* { return t ? pack.at(t->get_uid()) : nullptr; };
  p.token = ptr(pat.ops.token);
  p.weight = ptr(pat.ops.weight);
  p.output = ptr(pat.output);
  p.first_token_offset = ptr(pat.ops.first_token_offset);
  p.token_index = ptr(pat.ops.token_index);
  p.token_ks = ptr(pat.ops.token_ks);
  p.descale_token = static_cast<const float*>(ptr(pat.descale_token));
  p.descale_weight = static_cast<const float*>(ptr(pat.descale_weight));
  return p;
}

}  // namespace frost::detail
