// Mamba-2's selective state-space scan (SSD), forward, in mamba_ssm's `mamba_chunk_scan_combined` conventions.
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
// softplus(x) = log(1 + exp(x)), and x itself above 20 (as mamba_ssm). JSON tag: MAMBA2; ports are named as the
// enumerators below.
#pragma once

#include <limits>
#include <optional>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class Mamba2Input { X, DT, A, B, C, D, Z, DT_BIAS, INITIAL_STATE, CU_SEQLENS };
enum class Mamba2Output { Y, FINAL_STATE };

class Mamba2_attributes : public Attributes<Mamba2_attributes, Mamba2Input, Mamba2Output> {
 public:
  bool dt_softplus = false;
  std::optional<float> dt_min, dt_max;  // unset: no clamp on that side
  bool output_final_state = false;

  Mamba2_attributes& set_dt_softplus(bool v) { dt_softplus = v; return self(); }
  // mamba_ssm's dt_limit: an infinite bound (its default is (0, inf): no clamp above) leaves that side unclamped.
  Mamba2_attributes& set_dt_limit(float lo, float hi) {
    dt_min = lo == -std::numeric_limits<float>::infinity() ? std::nullopt : std::optional<float>(lo);
    dt_max = hi == std::numeric_limits<float>::infinity() ? std::nullopt : std::optional<float>(hi);
    return self();
  }
  Mamba2_attributes& set_output_final_state(bool v) { output_final_state = v; return self(); }
  Mamba2_attributes& set_d(TensorPtr t) { return bind(Mamba2Input::D, std::move(t)); }
  Mamba2_attributes& set_z(TensorPtr t) { return bind(Mamba2Input::Z, std::move(t)); }
  Mamba2_attributes& set_dt_bias(TensorPtr t) { return bind(Mamba2Input::DT_BIAS, std::move(t)); }
  Mamba2_attributes& set_initial_state(TensorPtr t) { return bind(Mamba2Input::INITIAL_STATE, std::move(t)); }
  Mamba2_attributes& set_cu_seqlens(TensorPtr t) { return bind(Mamba2Input::CU_SEQLENS, std::move(t)); }

 private:
  Mamba2_attributes& bind(Mamba2Input port, TensorPtr t) {
    inputs[port] = std::move(t);
    return self();
  }
};

}  // namespace frost::graph
