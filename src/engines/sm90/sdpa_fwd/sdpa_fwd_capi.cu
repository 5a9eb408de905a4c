// C ABI over frost::sm90::sdpa_fwd for ctypes and other foreign callers. Same fields as SdpaFwdParams, flattened.
// Returns 0 on success, a cudaError_t value on a CUDA failure, or -1 when the problem is not supported or the
// workspace is short (the reason is then available from frost_sm90_sdpa_fwd_last_reason on the same thread).
// workspace / workspace_bytes: device memory for SCHED_POLICY 3 (sdpa_fwd_workspace_size bytes, 256-byte
// aligned); null / 0 for the other policies.
#include "sm90_fwd_timeline.h"
#include "sm90_sdpa_fwd.h"

#include <cstdio>

namespace {
thread_local const char* g_last_reason = "";
thread_local char g_workspace_reason[96];
}  // namespace

extern "C" {

const char* frost_sm90_sdpa_fwd_last_reason() { return g_last_reason; }

int frost_sm90_sdpa_fwd(int dtype, const void* q, const void* k, const void* v, void* o, float* lse, int64_t b,
                        int64_t h_q, int64_t h_kv, int64_t s_q, int64_t s_kv, int64_t d_qk, int64_t d_v,
                        int64_t q_stride_b, int64_t q_stride_h, int64_t q_stride_s, int64_t k_stride_b,
                        int64_t k_stride_h, int64_t k_stride_s, int64_t v_stride_b, int64_t v_stride_h,
                        int64_t v_stride_s, int64_t o_stride_b, int64_t o_stride_h, int64_t o_stride_s,
                        int64_t lse_stride_b, int64_t lse_stride_h, float scale, int causal, int causal_bottom_right,
                        int lse_log2, int tile_m, int tile_n, int stages, int sched_policy, int pack_gqa,
                        int tile_cga_m, void* workspace, int64_t workspace_bytes, void* stream) {
  using namespace frost::sm90;
  SdpaFwdParams p{dtype == 0 ? AttnDtype::BF16 : AttnDtype::FP16,
                  q, k, v, o, lse, b, h_q, h_kv, s_q, s_kv, d_qk, d_v,
                  q_stride_b, q_stride_h, q_stride_s, k_stride_b, k_stride_h, k_stride_s,
                  v_stride_b, v_stride_h, v_stride_s, o_stride_b, o_stride_h, o_stride_s,
                  lse_stride_b, lse_stride_h, scale, causal != 0, causal_bottom_right != 0, lse_log2 != 0};
  SdpaFwdConfig c{tile_m, tile_n, stages, sched_policy, pack_gqa, tile_cga_m};
  if (dtype != 0 && dtype != 1) {
    g_last_reason = "dtype (0 = bf16, 1 = fp16)";
    return -1;
  }
  if (const char* r = sdpa_fwd_unsupported_reason(p, c)) {
    g_last_reason = r;
    return -1;
  }
  if (int64_t const need = sdpa_fwd_workspace_size(p, c); need > workspace_bytes) {
    std::snprintf(g_workspace_reason, sizeof(g_workspace_reason), "workspace of %lld bytes (needs %lld)",
                  (long long)workspace_bytes, (long long)need);
    g_last_reason = g_workspace_reason;
    return -1;
  }
  g_last_reason = "";
  return int(sdpa_fwd(p, c, workspace, static_cast<cudaStream_t>(stream)));
}

#ifdef FROST_FWD_TIMELINE
// Debug builds: record per-unit timestamps into `records` (kTimelineUnits per CTA, see sm90_fwd_timeline.h); null
// stops recording.
void frost_sm90_sdpa_fwd_set_timeline(void* records) {
  frost::sm90::fwd::g_timeline = static_cast<frost::sm90::fwd::TimelineRecord*>(records);
}
#endif

}  // extern "C"
