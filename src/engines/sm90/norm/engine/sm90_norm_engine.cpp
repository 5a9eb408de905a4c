// Engine family `sm90_norm`: a graph of one RMSNORM, LAYERNORM, RMSNORM_BACKWARD or LAYERNORM_BACKWARD node
// on an sm_90 GPU, served by the row kernels in ../ (FP32 compute, BF16/FP16/FP32 data). Every layout or type
// the kernels do not serve is declined here by name, so the planner moves on to the next engine.
#include <cuda_runtime.h>

#include "engines/sm90/common/sm90_device_check.h"
#include "engines/sm90/norm/engine/sm90_norm_layout.h"
#include "engines/sm90/norm/sm90_norm.h"
#include "ops/norm/norm_node.h"
#include "ops/norm/norm_shape.h"
#include "plan/engine.h"

namespace frost::detail {
namespace {

using sm90::NormDtype;

// The tensors of one normalization node, whatever its kind. mean and inv are outputs of a forward in
// TRAINING (null in INFERENCE) and inputs of a backward.
struct NormView {
  bool backward = false, centered = false;
  const Node* node = nullptr;
  TensorPtr x, scale, bias, epsilon, y, mean, inv, dy, dx, dscale, dbias;
};

bool view_of(const GraphState& g, NormView& v) {
  if (g.nodes.size() != 1) return false;
  const Node* n = g.nodes[0].get();
  v.node = n;
  if (const auto* f = dynamic_cast<const RmsnormNode*>(n)) {
    v.x = f->in(NormIn::X), v.scale = f->in(NormIn::SCALE), v.bias = f->in(NormIn::BIAS);
    v.epsilon = f->in(NormIn::EPSILON), v.y = f->out(NormOut::Y), v.inv = f->out(NormOut::INV_VARIANCE);
    return true;
  }
  if (const auto* f = dynamic_cast<const LayernormNode*>(n)) {
    v.centered = true;
    v.x = f->in(NormIn::X), v.scale = f->in(NormIn::SCALE), v.bias = f->in(NormIn::BIAS);
    v.epsilon = f->in(NormIn::EPSILON), v.y = f->out(NormOut::Y);
    v.mean = f->out(NormOut::MEAN), v.inv = f->out(NormOut::INV_VARIANCE);
    return true;
  }
  v.backward = true;
  if (const auto* b = dynamic_cast<const RmsnormBackwardNode*>(n)) {
    v.dy = b->in(NormIn::DY), v.x = b->in(NormIn::X), v.scale = b->in(NormIn::SCALE);
    v.inv = b->in(NormIn::INV_VARIANCE);
    v.dx = b->out(NormOut::DX), v.dscale = b->out(NormOut::DSCALE), v.dbias = b->out(NormOut::DBIAS);
    return true;
  }
  if (const auto* b = dynamic_cast<const LayernormBackwardNode*>(n)) {
    v.centered = true;
    v.dy = b->in(NormIn::DY), v.x = b->in(NormIn::X), v.scale = b->in(NormIn::SCALE);
    v.mean = b->in(NormIn::MEAN), v.inv = b->in(NormIn::INV_VARIANCE);
    v.dx = b->out(NormOut::DX), v.dscale = b->out(NormOut::DSCALE), v.dbias = b->out(NormOut::DBIAS);
    return true;
  }
  return false;
}

std::string dtype_of(const std::string& port, const TensorPtr& t, NormDtype& out) {
  switch (t->get_data_type()) {
    case DataType_t::BFLOAT16:
      out = NormDtype::BF16;
      return {};
    case DataType_t::HALF:
      out = NormDtype::FP16;
      return {};
    case DataType_t::FLOAT:
      out = NormDtype::FP32;
      return {};
    default:
      return port + " data type " + std::string(to_string(t->get_data_type())) + " (BFLOAT16, HALF or FLOAT only)";
  }
}

// Every problem fact the kernels need, with placeholder pointers (execute binds the real ones).
struct Problem {
  sm90::NormFwdParams fwd{};
  sm90::NormBwdParams bwd{};
};

// Returns the reason from a check that declines.
#define FROST_NORM_CHECK(expr)                        \
  do {                                                \
    if (std::string r = (expr); !r.empty()) return r; \
  } while (0)

std::string stats_layout(const std::string& port, const TensorPtr& t, size_t split, int64_t rows, int64_t& stride) {
  if (t->get_data_type() != DataType_t::FLOAT)
    return port + " data type " + std::string(to_string(t->get_data_type())) + " (FLOAT only)";
  RowLayout l;
  FROST_NORM_CHECK(row_layout(*t, port, split, l));
  if (l.rows != rows) return port + " holds " + std::to_string(l.rows) + " rows for X's " + std::to_string(rows);
  stride = l.row_stride;
  return {};
}

// A row-indexed operand (x, y, dy, dx) with X's rows and columns; outputs must not overlap themselves.
std::string rows_of(const std::string& port, const TensorPtr& t, size_t split, bool output, int64_t& stride) {
  RowLayout l;
  FROST_NORM_CHECK(row_layout(*t, port, split, l));
  if (output && l.rows > 1 && l.row_stride < l.cols)
    return port + " row stride " + std::to_string(l.row_stride) + " is below the row length " + std::to_string(l.cols) +
           " (rows would overlap)";
  stride = l.row_stride;
  return {};
}

std::string no_scalar(const std::string& port, const TensorPtr& t) {
  if (t && t->get_is_pass_by_value()) return port + " as a pass-by-value scalar (a device tensor only)";
  return {};
}

std::string problem_of(const NormView& v, Problem& pb) {
  if (v.node->compute_data_type() == DataType_t::DOUBLE) return "compute_data_type DOUBLE (FP32 compute only)";
  for (const auto& [port, t] : {std::pair<const char*, TensorPtr>{"X", v.x},
                                {"SCALE", v.scale},
                                {"BIAS", v.bias},
                                {"DY", v.dy},
                                {"MEAN", v.mean},
                                {"INV_VARIANCE", v.inv}})
    FROST_NORM_CHECK(no_scalar(port, t));
  const auto& x_dims = v.x->get_dim();
  const std::vector<int64_t> stats_dims = v.inv ? v.inv->get_dim() : default_stats_dims(x_dims);
  size_t split = 0;
  FROST_NORM_CHECK(normalized_split(x_dims, stats_dims, split));
  RowLayout x;
  FROST_NORM_CHECK(row_layout(*v.x, "X", split, x));
  void* const placeholder = reinterpret_cast<void*>(uintptr_t{256});
  NormDtype x_dtype{};
  FROST_NORM_CHECK(dtype_of("X", v.x, x_dtype));
  if (!v.backward) {
    auto& p = pb.fwd;
    p.centered = v.centered;
    p.x_dtype = x_dtype;
    p.rows = x.rows, p.cols = x.cols, p.x_row_stride = x.row_stride;
    FROST_NORM_CHECK(dtype_of("Y", v.y, p.y_dtype));
    FROST_NORM_CHECK(rows_of("Y", v.y, split, true, p.y_row_stride));
    if (v.scale) {
      FROST_NORM_CHECK(dtype_of("SCALE", v.scale, p.scale_dtype));
      FROST_NORM_CHECK(column_layout(*v.scale, "SCALE", split, x_dims));
    }
    if (v.bias) {
      FROST_NORM_CHECK(dtype_of("BIAS", v.bias, p.bias_dtype));
      FROST_NORM_CHECK(column_layout(*v.bias, "BIAS", split, x_dims));
    }
    if (v.mean) FROST_NORM_CHECK(stats_layout("MEAN", v.mean, split, x.rows, p.mean_stride));
    if (v.inv) FROST_NORM_CHECK(stats_layout("INV_VARIANCE", v.inv, split, x.rows, p.inv_stride));
    if (!v.epsilon->get_is_pass_by_value() || !v.epsilon->get_pass_by_value())
      return "EPSILON as a device tensor (a pass-by-value scalar only)";
    p.x = placeholder, p.y = placeholder;
    p.scale = v.scale ? placeholder : nullptr, p.bias = v.bias ? placeholder : nullptr;
    p.mean = v.mean ? static_cast<float*>(placeholder) : nullptr;
    p.inv = v.inv ? static_cast<float*>(placeholder) : nullptr;
    p.epsilon = static_cast<float>(*v.epsilon->get_pass_by_value());
    if (const char* why = sm90::norm_fwd_unsupported_reason(p)) return why;
    return {};
  }
  auto& p = pb.bwd;
  p.centered = v.centered;
  p.x_dtype = x_dtype;
  p.rows = x.rows, p.cols = x.cols, p.x_row_stride = x.row_stride;
  if (v.dy->get_data_type() != v.x->get_data_type()) return "DY data type differs from X's";
  FROST_NORM_CHECK(rows_of("DY", v.dy, split, false, p.dy_row_stride));
  FROST_NORM_CHECK(dtype_of("DX", v.dx, p.dx_dtype));
  FROST_NORM_CHECK(rows_of("DX", v.dx, split, true, p.dx_row_stride));
  FROST_NORM_CHECK(dtype_of("SCALE", v.scale, p.scale_dtype));
  FROST_NORM_CHECK(column_layout(*v.scale, "SCALE", split, x_dims));
  FROST_NORM_CHECK(dtype_of("DSCALE", v.dscale, p.dscale_dtype));
  FROST_NORM_CHECK(column_layout(*v.dscale, "DSCALE", split, x_dims));
  if (v.dbias) {
    FROST_NORM_CHECK(dtype_of("DBIAS", v.dbias, p.dbias_dtype));
    FROST_NORM_CHECK(column_layout(*v.dbias, "DBIAS", split, x_dims));
  }
  if (v.mean) FROST_NORM_CHECK(stats_layout("MEAN", v.mean, split, x.rows, p.mean_stride));
  FROST_NORM_CHECK(stats_layout("INV_VARIANCE", v.inv, split, x.rows, p.inv_stride));
  p.dy = p.x = p.scale = placeholder;
  p.mean = v.mean ? static_cast<const float*>(placeholder) : nullptr;
  p.inv = static_cast<const float*>(placeholder);
  p.dx = p.dscale = placeholder;
  p.dbias = v.dbias ? placeholder : nullptr;
  if (const char* why = sm90::norm_bwd_unsupported_reason(p)) return why;
  return {};
}

#undef FROST_NORM_CHECK

void* bind(const VariantPack& pack, const TensorPtr& t) { return t ? pack.at(t->get_uid()) : nullptr; }

error_t launch_error(cudaError_t e) {
  return {error_code_t::CUDA_API_FAILED, std::string("sm90_norm launch: ") + cudaGetErrorString(e)};
}

class Sm90NormFwdPlan final : public Plan {
 public:
  Sm90NormFwdPlan(NormView v, const sm90::NormFwdParams& p, const sm90::NormKernelPlan& k)
      : v_(std::move(v)), p_(p), k_(k) {}
  int64_t workspace_size() const override { return 0; }

