// Engine family `sm90_sdpa_fwd`: a graph of one SDPA node on an sm_90 GPU, served by the
// warp-specialized TMA + wgmma kernel in ../. Every attribute the kernel cannot serve is declined
// here by name, so the planner moves on to the next engine.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "engines/sm90/common/sm90_device_check.h"
#include "engines/sm90/sdpa_fwd/sm90_sdpa_fwd.h"
#include "ops/sdpa/sdpa_node.h"
#include "plan/engine.h"

namespace frost::detail {
namespace {

using graph::SdpaInput;
using graph::SdpaOutput;

// Key blocks per tile from which the engine ranks the tail split (SCHED_POLICY 3) first; see recommend().
constexpr int64_t kSplitMinBlocks = 64;

const SdpaNode* single_sdpa(const GraphState& g) {
  if (g.nodes.size() != 1) return nullptr;
  return dynamic_cast<const SdpaNode*>(g.nodes[0].get());
}

// Device address of a tensor: the variant pack's pointer at execution, a placeholder before.
using PtrOf = std::function<void*(const TensorPtr&)>;

void* placeholder(const TensorPtr&) { return reinterpret_cast<void*>(uintptr_t{256}); }

// Kernel parameters from the declaration; every device address comes from `ptr`.
sm90::SdpaFwdParams params_of(const SdpaNode& n, const PtrOf& ptr) {
  const auto& q = *n.in(SdpaInput::Q);
  const auto& k = *n.in(SdpaInput::K);
  const auto& v = *n.in(SdpaInput::V);
  const auto& o = *n.out(SdpaOutput::O);
  sm90::SdpaFwdParams p{};
  p.dtype = q.get_data_type() == DataType_t::HALF ? sm90::AttnDtype::FP16 : sm90::AttnDtype::BF16;
  p.q = ptr(n.in(SdpaInput::Q));
  p.k = ptr(n.in(SdpaInput::K));
  p.v = ptr(n.in(SdpaInput::V));
  p.o = ptr(n.out(SdpaOutput::O));
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
  const TensorPtr st = n.out(SdpaOutput::STATS);
  if (st) {
    p.lse = static_cast<float*>(ptr(st));
    strides(*st, p.lse_stride_b, p.lse_stride_h, p.lse_stride_s);
  }
  p.scale = n.attr.attn_scale_value.value_or(1.0f);
  if (const TensorPtr s = n.in(SdpaInput::ATTN_SCALE)) {
    if (s->get_is_pass_by_value())
      p.scale = static_cast<float>(s->get_pass_by_value().value_or(1.0));
    else
      p.scale_dev = static_cast<const float*>(ptr(s));
  }
  if (const TensorPtr sink = n.in(SdpaInput::SINK_TOKEN)) p.sink = static_cast<const float*>(ptr(sink));
  p.has_left_bound = n.attr.left_bound.has_value();
  p.left_bound = n.attr.left_bound.value_or(0);
  p.has_right_bound = n.attr.right_bound.has_value();
  p.right_bound = n.attr.right_bound.value_or(0);
  p.bottom_right = n.attr.diagonal_alignment == DiagonalAlignment_t::BOTTOM_RIGHT;
  p.lse_log2 = n.attr.stats_use_log2;
  if (n.attr.padding_mask) {
    auto i32 = [&](SdpaInput e) {
      const TensorPtr t = n.in(e);
      return t ? static_cast<const int32_t*>(ptr(t)) : nullptr;
    };
    p.seq_len_q = i32(SdpaInput::SEQ_LEN_Q);
    p.seq_len_kv = i32(SdpaInput::SEQ_LEN_KV);
    p.cu_seq_len_q = i32(SdpaInput::CU_SEQ_LEN_Q);
    p.cu_seq_len_kv = i32(SdpaInput::CU_SEQ_LEN_KV);
  }
  // Row starts as the reference reads them: a tensor's own ragged offsets, else its side's cu_seq_len.
  auto rows = [&](const TensorPtr& t, const int32_t* cu) -> sm90::RowStarts {
    if (const TensorPtr ro = t->get_ragged_offset())
      return {ro->get_data_type() == DataType_t::INT64 ? sm90::RowStartKind::OFFSETS_I64
                                                        : sm90::RowStartKind::OFFSETS_I32,
              ptr(ro)};
    if (cu) return {sm90::RowStartKind::CU_TOKENS, cu};
    return {sm90::RowStartKind::DENSE, nullptr};
  };
  p.q_rows = rows(n.in(SdpaInput::Q), p.cu_seq_len_q);
  p.k_rows = rows(n.in(SdpaInput::K), p.cu_seq_len_kv);
  p.v_rows = rows(n.in(SdpaInput::V), p.cu_seq_len_kv);
  p.o_rows = rows(n.out(SdpaOutput::O), p.cu_seq_len_q);
  if (st) p.lse_rows = rows(st, p.cu_seq_len_q);
  p.tokens_q = n.attr.max_total_seq_len_q.value_or(p.b * p.s_q);
  p.tokens_kv = n.attr.max_total_seq_len_kv.value_or(p.b * p.s_kv);
  return p;
}

int knob(const graph::KnobMap& knobs, KnobType_t t) {
  auto it = knobs.find(t);
  return it == knobs.end() ? 0 : static_cast<int>(it->second);
}

sm90::SdpaFwdConfig config_of(const graph::KnobMap& knobs) {
  return {knob(knobs, KnobType_t::TILE_M),   knob(knobs, KnobType_t::TILE_N),
          knob(knobs, KnobType_t::STAGES),   knob(knobs, KnobType_t::SCHED_POLICY),
          knob(knobs, KnobType_t::PACK_GQA), knob(knobs, KnobType_t::TILE_CGA_M)};
}

// An index tensor the kernel reads as consecutive elements: contiguous along its first dimension.
bool contiguous_index(const TensorPtr& t) {
  const auto& stride = t->get_stride();
  return stride.empty() || t->get_dim()[0] == 1 || stride[0] == 1;
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
  if (n.in(SdpaInput::PAGE_TABLE_K) || n.in(SdpaInput::PAGE_TABLE_V)) return "paged_attention_k/v_table";
  if (n.in(SdpaInput::BLOCK_MASK)) return "block_mask";
  if (n.attr.dropout_probability || n.in(SdpaInput::DROPOUT_MASK)) return "dropout";
  if (n.in(SdpaInput::BIAS)) return "bias";
  if (n.attr.alibi_mask) return "alibi_mask";
  for (const auto& [name, e] : {std::pair{"seq_len_q", SdpaInput::SEQ_LEN_Q}, {"seq_len_kv", SdpaInput::SEQ_LEN_KV},
                                {"cu_seq_len_q", SdpaInput::CU_SEQ_LEN_Q}, {"cu_seq_len_kv", SdpaInput::CU_SEQ_LEN_KV}})
    if (const TensorPtr t = n.in(e); t && !contiguous_index(t))
      return std::string(name) + " stride " + std::to_string(t->get_stride()[0]) + " (must be 1)";
  const auto st = n.out(SdpaOutput::STATS);
  for (const auto& [name, t] : {std::pair{"Q", q}, {"K", k}, {"V", v}, {"O", o}, {"Stats", st}})
    if (t && t->get_ragged_offset() && !contiguous_index(t->get_ragged_offset()))
      return std::string(name) + " ragged offset stride (must be 1)";
  if (const TensorPtr sink = n.in(SdpaInput::SINK_TOKEN); sink && sink->get_dim()[1] > 1 && sink->get_stride()[1] != 1)
    return "sink_token stride over heads " + std::to_string(sink->get_stride()[1]) + " (must be 1)";
  if (st && st->get_data_type() != DataType_t::FLOAT) return "Stats data type must be FLOAT";
  return {};
}

class Sm90SdpaFwdPlan final : public Plan {
 public:
  Sm90SdpaFwdPlan(const SdpaNode& n, sm90::SdpaFwdConfig c)
      : node_(n), config_(c), workspace_(sm90::sdpa_fwd_workspace_size(params_of(n, placeholder), c)) {}
  int64_t workspace_size() const override { return workspace_; }

