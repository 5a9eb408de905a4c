// C ABI over the sm90 GEMM entry points, for callers without C++ (ctypes, other languages).
// Structs use fixed-width fields only (int32 for enums and flags) so a foreign declaration of
// the same field order matches byte for byte. Return codes are cudaError_t values.
#include <cstdint>

#include "sm90_gemm.h"

#define FROST_CAPI extern "C" __attribute__((visibility("default")))

extern "C" {

struct FrostGemmC {
  int32_t a_type, b_type, d_type, act;
  int64_t m, n, k, batch;
  const void* a;
  const void* b;
  void* d;
  int64_t a_stride_batch, a_stride_m, a_stride_k;
  int64_t b_stride_batch, b_stride_k, b_stride_n;
  int64_t d_stride_batch, d_stride_m, d_stride_n;
  float alpha, beta, clamp_min, clamp_max;
  const void* bias;
  const void* c;
  const float* descale_a;
  const float* descale_b;
  const float* scale_d;
  float* amax;
  int32_t fp8_fast_accum, reserved;
};

struct FrostGemmConfigC {
  int32_t tile_m, tile_n, tile_k, stages, cluster_m, cluster_n, swizzle, split_k, stream_k;
};

struct FrostGroupedGemmC {
  int32_t a_type, b_type, d_type, reserved;
  int64_t groups, max_tokens, n, k;
  const int32_t* offsets;
  const void* a;
  const void* b;
  void* d;
  int64_t a_stride_m, b_stride_group, b_stride_k, b_stride_n, d_stride_m;
  float alpha, reserved2;
  const float* descale_a;
  const float* descale_b;
};

struct FrostSwigluC {
  int32_t a_type, b_type, d_type, reserved;
  int64_t m, f, k;
  const void* a;
  const void* w;
  void* h;
  int64_t a_stride_m, a_stride_k, w_stride_k, w_stride_n, h_stride_m;
  float alpha, reserved2;
};

}  // extern "C"

namespace {
using namespace frost::sm90;

GemmParams to_cpp(const FrostGemmC& s) {
  GemmParams p;
  p.a_type = static_cast<GemmDtype>(s.a_type);
  p.b_type = static_cast<GemmDtype>(s.b_type);
  p.d_type = static_cast<GemmDtype>(s.d_type);
  p.act = static_cast<GemmAct>(s.act);
  p.m = s.m, p.n = s.n, p.k = s.k, p.batch = s.batch;
  p.a = s.a, p.b = s.b, p.d = s.d;
  p.a_stride_batch = s.a_stride_batch, p.a_stride_m = s.a_stride_m, p.a_stride_k = s.a_stride_k;
  p.b_stride_batch = s.b_stride_batch, p.b_stride_k = s.b_stride_k, p.b_stride_n = s.b_stride_n;
  p.d_stride_batch = s.d_stride_batch, p.d_stride_m = s.d_stride_m, p.d_stride_n = s.d_stride_n;
  p.alpha = s.alpha, p.beta = s.beta, p.clamp_min = s.clamp_min, p.clamp_max = s.clamp_max;
  p.bias = s.bias, p.c = s.c;
  p.descale_a = s.descale_a, p.descale_b = s.descale_b, p.scale_d = s.scale_d, p.amax = s.amax;
  p.fp8_fast_accum = s.fp8_fast_accum != 0;
  return p;
}

GemmConfig to_cpp(const FrostGemmConfigC* s) {
  GemmConfig c;
  if (s) {
    c.tile_m = s->tile_m, c.tile_n = s->tile_n, c.tile_k = s->tile_k, c.stages = s->stages;
    c.cluster_m = s->cluster_m, c.cluster_n = s->cluster_n, c.swizzle = s->swizzle, c.split_k = s->split_k;
    c.stream_k = s->stream_k;
  }
  return c;
}

GroupedGemmParams to_cpp(const FrostGroupedGemmC& s) {
  GroupedGemmParams p;
  p.a_type = static_cast<GemmDtype>(s.a_type);
  p.b_type = static_cast<GemmDtype>(s.b_type);
  p.d_type = static_cast<GemmDtype>(s.d_type);
  p.groups = s.groups, p.max_tokens = s.max_tokens, p.n = s.n, p.k = s.k;
  p.offsets = s.offsets, p.a = s.a, p.b = s.b, p.d = s.d;
  p.a_stride_m = s.a_stride_m, p.b_stride_group = s.b_stride_group, p.b_stride_k = s.b_stride_k;
  p.b_stride_n = s.b_stride_n, p.d_stride_m = s.d_stride_m;
  p.alpha = s.alpha, p.descale_a = s.descale_a, p.descale_b = s.descale_b;
  return p;
}

SwigluParams to_cpp(const FrostSwigluC& s) {
  SwigluParams p;
  p.a_type = static_cast<GemmDtype>(s.a_type);
  p.b_type = static_cast<GemmDtype>(s.b_type);
  p.d_type = static_cast<GemmDtype>(s.d_type);
  p.m = s.m, p.f = s.f, p.k = s.k, p.a = s.a, p.w = s.w, p.h = s.h;
  p.a_stride_m = s.a_stride_m, p.a_stride_k = s.a_stride_k, p.w_stride_k = s.w_stride_k;
  p.w_stride_n = s.w_stride_n, p.h_stride_m = s.h_stride_m, p.alpha = s.alpha;
  return p;
}

}  // namespace

