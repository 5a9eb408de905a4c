// Engine family `sm90_linear_attention`: a graph of one GDN or KDA forward node, or one GDN or KDA backward node, on
// an sm_90 GPU, served by the chunked kernels in ../ (K = V = 128, BF16/FP16 data, FP32 state). What the kernels do
// not serve (other head sizes, FP32 or FP64 data, odd strides) is declined by name.
#include <cuda_runtime.h>

#include <cmath>
#include <initializer_list>
#include <mutex>
#include <optional>

#include "engines/sm90/common/sm90_device_check.h"
#include "engines/sm90/linear_attention/sm90_gdn.h"
#include "graph/shape_util.h"
#include "ops/linear_attention/linear_attention_node.h"
#include "plan/engine.h"
#include "runtime/device.h"

namespace frost::detail {
namespace {

using sm90::GdnDtype;

struct GdnView {
  const Node* node = nullptr;
  bool kda = false;
  bool backward = false;
  bool l2norm = false;
  std::optional<float> scale;
  TensorPtr q, k, v, g, beta, init, cu, indices, o, final_state;
  TensorPtr d_o, d_final, dq, dk, dv, dg, dbeta, d_init;  // the backward's ports
};

#define FROST_LA_CHECK(expr)                          \
  do {                                                \
    if (std::string r = (expr); !r.empty()) return r; \
  } while (0)

std::string type_name(const TensorPtr& t) { return std::string(to_string(t->get_data_type())); }

std::string io_type(const char* port, const TensorPtr& t, GdnDtype& out) {
  switch (t->get_data_type()) {
    case DataType_t::BFLOAT16:
      out = GdnDtype::BF16;
      return {};
    case DataType_t::HALF:
      out = GdnDtype::FP16;
      return {};
    default:
      return std::string(port) + " data type " + type_name(t) + " (BFLOAT16 or HALF only)";
  }
}

// g and beta: FLOAT, or the type of q.
std::string gate_type(const char* port, const TensorPtr& t, GdnDtype io, GdnDtype& out) {
  if (t->get_data_type() == DataType_t::FLOAT) {
    out = GdnDtype::FP32;
    return {};
  }
  if (std::string r = io_type(port, t, out); !r.empty() || out != io)
    return std::string(port) + " data type " + type_name(t) + " (FLOAT or Q's type only)";
  return {};
}

// A [B, T, heads, 128] operand: last axis contiguous, the others in 16-byte steps.
std::string row_strides(const char* port, const TensorPtr& t, int64_t out[3]) {
  const auto& s = t->get_stride();
  if (s.size() != 4 || s[3] != 1) return std::string(port) + " stride " + dims_string(s) + " (last axis must be 1)";
  for (int i = 0; i < 3; ++i) {
    if (s[i] % 8 != 0 || s[i] < 0)
      return std::string(port) + " stride " + std::to_string(s[i]) + " on axis " + std::to_string(i) +
             " (a non-negative multiple of 8 elements only)";
    out[i] = s[i];
  }
  return {};
}

// g [B, T, HV] (GDN) or [B, T, HV, K] (KDA), beta [B, T, HV]: any non-negative strides.
std::string gate_strides(const char* port, const TensorPtr& t, size_t rank, int64_t out[]) {
  const auto& s = t->get_stride();
  if (s.size() != rank)
    return std::string(port) + " rank " + std::to_string(s.size()) + " (" + std::to_string(rank) + " only)";
  for (size_t i = 0; i < rank; ++i) {
    if (s[i] < 0) return std::string(port) + " stride " + std::to_string(s[i]) + " (negative)";
    out[i] = s[i];
  }
  return {};
}

std::string packed_state(const char* port, const TensorPtr& t) {
  if (t->get_data_type() != DataType_t::FLOAT)
    return std::string(port) + " data type " + type_name(t) + " (FLOAT only)";
  if (t->get_stride() != packed_strides(t->get_dim()))
    return std::string(port) + " stride " + dims_string(t->get_stride()) + " (packed [N, HV, K, V] only)";
  return {};
}

std::string problem_of(const GdnView& v, sm90::GdnFwdParams& p) {
  const Node& n = *v.node;
  if (n.compute_data_type() == DataType_t::DOUBLE) return "compute_data_type DOUBLE (FP32 compute only)";
  const auto& qd = v.q->get_dim();
  const auto& vd = v.v->get_dim();
  if (qd[3] != sm90::kGdnHeadDim) return "key head dim K " + std::to_string(qd[3]) + " (128 only)";
  if (vd[3] != sm90::kGdnHeadDim) return "value head dim V " + std::to_string(vd[3]) + " (128 only)";
  FROST_LA_CHECK(io_type("Q", v.q, p.io));
  for (const auto& [port, t] : {std::pair{"K", v.k}, {"V", v.v}, {"O", v.o}})
    if (t && t->get_data_type() != v.q->get_data_type())
      return std::string(port) + " data type " + type_name(t) + " differs from Q's " + type_name(v.q);
  FROST_LA_CHECK(gate_type("G", v.g, p.io, p.g_dtype));
  FROST_LA_CHECK(gate_type("BETA", v.beta, p.io, p.beta_dtype));
  FROST_LA_CHECK(row_strides("Q", v.q, p.q_stride));
  FROST_LA_CHECK(row_strides("K", v.k, p.k_stride));
  FROST_LA_CHECK(row_strides("V", v.v, p.v_stride));
  if (v.o) FROST_LA_CHECK(row_strides("O", v.o, p.o_stride));
  FROST_LA_CHECK(gate_strides("G", v.g, v.kda ? 4 : 3, p.g_stride));
  FROST_LA_CHECK(gate_strides("BETA", v.beta, 3, p.beta_stride));
  if (v.init) FROST_LA_CHECK(packed_state("INITIAL_STATE", v.init));
  if (v.final_state) FROST_LA_CHECK(packed_state("FINAL_STATE", v.final_state));
  p.batch = qd[0], p.len = qd[1], p.heads = qd[2], p.value_heads = vd[2];
  p.sequences = v.cu ? v.cu->get_dim()[0] - 1 : qd[0];
  p.state_rows = v.init ? v.init->get_dim()[0] : p.sequences;
  p.cu_int64 = v.cu && v.cu->get_data_type() == DataType_t::INT64;
  p.l2norm = v.l2norm;
  p.per_key_decay = v.kda;
  p.scale = v.scale ? *v.scale : 1.f / std::sqrt(static_cast<float>(qd[3]));
  if (const char* why = sm90::gdn_fwd_unsupported_reason(p)) return why;
  return {};
}

// The backward's own ports: dO and the gradients have Q's data type and 16-byte rows; DG and DBETA are FLOAT or
// Q's type with any strides; the state gradients packed FP32.
std::string backward_of(const GdnView& v, sm90::GdnBwdParams& bp) {
  FROST_LA_CHECK(problem_of(v, bp.fwd));
  for (const auto& [port, t] : {std::pair{"DO", v.d_o}, {"DQ", v.dq}, {"DK", v.dk}, {"DV", v.dv}})
    if (t->get_data_type() != v.q->get_data_type())
      return std::string(port) + " data type " + type_name(t) + " differs from Q's " + type_name(v.q);
  FROST_LA_CHECK(row_strides("DO", v.d_o, bp.do_stride));
  FROST_LA_CHECK(row_strides("DQ", v.dq, bp.dq_stride));
  FROST_LA_CHECK(row_strides("DK", v.dk, bp.dk_stride));
  FROST_LA_CHECK(row_strides("DV", v.dv, bp.dv_stride));
  FROST_LA_CHECK(gate_type("DG", v.dg, bp.fwd.io, bp.dg_dtype));
  FROST_LA_CHECK(gate_type("DBETA", v.dbeta, bp.fwd.io, bp.dbeta_dtype));
  FROST_LA_CHECK(gate_strides("DG", v.dg, v.kda ? 4 : 3, bp.dg_stride));
  FROST_LA_CHECK(gate_strides("DBETA", v.dbeta, 3, bp.dbeta_stride));
  if (v.d_final) FROST_LA_CHECK(packed_state("D_FINAL_STATE", v.d_final));
  if (v.d_init) FROST_LA_CHECK(packed_state("D_INITIAL_STATE", v.d_init));
  if (const char* why = sm90::gdn_bwd_unsupported_reason(bp)) return why;
  return {};
}

template <class F>
void bind_ports(const F& f, GdnView& v) {
  v.node = &f;
  v.l2norm = f.attr.use_qk_l2norm_in_kernel;
  v.scale = f.attr.scale;
  v.q = f.in(LinIn::Q), v.k = f.in(LinIn::K), v.v = f.in(LinIn::V), v.g = f.in(LinIn::G);
  v.beta = f.in(LinIn::BETA), v.init = f.in(LinIn::INITIAL_STATE), v.cu = f.in(LinIn::CU_SEQLENS);
  v.indices = f.in(LinIn::STATE_INDICES), v.o = f.out(LinOut::O), v.final_state = f.out(LinOut::FINAL_STATE);
  v.d_o = f.in(LinIn::DO), v.d_final = f.in(LinIn::D_FINAL_STATE);
  v.dq = f.out(LinOut::DQ), v.dk = f.out(LinOut::DK), v.dv = f.out(LinOut::DV), v.dg = f.out(LinOut::DG);
  v.dbeta = f.out(LinOut::DBETA), v.d_init = f.out(LinOut::D_INITIAL_STATE);
}

bool view_of(const GraphState& g, GdnView& v, std::string& why) {
  why = "serves graphs of exactly one GDN, KDA, GDN_BACKWARD or KDA_BACKWARD node";
  if (g.nodes.size() != 1) return false;
  const Node* n = g.nodes[0].get();
  if (const auto* f = dynamic_cast<const GdnNode*>(n)) {
    bind_ports(*f, v);
  } else if (const auto* k = dynamic_cast<const KdaNode*>(n)) {
    bind_ports(*k, v);
    v.kda = true;
  } else if (const auto* b = dynamic_cast<const GdnBackwardNode*>(n)) {
    bind_ports(*b, v);
    v.backward = true;
  } else if (const auto* kb = dynamic_cast<const KdaBackwardNode*>(n)) {
    bind_ports(*kb, v);
    v.backward = true;
    v.kda = true;
  } else {
    return false;
  }
  why.clear();
  return true;
}

#undef FROST_LA_CHECK

void* bind(const VariantPack& pack, const TensorPtr& t) { return t ? pack.at(t->get_uid()) : nullptr; }

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The forward's inputs, which the backward recomputes from as well.
void bind_forward_inputs(const VariantPack& pack, const GdnView& v, sm90::GdnFwdParams& p) {
  p.q = bind(pack, v.q), p.k = bind(pack, v.k), p.v = bind(pack, v.v), p.g = bind(pack, v.g);
  p.beta = bind(pack, v.beta);
  p.initial_state = static_cast<const float*>(bind(pack, v.init));
  p.cu_seqlens = bind(pack, v.cu);
  p.state_indices = static_cast<const int32_t*>(bind(pack, v.indices));
}

struct PortAlignment {
  const char* port;
  const void* ptr;
  int bytes;
};

// The alignments the kernels' accesses need and the workspace's, checked before anything is enqueued.
error_t check_alignment(std::initializer_list<PortAlignment> ports, int64_t workspace_bytes, const void* workspace) {
  for (const PortAlignment& a : ports)
    if (!aligned(a.ptr, static_cast<uintptr_t>(a.bytes)))
      return {error_code_t::INVALID_VARIANT_PACK, std::string("sm90_linear_attention: ") + a.port +
                                                      " device pointer is not " + std::to_string(a.bytes) +
                                                      "-byte aligned"};
  if (workspace_bytes > 0 && (!workspace || !aligned(workspace, 256)))
    return {error_code_t::INVALID_VARIANT_PACK, "sm90_linear_attention: workspace missing or not 256-byte aligned"};
  return {};
}

// The side stream and events of an overlapped run (sm90::GdnOverlap), made with the plan.
class OverlapResources {
 public:
  OverlapResources() = default;
  OverlapResources(const OverlapResources&) = delete;
  OverlapResources& operator=(const OverlapResources&) = delete;
  ~OverlapResources() {
    if (r_.join) cudaEventDestroy(r_.join);
    if (r_.fork) cudaEventDestroy(r_.fork);
    if (r_.pass_stream) cudaStreamDestroy(r_.pass_stream);
  }
  cudaError_t create() {
    int least = 0, greatest = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&r_.pass_stream, cudaStreamNonBlocking, greatest);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&r_.fork, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&r_.join, cudaEventDisableTiming);
    return e;
  }
  const sm90::GdnOverlap& get() const { return r_; }
  // The fork and join events are shared by every call of the plan: one enqueue at a time.
  std::mutex& enqueue_lock() const { return mutex_; }

