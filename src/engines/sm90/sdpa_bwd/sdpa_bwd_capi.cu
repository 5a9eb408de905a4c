// C ABI over frost::sm90::sdpa_bwd for ctypes and other foreign callers. SdpaBwdParams flattened into two arrays:
//   ints  [0] dtype (0 bf16, 1 fp16), [1..7] b, h_q, h_kv, s_q, s_kv, d_qk, d_v,
//         [8..34] strides (b, h, s) of q, k, v, o, dO, dq, dk, dv, stats,
//         [35..38] sink, dsink, seq_len_q, seq_len_kv strides,
//         [39..48] stats_log2, has_left, left, has_right, right, bottom_right, deterministic, tile_m, tile_n,
//         warp_spec
//   ptrs  q, k, v, o, dO, stats, dq, dk, dv, sink, dsink, seq_len_q, seq_len_kv (the last four may be null)
// frost_sm90_sdpa_bwd returns 0 on success, a cudaError_t value on a CUDA failure, or -1 when the problem is not
// supported (the reason is then available from frost_sm90_sdpa_bwd_last_reason on the same thread).
#include "sm90_sdpa_bwd.h"

namespace {

thread_local const char* g_last_reason = "";

frost::sm90::SdpaBwdParams unpack(const int64_t* n, void* const* ptr, float scale) {
  using namespace frost::sm90;
  SdpaBwdParams p{};
  p.dtype = n[0] == 1 ? BwdDtype::FP16 : BwdDtype::BF16;
  p.b = n[1], p.h_q = n[2], p.h_kv = n[3], p.s_q = n[4], p.s_kv = n[5], p.d_qk = n[6], p.d_v = n[7];
  int64_t* strides[9] = {p.q_stride,  p.k_stride,  p.v_stride,  p.o_stride,    p.do_stride,
                         p.dq_stride, p.dk_stride, p.dv_stride, p.stats_stride};
  for (int t = 0; t < 9; ++t)
    for (int i = 0; i < 3; ++i) strides[t][i] = n[8 + 3 * t + i];
  p.sink_stride = n[35], p.dsink_stride = n[36], p.seq_len_q_stride = n[37], p.seq_len_kv_stride = n[38];
  p.stats_log2 = n[39] != 0;
  p.has_left = n[40] != 0, p.left = n[41], p.has_right = n[42] != 0, p.right = n[43];
  p.bottom_right = n[44] != 0;
  p.deterministic = n[45] != 0;
  p.q = ptr[0], p.k = ptr[1], p.v = ptr[2], p.o = ptr[3], p.d_o = ptr[4];
  p.stats = static_cast<const float*>(ptr[5]);
  p.dq = ptr[6], p.dk = ptr[7], p.dv = ptr[8];
  p.sink = static_cast<const float*>(ptr[9]);
  p.dsink = static_cast<float*>(ptr[10]);
  p.seq_len_q = static_cast<const int32_t*>(ptr[11]);
  p.seq_len_kv = static_cast<const int32_t*>(ptr[12]);
  p.scale = scale;
  return p;
}

}  // namespace

extern "C" {

const char* frost_sm90_sdpa_bwd_last_reason() { return g_last_reason; }

int64_t frost_sm90_sdpa_bwd_workspace_size(const int64_t* ints) {
  void* none[13] = {};
  const frost::sm90::SdpaBwdConfig c{int(ints[46]), int(ints[47]), int(ints[48])};
  return frost::sm90::sdpa_bwd_workspace_size(unpack(ints, none, 1.0f), c);
}

int frost_sm90_sdpa_bwd(const int64_t* ints, void* const* ptrs, float scale, void* workspace, void* stream) {
  using namespace frost::sm90;
  if (ints[0] != 0 && ints[0] != 1) {
    g_last_reason = "dtype (0 = bf16, 1 = fp16)";
    return -1;
  }
  const SdpaBwdParams p = unpack(ints, ptrs, scale);
  const SdpaBwdConfig c{int(ints[46]), int(ints[47]), int(ints[48])};
  if (const char* r = sdpa_bwd_unsupported_reason(p, c)) {
    g_last_reason = r;
    return -1;
  }
  g_last_reason = "";
  return int(sdpa_bwd(p, c, workspace, static_cast<cudaStream_t>(stream)));
}

}  // extern "C"