// Bumped whenever a struct above changes layout.
FROST_CAPI int32_t frost_sm90_gemm_abi_version() { return 1; }

FROST_CAPI const char* frost_sm90_gemm_reason(const FrostGemmC* p, const FrostGemmConfigC* c) {
  return gemm_unsupported_reason(to_cpp(*p), to_cpp(c));
}
FROST_CAPI size_t frost_sm90_gemm_workspace(const FrostGemmC* p, const FrostGemmConfigC* c) {
  return gemm_workspace_size(to_cpp(*p), to_cpp(c));
}
FROST_CAPI int32_t frost_sm90_gemm(const FrostGemmC* p, const FrostGemmConfigC* c, void* ws, void* stream) {
  return gemm(to_cpp(*p), to_cpp(c), ws, static_cast<cudaStream_t>(stream));
}

FROST_CAPI const char* frost_sm90_grouped_gemm_reason(const FrostGroupedGemmC* p, const FrostGemmConfigC* c) {
  return grouped_gemm_unsupported_reason(to_cpp(*p), to_cpp(c));
}
FROST_CAPI size_t frost_sm90_grouped_gemm_workspace(const FrostGroupedGemmC* p, const FrostGemmConfigC* c) {
  return grouped_gemm_workspace_size(to_cpp(*p), to_cpp(c));
}
FROST_CAPI int32_t frost_sm90_grouped_gemm(const FrostGroupedGemmC* p, const FrostGemmConfigC* c, void* ws,
                                           void* stream) {
  return grouped_gemm(to_cpp(*p), to_cpp(c), ws, static_cast<cudaStream_t>(stream));
}

FROST_CAPI const char* frost_sm90_swiglu_reason(const FrostSwigluC* p, const FrostGemmConfigC* c) {
  return swiglu_unsupported_reason(to_cpp(*p), to_cpp(c));
}
FROST_CAPI size_t frost_sm90_swiglu_workspace(const FrostSwigluC* p, const FrostGemmConfigC* c) {
  return swiglu_workspace_size(to_cpp(*p), to_cpp(c));
}
FROST_CAPI int32_t frost_sm90_swiglu(const FrostSwigluC* p, const FrostGemmConfigC* c, void* ws, void* stream) {
  return swiglu(to_cpp(*p), to_cpp(c), ws, static_cast<cudaStream_t>(stream));
}
