// Engine family `sm90_sdpa_bwd`: a graph of one SDPA_BACKWARD node on an sm_90 GPU, served by the
// warp-specialized TMA + wgmma kernels in ../. Every attribute the kernels cannot serve is declined here by
// name, so the planner moves on to the next engine.
#include <cuda_runtime.h>

#include "engines/sm90/common/sm90_device_check.h"
#include "engines/sm90/sdpa_bwd/sm90_sdpa_bwd.h"
#include "ops/sdpa_backward/sdpa_backward_node.h"
#include "plan/engine.h"

namespace frost::detail {
namespace {

using In = graph::SdpaBackwardInput;
using Out = graph::SdpaBackwardOutput;

const SdpaBackwardNode* single_node(const GraphState& g) {
  if (g.nodes.size() != 1) return nullptr;
  return dynamic_cast<const SdpaBackwardNode*>(g.nodes[0].get());
}

void strides_of(const TensorPtr& t, int64_t (&s)[3]) {
  for (int i = 0; i < 3; ++i) s[i] = t->get_stride()[static_cast<size_t>(i)];
}

// Kernel parameters from the declaration, with placeholder (aligned, non-null) pointers.
sm90::SdpaBwdParams params_of(const SdpaBackwardNode& n) {
  const auto& q = *n.in(In::Q);
  const auto& k = *n.in(In::K);
  const auto& v = *n.in(In::V);
  sm90::SdpaBwdParams p{};
  p.dtype = q.get_data_type() == DataType_t::HALF ? sm90::BwdDtype::FP16 : sm90::BwdDtype::BF16;
  void* placeholder = reinterpret_cast<void*>(uintptr_t{256});
  p.q = p.k = p.v = p.o = p.d_o = p.dq = p.dk = p.dv = placeholder;
  p.stats = static_cast<const float*>(placeholder);
  p.b = q.get_dim()[0];
  p.h_q = q.get_dim()[1];
  p.h_kv = k.get_dim()[1];
  p.s_q = q.get_dim()[2];
  p.s_kv = k.get_dim()[2];
  p.d_qk = q.get_dim()[3];
  p.d_v = v.get_dim()[3];
  strides_of(n.in(In::Q), p.q_stride);
  strides_of(n.in(In::K), p.k_stride);
  strides_of(n.in(In::V), p.v_stride);
  strides_of(n.in(In::O), p.o_stride);
  strides_of(n.in(In::DO), p.do_stride);
  strides_of(n.in(In::STATS), p.stats_stride);
  strides_of(n.out(Out::DQ), p.dq_stride);
  strides_of(n.out(Out::DK), p.dk_stride);
  strides_of(n.out(Out::DV), p.dv_stride);
  if (const auto t = n.in(In::SINK_TOKEN)) {
    p.sink = static_cast<const float*>(placeholder);
    p.sink_stride = t->get_stride()[1];
  }
  if (const auto t = n.out(Out::DSINK_TOKEN)) {
    p.dsink = static_cast<float*>(placeholder);
    p.dsink_stride = t->get_stride()[1];
  }
  if (n.attr.padding_mask) {
    auto lengths = [&](In e) { return n.in(e) ? static_cast<const int32_t*>(placeholder) : nullptr; };
    p.seq_len_q = lengths(In::SEQ_LEN_Q), p.seq_len_kv = lengths(In::SEQ_LEN_KV);
    p.cu_seq_len_q = lengths(In::CU_SEQ_LEN_Q), p.cu_seq_len_kv = lengths(In::CU_SEQ_LEN_KV);
    if (p.seq_len_q) p.seq_len_q_stride = n.in(In::SEQ_LEN_Q)->get_stride()[0];
    if (p.seq_len_kv) p.seq_len_kv_stride = n.in(In::SEQ_LEN_KV)->get_stride()[0];
  }
  // Row starts as the reference reads them: a tensor's own ragged offsets, else its side's cu_seq_len.
  auto rows = [&](const TensorPtr& t, const int32_t* cu) -> sm90::BwdRowStarts {
    if (const TensorPtr ro = t->get_ragged_offset())
      return {ro->get_data_type() == DataType_t::INT64 ? sm90::BwdRowKind::OFFSETS_I64 : sm90::BwdRowKind::OFFSETS_I32,
              placeholder};
    if (cu) return {sm90::BwdRowKind::CU_TOKENS, cu};
    return {sm90::BwdRowKind::DENSE, nullptr};
  };
  p.q_rows = rows(n.in(In::Q), p.cu_seq_len_q), p.o_rows = rows(n.in(In::O), p.cu_seq_len_q);
  p.do_rows = rows(n.in(In::DO), p.cu_seq_len_q), p.dq_rows = rows(n.out(Out::DQ), p.cu_seq_len_q);
  p.stats_rows = rows(n.in(In::STATS), p.cu_seq_len_q);
  p.k_rows = rows(n.in(In::K), p.cu_seq_len_kv), p.v_rows = rows(n.in(In::V), p.cu_seq_len_kv);
  p.dk_rows = rows(n.out(Out::DK), p.cu_seq_len_kv), p.dv_rows = rows(n.out(Out::DV), p.cu_seq_len_kv);
  p.tokens_q = n.attr.max_total_seq_len_q.value_or(p.b * p.s_q);
  p.tokens_kv = n.attr.max_total_seq_len_kv.value_or(p.b * p.s_kv);
  p.scale = n.attr.attn_scale_value.value_or(1.0f);
  if (const auto s = n.in(In::ATTN_SCALE)) p.scale = static_cast<float>(s->get_pass_by_value().value_or(1.0));
  p.stats_log2 = n.attr.stats_use_log2;
  p.has_left = n.attr.left_bound.has_value();
  p.left = n.attr.left_bound.value_or(0);
  p.has_right = n.attr.right_bound.has_value();
  p.right = n.attr.right_bound.value_or(0);
  p.bottom_right = n.attr.diagonal_alignment == DiagonalAlignment_t::BOTTOM_RIGHT;
  p.deterministic = n.attr.deterministic_algorithm;
  return p;
}

sm90::SdpaBwdConfig config_of(const graph::KnobMap& knobs) {
  auto get = [&](KnobType_t t) {
    auto it = knobs.find(t);
    return it == knobs.end() ? 0 : static_cast<int>(it->second);
  };
  return {get(KnobType_t::TILE_M), get(KnobType_t::TILE_N), get(KnobType_t::WARP_SPEC_CFG)};
}

// The reasons this node is out of the kernels' reach, in terms of graph attributes.
std::string graph_reason(const SdpaBackwardNode& n) {
  const auto q = n.in(In::Q);
  const DataType_t dt = q->get_data_type();
  if (dt != DataType_t::BFLOAT16 && dt != DataType_t::HALF)
    return "Q data type " + std::string(to_string(dt)) + " (BFLOAT16 or HALF only)";
  const std::pair<const char*, TensorPtr> dense[] = {{"Q", q},
                                                     {"K", n.in(In::K)},
                                                     {"V", n.in(In::V)},
                                                     {"O", n.in(In::O)},
                                                     {"DO", n.in(In::DO)},
                                                     {"DQ", n.out(Out::DQ)},
                                                     {"DK", n.out(Out::DK)},
                                                     {"DV", n.out(Out::DV)}};
  for (const auto& [name, t] : dense) {
    if (t->get_data_type() != dt) return std::string(name) + " data type differs from Q's";
    if (t->get_stride()[3] != 1)
      return std::string(name) + " stride of d is " + std::to_string(t->get_stride()[3]) + " (must be 1)";
  }
  if (n.in(In::K)->get_dim()[1] != n.in(In::V)->get_dim()[1]) return "h_k != h_v";
  if (n.in(In::BIAS) || n.out(Out::DBIAS)) return "bias / dbias";
  if (n.attr.alibi_mask) return "alibi_mask";
  // The kernels read index tensors (lengths, cumulative lengths, ragged offsets) as consecutive elements.
  auto contiguous = [](const TensorPtr& t) {
    const auto& st = t->get_stride();
    return st.empty() || t->get_dim()[0] == 1 || st[0] == 1;
  };
  for (const auto& [name, port] : {std::pair{"cu_seq_len_q", In::CU_SEQ_LEN_Q}, {"cu_seq_len_kv", In::CU_SEQ_LEN_KV}})
    if (const TensorPtr t = n.in(port)) {
      if (t->get_data_type() != DataType_t::INT32) return std::string(name) + " data type (INT32 only)";
      if (!contiguous(t)) return std::string(name) + " stride " + std::to_string(t->get_stride()[0]) + " (must be 1)";
    }
  for (const auto& [name, t] : dense)
    if (const TensorPtr ro = t->get_ragged_offset(); ro && !contiguous(ro))
      return std::string(name) + " ragged offset stride (must be 1)";
  if (const TensorPtr ro = n.in(In::STATS)->get_ragged_offset(); ro && !contiguous(ro))
    return "STATS ragged offset stride (must be 1)";
  const std::pair<In, const char*> unserved[] = {
      {In::BLOCK_MASK, "block_mask"}, {In::DROPOUT_SEED, "dropout"}, {In::DROPOUT_MASK, "dropout (mask)"}};
  for (const auto& [port, name] : unserved)
    if (n.in(port)) return name;
  if (const auto s = n.in(In::ATTN_SCALE); s && !s->get_is_pass_by_value())
    return "attn_scale as a device tensor (pass-by-value or float only)";
  if (const auto t = n.out(Out::DSINK_TOKEN); t && t->get_data_type() != DataType_t::FLOAT)
    return "DSINK_TOKEN data type must be FLOAT";
  return {};
}

class Sm90SdpaBwdPlan final : public Plan {
 public:
  Sm90SdpaBwdPlan(const SdpaBackwardNode& n, sm90::SdpaBwdParams p, sm90::SdpaBwdConfig c)
      : node_(n), params_(p), config_(c), workspace_(sm90::sdpa_bwd_workspace_size(p, c)) {}
  int64_t workspace_size() const override { return workspace_; }

