// The graph: declare tensors and ops, then validate, plan, build and execute.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "frost/error.h"
#include "frost/handle.h"
#include "frost/knobs.h"
#include "frost/ops/matmul.h"
#include "frost/ops/norm.h"
#include "frost/ops/pointwise.h"
#include "frost/ops/sdpa.h"
#include "frost/ops/shape_ops.h"
// -- op headers added by op families (one line each)
#include "frost/ops/linear_attention.h"
#include "frost/ops/mamba2.h"
#include "frost/ops/sdpa_backward.h"
#include "frost/ops/moe.h"
#include "frost/ops/sdpa_fp8.h"
#include "frost/ops/matmul_fp8.h"
#include "frost/ops/sdpa_fp8_backward.h"
#include "frost/ops/sdpa_mxfp8.h"
#include "frost/ops/conv.h"
#include "frost/ops/norm_extra.h"
#include "frost/ops/quantize.h"
#include "frost/ops/resample.h"
#include "frost/ops/rng.h"
#include "frost/ops/rope.h"
#include "frost/ops/swiglu_mlp.h"
#include "frost/tensor.h"
#include "frost/types.h"

namespace frost::detail {
struct GraphState;
}

namespace frost::graph {

using KnobMap = std::unordered_map<KnobType_t, int64_t>;

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Context: defaults for tensors that leave their data type unset (io for graph inputs and
  // outputs, intermediate for virtual tensors) and the op compute type.
  Graph& set_io_data_type(DataType_t);
  Graph& set_intermediate_data_type(DataType_t);
  Graph& set_compute_data_type(DataType_t);
  Graph& set_name(std::string);
  Graph& set_dynamic_shape_enabled(bool);
  Graph& set_override_shape_enabled(bool);
  Graph& set_sm_count(int32_t);
  Graph& set_sm_version(int32_t);

  TensorPtr tensor(const Tensor_attributes&);
  // Pass-by-value scalars of shape [1]: the value is baked into the declaration.
  TensorPtr tensor(float);
  TensorPtr tensor(double);
  TensorPtr tensor(int32_t);
  TensorPtr tensor(int64_t);
  // A new tensor with the dims, strides and data type of `like` and a fresh uid.
  TensorPtr tensor_like(const TensorPtr& like, std::string name = "");

  // Op builders. Returned outputs are virtual until set_output(true).
  TensorPtr pointwise(TensorPtr in0, Pointwise_attributes);
  TensorPtr pointwise(TensorPtr in0, TensorPtr in1, Pointwise_attributes);
  TensorPtr pointwise(TensorPtr in0, TensorPtr in1, TensorPtr in2, Pointwise_attributes);
  TensorPtr matmul(TensorPtr a, TensorPtr b, Matmul_attributes);
  TensorPtr reduction(TensorPtr x, Reduction_attributes);
  TensorPtr reshape(TensorPtr x, Reshape_attributes);
  TensorPtr transpose(TensorPtr x, Transpose_attributes);
  TensorPtr slice(TensorPtr x, Slice_attributes);
  TensorPtr concatenate(std::vector<TensorPtr> xs, Concatenate_attributes);
  // [Y, inv_rms]; inv_rms is null unless the phase is TRAINING.
  std::array<TensorPtr, 2> rmsnorm(TensorPtr x, TensorPtr scale, Rmsnorm_attributes);
  // [Y, mean, inv_variance]; the statistics are null unless the phase is TRAINING.
  std::array<TensorPtr, 3> layernorm(TensorPtr x, TensorPtr scale, TensorPtr bias, Layernorm_attributes);
  // [dX, dScale, dBias]; dBias is null unless requested.
  std::array<TensorPtr, 3> rmsnorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale, TensorPtr inv_rms,
                                            Rmsnorm_backward_attributes);
  std::array<TensorPtr, 3> layernorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                              Layernorm_backward_attributes);
  // [O, Stats]; Stats is null unless generate_stats.
  std::array<TensorPtr, 2> sdpa(TensorPtr q, TensorPtr k, TensorPtr v, SDPA_attributes);
  // -- attention backward builders
  std::array<TensorPtr, 3> sdpa_backward(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr o, TensorPtr dO,
                                         TensorPtr stats, SDPA_backward_attributes);
  // -- attention fp8 builders (and the FP8 matmul they are made of)
  // [O, Stats, Amax_S, Amax_O]; Stats is null unless generate_stats.
  std::array<TensorPtr, 4> sdpa_fp8(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr descale_q, TensorPtr descale_k,
                                    TensorPtr descale_v, TensorPtr descale_s, TensorPtr scale_s, TensorPtr scale_o,
                                    SDPA_fp8_attributes);
  // [dQ, dK, dV, Amax_dQ, Amax_dK, Amax_dV, Amax_dP]; arguments in cuDNN Frontend's order.
  std::array<TensorPtr, 7> sdpa_fp8_backward(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr o, TensorPtr dO,
                                             TensorPtr stats, TensorPtr descale_q, TensorPtr descale_k,
                                             TensorPtr descale_v, TensorPtr descale_o, TensorPtr descale_dO,
                                             TensorPtr descale_s, TensorPtr descale_dP, TensorPtr scale_s,
                                             TensorPtr scale_dQ, TensorPtr scale_dK, TensorPtr scale_dV,
                                             TensorPtr scale_dP, SDPA_fp8_backward_attributes);
  // MXFP8 (E8M0 block scales, frost/ops/sdpa_mxfp8.h): [O, Stats, Amax_O]; Stats is null unless generate_stats.
  std::array<TensorPtr, 3> sdpa_mxfp8(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr descale_q, TensorPtr descale_k,
                                      TensorPtr descale_v, SDPA_fp8_attributes);
  // [dQ, dK, dV, Amax_dQ, Amax_dK, Amax_dV].
  std::array<TensorPtr, 6> sdpa_mxfp8_backward(TensorPtr q, TensorPtr q_T, TensorPtr k, TensorPtr k_T, TensorPtr v,
                                               TensorPtr o_f16, TensorPtr dO_f16, TensorPtr dO, TensorPtr dO_T,
                                               TensorPtr stats, TensorPtr descale_q, TensorPtr descale_q_T,
                                               TensorPtr descale_k, TensorPtr descale_k_T, TensorPtr descale_v,
                                               TensorPtr descale_dO, TensorPtr descale_dO_T,
                                               SDPA_fp8_backward_attributes);
  // cuDNN Frontend's C++ spelling of the MXFP8 ops: overloads of sdpa_fp8 and sdpa_fp8_backward.
  std::array<TensorPtr, 3> sdpa_fp8(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr descale_q, TensorPtr descale_k,
                                    TensorPtr descale_v, SDPA_fp8_attributes);
  std::array<TensorPtr, 6> sdpa_fp8_backward(TensorPtr q, TensorPtr q_T, TensorPtr k, TensorPtr k_T, TensorPtr v,
                                             TensorPtr o_f16, TensorPtr dO_f16, TensorPtr dO, TensorPtr dO_T,
                                             TensorPtr stats, TensorPtr descale_q, TensorPtr descale_q_T,
                                             TensorPtr descale_k, TensorPtr descale_k_T, TensorPtr descale_v,
                                             TensorPtr descale_dO, TensorPtr descale_dO_T,
                                             SDPA_fp8_backward_attributes);
  // [C, Amax_C]: C = A @ B * descale_a * descale_b * scale_c (frost/ops/matmul_fp8.h).
  std::array<TensorPtr, 2> matmul_fp8(TensorPtr a, TensorPtr b, TensorPtr descale_a, TensorPtr descale_b,
                                      TensorPtr scale_c, Matmul_fp8_attributes);
  // -- convolution builders
  TensorPtr conv_fprop(TensorPtr image, TensorPtr weight, Conv_fprop_attributes);
  // dX; its dims must be set on the returned tensor before validate.
  TensorPtr conv_dgrad(TensorPtr dy, TensorPtr weight, Conv_dgrad_attributes);
  // dW; its dims must be set on the returned tensor before validate. Arguments in cuDNN Frontend's order.
  TensorPtr conv_wgrad(TensorPtr dy, TensorPtr image, Conv_wgrad_attributes);
  // -- batch/instance/group/adaptive norm builders
  // [Y, mean, inv_variance, next_running_mean, next_running_var]; the running stats are null unless
  // set_previous_running_stats was called.
  std::array<TensorPtr, 5> batchnorm(TensorPtr x, TensorPtr scale, TensorPtr bias, Batchnorm_attributes);
  TensorPtr batchnorm_inference(TensorPtr x, TensorPtr mean, TensorPtr inv_variance, TensorPtr scale, TensorPtr bias,
                                Batchnorm_inference_attributes);
  // [dX, dScale, dBias].
  std::array<TensorPtr, 3> batchnorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                              Batchnorm_backward_attributes);
  // [Y, mean, inv_variance]; the statistics are null unless the phase is TRAINING.
  std::array<TensorPtr, 3> instancenorm(TensorPtr x, TensorPtr scale, TensorPtr bias, Instancenorm_attributes);
  std::array<TensorPtr, 3> instancenorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                                 Instancenorm_backward_attributes);
  std::array<TensorPtr, 3> adalayernorm(TensorPtr x, TensorPtr scale, TensorPtr bias, AdaLayernorm_attributes);
  std::array<TensorPtr, 3> adalayernorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                                 AdaLayernorm_backward_attributes);
  std::array<TensorPtr, 3> groupnorm(TensorPtr x, TensorPtr scale, TensorPtr bias, Groupnorm_attributes);
  std::array<TensorPtr, 3> groupnorm_backward(TensorPtr dy, TensorPtr x, TensorPtr scale,
                                              Groupnorm_backward_attributes);
  // [sum, sq_sum].
  std::array<TensorPtr, 2> genstats(TensorPtr x, Genstats_attributes);
  // [eq_scale, eq_bias, mean, inv_variance, next_running_mean, next_running_var]; the running stats are
  // null unless set_previous_running_stats was called.
  std::array<TensorPtr, 6> bn_finalize(TensorPtr sum, TensorPtr sq_sum, TensorPtr scale, TensorPtr bias,
                                       TensorPtr epsilon, TensorPtr accum_count, BN_finalize_attributes);
  // [dScale, dBias, eq_scale_dy, eq_scale_x, eq_bias].
  std::array<TensorPtr, 5> dbn_weight(TensorPtr dy, TensorPtr x, TensorPtr mean, TensorPtr inv_variance,
                                      TensorPtr scale, DBN_weight_attributes);
  // -- resample, rng, quantization, rope builders
  // [Y, Index]; Index is null unless MAXPOOL with set_is_inference(false).
  std::array<TensorPtr, 2> resample(TensorPtr x, Resample_attributes);
  // dX of resample for dY (see frost/ops/resample.h).
  TensorPtr resample_backward(TensorPtr dy, Resample_backward_attributes);
  TensorPtr rng(TensorPtr seed, TensorPtr offset, Rng_attributes);
  // [Y, Scale].
  std::array<TensorPtr, 2> block_scale_quantize(TensorPtr x, Block_scale_quantize_attributes);
  TensorPtr block_scale_dequantize(TensorPtr x, TensorPtr scale, Block_scale_dequantize_attributes);
  TensorPtr rope(TensorPtr x, TensorPtr cos, TensorPtr sin, Rope_attributes);
  TensorPtr rope_backward(TensorPtr dy, TensorPtr cos, TensorPtr sin, Rope_backward_attributes);
  // -- mixture-of-experts builders
  // token_index (GATHER, SCATTER) and token_ks (SCATTER) may be null in modes that do not read them.
  TensorPtr moe_grouped_matmul(TensorPtr token, TensorPtr weight, TensorPtr first_token_offset, TensorPtr token_index,
                               TensorPtr token_ks, Moe_grouped_matmul_attributes);
  // [dToken, dWeight].
  std::array<TensorPtr, 2> moe_grouped_matmul_backward(TensorPtr doutput, TensorPtr token, TensorPtr weight,
                                                       TensorPtr first_token_offset, TensorPtr token_index,
                                                       TensorPtr token_ks, Moe_grouped_matmul_backward_attributes);
  // -- gated MLP (SwiGLU) forward: Y = (silu(X W_gate) * (X W_up)) W_down; see frost/ops/swiglu_mlp.h
  TensorPtr swiglu_mlp(TensorPtr x, TensorPtr w_gate, TensorPtr w_up, TensorPtr w_down, Swiglu_mlp_attributes);
  // W_GATE_UP [H, 2F]: gate and up columns interleaved in blocks of 8.
  TensorPtr swiglu_mlp(TensorPtr x, TensorPtr w_gate_up, TensorPtr w_down, Swiglu_mlp_attributes);
  // -- linear attention builders
  // [O, final_state]; final_state is null unless output_final_state.
  std::array<TensorPtr, 2> gdn(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr g, TensorPtr beta, Gdn_attributes);
  std::array<TensorPtr, 2> kda(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr g, TensorPtr beta, Kda_attributes);
  // [dQ, dK, dV, dG, dBeta, d_initial_state]; d_initial_state is null without an initial state.
  std::array<TensorPtr, 6> gdn_backward(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr g, TensorPtr beta,
                                        TensorPtr d_o, Gdn_backward_attributes);
  std::array<TensorPtr, 6> kda_backward(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr g, TensorPtr beta,
                                        TensorPtr d_o, Kda_backward_attributes);
  // Mamba-2's scan (frost/ops/mamba2.h): [Y, final_state]; final_state is null unless output_final_state.
  std::array<TensorPtr, 2> mamba2(TensorPtr x, TensorPtr dt, TensorPtr a, TensorPtr b, TensorPtr c, Mamba2_attributes);
  // [dX, dDT, dA, dB, dC, dD, dZ, dDT_bias, d_initial_state]; the last four are null without their input.
  std::array<TensorPtr, 9> mamba2_backward(TensorPtr x, TensorPtr dt, TensorPtr a, TensorPtr b, TensorPtr c,
                                           TensorPtr d_y, Mamba2_backward_attributes);

  // Lifecycle.
  error_t validate();
  error_t build_operation_graph(const Handle&);
  error_t create_execution_plans(const std::vector<HeurMode_t>&);
  error_t create_execution_plan(int64_t engine_id, const KnobMap& knobs);
  error_t check_support(const Handle&);
  error_t build_plans(const Handle&, BuildPlanPolicy_t = BuildPlanPolicy_t::HEURISTICS_CHOICE);
  error_t build_plan_at_index(const Handle&, int64_t index);
  error_t build(const Handle&, const std::vector<HeurMode_t>&,
                BuildPlanPolicy_t = BuildPlanPolicy_t::HEURISTICS_CHOICE);

  // Filters on the candidate plans (before build_plans).
  Graph& deselect_engines(const std::vector<std::string>& names);
  Graph& deselect_workspace_greater_than(int64_t bytes);
  Graph& select_numeric_notes(const std::vector<NumericalNote_t>&);
  Graph& deselect_numeric_notes(const std::vector<NumericalNote_t>&);
  Graph& select_behavior_notes(const std::vector<BehaviorNote_t>&);
  Graph& deselect_behavior_notes(const std::vector<BehaviorNote_t>&);

  // Queries. The "selected" plan is the first candidate that built.
  error_t get_workspace_size(int64_t& bytes) const;
  error_t get_workspace_size_plan_at_index(int64_t index, int64_t& bytes) const;
  int64_t get_execution_plan_count() const;
  error_t get_plan_name(std::string& name) const;
  error_t get_plan_name_at_index(int64_t index, std::string& name) const;
  error_t get_engine_and_knobs_at_index(int64_t index, int64_t& engine_id, KnobMap& knobs) const;
  error_t get_behavior_notes(std::vector<BehaviorNote_t>&) const;
  error_t get_behavior_notes_for_plan_at_index(int64_t index, std::vector<BehaviorNote_t>&) const;
  error_t get_numeric_notes_for_plan_at_index(int64_t index, std::vector<NumericalNote_t>&) const;
  // Every engine's reason for declining this graph, "engine: reason".
  std::vector<std::string> get_decline_reasons() const;

  // Execution: pointers bound by uid; the declaration is the operand contract.
  error_t execute(const Handle&, const std::unordered_map<int64_t, void*>& variant_pack, void* workspace) const;
  error_t execute(const Handle&, const std::unordered_map<TensorPtr, void*>& variant_pack, void* workspace) const;
  error_t execute(const Handle&, const std::vector<void*>& pointers, const std::vector<int64_t>& uids,
                  void* workspace) const;
  error_t execute_plan_at_index(const Handle&, const std::unordered_map<int64_t, void*>& variant_pack,
                                void* workspace, int64_t index) const;
  // Times every built plan on the given buffers and moves the fastest to the front.
  error_t autotune(const Handle&, const std::unordered_map<int64_t, void*>& variant_pack, void* workspace);

  // JSON 2.0 text of the declared graph (after validate) and back.
  error_t serialize(std::string& json_text) const;
  error_t deserialize(const std::string& json_text);
  // The graph plus the selected plan's engine id and knobs; replay builds that plan.
  error_t serialize(std::vector<uint8_t>& bytes) const;
  error_t deserialize(const Handle&, const std::vector<uint8_t>& bytes);
  // A hash of everything that identifies the graph (not names); stable across runs and processes.
  int64_t key() const;

  // Tensors declared in this graph, in creation order.
  const std::vector<TensorPtr>& get_tensors() const;

  detail::GraphState& state() { return *state_; }
  const detail::GraphState& state() const { return *state_; }

 private:
  std::unique_ptr<detail::GraphState> state_;
};

}  // namespace frost::graph
