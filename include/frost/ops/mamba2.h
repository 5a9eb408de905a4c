// Mamba-2's selective state-space scan (SSD), forward and backward, in mamba_ssm's `mamba_chunk_scan_combined`
// conventions.
//
// Shapes: x [B, T, H, P]; dt [B, T, H]; A [H] (FP32, usually negative: -exp(A_log)); B, C [B, T, G, N] with H a
// multiple of G (head h reads group h / (H / G)); optional D [H] or [H, P], z [B, T, H, P], dt_bias [H];
// y [B, T, H, P]. States are [S, H, P, N] FP32, one per sequence; S is B, or the number of packed sequences when
// cu_seqlens ([S + 1], INT32 or INT64, B == 1) is set.
//
// Per sequence and head, with the P x N state H_t (H_0 the initial state, zero if none):
//   dt_t = dt[t, h] + dt_bias[h], then softplus(dt_t) with dt_softplus, then clamped to [dt_min, dt_max] (each
//          side only when set)
//   H_t  = exp(dt_t A[h]) H_{t-1} + dt_t x_t B_t^T
//   y_t  = H_t C_t + D[h] x_t                 (D [H, P]: elementwise per channel; no D: no skip term)
//   y_t  = y_t * z_t * sigmoid(z_t)           (with z)
// softplus(x) = log(1 + exp(x)), and x itself above 20 (as mamba_ssm); its gradient sigmoid(x) (1 above 20). The
// clamp passes the gradient where lo <= dt <= hi. JSON tags: MAMBA2, MAMBA2_BACKWARD; ports are named as the
// enumerators below.
#pragma once

#include <limits>
#include <optional>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class Mamba2Input { X, DT, A, B, C, D, Z, DT_BIAS, INITIAL_STATE, CU_SEQLENS, DY, D_FINAL_STATE };
enum class Mamba2Output { Y, FINAL_STATE, DX, DDT, DA, DB, DC, DD, DZ, DDT_BIAS, D_INITIAL_STATE };

// Attributes shared by the forward and the backward.
template <class Derived>
class Mamba2_common_attributes : public Attributes<Derived, Mamba2Input, Mamba2Output> {
 public:
  bool dt_softplus = false;
  std::optional<float> dt_min, dt_max;  // unset: no clamp on that side

  Derived& set_dt_softplus(bool v) { dt_softplus = v; return this->self(); }
  // mamba_ssm's dt_limit: an infinite bound (its default is (0, inf): no clamp above) leaves that side unclamped.
  Derived& set_dt_limit(float lo, float hi) {
    dt_min = lo == -std::numeric_limits<float>::infinity() ? std::nullopt : std::optional<float>(lo);
    dt_max = hi == std::numeric_limits<float>::infinity() ? std::nullopt : std::optional<float>(hi);
    return this->self();
  }
  Derived& set_d(TensorPtr t) { return bind(Mamba2Input::D, std::move(t)); }
  Derived& set_z(TensorPtr t) { return bind(Mamba2Input::Z, std::move(t)); }
  Derived& set_dt_bias(TensorPtr t) { return bind(Mamba2Input::DT_BIAS, std::move(t)); }
  Derived& set_initial_state(TensorPtr t) { return bind(Mamba2Input::INITIAL_STATE, std::move(t)); }
  Derived& set_cu_seqlens(TensorPtr t) { return bind(Mamba2Input::CU_SEQLENS, std::move(t)); }

 protected:
  Derived& bind(Mamba2Input port, TensorPtr t) {
    this->inputs[port] = std::move(t);
    return this->self();
  }
};

// Forward: outputs Y and, with output_final_state, FINAL_STATE (FP32 unless set otherwise).
class Mamba2_attributes : public Mamba2_common_attributes<Mamba2_attributes> {
 public:
  bool output_final_state = false;
  Mamba2_attributes& set_output_final_state(bool v) { output_final_state = v; return self(); }
};

// Backward: from dY (and D_FINAL_STATE when set) to DX, DDT, DA, DB, DC and, for each optional input given (D, z,
// dt_bias, the initial state), its gradient. The forward is recomputed from the inputs; no saved tensors.
class Mamba2_backward_attributes : public Mamba2_common_attributes<Mamba2_backward_attributes> {
 public:
  Mamba2_backward_attributes& set_d_final_state(TensorPtr t) { return bind(Mamba2Input::D_FINAL_STATE, std::move(t)); }
};

}  // namespace frost::graph