  error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const override {
    const sm90::SdpaFwdParams p = params_of(node_, [&](const TensorPtr& t) -> void* {
      auto it = pack.find(t->get_uid());
      return it == pack.end() ? nullptr : it->second;
    });
    if (const char* why = sm90::sdpa_fwd_unsupported_reason(p, config_))
      return {error_code_t::INVALID_VARIANT_PACK, std::string("sm90_sdpa_fwd: ") + why};
    if (workspace_ > 0 && (workspace == nullptr || (reinterpret_cast<uintptr_t>(workspace) & 255) != 0))
      return {error_code_t::INVALID_VARIANT_PACK,
              "sm90_sdpa_fwd: workspace must be a 256-byte aligned device buffer of " + std::to_string(workspace_) +
                  " bytes (SCHED_POLICY=" + std::to_string(config_.sched_policy) + ")"};
    const cudaError_t e = sm90::sdpa_fwd(p, config_, workspace, static_cast<cudaStream_t>(handle.stream()));
    if (e != cudaSuccess) return {error_code_t::CUDA_API_FAILED, std::string("sm90_sdpa_fwd launch: ") + cudaGetErrorString(e)};
    return {};
  }

 private:
  const SdpaNode& node_;
  sm90::SdpaFwdConfig config_;
  int64_t workspace_;
};

class Sm90SdpaFwdEngine final : public EngineFamily {
 public:
  std::string_view name() const override { return "sm90_sdpa_fwd"; }
  int64_t engine_id() const override { return 10100; }
  EngineClass engine_class() const override { return EngineClass::SM90; }

