// GDN and KDA forward on sm_90a: the prologue (sequence table, checks), the pool copy, the workspace carve-up
// and the launches. The heavy kernels are in sm90_gdn_kernels.cuh and sm90_kda_chunk.cuh.
#include "engines/sm90/linear_attention/sm90_gdn.h"
#include "engines/sm90/linear_attention/sm90_gdn_kernels.cuh"
#include "engines/sm90/linear_attention/sm90_gdn_pass_wgmma.cuh"
#include "engines/sm90/linear_attention/sm90_gdn_prologue.cuh"
#include "engines/sm90/linear_attention/sm90_kda_chunk.cuh"

namespace frost::sm90 {
namespace {

using gdn::SeqInfo;
using gdn::Workspace;

// Pool rows no sequence names pass from the initial to the final state. Grid: one CTA per (row, head).
__global__ void __launch_bounds__(256) gdn_pool_copy_kernel(const GdnFwdParams p, const Workspace ws) {
  if (*ws.flag == 0) return;
  const int64_t slot = blockIdx.x, row = slot / p.value_heads;
  if (ws.bitmap[row >> 5] & (1u << (row & 31))) return;
  const auto* src = reinterpret_cast<const float4*>(p.initial_state + slot * gdn::kD * gdn::kD);
  auto* dst = reinterpret_cast<float4*>(p.final_state + slot * gdn::kD * gdn::kD);
  for (int i = static_cast<int>(threadIdx.x); i < gdn::kD * gdn::kD / 4; i += 256) dst[i] = src[i];
}

int64_t align256(int64_t x) { return (x + 255) / 256 * 256; }

// Byte offsets of the workspace pieces, in Workspace's order; the last entry is the total. On the wgmma pass
// (tu_form) the chunk kernel writes T diag(beta) and W's factors instead of W and U; `ready` holds the flags of
// an overlapped run.
constexpr int kPieces = 14;
struct Layout {
  int64_t at[kPieces + 1];
};

Layout layout_of(const GdnFwdParams& p, int64_t max_chunks, bool tu_form, bool ready) {
  const int64_t slots = max_chunks * p.value_heads, elem = 2, tile = slots * gdn::kC * gdn::kD * elem;
  const bool kda = p.per_key_decay;
  const int64_t sizes[kPieces] = {4,
                                  p.sequences * static_cast<int64_t>(sizeof(SeqInfo)),
                                  (p.sequences + 1) * 4,
                                  ((p.state_rows + 31) / 32) * 4,
                                  tu_form ? 0 : tile,
                                  tu_form ? 0 : tile,
                                  slots * gdn::kC * gdn::kC * elem,
                                  kda ? 0 : slots * 2 * gdn::kC * 4,
                                  slots * (kda ? gdn::kD : 1) * 4,
                                  kda ? tile : 0,
                                  kda ? tile : 0,
                                  tu_form ? slots * gdn::kC * gdn::kC * elem : 0,
                                  tu_form ? slots * gdn::kC * 4 : 0,
                                  ready ? slots * 4 : 0};
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
          nullptr,
          nullptr,
          b + l.at[11],
          reinterpret_cast<float*>(b + l.at[12]),
          reinterpret_cast<int32_t*>(b + l.at[13])};
}

template <class E, int BV, bool kPerKey>
cudaError_t launch_pass(const GdnFwdParams& p, const Workspace& ws, cudaStream_t stream) {
  constexpr int bytes = sizeof(gdn::PassSmem<E, BV>);
  auto* kernel = gdn::gdn_pass_kernel<E, BV, kPerKey>;
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      e != cudaSuccess)
    return e;
  const int64_t ctas = p.sequences * p.value_heads * (gdn::kD / BV);
  kernel<<<static_cast<unsigned>(ctas), gdn::kPassThreads, bytes, stream>>>(p, ws, gdn::PassRecord{});
  return cudaGetLastError();
}

// The wgmma state pass (GDN): one CTA of kWG warpgroups per (sequence, value head, 64 kWG value columns).
template <class E, int kWG>
cudaError_t launch_pass_wgmma(const GdnFwdParams& p, const Workspace& ws, cudaStream_t stream) {
  using Tr = gdn::wgmma_pass::Traits<E, kWG>;
  constexpr int bytes = sizeof(typename Tr::Smem);
  auto* kernel = gdn::gdn_pass_wgmma_kernel<E, kWG>;
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      e != cudaSuccess)
    return e;
  const int64_t ctas = p.sequences * p.value_heads * (gdn::kD / Tr::kCols);
  kernel<<<static_cast<unsigned>(ctas), Tr::kCtaThreads, bytes, stream>>>(p, ws, gdn::PassRecord{});
  return cudaGetLastError();
}