  error_t execute(const VariantPack& pack, void*, const Handle& handle) const override {
    sm90::NormFwdParams p = p_;
    p.x = bind(pack, v_.x), p.y = bind(pack, v_.y), p.scale = bind(pack, v_.scale), p.bias = bind(pack, v_.bias);
    p.mean = static_cast<float*>(bind(pack, v_.mean)), p.inv = static_cast<float*>(bind(pack, v_.inv));
    // Read at every execute: a scalar declared without a value is set from the variant pack.
    p.epsilon = static_cast<float>(v_.epsilon->get_pass_by_value().value_or(p_.epsilon));
    if (const cudaError_t e = sm90::norm_fwd(p, k_, static_cast<cudaStream_t>(handle.stream())); e != cudaSuccess)
      return launch_error(e);
    return {};
  }

 private:
  NormView v_;
  sm90::NormFwdParams p_;
  sm90::NormKernelPlan k_;
};

class Sm90NormBwdPlan final : public Plan {
 public:
  Sm90NormBwdPlan(NormView v, const sm90::NormBwdParams& p, const sm90::NormKernelPlan& k)
      : v_(std::move(v)), p_(p), k_(k) {}
  int64_t workspace_size() const override { return k_.workspace_bytes; }

  error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const override {
    sm90::NormBwdParams p = p_;
    p.dy = bind(pack, v_.dy), p.x = bind(pack, v_.x), p.scale = bind(pack, v_.scale);
    p.mean = static_cast<const float*>(bind(pack, v_.mean)), p.inv = static_cast<const float*>(bind(pack, v_.inv));
    p.dx = bind(pack, v_.dx), p.dscale = bind(pack, v_.dscale), p.dbias = bind(pack, v_.dbias);
    const auto stream = static_cast<cudaStream_t>(handle.stream());
    if (const cudaError_t e = sm90::norm_bwd(p, k_, workspace, stream); e != cudaSuccess) return launch_error(e);
    return {};
  }