 private:
  sm90::GdnOverlap r_;
  mutable std::mutex mutex_;
};

// The resources of a plan that overlaps (k.overlap), else none.
cudaError_t overlap_for(const sm90::GdnPlan& k, std::unique_ptr<OverlapResources>& out) {
  if (!k.overlap) return cudaSuccess;
  out = std::make_unique<OverlapResources>();
  return out->create();
}

class Sm90GdnFwdPlan final : public Plan {
 public:
  Sm90GdnFwdPlan(GdnView v, const sm90::GdnFwdParams& p, const sm90::GdnPlan& k,
                 std::unique_ptr<OverlapResources> overlap)
      : v_(std::move(v)), p_(p), k_(k), overlap_(std::move(overlap)) {}
  int64_t workspace_size() const override { return k_.workspace_bytes; }

  error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const override {
    sm90::GdnFwdParams p = p_;
    bind_forward_inputs(pack, v_, p);
    p.o = bind(pack, v_.o);
    p.final_state = static_cast<float*>(bind(pack, v_.final_state));
    // Rows are copied 16 bytes at a time and outputs written in pairs.
    if (error_t e = check_alignment({{"Q", p.q, 16},
                                     {"K", p.k, 16},
                                     {"V", p.v, 16},
                                     {"O", p.o, 4},
                                     {"INITIAL_STATE", p.initial_state, 16},
                                     {"FINAL_STATE", p.final_state, 16}},
                                    k_.workspace_bytes, workspace);
        e.is_bad())
      return e;
    const auto stream = static_cast<cudaStream_t>(handle.stream());
    cudaError_t e;
    if (overlap_) {
      const std::lock_guard<std::mutex> lock(overlap_->enqueue_lock());
      e = sm90::gdn_fwd(p, k_, workspace, stream, nullptr, &overlap_->get());
    } else {
      e = sm90::gdn_fwd(p, k_, workspace, stream);
    }
    if (e != cudaSuccess)
      return {error_code_t::CUDA_API_FAILED, std::string("sm90_linear_attention launch: ") + cudaGetErrorString(e)};
    return {};
  }