// The state pass of plan, on `stream`.
template <class E, bool kPerKey>
cudaError_t launch_state_pass(const GdnFwdParams& p, const GdnPlan& plan, const Workspace& ws, cudaStream_t stream) {
  if constexpr (!kPerKey) {
    if (plan.pass_kernel == 1)
      return plan.value_slice == gdn::kD ? launch_pass_wgmma<E, 2>(p, ws, stream)
                                         : launch_pass_wgmma<E, 1>(p, ws, stream);
  }
  return plan.value_slice == 64 ? launch_pass<E, 64, kPerKey>(p, ws, stream)
                                : launch_pass<E, 32, kPerKey>(p, ws, stream);
}

// ws.ready set: the state pass runs on ov.pass_stream beside the chunk kernel (its loading warpgroup waits for each
// chunk's flag), forked after the prologue and joined before returning.
template <class E, bool kPerKey>
cudaError_t launch_all(const GdnFwdParams& p, const GdnPlan& plan, const Workspace& ws, cudaStream_t stream,
                       const cudaEvent_t* marks, const GdnOverlap* ov) {
  constexpr int chunk_bytes = kPerKey ? sizeof(gdn::KdaChunkSmem<E>) : sizeof(gdn::ChunkSmem<E>);
  auto* chunk_kernel = kPerKey                 ? gdn::kda_chunk_kernel<E>
                       : plan.pass_kernel == 1 ? gdn::gdn_chunk_kernel<E, gdn::ChunkOut::kTu>
                                               : gdn::gdn_chunk_kernel<E, gdn::ChunkOut::kWu>;
  // Before anything is launched: with lazy module loading, this call loads the chunk kernel, and a load while the
  // pass spins on the chunk kernel's flags would wait for the pass forever.
  if (const cudaError_t e =
          cudaFuncSetAttribute(chunk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, chunk_bytes);
      e != cudaSuccess)
    return e;
  gdn::gdn_prologue_kernel<gdn::kPrologueThreads><<<1, gdn::kPrologueThreads, 0, stream>>>(p, ws, plan.max_chunks);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (ws.ready) {
    if (const cudaError_t e = cudaMemsetAsync(ws.ready, 0, plan.max_chunks * p.value_heads * 4, stream);
        e != cudaSuccess)
      return e;
  }
  if (p.state_indices && p.final_state && p.final_state != p.initial_state) {
    gdn_pool_copy_kernel<<<static_cast<unsigned>(p.state_rows * p.value_heads), 256, 0, stream>>>(p, ws);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  if (marks) cudaEventRecord(marks[0], stream);
  if (ws.ready) {
    cudaError_t e = cudaEventRecord(ov->fork, stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(ov->pass_stream, ov->fork, 0);
    if (e == cudaSuccess) e = launch_state_pass<E, kPerKey>(p, plan, ws, ov->pass_stream);
    if (e == cudaSuccess) e = cudaEventRecord(ov->join, ov->pass_stream);
    if (e != cudaSuccess) return e;
  }
  if (plan.max_chunks > 0) {
    // GDN: one CTA per (chunk, value head), chunk-major; KDA: grid (chunks, value heads).
    const dim3 grid = kPerKey ? dim3(static_cast<unsigned>(plan.max_chunks), static_cast<unsigned>(p.value_heads))
                              : dim3(static_cast<unsigned>(plan.max_chunks * p.value_heads));
    chunk_kernel<<<grid, gdn::kThreads, chunk_bytes, stream>>>(p, ws);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  if (marks) cudaEventRecord(marks[1], stream);
  if (ws.ready) return cudaStreamWaitEvent(stream, ov->join, 0);
  return launch_state_pass<E, kPerKey>(p, plan, ws, stream);
}

}  // namespace

const char* gdn_fwd_unsupported_reason(const GdnFwdParams& p) {
  if (p.io == GdnDtype::FP32) return "Q data type FLOAT (BFLOAT16 or HALF only)";
  if (p.heads <= 0 || p.value_heads % p.heads != 0) return "V heads not a multiple of Q heads";
  for (const int64_t* s : {p.q_stride, p.k_stride, p.v_stride, p.o_stride})
    for (int i = 0; i < 3; ++i)
      if (s[i] % 8 != 0) return "Q, K, V or O stride not a multiple of 8 elements (16-byte rows)";
  if (p.sequences >= (int64_t{1} << 30) || p.len >= (int64_t{1} << 31))
    return "sequence count or T beyond 32-bit chunk indexing";
  if (p.sequences * p.value_heads * 4 >= (int64_t{1} << 31)) return "sequences x value heads too many for one grid";
  const int64_t chunk_bound =
      p.cu_seqlens ? (p.len + (gdn::kC - 1) * p.sequences) / gdn::kC : p.batch * ((p.len + gdn::kC - 1) / gdn::kC);
  if (chunk_bound * p.value_heads >= (int64_t{1} << 31)) return "chunks x value heads too many for one grid";
  return nullptr;
}

cudaError_t gdn_fwd_plan(const GdnFwdParams& p, int value_slice, GdnPlan& out, int pass_kernel, int sm_count) {
  out.max_chunks =
      p.cu_seqlens ? (p.len + (gdn::kC - 1) * p.sequences) / gdn::kC : p.batch * ((p.len + gdn::kC - 1) / gdn::kC);
  // Two 64-column CTAs per head (either pass) no longer fit one wave of the SMs: whole heads pay on the wgmma pass.
  const bool whole_heads = p.sequences * p.value_heads * 2 > 132;
  if (pass_kernel == kPassAuto) {
    if (value_slice != 0) return cudaErrorInvalidValue;
    // H200, GDN, same-run timings (bench/results/2026-12-02-h200-la_pass_loader.log): the wgmma pass leads at
    // every size once its one-warpgroup CTAs have a loading warpgroup, with halves while they fit one wave (B1
    // T32768 H32 1.301 ms against 1.482 on mma.sync 32; B2 T16384 H16 0.659 against 0.754; B4 T8192 H16 0.466
    // against 0.622 on mma.sync 64) and whole heads beyond (B4 T8192 H32 0.834 against 0.891 on halves).
    pass_kernel = p.per_key_decay ? 0 : 1;
  }
  out.pass_kernel = pass_kernel;
  if (pass_kernel == 1) {
    if (p.per_key_decay) return cudaErrorNotSupported;  // the wgmma pass is GDN's only
    if (value_slice != 0 && value_slice != 64 && value_slice != gdn::kD) return cudaErrorInvalidValue;
    // One CTA per SM: whole heads (two warpgroups) or halves (one, with a loading warpgroup).
    if (value_slice == 0) value_slice = whole_heads ? gdn::kD : 64;
    out.value_slice = value_slice;
    // The chunk kernel runs beside the pass on the SMs it leaves: at most half of them hold pass CTAs, so the
    // chunk kernel keeps at least as many (the pass waits on it; with every SM held it could never run).
    out.overlap = value_slice == 64 && p.sequences * p.value_heads * 2 <= sm_count / 2;
    out.workspace_bytes = layout_of(p, out.max_chunks, true, out.overlap).at[kPieces];
    return cudaSuccess;
  }
  if (pass_kernel != 0 || (value_slice != 0 && value_slice != 32 && value_slice != 64)) return cudaErrorInvalidValue;
  if (value_slice == 0) {
    // One CTA per SM. A 64-column CTA takes about 1.4x the time of a 32-column one per chunk (H200, GDN) for
    // twice the columns, so 32 columns pay only while all their CTAs fit in one wave of 132 SMs.
    value_slice = p.sequences * p.value_heads * 4 <= 132 ? 32 : 64;
  }
  out.value_slice = value_slice;
  out.overlap = false;
  out.workspace_bytes = layout_of(p, out.max_chunks, false, false).at[kPieces];
  return cudaSuccess;
}

cudaError_t gdn_fwd(const GdnFwdParams& p, const GdnPlan& plan, void* workspace, cudaStream_t stream,
                    const cudaEvent_t* phase_marks, const GdnOverlap* overlap) {
  Workspace ws = carve(layout_of(p, plan.max_chunks, plan.pass_kernel == 1, plan.overlap), workspace);
  if (!plan.overlap || !overlap || phase_marks) ws.ready = nullptr;
  if (p.per_key_decay) {
    if (p.io == GdnDtype::BF16) return launch_all<__nv_bfloat16, true>(p, plan, ws, stream, phase_marks, overlap);
    return launch_all<__half, true>(p, plan, ws, stream, phase_marks, overlap);
  }
  if (p.io == GdnDtype::BF16) return launch_all<__nv_bfloat16, false>(p, plan, ws, stream, phase_marks, overlap);
  return launch_all<__half, false>(p, plan, ws, stream, phase_marks, overlap);
}

}  // namespace frost::sm90
