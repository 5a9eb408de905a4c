// Hopper (sm_90a) Gated DeltaNet and Kimi Delta Attention forward, chunked: framework-free interface.
//
// q, k [B, T, H, 128] and v, o [B, T, HV, 128] (BF16 or FP16, last axis contiguous, other strides in
// elements, multiples of 8); g [B, T, HV] (GDN) or [B, T, HV, 128] (KDA: one log decay per key channel) and
// beta [B, T, HV] (FLOAT or q's type, any strides); states FP32 [rows, HV, 128, 128] packed. Sequences: one
// per batch row, or packed along T by cu_seqlens (B == 1).
//
// Three launches, none allocating:
//   1. a one-CTA prologue checks cu_seqlens and state_indices, writes the sequence table and the
//      chunk offsets into the workspace and a validity flag (bad offsets or indices: nothing else
//      writes anything, so the caller's buffers stay as they were);
//   2. per (chunk of 64 tokens, value head), independent of the state: cumulative decay G, A =
//      strictly lower(beta K K^T * exp(G_i - G_j)), T = (I + A)^-1 by forward substitution in FP32,
//      W = T diag(beta exp(G)) K and U = T diag(beta) V (the WY form), the causal gated scores
//      P = scale Q K^T * exp(G_i - G_j), and per-row factors; all into the workspace (for the wgmma pass
//      T diag(beta) and W's row factors exp(G) rk instead of W and U);
//   3. per (sequence, value head, slice of value columns), the state pass over the chunks in order:
//      U' = U - W S, O = scale exp(G) Q S + P U', S = exp(G_last) S + (exp(G_last - G) K)^T U',
//      with S kept in FP32 registers; tensor-core products (mma.sync m16n8k16, FP32 accumulation; or wgmma,
//      forming U' as T diag(beta) (V - diag(exp(G) rk) K S)).
// With few sequences x heads (GdnPlan::overlap) 2 and 3 run at once: the wgmma pass on a side stream, its CTAs
// on at most half the SMs, the chunk kernel in chunk order on the others, and the pass's loading warpgroup
// waiting on a per-chunk ready flag that the chunk kernel releases once that chunk's pieces are stored.
// KDA (per_key_decay) keeps the structure; G is per key channel, so the decay can no longer be applied to
// whole rows of a product (sm90_kda_chunk.cuh): the chunk kernel gates the operands element by element
// (exp(G_i - G_a) and exp(G_a - G_j) around an anchor a between the rows, so no factor exceeds the FP32
// range), stores Q exp(G) and K exp(G_last - G) for the state pass, and the state pass scales each state
// row by its channel's exp(G_last). Log decays below kKdaMinLogDecay are raised to it (below).
// With state_indices, pool rows no sequence names are copied from the initial to the final state.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace frost::sm90 {

enum class GdnDtype : int { BF16, FP16, FP32 };

inline constexpr int kGdnHeadDim = 128;  // K and V
inline constexpr int kGdnChunk = 64;
// KDA's per-step log decays are raised to at least this: the diagonal 16 x 16 blocks of a chunk take factors
// exp(+-4 g) around their anchors, which stay inside FP32 for g >= -20. A step that keeps exp(-20) = 2e-9 of
// the state instead of less changes results far below the 16-bit rounding of the outputs.
inline constexpr float kKdaMinLogDecay = -20.f;

struct GdnFwdParams {
  GdnDtype io = GdnDtype::BF16;  // q, k, v, o
  GdnDtype g_dtype = GdnDtype::FP32, beta_dtype = GdnDtype::FP32;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
  void* o = nullptr;
  const float* initial_state = nullptr;  // null: zero
  float* final_state = nullptr;          // null: not written
  const void* cu_seqlens = nullptr;      // null: one sequence per batch row
  bool cu_int64 = false;
  const int32_t* state_indices = nullptr;
  int64_t batch = 0, len = 0, heads = 0, value_heads = 0;
  int64_t sequences = 0;   // B, or cu_seqlens' N
  int64_t state_rows = 0;  // rows of the initial / final state tensors
  // Element strides of the batch, token and head axes.
  int64_t q_stride[3] = {}, k_stride[3] = {}, v_stride[3] = {}, o_stride[3] = {}, beta_stride[3] = {};
  int64_t g_stride[4] = {};  // and, for KDA, the key channel's
  float scale = 1.f;
  bool l2norm = false;
  bool per_key_decay = false;  // KDA
};

