// Launchers for the grouped (MoE) GEMM and the fused SwiGLU GEMM: validation against the
// instantiated kernels (sm90_gemm_grouped_swiglu_registry.h) and dispatch. Host-only.
#include "sm90_gemm.h"
#include "sm90_gemm_dispatch_util.h"
#include "sm90_gemm_grouped_swiglu_registry.h"

namespace frost::sm90 {
namespace {
using namespace gemm_detail;

struct GroupedEntry {
  GemmDtype a, b, d;
  bool b_kmajor;
  int tile_n, tile_k, sched, cluster_n;
  GroupedRunFn run;
  GroupedWorkspaceFn workspace;
};
#define FROST_SM90_GEMM_GROUPED_ROW(NAME, A, B, D, BK, TN, TK, SCHED, CN) \
  GroupedEntry{GemmDtype::A, GemmDtype::B, GemmDtype::D, BK != 0, TN, TK, SCHED, CN, NAME##_run, NAME##_workspace},
const GroupedEntry kGrouped[] = {FROST_SM90_GEMM_GROUPED_LIST(FROST_SM90_GEMM_GROUPED_ROW)};
#undef FROST_SM90_GEMM_GROUPED_ROW

struct SwigluEntry {
  GemmDtype a, b, d;
  bool a_kmajor, b_kmajor;
  int tile_n;
  SwigluRunFn run;
  SwigluWorkspaceFn workspace;
};
#define FROST_SM90_GEMM_SWIGLU_ROW(NAME, A, B, D, AK, BK, TN) \
  SwigluEntry{GemmDtype::A, GemmDtype::B, GemmDtype::D, AK != 0, BK != 0, TN, NAME##_run, NAME##_workspace},
const SwigluEntry kSwiglu[] = {FROST_SM90_GEMM_SWIGLU_LIST(FROST_SM90_GEMM_SWIGLU_ROW)};
#undef FROST_SM90_GEMM_SWIGLU_ROW

// Each kernel has one configuration (128x256x64 but for FP8 grouped), stages from shared memory.
const char* check_fixed_config(const GemmConfig& c, int cluster_m, int cluster_n, int tile_n = 256, int tile_k = 64) {
  if ((c.tile_m && c.tile_m != 128) || (c.tile_n && c.tile_n != tile_n) || (c.tile_k && c.tile_k != tile_k))
    return reason("tile %dx%dx%d: only 128x%dx%d is instantiated", c.tile_m, c.tile_n, c.tile_k, tile_n, tile_k);
  if ((c.cluster_m && c.cluster_m != cluster_m) || (c.cluster_n && c.cluster_n != cluster_n))
    return reason("cluster %dx%d: only %dx%d is instantiated", c.cluster_m, c.cluster_n, cluster_m, cluster_n);
  if (c.stream_k) return reason("stream_k=%d: grouped and SwiGLU kernels are data-parallel", c.stream_k);
  if (c.stages != 0) return reason("stages=%d: stage count is derived from shared memory, not selectable", c.stages);
  if (c.split_k > 1) return reason("split_k=%d: split-K is not instantiated", c.split_k);
  return nullptr;
}

const char* plan_grouped(const GroupedGemmParams& p, const GemmConfig& c, const GroupedEntry** out) {
  if (const char* r = device_reason()) return r;
  if (p.groups < 1 || p.groups > (1 << 20)) return reason("groups=%lld: must be in [1, 2^20]", (long long)p.groups);
  if (p.n < 1 || p.k < 1 || p.n > INT32_MAX || p.k > INT32_MAX)
    return reason("n=%lld k=%lld: must be in [1, 2^31)", (long long)p.n, (long long)p.k);
  if (p.max_tokens < 0 || p.max_tokens > INT32_MAX)
    return reason("max_tokens=%lld: must be in [0, 2^31) (offsets are int32)", (long long)p.max_tokens);
  if (!p.offsets || reinterpret_cast<uintptr_t>(p.offsets) % 4) return "offsets: a 4-byte aligned device pointer is required";
  const int ea = dtype_bytes(p.a_type), eb = dtype_bytes(p.b_type), ed = dtype_bytes(p.d_type);
  const char* r;
  if ((r = check_tma_operand("a", p.a, p.a_stride_m, "a_stride_m", ea))) return r;
  if ((r = check_tma_operand("d", p.d, p.d_stride_m, "d_stride_m", ed))) return r;
  bool b_k;
  if (p.b_stride_n == 1) b_k = false;
  else if (p.b_stride_k == 1) b_k = true;
  else
    return reason("b_stride_k=%lld b_stride_n=%lld: K must be contiguous or N must be", (long long)p.b_stride_k,
                  (long long)p.b_stride_n);
  if ((r = check_tma_operand("b", p.b, b_k ? p.b_stride_n : p.b_stride_k, b_k ? "b_stride_n" : "b_stride_k", eb)))
    return r;
  if ((p.b_stride_group * eb) % 16 != 0 || p.b_stride_group < 0)
    return reason("b_stride_group=%lld: must be a non-negative multiple of 16 bytes", (long long)p.b_stride_group);
  // Contiguous extents in whole 16-byte units (CUTLASS's alignment rule; see the dense launcher).
  if ((p.k * ea) % 16) return reason("k=%lld: must be a multiple of %d elements (16 bytes)", (long long)p.k, 16 / ea);
  if ((p.n * ed) % 16 || (!b_k && (p.n * eb) % 16))
    return reason("n=%lld: must be a multiple of %d elements (16 bytes)", (long long)p.n, 16 / ed);
  const char* mismatch = nullptr;
  for (const GroupedEntry& e : kGrouped) {
    if (e.a != p.a_type || e.b != p.b_type || e.d != p.d_type) continue;
    if (e.b_kmajor != b_k) continue;
    if ((c.tile_n && c.tile_n != e.tile_n) || (c.cluster_n && c.cluster_n != e.cluster_n)) {
      mismatch = reason("tile_n=%d cluster_n=%d: no grouped kernel of this type has that tile width and cluster",
                        c.tile_n, c.cluster_n);
      continue;
    }
    if (const char* r = check_fixed_config(c, 1, e.cluster_n, e.tile_n, e.tile_k)) return r;
    *out = &e;
    return nullptr;
  }
  if (mismatch) return mismatch;
  return reason("a_type=%s b_type=%s d_type=%s B %s-major: no grouped kernel instantiated", dtype_name(p.a_type),
                dtype_name(p.b_type), dtype_name(p.d_type), b_k ? "K" : "N");
}

const char* plan_swiglu(const SwigluParams& p, const GemmConfig& c, const SwigluEntry** out) {
  if (const char* r = device_reason()) return r;
  if (c.tile_n && c.tile_n != 128 && c.tile_n != 256)
    return reason("tile_n=%d: SwiGLU kernels are instantiated with tile_n 128 (ping-pong) and 256 (cooperative)",
                  c.tile_n);
  if (const char* r = check_fixed_config(c, 2, 1, c.tile_n ? c.tile_n : 128)) return r;
  if (p.m < 1 || p.k < 1 || p.m > INT32_MAX || p.k > INT32_MAX)
    return reason("m=%lld k=%lld: must be in [1, 2^31)", (long long)p.m, (long long)p.k);
  if (p.f < kSwigluInterleave || p.f % kSwigluInterleave || 2 * p.f > INT32_MAX)
    return reason("f=%lld: must be a positive multiple of %d (gate/up interleave block)", (long long)p.f,
                  kSwigluInterleave);
  const int ea = dtype_bytes(p.a_type), eb = dtype_bytes(p.b_type), ed = dtype_bytes(p.d_type);
  if (p.a_stride_k != 1 && p.k != 1) return reason("a_stride_k=%lld: A must be row-major (K contiguous)",
                                                   (long long)p.a_stride_k);
  const char* r;
  int64_t a_row = p.m == 1 ? (p.k + 15) / 16 * 16 : p.a_stride_m;
  if ((r = check_tma_operand("a", p.a, a_row, "a_stride_m", ea))) return r;
  bool b_k;
  if (p.w_stride_n == 1) b_k = false;
  else if (p.w_stride_k == 1) b_k = true;
  else
    return reason("w_stride_k=%lld w_stride_n=%lld: K must be contiguous or N must be", (long long)p.w_stride_k,
                  (long long)p.w_stride_n);
  if ((r = check_tma_operand("w", p.w, b_k ? p.w_stride_n : p.w_stride_k, b_k ? "w_stride_n" : "w_stride_k", eb)))
    return r;
  if ((r = check_tma_operand("h", p.h, p.m == 1 ? p.f : p.h_stride_m, "h_stride_m", ed))) return r;
  if ((p.k * ea) % 16) return reason("k=%lld: must be a multiple of %d elements (16 bytes)", (long long)p.k, 16 / ea);
  for (const SwigluEntry& e : kSwiglu) {
    if (e.a != p.a_type || e.b != p.b_type || e.d != p.d_type) continue;
    if (e.b_kmajor != b_k || (c.tile_n && e.tile_n != c.tile_n)) continue;
    *out = &e;
    return nullptr;
  }
  return reason("a_type=%s b_type=%s d_type=%s: no SwiGLU kernel instantiated", dtype_name(p.a_type),
                dtype_name(p.b_type), dtype_name(p.d_type));
}

SwigluParams normalized(const SwigluParams& in) {
  SwigluParams p = in;
  p.a_stride_k = 1;
  if (p.m == 1) {
    p.a_stride_m = (p.k + 15) / 16 * 16;
    p.h_stride_m = p.f;
  }
  return p;
}

}  // namespace

const char* grouped_gemm_unsupported_reason(const GroupedGemmParams& p, const GemmConfig& c) {
  const GroupedEntry* e = nullptr;
  return plan_grouped(p, c, &e);
}

size_t grouped_gemm_workspace_size(const GroupedGemmParams& p, const GemmConfig& c) {
  const GroupedEntry* e = nullptr;
  if (plan_grouped(p, c, &e)) return 0;
  return e->workspace(p, c);
}

cudaError_t grouped_gemm(const GroupedGemmParams& p, const GemmConfig& c, void* workspace, cudaStream_t stream) {
  const GroupedEntry* e = nullptr;
  if (plan_grouped(p, c, &e)) return cudaErrorNotSupported;
  if (!workspace || reinterpret_cast<uintptr_t>(workspace) % 256) return cudaErrorInvalidValue;
  return e->run(p, c, workspace, stream);
}

const char* swiglu_unsupported_reason(const SwigluParams& p, const GemmConfig& c) {
  const SwigluEntry* e = nullptr;
  return plan_swiglu(p, c, &e);
}

size_t swiglu_workspace_size(const SwigluParams& p, const GemmConfig& c) {
  const SwigluEntry* e = nullptr;
  if (plan_swiglu(p, c, &e)) return 0;
  return e->workspace(normalized(p), c);
}

cudaError_t swiglu(const SwigluParams& p, const GemmConfig& c, void* workspace, cudaStream_t stream) {
  const SwigluEntry* e = nullptr;
  if (plan_swiglu(p, c, &e)) return cudaErrorNotSupported;
  return e->run(normalized(p), c, workspace, stream);
}

}  // namespace frost::sm90