 private:
  NormView v_;
  sm90::NormBwdParams p_;
  sm90::NormKernelPlan k_;
};

// Makes `ordinal` the current device for the occupancy queries of a build, restoring the caller's after.
class DeviceScope {
 public:
  explicit DeviceScope(int ordinal) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != ordinal)
      changed_ = cudaSetDevice(ordinal) == cudaSuccess;
  }
  ~DeviceScope() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

class Sm90NormEngine final : public EngineFamily {
 public:
  std::string_view name() const override { return "sm90_norm"; }
  int64_t engine_id() const override { return 10400; }
  EngineClass engine_class() const override { return EngineClass::SM90; }

  // BLOCK_SIZE: threads per row (a performance choice only; rows too long for it are streamed).
  std::vector<Knob> knob_space(const GraphFacts&) const override { return {{KnobType_t::BLOCK_SIZE, 32, 512, 32}}; }

  std::string support(const GraphFacts& f) const override {
    if (std::string r = sm90_device_reason(f.device); !r.empty()) return r;
    NormView v;
    if (!view_of(f.graph, v)) return "serves graphs of exactly one RMSNORM, LAYERNORM or backward node";
    Problem pb;
    return problem_of(v, pb);
  }

  error_t build(const GraphFacts& f, const graph::KnobMap& knobs, std::unique_ptr<Plan>& out) const override {
    NormView v;
    Problem pb;
    if (!view_of(f.graph, v))
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "sm90_norm: not a normalization graph"};
    if (std::string r = problem_of(v, pb); !r.empty())
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "sm90_norm: " + r};
    const auto knob = knobs.find(KnobType_t::BLOCK_SIZE);
    const int threads_per_row = knob == knobs.end() ? 0 : static_cast<int>(knob->second);
    DeviceScope scope(f.device.ordinal);
    sm90::NormKernelPlan k;
    const cudaError_t e =
        v.backward ? sm90::norm_bwd_plan(pb.bwd, threads_per_row, k) : sm90::norm_fwd_plan(pb.fwd, threads_per_row, k);
    if (e != cudaSuccess)
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, std::string("sm90_norm: ") + cudaGetErrorString(e)};
    if (v.backward)
      out = std::make_unique<Sm90NormBwdPlan>(std::move(v), pb.bwd, k);
    else
      out = std::make_unique<Sm90NormFwdPlan>(std::move(v), pb.fwd, k);
    return {};
  }

  std::vector<BehaviorNote_t> behavior_notes() const override {
    return {BehaviorNote_t::SUPPORTS_CUDA_GRAPH_NATIVE_API};
  }
};

const EngineRegistrar kRegister(std::make_unique<Sm90NormEngine>());

}  // namespace
}  // namespace frost::detail
