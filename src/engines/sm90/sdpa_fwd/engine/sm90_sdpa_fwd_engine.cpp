// Engine family `sm90_sdpa_fwd`: a graph of one SDPA node on an sm_90 GPU, served by the
// warp-specialized TMA + wgmma kernel in ../. Every attribute the kernel cannot serve is declined
// here by name, so the planner moves on to the next engine.
#include <cuda_runtime.h>

#include "engines/sm90/common/sm90_device_check.h"
#include "engines/sm90/sdpa_fwd/sm90_sdpa_fwd.h"
#include "ops/sdpa/sdpa_node.h"
#include "plan/engine.h"

namespace frost::detail {
namespace {

using graph::SdpaInput;
using graph::SdpaOutput;

const SdpaNode* single_sdpa(const GraphState& g) {
  if (g.nodes.size() != 1) return nullptr;
  return dynamic_cast<const SdpaNode*>(g.nodes[0].get());
}

// Kernel parameters from the declaration, with placeholder (aligned, non-null) pointers.
sm90::SdpaFwdParams params_of(const SdpaNode& n) {
  const auto& q = *n.in(SdpaInput::Q);
  const auto& k = *n.in(SdpaInput::K);
  const auto& v = *n.in(SdpaInput::V);
  const auto& o = *n.out(SdpaOutput::O);
  sm90::SdpaFwdParams p{};
  p.dtype = q.get_data_type() == DataType_t::HALF ? sm90::AttnDtype::FP16 : sm90::AttnDtype::BF16;
  void* placeholder = reinterpret_cast<void*>(uintptr_t{256});
  p.q = p.k = p.v = p.o = placeholder;
  p.b = q.get_dim()[0];
  p.h_q = q.get_dim()[1];
  p.h_kv = k.get_dim()[1];
  p.s_q = q.get_dim()[2];
  p.s_kv = k.get_dim()[2];
  p.d_qk = q.get_dim()[3];
  p.d_v = v.get_dim()[3];
  auto strides = [](const graph::Tensor_attributes& t, int64_t& b, int64_t& h, int64_t& s) {
    b = t.get_stride()[0];
    h = t.get_stride()[1];
    s = t.get_stride()[2];
  };
  strides(q, p.q_stride_b, p.q_stride_h, p.q_stride_s);
  strides(k, p.k_stride_b, p.k_stride_h, p.k_stride_s);
  strides(v, p.v_stride_b, p.v_stride_h, p.v_stride_s);
  strides(o, p.o_stride_b, p.o_stride_h, p.o_stride_s);
  if (const auto st = n.out(SdpaOutput::STATS)) {
    p.lse_stride_b = st->get_stride()[0];
    p.lse_stride_h = st->get_stride()[1];
  }
  p.scale = n.attr.attn_scale_value.value_or(1.0f);
  if (const auto s = n.in(SdpaInput::ATTN_SCALE)) p.scale = static_cast<float>(s->get_pass_by_value().value_or(1.0));
  const bool causal = n.attr.right_bound && *n.attr.right_bound == 0;
  p.causal = causal;
  p.causal_bottom_right = causal && n.attr.diagonal_alignment == DiagonalAlignment_t::BOTTOM_RIGHT;
  p.lse_log2 = n.attr.stats_use_log2;
  return p;
}

sm90::SdpaFwdConfig config_of(const graph::KnobMap& knobs) {
  auto get = [&](KnobType_t t) {
    auto it = knobs.find(t);
    return it == knobs.end() ? 0 : static_cast<int>(it->second);
  };
  return {get(KnobType_t::TILE_M), get(KnobType_t::TILE_N), get(KnobType_t::STAGES)};
}

// The reasons this node is out of the kernel's reach, in terms of graph attributes.
std::string graph_reason(const SdpaNode& n) {
  const auto q = n.in(SdpaInput::Q), k = n.in(SdpaInput::K), v = n.in(SdpaInput::V), o = n.out(SdpaOutput::O);
  const DataType_t dt = q->get_data_type();
  if (dt != DataType_t::BFLOAT16 && dt != DataType_t::HALF)
    return "Q data type " + std::string(to_string(dt)) + " (BFLOAT16 or HALF only)";
  for (const auto& [name, t] : {std::pair{"K", k}, {"V", v}, {"O", o}})
    if (t->get_data_type() != dt) return std::string(name) + " data type differs from Q's";
  for (const auto& [name, t] : {std::pair{"Q", q}, {"K", k}, {"V", v}, {"O", o}})
    if (t->get_stride()[3] != 1) return std::string(name) + " stride of d is " + std::to_string(t->get_stride()[3]) + " (must be 1)";
  if (k->get_dim()[1] != v->get_dim()[1]) return "h_k != h_v";
  for (const auto& [name, t] : {std::pair{"Q", q}, {"K", k}, {"V", v}, {"O", o}})
    if (t->get_ragged_offset()) return std::string(name) + " ragged offset (THD layout)";
  if (const auto st = n.out(SdpaOutput::STATS); st && st->get_ragged_offset()) return "Stats ragged offset";
  if (n.in(SdpaInput::CU_SEQ_LEN_Q) || n.in(SdpaInput::CU_SEQ_LEN_KV)) return "cu_seq_len_q/kv";
  if (n.in(SdpaInput::PAGE_TABLE_K) || n.in(SdpaInput::PAGE_TABLE_V)) return "paged_attention_k/v_table";
  if (n.in(SdpaInput::BLOCK_MASK)) return "block_mask";
  if (n.attr.dropout_probability || n.in(SdpaInput::DROPOUT_MASK)) return "dropout";
  if (n.in(SdpaInput::BIAS)) return "bias";
  if (n.attr.alibi_mask) return "alibi_mask";
  if (n.attr.padding_mask) return "padding_mask";
  if (n.in(SdpaInput::SINK_TOKEN)) return "sink_token";
  if (n.attr.left_bound) return "diagonal_band_left_bound (sliding window)";
  if (n.attr.right_bound && *n.attr.right_bound != 0)
    return "diagonal_band_right_bound=" + std::to_string(*n.attr.right_bound) + " (only 0, causal)";
  if (const auto s = n.in(SdpaInput::ATTN_SCALE); s && !s->get_is_pass_by_value())
    return "attn_scale as a device tensor (pass-by-value or float only)";
  if (const auto st = n.out(SdpaOutput::STATS)) {
    if (st->get_data_type() != DataType_t::FLOAT) return "Stats data type must be FLOAT";
    if (st->get_stride()[2] != 1) return "Stats stride over s_q is " + std::to_string(st->get_stride()[2]) + " (must be 1)";
  }
  return {};
}

class Sm90SdpaFwdPlan final : public Plan {
 public:
  Sm90SdpaFwdPlan(const SdpaNode& n, sm90::SdpaFwdParams p, sm90::SdpaFwdConfig c) : node_(n), params_(p), config_(c) {}
  int64_t workspace_size() const override { return 0; }