  // SCHED_POLICY 1: heads grouped so concurrently read K/V stay in L2; 2: one global longest-tile-first order;
  // 3: as 1, the last partial wave's tiles split along their key blocks over all SMs (workspace; unmasked plain
  // problems, packed or not); 4: policy 1's order (8 MB groups) handed to the CTAs as they come free through a
  // counter in the workspace (plain problems on single CTAs, unpacked). PACK_GQA 1: the query heads of a K/V group
  // share each tile (dense problems without padding, left band bound, sink or device scale). TILE_CGA_M 2: CTA pairs on
  // adjacent m-blocks, each loading half of every K/V block for both (unmasked plain problems, d >= 128, an even
  // m-block count).
  std::vector<Knob> knob_space(const GraphFacts&) const override {
    return {{KnobType_t::TILE_M, 128, 192, 64},  {KnobType_t::TILE_N, 80, 176, 16}, {KnobType_t::STAGES, 2, 2, 1},
            {KnobType_t::SCHED_POLICY, 1, 4, 1}, {KnobType_t::PACK_GQA, 0, 1, 1},   {KnobType_t::TILE_CGA_M, 1, 2, 1}};
  }

  std::string support(const GraphFacts& f) const override {
    if (std::string r = sm90_device_reason(f.device); !r.empty()) return r;
    const SdpaNode* n = single_sdpa(f.graph);
    if (!n) return "serves graphs of exactly one SDPA node";
    if (std::string r = graph_reason(*n); !r.empty()) return r;
    if (const char* why = sm90::sdpa_fwd_unsupported_reason(params_of(*n, placeholder), {})) return why;
    return {};
  }

