// GDN and KDA backward on sm_90a: the workspace carve-up and the launches (sm90_gdn.h lists them). The forward's
// chunk kernel and state pass recompute W, U, P, the per-chunk states and U'; sm90_gdn_bwd_kernels.cuh (GDN) and
// sm90_kda_bwd_kernels.cuh (KDA) do the rest.
#include <algorithm>

#include "engines/sm90/linear_attention/sm90_gdn.h"
#include "engines/sm90/linear_attention/sm90_gdn_bwd_grad_wgmma.cuh"
#include "engines/sm90/linear_attention/sm90_gdn_bwd_kernels.cuh"
#include "engines/sm90/linear_attention/sm90_gdn_bwd_pass_wgmma.cuh"
#include "engines/sm90/linear_attention/sm90_gdn_kernels.cuh"
#include "engines/sm90/linear_attention/sm90_gdn_pass_wgmma.cuh"
#include "engines/sm90/linear_attention/sm90_gdn_prologue.cuh"
#include "engines/sm90/linear_attention/sm90_kda_bwd_kernels.cuh"

namespace frost::sm90 {
namespace {

using gdn::BwdWs;
using gdn::KdaBwdWs;
using gdn::SeqInfo;
using gdn::Workspace;

int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

// Byte offsets of the workspace pieces: the forward's Workspace, then BwdWs, then (KDA) the recorded KK and
// KdaBwdWs, then the recorded T, then (recording on the wgmma pass, tu_form) T diag(beta) and W's factors, then the
// ready flags of an overlapped recording run, then the gradient kernel's item count and (grad_overlap) the reverse
// pass's flags; the last entry is the total. The last two pieces are zeroed before each run.
constexpr int kPieces = 11 + 6 + 4 + 1 + 4;
struct Layout {
  int64_t at[kPieces + 1];
};

Layout layout_of(const GdnFwdParams& p, int64_t max_chunks, bool tu_form, bool ready, bool grad_overlap) {
  const int64_t slots = max_chunks * p.value_heads, elem = 2, tile = slots * gdn::kC * gdn::kD * elem;
  const int64_t state_tiles = slots * gdn::kD * gdn::kD * elem;
  const int64_t grads = gdn::gdn_bwd_direct_grads(p) ? 0 : p.batch * p.len * p.value_heads * gdn::kD * 4;
  const bool kda = p.per_key_decay;
  const int64_t square = kda ? slots * gdn::kC * gdn::kC * 4 : 0;
  const int64_t sizes[kPieces] = {4,
                                  p.sequences * static_cast<int64_t>(sizeof(SeqInfo)),
                                  (p.sequences + 1) * 4,
                                  ((p.state_rows + 31) / 32) * 4,
                                  tile,
                                  tu_form ? 0 : tile,
                                  slots * gdn::kC * gdn::kC * elem,
                                  kda ? 0 : slots * 2 * gdn::kC * 4,
                                  slots * (kda ? gdn::kD : 1) * 4,
                                  kda ? tile : 0,
                                  kda ? tile : 0,
                                  state_tiles,
                                  state_tiles,
                                  tile,
                                  tile,
                                  grads,
                                  grads,
                                  square,
                                  square,
                                  square,
                                  kda ? slots * gdn::kC * gdn::kD * 4 : 0,
                                  slots * gdn::kC * gdn::kC * elem,
                                  tu_form ? slots * gdn::kC * gdn::kC * elem : 0,
                                  tu_form ? slots * gdn::kC * 4 : 0,
                                  ready ? slots * 4 : 0,
                                  (1 + (grad_overlap ? slots : 0)) * 4};
  Layout l{};
  for (int i = 0; i < kPieces; ++i) l.at[i + 1] = l.at[i] + align256(sizes[i]);
  return l;
}

Workspace carve(const Layout& l, void* base) {
  auto* b = static_cast<char*>(base);
  return {reinterpret_cast<int32_t*>(b + l.at[0]),
          reinterpret_cast<SeqInfo*>(b + l.at[1]),
          reinterpret_cast<int32_t*>(b + l.at[2]),
          reinterpret_cast<uint32_t*>(b + l.at[3]),
          b + l.at[4],
          b + l.at[5],
          b + l.at[6],
          reinterpret_cast<float*>(b + l.at[7]),
          reinterpret_cast<float*>(b + l.at[8]),
          b + l.at[9],
          b + l.at[10],
          reinterpret_cast<float*>(b + l.at[17]),
          b + l.at[21],
          b + l.at[22],
          reinterpret_cast<float*>(b + l.at[23]),
          reinterpret_cast<int32_t*>(b + l.at[24])};
}

BwdWs carve_bwd(const Layout& l, void* base, bool grad_overlap) {
  auto* b = static_cast<char*>(base);
  return {b + l.at[11],
          b + l.at[12],
          b + l.at[13],
          b + l.at[14],
          reinterpret_cast<float*>(b + l.at[15]),
          reinterpret_cast<float*>(b + l.at[16]),
          reinterpret_cast<int32_t*>(b + l.at[25]),
          grad_overlap ? reinterpret_cast<int32_t*>(b + l.at[25]) + 1 : nullptr};
}

KdaBwdWs carve_kda(const Layout& l, void* base) {
  auto* b = static_cast<char*>(base);
  return {reinterpret_cast<float*>(b + l.at[18]), reinterpret_cast<float*>(b + l.at[19]),
          reinterpret_cast<float*>(b + l.at[20])};
}

template <class K>
cudaError_t set_smem(K* kernel, int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

// The forward's state pass, recording (mma.sync, BV value columns per CTA).
template <class E, int BV, bool kPerKey>
cudaError_t launch_recording_pass(const GdnFwdParams& p, const Workspace& ws, const BwdWs& bw, cudaStream_t stream) {
  constexpr int bytes = sizeof(gdn::PassSmem<E, BV>);
  auto* kernel = gdn::gdn_pass_kernel<E, BV, kPerKey, true>;
  if (const cudaError_t e = set_smem(kernel, bytes); e != cudaSuccess) return e;
  const auto ctas = static_cast<unsigned>(p.sequences * p.value_heads * (gdn::kD / BV));
  kernel<<<ctas, gdn::kPassThreads, bytes, stream>>>(p, ws, gdn::PassRecord{bw.h, bw.vnew});
  return cudaGetLastError();
}

// The same on the wgmma pass (GDN; kWG warpgroups of 64 value columns per CTA).
template <class E, int kWG>
cudaError_t launch_recording_pass_wgmma(const GdnFwdParams& p, const Workspace& ws, const BwdWs& bw,
                                        cudaStream_t stream) {
  using Tr = gdn::wgmma_pass::Traits<E, kWG, true>;
  constexpr int bytes = sizeof(typename Tr::Smem);
  auto* kernel = gdn::gdn_pass_wgmma_kernel<E, kWG, true>;
  if (const cudaError_t e = set_smem(kernel, bytes); e != cudaSuccess) return e;
  const auto ctas = static_cast<unsigned>(p.sequences * p.value_heads * (gdn::kD / Tr::kCols));
  kernel<<<ctas, Tr::kCtaThreads, bytes, stream>>>(p, ws, gdn::PassRecord{bw.h, bw.vnew});
  return cudaGetLastError();
}

template <class E, int BV, bool kPerKey>
cudaError_t launch_reverse_pass(const GdnBwdParams& bp, const Workspace& ws, const BwdWs& bw, cudaStream_t stream) {
  constexpr int bytes = sizeof(gdn::PassSmem<E, BV>);
  auto* kernel = gdn::gdn_bwd_pass_kernel<E, BV, kPerKey>;
  if (const cudaError_t e = set_smem(kernel, bytes); e != cudaSuccess) return e;
  const auto ctas = static_cast<unsigned>(bp.fwd.sequences * bp.fwd.value_heads * (gdn::kD / BV));
  kernel<<<ctas, gdn::kPassThreads, bytes, stream>>>(bp, ws, bw);
  return cudaGetLastError();
}

// The reverse pass on wgmma (GDN; kWG x 64 value columns per CTA).
template <class E, int kWG>
cudaError_t launch_reverse_pass_wgmma(const GdnBwdParams& bp, const Workspace& ws, const BwdWs& bw,
                                      cudaStream_t stream) {
  using Tr = gdn::wgmma_reverse::Traits<E, kWG>;
  constexpr int bytes = sizeof(typename Tr::Smem);
  auto* kernel = gdn::gdn_bwd_pass_wgmma_kernel<E, kWG>;
  if (const cudaError_t e = set_smem(kernel, bytes); e != cudaSuccess) return e;
  const auto ctas = static_cast<unsigned>(bp.fwd.sequences * bp.fwd.value_heads * (gdn::kD / Tr::kCols));
  kernel<<<ctas, Tr::kCtaThreads, bytes, stream>>>(bp, ws, bw);
  return cudaGetLastError();
}

// GDN's chunk gradient kernel (two warpgroups: four measured slower, NOTES.md) on plan.grad_ctas persistent CTAs.
// behind_reverse: launched to start while the reverse pass just enqueued still runs (GdnPlan::grad_overlap), on the
// SMs it leaves once all of its CTAs are resident.
template <class E>
cudaError_t launch_gradient(const GdnBwdParams& bp, const GdnPlan& plan, const gdn::Workspace& ws, const gdn::BwdWs& bw,
                            cudaStream_t stream, bool behind_reverse) {
  constexpr int kWG = 2, bytes = sizeof(gdn::wgmma_grad::Smem<E, kWG * 4>);
  auto* kernel = gdn::gdn_bwd_grad_wgmma_kernel<E, kWG>;
  if (const cudaError_t e = set_smem(kernel, bytes); e != cudaSuccess) return e;
  const int64_t items = plan.max_chunks * bp.fwd.value_heads;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(plan.grad_ctas > 0 ? std::min<int64_t>(items, plan.grad_ctas) : items));
  config.blockDim = dim3(kWG * 128);
  config.dynamicSmemBytes = bytes;
  config.stream = stream;
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &early;
  config.numAttrs = behind_reverse ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, bp, ws, bw, items);
}

// The reverse pass of plan.
template <class E, bool kPerKey>
cudaError_t launch_reverse(const GdnBwdParams& bp, const GdnPlan& plan, const Workspace& ws, const BwdWs& bw,
                           cudaStream_t stream) {
  if constexpr (!kPerKey) {
    if (plan.reverse_kernel == 1)
      return plan.reverse_slice == gdn::kD ? launch_reverse_pass_wgmma<E, 2>(bp, ws, bw, stream)
                                           : launch_reverse_pass_wgmma<E, 1>(bp, ws, bw, stream);
  }
  if (plan.reverse_kernel != 0) return cudaErrorNotSupported;  // KDA on the wgmma pass (its plan refuses it)
  return plan.reverse_slice == 64 ? launch_reverse_pass<E, 64, kPerKey>(bp, ws, bw, stream)
                                  : launch_reverse_pass<E, 32, kPerKey>(bp, ws, bw, stream);
}

// The recording run's state pass of plan, on `stream`.
template <class E, bool kPerKey>
cudaError_t launch_recording(const GdnFwdParams& p, const GdnPlan& plan, const Workspace& ws, const BwdWs& bw,
                             cudaStream_t stream) {
  if constexpr (!kPerKey) {
    if (plan.pass_kernel == 1)
      return plan.value_slice == gdn::kD ? launch_recording_pass_wgmma<E, 2>(p, ws, bw, stream)
                                         : launch_recording_pass_wgmma<E, 1>(p, ws, bw, stream);
  }
  if (plan.pass_kernel != 0) return cudaErrorNotSupported;  // KDA on the wgmma pass (its plan refuses it)
  return plan.value_slice == 64 ? launch_recording_pass<E, 64, kPerKey>(p, ws, bw, stream)
                                : launch_recording_pass<E, 32, kPerKey>(p, ws, bw, stream);
}

// ws.ready set: the recording pass runs on ov.pass_stream beside the chunk kernel, as in the forward (gdn_fwd), and
// beside the reverse pass after it.
template <class E, bool kPerKey>
cudaError_t launch_all(const GdnBwdParams& bp, const GdnPlan& plan, const Workspace& ws, const BwdWs& bw,
                       const KdaBwdWs& kw, cudaStream_t stream, const GdnOverlap* ov, const cudaEvent_t* marks) {
  const GdnFwdParams& p = bp.fwd;
  constexpr int chunk_bytes = kPerKey ? sizeof(gdn::KdaChunkSmem<E>) : sizeof(gdn::ChunkSmem<E>);
  auto* chunk_kernel = kPerKey                 ? gdn::kda_chunk_kernel<E, true>
                       : plan.pass_kernel == 1 ? gdn::gdn_chunk_kernel<E, gdn::ChunkOut::kTuW>
                                               : gdn::gdn_chunk_kernel<E, gdn::ChunkOut::kWu>;
  // Before anything is launched: with lazy module loading, this call loads the chunk kernel, and a load while the
  // recording pass spins on the chunk kernel's flags would wait for the pass forever.
  if (const cudaError_t e = set_smem(chunk_kernel, chunk_bytes); e != cudaSuccess) return e;
  gdn::gdn_prologue_kernel<gdn::kPrologueThreads><<<1, gdn::kPrologueThreads, 0, stream>>>(p, ws, plan.max_chunks);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (p.state_indices && bp.d_initial_state && bp.d_initial_state != bp.d_final_state) {
    gdn::gdn_bwd_pool_kernel<<<static_cast<unsigned>(p.state_rows * p.value_heads), 256, 0, stream>>>(bp, ws);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  if (ws.ready) {
    cudaError_t e = cudaEventRecord(ov->fork, stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(ov->pass_stream, ov->fork, 0);
    if (e == cudaSuccess) e = launch_recording<E, kPerKey>(p, plan, ws, bw, ov->pass_stream);
    if (e == cudaSuccess) e = cudaEventRecord(ov->join, ov->pass_stream);
    if (e != cudaSuccess) return e;
  }
  const dim3 chunk_grid(static_cast<unsigned>(plan.max_chunks), static_cast<unsigned>(p.value_heads));
  if (plan.max_chunks > 0) {
    // GDN's chunk kernel takes a 1-D chunk-major grid (sm90_gdn_kernels.cuh).
    const dim3 grid = kPerKey ? chunk_grid : dim3(static_cast<unsigned>(plan.max_chunks * p.value_heads));
    chunk_kernel<<<grid, gdn::kThreads, chunk_bytes, stream>>>(p, ws);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  // The reverse pass needs the chunk kernel's output alone: with the recording pass on the side stream it runs
  // at the same time, on the SMs the chunk kernel leaves, and the join comes after it.
  if (!ws.ready) {
    if (const cudaError_t e = launch_recording<E, kPerKey>(p, plan, ws, bw, stream); e != cudaSuccess) return e;
  }
  if (marks) cudaEventRecord(marks[0], stream);
  // The gradient kernel reads the recording: running beside the reverse pass, it comes right behind it on the stream,
  // so the join goes first (the recording ends right after the chunk kernel, whose chunks it takes as they come).
  if (ws.ready && bw.reversed) {
    if (const cudaError_t e = cudaStreamWaitEvent(stream, ov->join, 0); e != cudaSuccess) return e;
  }
  if (const cudaError_t e = launch_reverse<E, kPerKey>(bp, plan, ws, bw, stream); e != cudaSuccess) return e;
  if (ws.ready && !bw.reversed) {
    if (const cudaError_t e = cudaStreamWaitEvent(stream, ov->join, 0); e != cudaSuccess) return e;
  }
  if (marks) cudaEventRecord(marks[1], stream);
  if (plan.max_chunks > 0) {
    if constexpr (kPerKey) {
      constexpr int bytes = sizeof(gdn::KdaBwdChunkSmem<E>);
      auto* kernel = gdn::kda_bwd_chunk_kernel<E>;
      if (const cudaError_t e = set_smem(kernel, bytes); e != cudaSuccess) return e;
      kernel<<<chunk_grid, gdn::kBwdThreads, bytes, stream>>>(bp, ws, bw, kw);
      if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
      constexpr int intra_bytes = sizeof(gdn::KdaIntraSmem<E>);
      auto* intra = gdn::kda_bwd_intra_kernel<E>;
      if (const cudaError_t e = set_smem(intra, intra_bytes); e != cudaSuccess) return e;
      intra<<<chunk_grid, gdn::kIntraThreads, intra_bytes, stream>>>(bp, ws, bw, kw);
      if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    } else {
      // With a mark between them the gradient kernel starts after the reverse pass; its flags are then all set.
      if (const cudaError_t e = launch_gradient<E>(bp, plan, ws, bw, stream, bw.reversed && !marks); e != cudaSuccess)
        return e;
    }
  }
  if (marks) cudaEventRecord(marks[2], stream);
  const int64_t rows = 2 * p.batch * p.len * p.heads;
  if (rows > 0 && !gdn::gdn_bwd_direct_grads(p)) {
    gdn::gdn_bwd_finalize_kernel<E><<<static_cast<unsigned>((rows + gdn::kFinalizeRows - 1) / gdn::kFinalizeRows),
                                      gdn::kFinalizeWarps * 32, 0, stream>>>(bp, ws, bw);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

const char* gdn_bwd_unsupported_reason(const GdnBwdParams& bp) {
  if (const char* why = gdn_fwd_unsupported_reason(bp.fwd)) return why;
  for (const int64_t* s : {bp.do_stride, bp.dq_stride, bp.dk_stride, bp.dv_stride})
    for (int i = 0; i < 3; ++i)
      if (s[i] % 8 != 0) return "DO, DQ, DK or DV stride not a multiple of 8 elements (16-byte rows)";
  if ((2 * bp.fwd.batch * bp.fwd.len * bp.fwd.heads + gdn::kFinalizeRows - 1) / gdn::kFinalizeRows >=
      (int64_t{1} << 31))
    return "B x T x H too large for one grid";
  return nullptr;
}

cudaError_t gdn_bwd_plan(const GdnBwdParams& bp, int value_slice, GdnPlan& out, int pass_kernel, int sm_count,
                         bool overlap) {
  const GdnFwdParams& p = bp.fwd;
  out.grad_ctas = sm_count;
  if (pass_kernel == kPassAuto) {
    if (value_slice != 0) return cudaErrorInvalidValue;
    pass_kernel = p.per_key_decay ? 0 : 2;
  }
  if (pass_kernel == 2 && p.per_key_decay) return cudaErrorNotSupported;
  out.reverse_kernel = pass_kernel == 2 ? 1 : 0;
  // The recording run takes the forward's pass of that kind, overlapped as the forward's would be.
  if (const cudaError_t e =
          gdn_fwd_plan(p, value_slice, out, pass_kernel == 2 ? 1 : pass_kernel, overlap ? sm_count : 0);
      e != cudaSuccess)
    return e;
  // The mma.sync reverse pass: the recording pass's slice when that one is mma.sync too, else as the forward's
  // heuristic would pick it.
  GdnPlan mma_sync;
  if (const cudaError_t e = gdn_fwd_plan(p, 0, mma_sync, 0, 0); e != cudaSuccess) return e;
  // The wgmma reverse pass: halves of the value columns while those CTAs fit one wave, else all 128 per CTA (two
  // warpgroups of dS, one loading warpgroup for both: each chunk takes longer, 4.0 us against 2.45 on the H200, but
  // the loads are shared and a second wave is saved).
  const bool halves_fit = p.sequences * p.value_heads * 2 <= sm_count;
  out.reverse_slice = out.reverse_kernel == 1 ? (halves_fit ? gdn::kD / 2 : gdn::kD)
                      : pass_kernel == 0      ? out.value_slice
                                              : mma_sync.value_slice;
  // The gradient kernel beside the wgmma reverse pass while that one leaves at least half the SMs.
  const int64_t reverse_ctas = p.sequences * p.value_heads * (gdn::kD / out.reverse_slice);
  out.grad_overlap = overlap && out.reverse_kernel == 1 && reverse_ctas * 2 <= sm_count;
  out.workspace_bytes = layout_of(p, out.max_chunks, out.pass_kernel == 1, out.overlap, out.grad_overlap).at[kPieces];
  return cudaSuccess;
}

cudaError_t gdn_bwd(const GdnBwdParams& bp, const GdnPlan& plan, void* workspace, cudaStream_t stream,
                    const GdnOverlap* overlap, const cudaEvent_t* phase_marks) {
  const Layout l = layout_of(bp.fwd, plan.max_chunks, plan.pass_kernel == 1, plan.overlap, plan.grad_overlap);
  Workspace ws = carve(l, workspace);
  if (!plan.overlap || !overlap) ws.ready = nullptr;
  const BwdWs bw = carve_bwd(l, workspace, plan.grad_overlap);
  // The ready flags, the gradient kernel's item count and the reverse pass's flags: zero before anything reads them.
  if (const cudaError_t e = cudaMemsetAsync(static_cast<char*>(workspace) + l.at[kPieces - 2], 0,
                                            l.at[kPieces] - l.at[kPieces - 2], stream);
      e != cudaSuccess)
    return e;
  const KdaBwdWs kw = carve_kda(l, workspace);
  if (bp.fwd.per_key_decay) {
    if (bp.fwd.io == GdnDtype::BF16)
      return launch_all<__nv_bfloat16, true>(bp, plan, ws, bw, kw, stream, overlap, phase_marks);
    return launch_all<__half, true>(bp, plan, ws, bw, kw, stream, overlap, phase_marks);
  }
  if (bp.fwd.io == GdnDtype::BF16)
    return launch_all<__nv_bfloat16, false>(bp, plan, ws, bw, kw, stream, overlap, phase_marks);
  return launch_all<__half, false>(bp, plan, ws, bw, kw, stream, overlap, phase_marks);
}

}  // namespace frost::sm90
