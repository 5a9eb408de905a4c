#include "engines/sm90/gemm/engine/sm90_swiglu_pattern.h"

#include "ops/matmul/matmul_node.h"
#include "ops/pointwise/pointwise_node.h"
#include "ops/swiglu_mlp/swiglu_mlp_node.h"

namespace frost::detail {
namespace {

using graph::MatmulInput;
using graph::MatmulOutput;
using graph::PointwiseInput;
using graph::PointwiseOutput;

constexpr int64_t kAlign = 256;
int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
// Planning-time stand-in for a pointer: aligned, so the kernels' own checks run on the declaration.
void* placeholder() { return reinterpret_cast<void*>(uintptr_t{kAlign}); }

std::string where(const Node& n) { return "node '" + n.name() + "': "; }

bool to_gemm_type(DataType_t dt, sm90::GemmDtype& out) {
  switch (dt) {
    case DataType_t::BFLOAT16:
      out = sm90::GemmDtype::BF16;
      return true;
    case DataType_t::HALF:
      out = sm90::GemmDtype::FP16;
      return true;
    default:
      return false;
  }
}

std::string rank2(const Node& n, const char* port, const TensorPtr& t) {
  if (t->get_dim().size() != 2 || t->get_stride().size() != 2)
    return where(n) + port + ".dim " + dims_string(t->get_dim()) + ": the fused SwiGLU GEMM takes rank-2 operands";
  return {};
}

// The fused GEMM's operands from X, the (interleaved or to-be-packed) weight and the output it writes.
std::string set_swiglu(const Node& n, SwigluPattern& p, const TensorPtr& out_tensor) {
  sm90::SwigluParams& s = p.swiglu;
  if (!to_gemm_type(p.x->get_data_type(), s.a_type))
    return where(n) + "X is " + std::string(to_string(p.x->get_data_type())) + "; the fused SwiGLU GEMM takes BFLOAT16";
  if (!to_gemm_type(out_tensor->get_data_type(), s.d_type))
    return where(n) + "the intermediate type " + std::string(to_string(out_tensor->get_data_type())) +
           " is not one the fused SwiGLU GEMM writes";
  s.b_type = s.a_type;
  const auto& xd = p.x->get_dim();
  const auto& xs = p.x->get_stride();
  s.m = xd[0];
  s.k = xd[1];
  s.a_stride_m = xs[0];
  s.a_stride_k = xs[1];
  s.a = s.w = placeholder();
  s.h = placeholder();
  if (p.gate_up) {
    s.f = p.gate_up->get_dim()[1] / 2;
    s.w_stride_k = p.gate_up->get_stride()[0];
    s.w_stride_n = p.gate_up->get_stride()[1];
  } else {
    s.f = p.gate->get_dim()[1];
    if (p.gate->get_data_type() != p.x->get_data_type() || p.up->get_data_type() != p.x->get_data_type())
      return where(n) + "gate and up weights must have X's data type";
    sm90::SwigluPackParams& k = p.packing;
    k.type = s.a_type;
    k.k = s.k;
    k.f = s.f;
    k.gate = k.up = k.dst = placeholder();
    k.gate_stride_k = p.gate->get_stride()[0];
    k.gate_stride_n = p.gate->get_stride()[1];
    k.up_stride_k = p.up->get_stride()[0];
    k.up_stride_n = p.up->get_stride()[1];
    if (const char* why = sm90::swiglu_pack_unsupported_reason(k)) return where(n) + "W_GATE/W_UP: " + why;
    p.pack = true;
    const bool k_major = sm90::swiglu_pack_k_major(k);
    s.w_stride_k = k_major ? 1 : 2 * s.f;
    s.w_stride_n = k_major ? s.k : 1;
  }
  const auto& os = out_tensor->get_stride();
  if (os[1] != 1 && s.f > 1) return where(n) + "the SwiGLU output must be row-major (stride[1] == 1)";
  s.h_stride_m = os[0];
  return {};
}

std::string match_mlp(const SwigluMlpNode& n, SwigluPattern& p) {
  using I = graph::SwigluMlpInput;
  p.mlp = true;
  SwigluMlpExtents ext;
  if (n.validate_inputs(ext).is_bad()) return where(n) + "inputs fail validation";
  p.x = n.in(I::X), p.gate = n.in(I::W_GATE), p.up = n.in(I::W_UP), p.gate_up = n.in(I::W_GATE_UP);
  p.down = n.in(I::W_DOWN), p.output = n.out(graph::SwigluMlpOutput::Y);
  if (p.output->get_is_virtual()) return where(n) + "Y is virtual";
  // The intermediate lives in the workspace as [T, F] row-major, in X's type (the op's rounding rule).
  auto mid = std::make_shared<graph::Tensor_attributes>();
  mid->set_dim({ext.t, ext.f}).set_stride({ext.f, 1}).set_data_type(p.x->get_data_type());
  if (std::string r = set_swiglu(n, p, mid); !r.empty()) return r;
  sm90::GemmParams& d = p.down_gemm;
  d.a_type = d.b_type = p.swiglu.a_type;
  if (p.output->get_data_type() != p.x->get_data_type())
    return where(n) + "Y is " + std::string(to_string(p.output->get_data_type())) + "; the sm90 path writes X's type";
  d.d_type = p.swiglu.a_type;
  d.m = ext.t, d.n = ext.h, d.k = ext.f;
  d.a_stride_m = ext.f, d.a_stride_k = 1;
  d.b_stride_k = p.down->get_stride()[0], d.b_stride_n = p.down->get_stride()[1];
  d.d_stride_m = p.output->get_stride()[0], d.d_stride_n = p.output->get_stride()[1];
  d.a = d.b = placeholder();
  d.d = placeholder();
  return {};
}

// matmul(X, W_gate) -> SWISH -> MUL <- matmul(X, W_up).
std::string match_gate_up(const GraphState& g, SwigluPattern& p) {
  const MatmulNode* mm[2] = {nullptr, nullptr};
  const PointwiseNode *swish = nullptr, *mul = nullptr;
  int mms = 0;
  for (const auto& node : g.nodes) {
    if (const auto* m = dynamic_cast<const MatmulNode*>(node.get()); m && mms < 2) {
      mm[mms++] = m;
    } else if (const auto* pw = dynamic_cast<const PointwiseNode*>(node.get())) {
      if (pw->attr.mode == PointwiseMode_t::SWISH_FWD && !swish)
        swish = pw;
      else if (pw->attr.mode == PointwiseMode_t::MUL && !mul)
        mul = pw;
      else
        return where(*pw) + "pointwise mode " + std::string(to_string(pw->attr.mode)) + " in a SwiGLU graph";
    } else {
      return where(*node) + std::string(node->tag()) + " in a SwiGLU graph";
    }
  }
  if (mms != 2 || !swish || !mul) return "a SwiGLU graph is two MATMULs, one SWISH_FWD and one MUL";
  if (swish->attr.swish_beta.value_or(1.f) != 1.f)
    return where(*swish) + "swish_beta " + std::to_string(*swish->attr.swish_beta) + ": the fused GEMM computes silu";
  const TensorPtr s_in = swish->in(PointwiseInput::IN_0), s_out = swish->out(PointwiseOutput::OUT_0);
  const MatmulNode* gate_mm = mm[0]->out(MatmulOutput::C) == s_in ? mm[0] : mm[1];
  const MatmulNode* up_mm = gate_mm == mm[0] ? mm[1] : mm[0];
  if (gate_mm->out(MatmulOutput::C) != s_in) return where(*swish) + "SWISH must read a MATMUL's output";
  const TensorPtr up_out = up_mm->out(MatmulOutput::C);
  const TensorPtr a = mul->in(PointwiseInput::IN_0), b = mul->in(PointwiseInput::IN_1);
  if (!((a == s_out && b == up_out) || (a == up_out && b == s_out)))
    return where(*mul) + "MUL must take the SWISH output and the other MATMUL's output";
  for (const MatmulNode* m : {gate_mm, up_mm})
    for (auto port : {MatmulInput::M_OVERRIDE, MatmulInput::N_OVERRIDE, MatmulInput::K_OVERRIDE})
      if (m->in(port)) return where(*m) + "m/n/k override tensors";
  if (gate_mm->in(MatmulInput::A) != up_mm->in(MatmulInput::A))
    return where(*up_mm) + "A must be the gate MATMUL's A (one X for both projections)";
  for (const TensorPtr& link : {s_in, up_out, s_out})
    if (!link->get_is_virtual() || link->get_data_type() != DataType_t::FLOAT)
      return "tensor '" + link->get_name() + "' must be virtual FLOAT: the fused GEMM keeps gate, up and silu in FP32";
  p.x = gate_mm->in(MatmulInput::A);
  p.gate = gate_mm->in(MatmulInput::B);
  p.up = up_mm->in(MatmulInput::B);
  p.output = mul->out(PointwiseOutput::OUT_0);
  if (p.output->get_is_virtual()) return where(*mul) + "the MUL output must be a graph output";
  for (const auto& [port, t] : {std::pair{"A", p.x}, {"B", p.gate}, {"B", p.up}})
    if (std::string r = rank2(*gate_mm, port, t); !r.empty()) return r;
  if (std::string r = rank2(*mul, "OUT_0", p.output); !r.empty()) return r;
  if (p.gate->get_dim() != p.up->get_dim())
    return where(*up_mm) + "B.dim " + dims_string(p.up->get_dim()) + " differs from the gate weight's " +
           dims_string(p.gate->get_dim());
  return set_swiglu(*mul, p, p.output);
}

}  // namespace

bool is_swiglu_graph(const GraphState& g) {
  if (g.nodes.size() == 1) return dynamic_cast<const SwigluMlpNode*>(g.nodes[0].get()) != nullptr;
  if (g.nodes.size() != 4) return false;
  int mms = 0, swish = 0;
  for (const auto& n : g.nodes) {
    mms += dynamic_cast<const MatmulNode*>(n.get()) != nullptr;
    const auto* pw = dynamic_cast<const PointwiseNode*>(n.get());
    swish += pw && pw->attr.mode == PointwiseMode_t::SWISH_FWD;
  }
  return mms == 2 && swish == 1;
}

std::string match_swiglu_pattern(const GraphState& g, const sm90::GemmConfig& config, SwigluPattern& out) {
  out = {};
  std::string r =
      g.nodes.size() == 1 ? match_mlp(static_cast<const SwigluMlpNode&>(*g.nodes[0]), out) : match_gate_up(g, out);
  if (!r.empty()) return r;
  if (const char* why = sm90::swiglu_unsupported_reason(out.swiglu, config)) return why;
  // The down GEMM picks its own tile (long k-loops: stream-K tails); only the raster swizzle carries over.
  out.down_config.swizzle = config.swizzle;
  if (out.mlp && sm90::stream_k_pays(out.down_gemm)) {
    out.down_config.tile_n = 256;
    out.down_config.stream_k = 1;
  }
  if (out.mlp)
    if (const char* why = sm90::gemm_unsupported_reason(out.down_gemm, out.down_config))
      return std::string("down projection: ") + why;
  const int64_t esize = 2;
  int64_t at = 0;
  out.packed_offset = at;
  if (out.pack) at += aligned(2 * out.swiglu.k * out.swiglu.f * esize);
  out.mid_offset = at;
  if (out.mlp) at += aligned(out.swiglu.m * out.swiglu.f * esize);
  out.swiglu_offset = at;
  at += aligned(static_cast<int64_t>(sm90::swiglu_workspace_size(out.swiglu, config)));
  out.down_offset = at;
  if (out.mlp) at += aligned(static_cast<int64_t>(sm90::gemm_workspace_size(out.down_gemm, out.down_config)));
  out.workspace = at;
  return {};
}

error_t run_swiglu(const SwigluPattern& pat, const sm90::GemmConfig& config, const VariantPack& pack, void* workspace,
                   cudaStream_t stream) {
  auto ptr = [&](const TensorPtr& t) -> void* { return t ? pack.at(t->get_uid()) : nullptr; };
  auto failed = [](const char* what, const char* why) {
    return error_t{error_code_t::INVALID_VARIANT_PACK, std::string("sm90_gemm: ") + what + why};
  };
  auto launch_error = [](const char* what, cudaError_t e) {
    return error_t{error_code_t::CUDA_API_FAILED, std::string("sm90_gemm ") + what + ": " + cudaGetErrorString(e)};
  };
  if (pat.workspace > 0 && (!workspace || reinterpret_cast<uintptr_t>(workspace) % kAlign))
    return {error_code_t::INVALID_VARIANT_PACK, "sm90_gemm: the workspace must be a 256-byte aligned device pointer"};
  char* ws = static_cast<char*>(workspace);
  sm90::SwigluParams s = pat.swiglu;
  s.a = ptr(pat.x);
  s.h = pat.mlp ? ws + pat.mid_offset : ptr(pat.output);
  if (pat.pack) {
    sm90::SwigluPackParams k = pat.packing;
    k.gate = ptr(pat.gate);
    k.up = ptr(pat.up);
    k.dst = ws + pat.packed_offset;
    if (const char* why = sm90::swiglu_pack_unsupported_reason(k)) return failed("", why);
    if (cudaError_t e = sm90::swiglu_pack_weights(k, stream); e != cudaSuccess) return launch_error("pack", e);
    s.w = k.dst;
  } else {
    s.w = ptr(pat.gate_up);
  }
  if (const char* why = sm90::swiglu_unsupported_reason(s, config)) return failed("", why);
  if (cudaError_t e = sm90::swiglu(s, config, ws + pat.swiglu_offset, stream); e != cudaSuccess)
    return launch_error("swiglu", e);
  if (!pat.mlp) return {};
  sm90::GemmParams d = pat.down_gemm;
  d.a = s.h;
  d.b = ptr(pat.down);
  d.d = ptr(pat.output);
  if (const char* why = sm90::gemm_unsupported_reason(d, pat.down_config)) return failed("down projection: ", why);
  if (cudaError_t e = sm90::gemm(d, pat.down_config, ws + pat.down_offset, stream); e != cudaSuccess)
    return launch_error("down projection", e);
  return {};
}

}  // namespace frost::detail