// Sizes fixed at build time: the chunk bound (sum over sequences of ceil(len / 64) is at most
// ceil(T / 64) * B without cu_seqlens and (T + 63 N) / 64 with them), the value-column slice the
// state pass uses, and the workspace carve-up.
struct GdnPlan {
  int64_t max_chunks = 0;
  int value_slice = 32;
  int pass_kernel = 0;  // 0: the mma.sync state pass (slices of 32 or 64), 1: the wgmma one (64 or 128)
  // The backward's reverse pass: 0 mma.sync with reverse_slice (32 or 64) value columns per CTA, 1 wgmma with 64 or
  // 128.
  int reverse_kernel = 0, reverse_slice = 32;
  // The wgmma pass's CTAs fill at most half the SMs: the chunk kernel may run beside it (GdnOverlap).
  bool overlap = false;
  // The GDN backward's chunk gradient kernel: a persistent grid of this many CTAs (0: one per chunk and value head).
  int grad_ctas = 0;
  // It starts while the wgmma reverse pass runs, on the SMs that one leaves, and takes each chunk once the reverse
  // pass has stored it (GdnOverlap not needed; a programmatic dependent launch behind the reverse pass).
  bool grad_overlap = false;
  int64_t workspace_bytes = 0;
};

// What running the chunk kernel and the state pass at once takes (GdnPlan::overlap), created with the plan by its
// owner: a stream for the pass (created with the highest priority, so its CTAs are placed first) and two events
// (fork: the prologue is done; join: the pass is done). gdn_fwd enqueues on them; two calls that share them must
// not enqueue at the same time.
struct GdnOverlap {
  cudaStream_t pass_stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};

// Null when served, else the attribute out of reach.
const char* gdn_fwd_unsupported_reason(const GdnFwdParams&);

// Sizes the launches. pass_kernel 0: the mma.sync state pass, value_slice 32 or 64 columns per CTA (0: by
// heuristic); 1: the wgmma state pass (GDN only), 64 or 128 columns per CTA (0: 128 once sequences x value heads x 2
// exceed 132, else 64); kPassAuto: both by heuristic (value_slice must be 0). Other values: cudaErrorInvalidValue;
// the wgmma pass for KDA: cudaErrorNotSupported.
// sm_count: the device's SMs (or its partition's): the plan overlaps only while the pass leaves half of them free
// (0: never).
inline constexpr int kPassAuto = -1;
cudaError_t gdn_fwd_plan(const GdnFwdParams&, int value_slice, GdnPlan& out, int pass_kernel, int sm_count);

// Enqueue on `stream`: no allocation, no host synchronization; capturable in a CUDA graph. The
// workspace (plan.workspace_bytes, 256-byte aligned) holds everything between the launches.
// phase_marks (benchmarks only; null from execute): two events recorded after the prologue and after the
// chunk kernel, to split the time between the phases.
// overlap (with plan.overlap and without phase_marks): the state pass runs on overlap->pass_stream beside the chunk
// kernel, forked from and joined back into `stream`; else the launches run one after the other on `stream`.
cudaError_t gdn_fwd(const GdnFwdParams&, const GdnPlan&, void* workspace, cudaStream_t stream,
                    const cudaEvent_t* phase_marks = nullptr, const GdnOverlap* overlap = nullptr);

