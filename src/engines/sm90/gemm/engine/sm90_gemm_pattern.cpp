#include "engines/sm90/gemm/engine/sm90_gemm_pattern.h"

#include "ops/pointwise/pointwise_node.h"

namespace frost::detail {
namespace {

using graph::MatmulInput;
using graph::MatmulOutput;
using graph::PointwiseInput;
using graph::PointwiseOutput;

bool to_gemm_type(DataType_t dt, sm90::GemmDtype& out) {
  switch (dt) {
    case DataType_t::BFLOAT16: out = sm90::GemmDtype::BF16; return true;
    case DataType_t::HALF: out = sm90::GemmDtype::FP16; return true;
    case DataType_t::FLOAT: out = sm90::GemmDtype::FP32; return true;
    case DataType_t::FP8_E4M3: out = sm90::GemmDtype::E4M3; return true;
    case DataType_t::FP8_E5M2: out = sm90::GemmDtype::E5M2; return true;
    default: return false;
  }
}

bool to_activation(const graph::Pointwise_attributes& a, sm90::GemmAct& out) {
  switch (a.mode) {
    case PointwiseMode_t::RELU_FWD:
      if (a.relu_lower_clip.value_or(0.f) != 0.f || a.relu_upper_clip || a.relu_lower_clip_slope.value_or(0.f) != 0.f)
        return false;
      out = sm90::GemmAct::RELU;
      return true;
    case PointwiseMode_t::GELU_FWD: out = sm90::GemmAct::GELU; return true;
    case PointwiseMode_t::GELU_APPROX_TANH_FWD: out = sm90::GemmAct::GELU_TANH; return true;
    case PointwiseMode_t::SIGMOID_FWD: out = sm90::GemmAct::SIGMOID; return true;
    case PointwiseMode_t::SWISH_FWD:
      if (a.swish_beta.value_or(1.f) != 1.f) return false;
      out = sm90::GemmAct::SILU;
      return true;
    default: return false;
  }
}

// The operand of an ADD that is not the chain tensor `link`.
TensorPtr other_operand(const PointwiseNode& n, const TensorPtr& link) {
  const TensorPtr a = n.in(PointwiseInput::IN_0), b = n.in(PointwiseInput::IN_1);
  return a == link ? b : (b == link ? a : nullptr);
}

// [b, m, k] view of a rank-2 or rank-3 tensor: (batch extent, stride), then the two matrix axes.
struct View3 {
  int64_t batch = 1, s_batch = 0, rows = 0, cols = 0, s_rows = 0, s_cols = 0;
};
bool view3(const graph::Tensor_attributes& t, View3& v) {
  const auto& d = t.get_dim();
  const auto& s = t.get_stride();
  if (d.size() == 2) {
    v = {1, 0, d[0], d[1], s[0], s[1]};
    return true;
  }
  if (d.size() == 3) {
    v = {d[0], d[0] == 1 ? 0 : s[0], d[1], d[2], s[1], s[2]};
    return true;
  }
  return false;
}

}  // namespace

std::string match_gemm_pattern(const GraphState& g, GemmPattern& out) {
  if (g.nodes.empty()) return "empty graph";
  out.matmul = dynamic_cast<const MatmulNode*>(g.nodes[0].get());
  if (!out.matmul) return "serves graphs that start with a MATMUL node";
  const MatmulNode& mm = *out.matmul;
  for (auto port : {MatmulInput::M_OVERRIDE, MatmulInput::N_OVERRIDE, MatmulInput::K_OVERRIDE})
    if (mm.in(port)) return "node '" + mm.name() + "': m/n/k override tensors";
  const TensorPtr a = mm.in(MatmulInput::A), b = mm.in(MatmulInput::B);
  TensorPtr link = mm.out(MatmulOutput::C);
  View3 va, vb, vc;
  if (!view3(*a, va) || !view3(*b, vb) || !view3(*link, vc) || a->get_dim().size() != b->get_dim().size())
    return "node '" + mm.name() + "': operands of rank 2 or 3 (same rank) only";

  // Walk the epilogue chain.
  for (size_t i = 1; i < g.nodes.size(); ++i) {
    const auto* pw = dynamic_cast<const PointwiseNode*>(g.nodes[i].get());
    if (!pw) return "node '" + g.nodes[i]->name() + "' (" + std::string(g.nodes[i]->tag()) + ") cannot join a GEMM epilogue";
    if (!link->get_is_virtual()) return "node '" + g.nodes[i]->name() + "': the epilogue may only read the last link";
    if (link->get_data_type() != DataType_t::FLOAT)
      return "virtual tensor '" + link->get_name() + "' is " + std::string(to_string(link->get_data_type())) +
             "; the fused epilogue keeps FP32 between links";
    const auto& attr = pw->attr;
    if (attr.mode == PointwiseMode_t::ADD) {
      const TensorPtr operand = other_operand(*pw, link);
      if (!operand || operand->get_is_virtual()) return "node '" + pw->name() + "': ADD must take the chain and a graph input";
      const auto& od = operand->get_dim();
      const auto& cd = link->get_dim();
      bool is_bias = od.size() == cd.size() && od.back() == cd.back() && operand->get_stride().back() == 1;
      for (size_t k = 0; k + 1 < od.size(); ++k) is_bias = is_bias && od[k] == 1;
      if (is_bias && !out.bias && !out.residual && out.act == sm90::GemmAct::NONE) {
        out.bias = operand;
      } else if (od == cd && !out.residual && out.act == sm90::GemmAct::NONE) {
        if (operand->get_stride() != link->get_stride() && operand->get_stride().back() != 1)
          return "node '" + pw->name() + "': residual must be row-major";
        out.residual = operand;
      } else {
        return "node '" + pw->name() + "': ADD operand " + dims_string(od) + " is neither a bias [.., 1, N] nor a residual " +
               dims_string(cd) + " in epilogue order (bias, residual, activation)";
      }
    } else if (sm90::GemmAct act; to_activation(attr, act)) {
      if (out.act != sm90::GemmAct::NONE) return "node '" + pw->name() + "': one activation per epilogue";
      out.act = act;
    } else {
      return "node '" + pw->name() + "': pointwise mode " + std::string(to_string(attr.mode)) + " (with its attributes) in a GEMM epilogue";
    }
    link = pw->out(PointwiseOutput::OUT_0);
  }
  if (link->get_is_virtual()) return "the graph's last tensor '" + link->get_name() + "' is virtual";
  out.output = link;
  View3 vd;
  view3(*link, vd);

  sm90::GemmParams& p = out.params;
  if (!to_gemm_type(a->get_data_type(), p.a_type) || !to_gemm_type(b->get_data_type(), p.b_type) ||
      !to_gemm_type(link->get_data_type(), p.d_type))
    return "data types A " + std::string(to_string(a->get_data_type())) + ", B " + std::string(to_string(b->get_data_type())) +
           ", D " + std::string(to_string(link->get_data_type()));
  if (a->get_data_type() == DataType_t::FLOAT || b->get_data_type() == DataType_t::FLOAT)
    return "FLOAT operands (the tensor cores take 16- and 8-bit inputs)";
  p.m = va.rows;
  p.k = va.cols;
  p.n = vb.cols;
  p.batch = vd.batch;
  p.a_stride_batch = va.s_batch;
  p.a_stride_m = va.s_rows;
  p.a_stride_k = va.s_cols;
  p.b_stride_batch = vb.s_batch;
  p.b_stride_k = vb.s_rows;
  p.b_stride_n = vb.s_cols;
  p.d_stride_batch = vd.s_batch;
  p.d_stride_m = vd.s_rows;
  p.d_stride_n = vd.s_cols;
  p.act = out.act;
  p.beta = out.residual ? 1.f : 0.f;
  if (out.bias && out.bias->get_data_type() != link->get_data_type())
    return "bias data type " + std::string(to_string(out.bias->get_data_type())) + " differs from the output's";
  if (out.residual && out.residual->get_data_type() != link->get_data_type())
    return "residual data type differs from the output's";
  if (out.residual && out.residual->get_stride() != link->get_stride()) return "residual strides differ from the output's";
  // Placeholders let the kernel's own checks run at planning time (alignment is rechecked at execute).
  void* placeholder = reinterpret_cast<void*>(uintptr_t{256});
  p.a = p.b = placeholder;
  p.d = placeholder;
  if (out.bias) p.bias = placeholder;
  if (out.residual) p.c = placeholder;
  return {};
}

}  // namespace frost::detail
