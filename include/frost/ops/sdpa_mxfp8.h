// MXFP8 attention (sdpa_mxfp8, sdpa_mxfp8_backward): FP8 operands with E8M0 block scales, one per 32
// consecutive elements along the dimension each product reduces over (OCP Microscaling). The attributes are
// the FP8 attention's (SDPA_fp8_attributes, SDPA_fp8_backward_attributes), as in cuDNN Frontend, whose C++
// API reaches these ops through overloads of sdpa_fp8 and sdpa_fp8_backward (frost has those too).
//
// Scales: FP8_E8M0 rank-4 tensors. A real value is code * scale of its block:
//   descale_q  [b, h_q, >= s_q, >= ceil(d_qk / 32)]    Q, blocks along d      (Q K^T)
//   descale_k  [b, h_k, >= s_kv, >= ceil(d_qk / 32)]   K, blocks along d      (Q K^T)
//   descale_v  [b, h_v, >= ceil(s_kv / 32), >= d_v]    V, blocks along s_kv   (P V)
// and for the backward, the copies quantized along the other axis for the transposed products:
//   descale_q_T  [b, h_q, >= ceil(s_q / 32), >= d_qk]   Q_T, blocks along s_q  (dK = dS^T Q)
//   descale_k_T  [b, h_k, >= ceil(s_kv / 32), >= d_qk]  K_T, blocks along s_kv (dQ = dS K)
//   descale_dO   [b, h_q, >= s_q, >= ceil(d_v / 32)]    dO, blocks along d_v   (dP = dO V^T)
//   descale_dO_T [b, h_q, >= ceil(s_q / 32), >= d_v]    dO_T, blocks along s_q (dV = P^T dO)
// The layout is block_scale_quantize's (plain strides), or cuDNN's F8_128x4 reordering with its padded
// extents (set_reordering_type). Extents past the needed ones are padding and never read.
//
// Forward, on real values: S = attn_scale * Q K^T (masked as in sdpa), e = exp(S - rowmax), l = sum e,
//   O = sum_j (fp8(16 e_j) / 16) V_j / l     Stats = rowmax + log l     Amax_O = max |O|
// fp8() rounds to Q's type (nearest even, saturating): the probabilities meet V in FP8, at the fixed
// scale of 16 cuDNN's MXFP8 kernels apply to exp(S - max).
//
// Backward, on real values, with P = exp(S - Stats), D = rowsum(dO_f16 * O_f16), dP = dO V^T:
//   dS = attn_scale * P * (dP - D)
//   dV = (fp8(256 P) / 256)^T dO_T           (Q's type)
//   dQ = mx_rows(dS) K_T                      dS quantized in blocks of 32 along s_kv (dO's type)
//   dK = mx_cols(dS)^T Q_T                    dS quantized in blocks of 32 along s_q
//   Amax_dX = max |dX| before dX is stored; GQA/MQA sums the query heads of a group first.
// mx() takes block_scale_quantize's MXFP8 rule (scale = 2^(floor(log2 amax) - emax), saturating values).
// O_f16 and dO_f16 are HALF, BFLOAT16 or FLOAT; the gradients default to O_f16's type.
#pragma once

#include "frost/ops/sdpa_fp8.h"
#include "frost/ops/sdpa_fp8_backward.h"