  error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const override {
    sm90::SdpaBwdParams p = params_;
    auto bind = [&](const TensorPtr& t) { return t ? pack.at(t->get_uid()) : nullptr; };
    p.q = bind(node_.in(In::Q));
    p.k = bind(node_.in(In::K));
    p.v = bind(node_.in(In::V));
    p.o = bind(node_.in(In::O));
    p.d_o = bind(node_.in(In::DO));
    p.stats = static_cast<const float*>(bind(node_.in(In::STATS)));
    p.dq = bind(node_.out(Out::DQ));
    p.dk = bind(node_.out(Out::DK));
    p.dv = bind(node_.out(Out::DV));
    p.sink = static_cast<const float*>(bind(node_.in(In::SINK_TOKEN)));
    p.dsink = static_cast<float*>(bind(node_.out(Out::DSINK_TOKEN)));
    if (node_.attr.padding_mask) {
      p.seq_len_q = static_cast<const int32_t*>(bind(node_.in(In::SEQ_LEN_Q)));
      p.seq_len_kv = static_cast<const int32_t*>(bind(node_.in(In::SEQ_LEN_KV)));
      p.cu_seq_len_q = static_cast<const int32_t*>(bind(node_.in(In::CU_SEQ_LEN_Q)));
      p.cu_seq_len_kv = static_cast<const int32_t*>(bind(node_.in(In::CU_SEQ_LEN_KV)));
    }
    auto rebind = [&](sm90::BwdRowStarts& r, const TensorPtr& t, const int32_t* cu) {
      if (r.kind == sm90::BwdRowKind::CU_TOKENS)
        r.ptr = cu;
      else if (r.kind != sm90::BwdRowKind::DENSE)
        r.ptr = bind(t->get_ragged_offset());
    };
    rebind(p.q_rows, node_.in(In::Q), p.cu_seq_len_q), rebind(p.o_rows, node_.in(In::O), p.cu_seq_len_q);
    rebind(p.do_rows, node_.in(In::DO), p.cu_seq_len_q), rebind(p.dq_rows, node_.out(Out::DQ), p.cu_seq_len_q);
    rebind(p.stats_rows, node_.in(In::STATS), p.cu_seq_len_q);
    rebind(p.k_rows, node_.in(In::K), p.cu_seq_len_kv), rebind(p.v_rows, node_.in(In::V), p.cu_seq_len_kv);
    rebind(p.dk_rows, node_.out(Out::DK), p.cu_seq_len_kv), rebind(p.dv_rows, node_.out(Out::DV), p.cu_seq_len_kv);
    if (const char* why = sm90::sdpa_bwd_unsupported_reason(p, config_))
      return {error_code_t::INVALID_VARIANT_PACK, std::string("sm90_sdpa_bwd: ") + why};
    if (workspace == nullptr || (reinterpret_cast<uintptr_t>(workspace) & 255) != 0)
      return {error_code_t::INVALID_VARIANT_PACK,
              "sm90_sdpa_bwd: workspace must be a 256-byte aligned device buffer of " + std::to_string(workspace_) +
                  " bytes"};
    const cudaError_t e = sm90::sdpa_bwd(p, config_, workspace, static_cast<cudaStream_t>(handle.stream()));
    if (e != cudaSuccess)
      return {error_code_t::CUDA_API_FAILED, std::string("sm90_sdpa_bwd launch: ") + cudaGetErrorString(e)};
    return {};
  }