 private:
  GdnView v_;
  sm90::GdnFwdParams p_;
  sm90::GdnPlan k_;
  std::unique_ptr<OverlapResources> overlap_;
};

class Sm90GdnBwdPlan final : public Plan {
 public:
  Sm90GdnBwdPlan(GdnView v, const sm90::GdnBwdParams& p, const sm90::GdnPlan& k,
                 std::unique_ptr<OverlapResources> overlap)
      : v_(std::move(v)), p_(p), k_(k), overlap_(std::move(overlap)) {}
  int64_t workspace_size() const override { return k_.workspace_bytes; }

  error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const override {
    sm90::GdnBwdParams p = p_;
    sm90::GdnFwdParams& f = p.fwd;
    bind_forward_inputs(pack, v_, f);
    p.d_o = bind(pack, v_.d_o);
    p.d_final_state = static_cast<const float*>(bind(pack, v_.d_final));
    p.d_initial_state = static_cast<float*>(bind(pack, v_.d_init));
    p.dq = bind(pack, v_.dq), p.dk = bind(pack, v_.dk), p.dv = bind(pack, v_.dv), p.dg = bind(pack, v_.dg);
    p.dbeta = bind(pack, v_.dbeta);
    // Rows are copied 16 bytes at a time, dQ and dK written 8 bytes and dV 4 bytes at a time.
    if (error_t e = check_alignment({{"Q", f.q, 16},
                                     {"K", f.k, 16},
                                     {"V", f.v, 16},
                                     {"DO", p.d_o, 16},
                                     {"DQ", p.dq, 8},
                                     {"DK", p.dk, 8},
                                     {"DV", p.dv, 4},
                                     {"INITIAL_STATE", f.initial_state, 16},
                                     {"D_FINAL_STATE", p.d_final_state, 16},
                                     {"D_INITIAL_STATE", p.d_initial_state, 16}},
                                    k_.workspace_bytes, workspace);
        e.is_bad())
      return e;
    const auto stream = static_cast<cudaStream_t>(handle.stream());
    cudaError_t e;
    if (overlap_) {
      const std::lock_guard<std::mutex> lock(overlap_->enqueue_lock());
      e = sm90::gdn_bwd(p, k_, workspace, stream, &overlap_->get());
    } else {
      e = sm90::gdn_bwd(p, k_, workspace, stream);
    }
    if (e != cudaSuccess)
      return {error_code_t::CUDA_API_FAILED, std::string("sm90_linear_attention launch: ") + cudaGetErrorString(e)};
    return {};
  }

