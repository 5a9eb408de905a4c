// Engine family `sm90_gemm`: MATMUL graphs (with an optional bias / residual / activation epilogue),
// MOE_GROUPED_MATMUL graphs (BF16, or FP8 with descales) and SwiGLU graphs (SWIGLU_MLP, or the
// matmul -> swish -> mul gate/up graph) on an sm_90 GPU, served by the CUTLASS-based kernels in ../.
#include <cuda_runtime.h>

#include "engines/sm90/common/sm90_device_check.h"
#include "engines/sm90/gemm/engine/sm90_gemm_pattern.h"
#include "engines/sm90/gemm/engine/sm90_moe_pattern.h"
#include "engines/sm90/gemm/engine/sm90_swiglu_pattern.h"
#include "plan/engine.h"

namespace frost::detail {
namespace {

sm90::GemmConfig config_of(const graph::KnobMap& knobs) {
  auto get = [&](KnobType_t t) {
    auto it = knobs.find(t);
    return it == knobs.end() ? 0 : static_cast<int>(it->second);
  };
  sm90::GemmConfig c;
  c.tile_m = get(KnobType_t::TILE_M);
  c.tile_n = get(KnobType_t::TILE_N);
  c.tile_k = get(KnobType_t::TILEK);
  c.stages = get(KnobType_t::STAGES);
  c.cluster_m = get(KnobType_t::TILE_CGA_M);
  c.cluster_n = get(KnobType_t::TILE_CGA_N);
  c.swizzle = get(KnobType_t::SWIZZLE);
  c.split_k = get(KnobType_t::SPLIT_K);
  c.stream_k = get(KnobType_t::STREAM_K);
  return c;
}

class Sm90GemmPlan final : public Plan {
 public:
  Sm90GemmPlan(GemmPattern pat, sm90::GemmConfig c, int64_t ws) : pat_(std::move(pat)), config_(c), workspace_(ws) {}
  int64_t workspace_size() const override { return workspace_; }

  error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const override {
    sm90::GemmParams p = pat_.params;
    p.a = pack.at(pat_.matmul->in(graph::MatmulInput::A)->get_uid());
    p.b = pack.at(pat_.matmul->in(graph::MatmulInput::B)->get_uid());
    p.d = pack.at(pat_.output->get_uid());
    p.bias = pat_.bias ? pack.at(pat_.bias->get_uid()) : nullptr;
    p.c = pat_.residual ? pack.at(pat_.residual->get_uid()) : nullptr;
    if (const char* why = sm90::gemm_unsupported_reason(p, config_))
      return {error_code_t::INVALID_VARIANT_PACK, std::string("sm90_gemm: ") + why};
    const cudaError_t e = sm90::gemm(p, config_, workspace, static_cast<cudaStream_t>(handle.stream()));
    if (e != cudaSuccess) return {error_code_t::CUDA_API_FAILED, std::string("sm90_gemm launch: ") + cudaGetErrorString(e)};
    return {};
  }

 private:
  GemmPattern pat_;
  sm90::GemmConfig config_;
  int64_t workspace_;
};

class Sm90MoePlan final : public Plan {
 public:
  Sm90MoePlan(MoePattern pat, sm90::GemmConfig c, int64_t ws) : pat_(std::move(pat)), config_(c), workspace_(ws) {}
  int64_t workspace_size() const override { return workspace_; }

  error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const override {
    const sm90::MoeParams p = bind_moe_pointers(pat_, pack);
    if (const char* why = sm90::moe_unsupported_reason(p, config_))
      return {error_code_t::INVALID_VARIANT_PACK, std::string("sm90_gemm: ") + why};
    const cudaError_t e =
        sm90::moe_grouped_matmul(p, config_, workspace, static_cast<cudaStream_t>(handle.stream()));
    if (e != cudaSuccess) return {error_code_t::CUDA_API_FAILED, std::string("sm90_gemm moe launch: ") + cudaGetErrorString(e)};
    return {};
  }

 private:
  MoePattern pat_;
  sm90::GemmConfig config_;
  int64_t workspace_;
};

class Sm90SwigluPlan final : public Plan {
 public:
  Sm90SwigluPlan(SwigluPattern pat, sm90::GemmConfig c) : pat_(std::move(pat)), config_(c) {}
  int64_t workspace_size() const override { return pat_.workspace; }

  error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const override {
    return run_swiglu(pat_, config_, pack, workspace, static_cast<cudaStream_t>(handle.stream()));
  }

 private:
  SwigluPattern pat_;
  sm90::GemmConfig config_;
};

bool is_moe_graph(const GraphState& g) {
  return !g.nodes.empty() && dynamic_cast<const MoeGroupedMatmulNode*>(g.nodes[0].get()) != nullptr;
}

class Sm90GemmEngine final : public EngineFamily {
 public:
  std::string_view name() const override { return "sm90_gemm"; }
  int64_t engine_id() const override { return 10200; }
  EngineClass engine_class() const override { return EngineClass::SM90; }

  std::vector<Knob> knob_space(const GraphFacts&) const override {
    return {{KnobType_t::TILE_M, 64, 256, 64},    {KnobType_t::TILE_N, 64, 256, 16}, {KnobType_t::TILEK, 64, 128, 64},
            {KnobType_t::STAGES, 0, 8, 1},        {KnobType_t::TILE_CGA_M, 1, 2, 1}, {KnobType_t::TILE_CGA_N, 1, 2, 1},
            {KnobType_t::SWIZZLE, 0, 8, 1},       {KnobType_t::SPLIT_K, 1, 1, 1},
            {KnobType_t::STREAM_K, 0, 1, 1}};
  }