 private:
  const SdpaBackwardNode& node_;
  sm90::SdpaBwdParams params_;
  sm90::SdpaBwdConfig config_;
  int64_t workspace_;
};

// WARP_SPEC_CFG recommended for the split-d kernels (d_qk 192 and 256; 192/128 has 1 only).
constexpr int64_t kSplitDDefault = 1;

class Sm90SdpaBwdEngine final : public EngineFamily {
 public:
  std::string_view name() const override { return "sm90_sdpa_bwd"; }
  int64_t engine_id() const override { return 10300; }
  EngineClass engine_class() const override { return EngineClass::SM90; }

  // 128 keys per CTA for d_qk 64 and 128; 64 for the split-d kernels (d_qk 192 and 256), whose WARP_SPEC_CFG
  // says how the consumer warpgroups share S^T and dP^T (1: half the queries each, 2: one product each; 0 for the
  // others). Query rows per step: 128 for d_qk 64 (64 also built), 64 for the others. sm90_bwd_variants.h lists
  // what is built; sdpa_bwd_unsupported_reason declines the rest.
  std::vector<Knob> knob_space(const GraphFacts&) const override {
    return {{KnobType_t::TILE_M, 64, 128, 64}, {KnobType_t::TILE_N, 64, 128, 64}, {KnobType_t::WARP_SPEC_CFG, 0, 2, 1}};
  }