  // Every knob is explicit, so a plan is replayable from (engine id, knobs). d128: long rows prefer 176-wide key
  // blocks (fewer, longer iterations): s_kv >= 8192 unmasked, >= 16384 under a right bound only (causal);
  // sliding windows and short rows prefer 128 (its own O buffer lets the next Q load under the epilogue). A
  // causal-like mask (right bound only) with more than 16 m-blocks makes tile lengths differ widely: one global
  // longest-first order, after the hand-out of policy 1's order (SCHED_POLICY 4) where the plain kernel serves it:
  // H200, in the same rounds (NOTES.md v14), d128 h16 b4 s4096 causal +1.0 to +8.7 % over the global order in seven
  // runs (DRAM reads 1.10 -> 0.21 GB), d64 h32 b2 s8192, d256 h8 b2 s8192 and d128 h16 b1 s16384 causal -0.5 to +1.5 %;
  // otherwise heads grouped for L2 (short causal rows with many heads gain more from L2).
  // PACK_GQA first where packing the group saves a fifth of the tiles (s_q short of a tile: decode, short prefill),
  // with the unpacked plan after it. Under policy 1, the tail split (policy 3) first where it saves at least 2 % of
  // the kernel on this device and the tiles are long (64 key blocks or more). H200, one run (NOTES.md v7): d128 h16
  // b1 s16384 (94 blocks of 176) +3.5 %, d256 h8 b2 s8192 (103 of 80) +1.3 %, but d128 h16 b4 s4096 (32 of 128,
  // 3.0 % predicted) -0.5 %: the split's per-unit costs take what short tiles would gain. TILE_CGA_M 2 (CTA pairs
  // multicasting K/V) next to every unpacked policy-1 plan it serves, first at d128 and d256: H200, in turns with
  // the single-CTA plan (NOTES.md v13), d128 h16 b4 s4096 +1.2 to +1.6 % over fourteen series in four calls (L2
  // bytes 4.7 -> 2.7 GB), d256 h8 b2 s8192 +0.5 % in one; d192 is not measured and takes it second.
  std::vector<graph::KnobMap> recommend(const GraphFacts& f) const override {
    const auto p = params_of(*single_sdpa(f.graph), placeholder);
    std::vector<graph::KnobMap> plans;
    const int64_t group = p.h_q / p.h_kv;
    // Tiles per K/V head: unpacked group * ceil(s_q / m), packed ceil(s_q / rows).
    auto pack_pays = [&](int64_t m) {
      const int64_t rows = m / group;
      return group > 1 && m % group == 0 && sm90::sdpa_fwd_is_plain(p) &&
             5 * ((p.s_q + rows - 1) / rows) < 4 * group * ((p.s_q + m - 1) / m);
    };
    auto split_pays = [&](int64_t m, int64_t n, int64_t pack) {
      const sm90::SdpaFwdConfig split{int(m), int(n), 2, 3, int(pack)};
      return (p.s_kv + n - 1) / n >= kSplitMinBlocks && sm90::sdpa_fwd_tail_split_gain(p, split) >= 0.02;
    };
    auto push = [&](int64_t m, int64_t n, int64_t sched, int64_t pack, int64_t cga) {
      plans.push_back({{KnobType_t::TILE_M, m},
                       {KnobType_t::TILE_N, n},
                       {KnobType_t::STAGES, 2},
                       {KnobType_t::SCHED_POLICY, sched},
                       {KnobType_t::PACK_GQA, pack},
                       {KnobType_t::TILE_CGA_M, cga}});
    };
    auto add = [&](int64_t m, int64_t n) {
      const int64_t rows = m % group == 0 ? m / group : m;
      for (int64_t pack : {int64_t{1}, int64_t{0}}) {
        if (pack && !pack_pays(m)) continue;
        const bool long_causal = p.has_right_bound && !p.has_left_bound && p.s_q > 16 * (pack ? rows : m);
        const int64_t policy = long_causal ? 2 : 1;
        const bool split = policy == 1 && split_pays(m, n, pack);
        const sm90::SdpaFwdConfig handed{int(m), int(n), 2, 4, int(pack)};
        const bool hand_out = long_causal && sm90::sdpa_fwd_unsupported_reason(p, handed) == nullptr;
        for (int64_t sched : {int64_t{3}, int64_t{4}, policy}) {
          if ((sched == 3 && !split) || (sched == 4 && !hand_out)) continue;
          const sm90::SdpaFwdConfig paired{int(m), int(n), 2, int(sched), int(pack), 2};
          const bool pair = sched == 1 && !pack && sm90::sdpa_fwd_unsupported_reason(p, paired) == nullptr;
          if (pair && p.d_qk != 192) push(m, n, sched, pack, 2);
          push(m, n, sched, pack, 1);
          if (pair && p.d_qk == 192) push(m, n, sched, pack, 2);
        }
      }
    };
    // Packed decode split over the SMs takes 128-wide key blocks even on long rows: the CTAs' ranges are finer
    // (H200, d128 GQA 64/8 b8 L32768: 3944.8 GB/s against 3864.8 with 176, NOTES.md v10).
    const bool packed_split = pack_pays(128) && !p.has_right_bound && split_pays(128, 128, 1);
    if (p.d_qk == 64) {
      add(192, 128);
    } else if (p.d_qk == 192) {
      add(128, 112);
    } else if (p.d_qk == 256) {
      add(128, 80);
    } else if (!p.has_left_bound && p.s_kv >= (p.has_right_bound ? 16384 : 8192) && !packed_split) {
      add(128, 176), add(128, 128);
    } else {
      add(128, 128), add(128, 176);
    }
    return plans;
  }

  error_t build(const GraphFacts& f, const graph::KnobMap& knobs, std::unique_ptr<Plan>& out) const override {
    const SdpaNode* n = single_sdpa(f.graph);
    const auto c = config_of(knobs);
    if (const char* why = sm90::sdpa_fwd_unsupported_reason(params_of(*n, placeholder), c))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, std::string("sm90_sdpa_fwd: ") + why};
    out = std::make_unique<Sm90SdpaFwdPlan>(*n, c);
    return {};
  }

  std::vector<NumericalNote_t> numeric_notes() const override { return {NumericalNote_t::TENSOR_CORE}; }
  std::vector<BehaviorNote_t> behavior_notes() const override { return {BehaviorNote_t::SUPPORTS_CUDA_GRAPH_NATIVE_API}; }
};

const EngineRegistrar kRegister(std::make_unique<Sm90SdpaFwdEngine>());

}  // namespace
}  // namespace frost::detail