 private:
  GdnView v_;
  sm90::GdnBwdParams p_;
  sm90::GdnPlan k_;
  std::unique_ptr<OverlapResources> overlap_;
};

error_t plan_failed(cudaError_t e) {
  return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED,
          std::string("sm90_linear_attention: ") + cudaGetErrorString(e)};
}

class Sm90LinearAttentionEngine final : public EngineFamily {
 public:
  std::string_view name() const override { return "sm90_linear_attention"; }
  int64_t engine_id() const override { return 10500; }
  EngineClass engine_class() const override { return EngineClass::SM90; }

  // KERNEL_CFG: the state pass (of a backward: its recording run), 0 mma.sync (every op), 1 wgmma (GDN only), 2
  // wgmma with the reverse pass on wgmma too (GDN backward; its default). TILE_COLS: value columns of the
  // state each state-pass CTA owns (32 or 64 for mma.sync, 64 or 128 for wgmma; a backward's mma.sync reverse pass
  // takes the same with KERNEL_CFG 0, else its heuristic's; the wgmma one 64 or 128). KERNEL_OVERLAP 0:
  // GDN's chunk kernel and wgmma state pass, and the backward's reverse pass and gradient kernel, one after the
  // other even where they could run at once (for a process held to fewer SMs than the device reports, e.g. an MPS
  // client, where the pass's waiting CTAs could take every SM it gets). Performance only.
  std::vector<Knob> knob_space(const GraphFacts&) const override {
    return {
        {KnobType_t::TILE_COLS, 32, 128, 32}, {KnobType_t::KERNEL_CFG, 0, 2, 1}, {KnobType_t::KERNEL_OVERLAP, 0, 1, 1}};
  }