  error_t execute(const VariantPack& pack, void*, const Handle& handle) const override {
    sm90::SdpaFwdParams p = params_;
    p.q = pack.at(node_.in(SdpaInput::Q)->get_uid());
    p.k = pack.at(node_.in(SdpaInput::K)->get_uid());
    p.v = pack.at(node_.in(SdpaInput::V)->get_uid());
    p.o = pack.at(node_.out(SdpaOutput::O)->get_uid());
    const auto st = node_.out(SdpaOutput::STATS);
    p.lse = st ? static_cast<float*>(pack.at(st->get_uid())) : nullptr;
    if (const char* why = sm90::sdpa_fwd_unsupported_reason(p, config_))
      return {error_code_t::INVALID_VARIANT_PACK, std::string("sm90_sdpa_fwd: ") + why};
    const cudaError_t e = sm90::sdpa_fwd(p, config_, static_cast<cudaStream_t>(handle.stream()));
    if (e != cudaSuccess) return {error_code_t::CUDA_API_FAILED, std::string("sm90_sdpa_fwd launch: ") + cudaGetErrorString(e)};
    return {};
  }

 private:
  const SdpaNode& node_;
  sm90::SdpaFwdParams params_;
  sm90::SdpaFwdConfig config_;
};

class Sm90SdpaFwdEngine final : public EngineFamily {
 public:
  std::string_view name() const override { return "sm90_sdpa_fwd"; }
  int64_t engine_id() const override { return 10100; }
  EngineClass engine_class() const override { return EngineClass::SM90; }

  std::vector<Knob> knob_space(const GraphFacts&) const override {
    return {{KnobType_t::TILE_M, 128, 192, 64}, {KnobType_t::TILE_N, 80, 176, 16}, {KnobType_t::STAGES, 2, 2, 1}};
  }

  std::string support(const GraphFacts& f) const override {
    if (std::string r = sm90_device_reason(f.device); !r.empty()) return r;
    const SdpaNode* n = single_sdpa(f.graph);
    if (!n) return "serves graphs of exactly one SDPA node";
    if (std::string r = graph_reason(*n); !r.empty()) return r;
    if (const char* why = sm90::sdpa_fwd_unsupported_reason(params_of(*n), {})) return why;
    return {};
  }

  // d128: long non-causal rows prefer 176-wide key blocks (fewer, longer iterations); causal and
  // short rows prefer 128 (its own O buffer lets the next Q load under the epilogue).
  std::vector<graph::KnobMap> recommend(const GraphFacts& f) const override {
    const auto p = params_of(*single_sdpa(f.graph));
    if (p.d_qk == 64) return {{{KnobType_t::TILE_M, 192}, {KnobType_t::TILE_N, 128}, {KnobType_t::STAGES, 2}}};
    if (p.d_qk == 256) return {{{KnobType_t::TILE_M, 128}, {KnobType_t::TILE_N, 80}, {KnobType_t::STAGES, 2}}};
    graph::KnobMap wide{{KnobType_t::TILE_M, 128}, {KnobType_t::TILE_N, 176}, {KnobType_t::STAGES, 2}};
    graph::KnobMap square{{KnobType_t::TILE_M, 128}, {KnobType_t::TILE_N, 128}, {KnobType_t::STAGES, 2}};
    if (!p.causal && p.s_kv >= 8192) return {wide, square};
    return {square, wide};
  }

  error_t build(const GraphFacts& f, const graph::KnobMap& knobs, std::unique_ptr<Plan>& out) const override {
    const SdpaNode* n = single_sdpa(f.graph);
    const auto p = params_of(*n);
    const auto c = config_of(knobs);
    if (const char* why = sm90::sdpa_fwd_unsupported_reason(p, c))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, std::string("sm90_sdpa_fwd: ") + why};
    out = std::make_unique<Sm90SdpaFwdPlan>(*n, p, c);
    return {};
  }

  std::vector<NumericalNote_t> numeric_notes() const override { return {NumericalNote_t::TENSOR_CORE}; }
  std::vector<BehaviorNote_t> behavior_notes() const override { return {BehaviorNote_t::SUPPORTS_CUDA_GRAPH_NATIVE_API}; }
};

const EngineRegistrar kRegister(std::make_unique<Sm90SdpaFwdEngine>());

}  // namespace
}  // namespace frost::detail