  std::string support(const GraphFacts& f) const override {
    if (std::string r = sm90_device_reason(f.device); !r.empty()) return r;
    if (is_moe_graph(f.graph)) {
      MoePattern moe;
      if (std::string r = match_moe_pattern(f.graph, moe); !r.empty()) return r;
      if (const char* why = sm90::moe_unsupported_reason(moe.params, {})) return why;
      return {};
    }
    if (is_swiglu_graph(f.graph)) {
      SwigluPattern sw;
      return match_swiglu_pattern(f.graph, {}, sw);
    }
    GemmPattern pat;
    if (std::string r = match_gemm_pattern(f.graph, pat); !r.empty()) return r;
    if (const char* why = sm90::gemm_unsupported_reason(pat.params, {})) return why;
    return {};
  }

  // Dispatch's kernel ranking chooses tile, cluster and schedule; large GEMMs rank the raster
  // swizzle 4 first, which keeps more of A and B in L2: on the default ping-pong 128x128 kernel,
  // timed in turns, 0.6-2 % faster at 4096^3, 8192^3 and m16384 n14336 k4096 (NOTES.md runs 7, 8).
  // Long k-loops rank the cooperative 128x256 kernel with stream-K tails before it (stream_k_pays).
  std::vector<graph::KnobMap> recommend(const GraphFacts& f) const override {
    if (is_moe_graph(f.graph)) {
      MoePattern moe;
      match_moe_pattern(f.graph, moe);
      // BF16 grouped, timed in turns (NOTES.md run 23): ping-pong 128x128 ran 2-5 % faster than cooperative
      // 128x256 with 8 and 16 experts and 8-16 % slower with 32 and 64.
      const sm90::MoeParams& p = moe.params;
      if (p.dtype == sm90::GemmDtype::BF16 && p.experts <= 16) return {{{KnobType_t::TILE_N, 128}}, {}};
      if (p.dtype == sm90::GemmDtype::BF16) return {{}, {{KnobType_t::TILE_N, 128}}};
      return {{}};
    }
    if (is_swiglu_graph(f.graph)) {
      SwigluPattern sw;
      match_swiglu_pattern(f.graph, {}, sw);
      // T 8192: swizzle 4 ran the MLP 0.5-1.6 % faster than swizzle 1 in each of runs 12-16 (NOTES.md).
      if (sw.swiglu.m >= 4096) return {{{KnobType_t::SWIZZLE, 4}}, {}};
      return {{}};
    }
    GemmPattern pat;
    match_gemm_pattern(f.graph, pat);
    std::vector<graph::KnobMap> ranked;
    if (sm90::stream_k_pays(pat.params))
      ranked.push_back({{KnobType_t::TILE_N, 256}, {KnobType_t::STREAM_K, 1}, {KnobType_t::SWIZZLE, 4}});
    if (pat.params.m >= 4096 && pat.params.n >= 4096) ranked.push_back({{KnobType_t::SWIZZLE, 4}});
    ranked.push_back({});
    return ranked;
  }

  error_t build(const GraphFacts& f, const graph::KnobMap& knobs, std::unique_ptr<Plan>& out) const override {
    if (is_moe_graph(f.graph)) return build_moe(f, config_of(knobs), out);
    if (is_swiglu_graph(f.graph)) {
      SwigluPattern sw;
      const auto c = config_of(knobs);
      if (std::string r = match_swiglu_pattern(f.graph, c, sw); !r.empty())
        return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "sm90_gemm: " + r};
      out = std::make_unique<Sm90SwigluPlan>(std::move(sw), c);
      return {};
    }
    GemmPattern pat;
    if (std::string r = match_gemm_pattern(f.graph, pat); !r.empty())
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "sm90_gemm: " + r};
    const auto c = config_of(knobs);
    if (const char* why = sm90::gemm_unsupported_reason(pat.params, c))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, std::string("sm90_gemm: ") + why};
    const auto ws = static_cast<int64_t>(sm90::gemm_workspace_size(pat.params, c));
    out = std::make_unique<Sm90GemmPlan>(std::move(pat), c, ws);
    return {};
  }

  static error_t build_moe(const GraphFacts& f, const sm90::GemmConfig& c, std::unique_ptr<Plan>& out) {
    MoePattern pat;
    if (std::string r = match_moe_pattern(f.graph, pat); !r.empty())
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "sm90_gemm: " + r};
    if (const char* why = sm90::moe_unsupported_reason(pat.params, c))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, std::string("sm90_gemm: ") + why};
    const auto ws = static_cast<int64_t>(sm90::moe_workspace_size(pat.params, c));
    out = std::make_unique<Sm90MoePlan>(std::move(pat), c, ws);
    return {};
  }

  std::vector<NumericalNote_t> numeric_notes() const override { return {NumericalNote_t::TENSOR_CORE}; }
  std::vector<BehaviorNote_t> behavior_notes() const override { return {BehaviorNote_t::SUPPORTS_CUDA_GRAPH_NATIVE_API}; }
};

const EngineRegistrar kRegister(std::make_unique<Sm90GemmEngine>());

}  // namespace
}  // namespace frost::detail