  std::string support(const GraphFacts& f) const override {
    if (std::string r = sm90_device_reason(f.device); !r.empty()) return r;
    const SdpaBackwardNode* n = single_node(f.graph);
    if (!n) return "serves graphs of exactly one SDPA_BACKWARD node";
    if (std::string r = graph_reason(*n); !r.empty()) return r;
    if (const char* why = sm90::sdpa_bwd_unsupported_reason(params_of(*n), {})) return why;
    return {};
  }

  std::vector<graph::KnobMap> recommend(const GraphFacts& f) const override {
    const SdpaBackwardNode* n = single_node(f.graph);
    const int64_t d = n ? n->in(In::Q)->get_dim()[3] : 0;
    if (d == 64) return {{{KnobType_t::TILE_M, 128}, {KnobType_t::TILE_N, 128}, {KnobType_t::WARP_SPEC_CFG, 0}}};
    if (d <= 128) return {{{KnobType_t::TILE_M, 64}, {KnobType_t::TILE_N, 128}, {KnobType_t::WARP_SPEC_CFG, 0}}};
    return {{{KnobType_t::TILE_M, 64}, {KnobType_t::TILE_N, 64}, {KnobType_t::WARP_SPEC_CFG, kSplitDDefault}}};
  }

  error_t build(const GraphFacts& f, const graph::KnobMap& knobs, std::unique_ptr<Plan>& out) const override {
    const SdpaBackwardNode* n = single_node(f.graph);
    const auto p = params_of(*n);
    const auto c = config_of(knobs);
    if (const char* why = sm90::sdpa_bwd_unsupported_reason(p, c))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, std::string("sm90_sdpa_bwd: ") + why};
    out = std::make_unique<Sm90SdpaBwdPlan>(*n, p, c);
    return {};
  }

  std::vector<NumericalNote_t> numeric_notes() const override { return {NumericalNote_t::TENSOR_CORE}; }
  std::vector<BehaviorNote_t> behavior_notes() const override {
    return {BehaviorNote_t::SUPPORTS_CUDA_GRAPH_NATIVE_API};
  }
};

const EngineRegistrar kRegister(std::make_unique<Sm90SdpaBwdEngine>());

}  // namespace
}  // namespace frost::detail