// GDN and KDA backward, chunked like the forward. Six launches for GDN, seven for KDA (one more each with a
// state pool) on one stream, none allocating:
//   1. the forward's prologue (sequence table, checks, validity flag); rows of a state pool no sequence names
//      get D_INITIAL_STATE = D_FINAL_STATE (zero without it);
//   2. the forward's chunk kernel (W, P, the row factors and T per chunk; U for the mma.sync pass, T diag(beta)
//      and W's factors for the wgmma pass);
//   3. the forward's state pass (mma.sync or wgmma: GdnPlan::pass_kernel), recording the state entering each
//      chunk, h, and U' = U - W S (no O);
//   4. the reverse state pass per (sequence, value head, column slice), chunks last to first, with the
//      gradient dS of the state leaving the chunk in FP32 registers:
//        dU' = P^T dO + exp(G_last - G) K dS,  dS <- exp(G_last) dS + scale (exp(G) Q)^T dO - W^T dU';
//      it records dS per chunk and dU', and writes D_INITIAL_STATE (mma.sync, or wgmma on 64 or 128 value columns
//      per CTA: GdnPlan::reverse_kernel, reverse_slice);
//   5. per (chunk, value head), on wgmma, a persistent grid taking items from the last chunk and loading each during
//      the one before (sm90_gdn_bwd_grad_wgmma.cuh); with GdnPlan::grad_overlap it starts while step 4 runs, on the
//      SMs step 4 leaves, each item waiting for step 4's flag of its chunk: recompute G, K K^T and Q K^T (T comes
//      from step 2); dP = dO U'^T; dQ, dK, dW from the state terms and dP; dT, then dV, dbeta and dK through the WY
//      form; dA = -T^T dT T^T and its dK, dbeta; dG from every decay factor, summed backwards within the chunk into dg.
//      dQ and dK stay FP32 per value head in the workspace, or, with one value head per key head and no L2 norm, go
//      straight to DQ and DK (step 6 is then left out);
//   6. per (token, head): dQ and dK summed over the value heads of a GVA group, then through the L2 norm.
// KDA (fwd.per_key_decay): step 2 is the KDA chunk kernel, which also records K K^T gated per channel (FP32);
// steps 3 and 4 read its gated q and k tiles and decay each state row by its channel; step 5 is split in two
// (sm90_kda_bwd_kernels.cuh): the WY and state terms on tensor cores, then the intra-chunk products that carry
// exp(G_i - G_j) inside the channel sum, in FP32 with each factor formed as a decay, and dg per channel.
struct GdnBwdParams {
  GdnFwdParams fwd;  // o and final_state unused; initial_state as the forward's
  const void* d_o = nullptr;
  const float* d_final_state = nullptr;  // null: zero
  float* d_initial_state = nullptr;      // null: not written
  void *dq = nullptr, *dk = nullptr, *dv = nullptr, *dg = nullptr, *dbeta = nullptr;
  GdnDtype dg_dtype = GdnDtype::FP32, dbeta_dtype = GdnDtype::FP32;
  int64_t do_stride[3] = {}, dq_stride[3] = {}, dk_stride[3] = {}, dv_stride[3] = {}, dbeta_stride[3] = {};
  int64_t dg_stride[4] = {};  // and, for KDA, the key channel's
};

// Null when served, else the attribute out of reach.
const char* gdn_bwd_unsupported_reason(const GdnBwdParams&);

// Sizes the launches (max_chunks and value_slice as the forward's) and the workspace: the forward's pieces,
// then h and dS per chunk ([chunks, HV, 128, 128] each), U' and dU' ([chunks, HV, 64, 128]) in the 16-bit
// type, and dQ, dK per value head ([B * T, HV, 128] FP32 each, unless step 5 writes them out); KDA adds K K^T,
// dP and dKK ([chunks, HV, 64, 64] FP32 each) and dG ([chunks, HV, 64, 128] FP32); both keep the chunks' T
// ([chunks, HV, 64, 64], 16-bit).
// pass_kernel, value_slice and sm_count pick the recording run's state pass and its overlap as gdn_fwd_plan's do
// (overlap false: never overlapped). pass_kernel 0 or 1: that recording pass and the mma.sync reverse pass, with the
// recording pass's slice when that one is mma.sync too, else as the forward's heuristic picks it; 2 (GDN): the wgmma
// recording pass and the wgmma reverse pass (halves of the value columns while those CTAs fit one wave of sm_count,
// else all 128 per CTA); kPassAuto: 2 for GDN, 0 for KDA. GDN's chunk gradient kernel runs sm_count persistent CTAs
// (0: one per chunk and value head), beside the wgmma reverse pass (grad_overlap) when overlap is true and that
// pass's CTAs leave at least half of the sm_count SMs.
cudaError_t gdn_bwd_plan(const GdnBwdParams&, int value_slice, GdnPlan& out, int pass_kernel, int sm_count,
                         bool overlap = true);

// Enqueue on `stream`: no allocation, no host synchronization; capturable in a CUDA graph. overlap (with
// plan.overlap): the recording pass runs beside the chunk kernel, as gdn_fwd's state pass does, and then beside the
// reverse pass (with plan.grad_overlap: joined before it). phase_marks (benchmarks only; null from execute): three
// events recorded after the recording run (steps 1-3; overlapped: steps 1-2), the reverse pass (overlapped: and the
// recording pass) and the chunk gradient kernels, to split the time between the steps; the gradient kernel then
// starts after the reverse pass.
cudaError_t gdn_bwd(const GdnBwdParams&, const GdnPlan&, void* workspace, cudaStream_t stream,
                    const GdnOverlap* overlap = nullptr, const cudaEvent_t* phase_marks = nullptr);

}  // namespace frost::sm90