  std::string support(const GraphFacts& f) const override {
    if (std::string r = sm90_device_reason(f.device); !r.empty()) return r;
    GdnView v;
    std::string why;
    if (!view_of(f.graph, v, why)) return why;
    if (v.backward) {
      sm90::GdnBwdParams bp;
      return backward_of(v, bp);
    }
    sm90::GdnFwdParams p;
    return problem_of(v, p);
  }

  error_t build(const GraphFacts& f, const graph::KnobMap& knobs, std::unique_ptr<Plan>& out) const override {
    GdnView v;
    std::string why;
    if (!view_of(f.graph, v, why))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "sm90_linear_attention: " + why};
    // The plan's sizes depend on whether the optional ports are bound, not on their addresses.
    const auto placeholder = reinterpret_cast<const void*>(uintptr_t{256});
    const auto knob = knobs.find(KnobType_t::TILE_COLS);
    const int slice = knob == knobs.end() ? 0 : static_cast<int>(knob->second);
    const auto cfg_knob = knobs.find(KnobType_t::KERNEL_CFG);
    int pass_kernel = cfg_knob != knobs.end() ? static_cast<int>(cfg_knob->second) : 0;
    // Neither knob: the heuristic picks the pass and its slice.
    if (cfg_knob == knobs.end() && knob == knobs.end()) pass_kernel = sm90::kPassAuto;
    if (pass_kernel == 1 && v.kda)
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED,
              "sm90_linear_attention: KERNEL_CFG 1 (the wgmma state pass) serves GDN only"};
    if (pass_kernel == 2 && (v.kda || !v.backward))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED,
              "sm90_linear_attention: KERNEL_CFG 2 (the wgmma reverse pass) serves the GDN backward only"};
    if (slice == 96 || (pass_kernel == 0 && slice == 128) || (pass_kernel >= 1 && slice == 32))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED,
              "sm90_linear_attention: TILE_COLS " + std::to_string(slice) + " with KERNEL_CFG " +
                  std::to_string(pass_kernel) + " (mma.sync pass: 32 or 64; wgmma pass: 64 or 128)"};
    detail::DeviceFacts device;
    if (!detail::query_device(f.device.ordinal, device))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED,
              "sm90_linear_attention: cannot query " + f.device.to_string()};
    const auto overlap_knob = knobs.find(KnobType_t::KERNEL_OVERLAP);
    const bool overlap_on = overlap_knob == knobs.end() || overlap_knob->second == 1;
    const int sm_count = overlap_on ? device.sm_count : 0;
    sm90::GdnPlan k;
    std::unique_ptr<OverlapResources> overlap;
    if (v.backward) {
      sm90::GdnBwdParams bp;
      if (std::string r = backward_of(v, bp); !r.empty())
        return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "sm90_linear_attention: " + r};
      bp.fwd.cu_seqlens = v.cu ? placeholder : nullptr;
      cudaError_t e = sm90::gdn_bwd_plan(bp, slice, k, pass_kernel, device.sm_count, overlap_on);
      if (e == cudaSuccess) e = overlap_for(k, overlap);
      if (e != cudaSuccess) return plan_failed(e);
      out = std::make_unique<Sm90GdnBwdPlan>(std::move(v), bp, k, std::move(overlap));
      return {};
    }
    sm90::GdnFwdParams p;
    if (std::string r = problem_of(v, p); !r.empty())
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "sm90_linear_attention: " + r};
    p.cu_seqlens = v.cu ? placeholder : nullptr;
    cudaError_t e = sm90::gdn_fwd_plan(p, slice, k, pass_kernel, sm_count);
    if (e == cudaSuccess) e = overlap_for(k, overlap);
    if (e != cudaSuccess) return plan_failed(e);
    out = std::make_unique<Sm90GdnFwdPlan>(std::move(v), p, k, std::move(overlap));
    return {};
  }

  std::vector<BehaviorNote_t> behavior_notes() const override {
    return {BehaviorNote_t::SUPPORTS_CUDA_GRAPH_NATIVE_API};
  }
};

const EngineRegistrar kRegister(std::make_unique<Sm90LinearAttentionEngine>());

}  // namespace
}  // namespace frost::detail
