// Dispatcher of the sm90 attention forward: validates the problem, picks a compiled variant (sm90_fwd_variants.h)
// from the head dim, dtype and knobs, and launches it.
#include "sm90_fwd_variants.h"
#include "sm90_sdpa_fwd.h"
#include <cstdio>

namespace frost::sm90 {
namespace {

using Launcher = cudaError_t (*)(SdpaFwdParams const&, cudaStream_t);

struct Variant {
  int d, m, n, stages;
  AttnDtype dtype;
  Launcher fn;
};

constexpr AttnDtype bf16 = AttnDtype::BF16;
constexpr AttnDtype fp16 = AttnDtype::FP16;
#define FROST_SM90_FWD_TABLE_ROW(D, M, N, S, T, E) {D, M, N, S, T, &fwd::FROST_SM90_FWD_LAUNCHER_NAME(D, M, N, S, T)},
constexpr Variant kVariants[] = {FROST_SM90_FWD_VARIANTS(FROST_SM90_FWD_TABLE_ROW)};
#undef FROST_SM90_FWD_TABLE_ROW

// Default key-block width per head dim. d128: 128 x 128 has its own O buffer (the next Q loads under the epilogue),
// which pays on short and causal tiles; 128 x 176 has fewer, longer iterations and wins on long non-causal rows
// (H200, v2: s16384 672 vs 651 TFLOP/s; s4096 662 vs 671; b16 s1024 causal 322 vs 380).
int default_tile_n(SdpaFwdParams const& p) {
  if (p.d_qk == 64) return 128;
  if (p.d_qk == 256) return 80;
  return !p.causal && p.s_kv >= 8192 ? 176 : 128;
}

Variant const* find_variant(SdpaFwdParams const& p, SdpaFwdConfig const& c) {
  int const n = c.tile_n ? c.tile_n : default_tile_n(p);
  for (auto const& v : kVariants)
    if (v.d == p.d_qk && v.dtype == p.dtype && v.n == n && (c.tile_m == 0 || c.tile_m == v.m) &&
        (c.stages == 0 || c.stages == v.stages))
      return &v;
  return nullptr;
}

thread_local char g_reason[96];

char const* reason(char const* fmt, long long value) {
  std::snprintf(g_reason, sizeof(g_reason), fmt, value);
  return g_reason;
}

bool misaligned(void const* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) != 0; }

}  // namespace

const char* sdpa_fwd_unsupported_reason(const SdpaFwdParams& p, const SdpaFwdConfig& c) {
  if (p.dtype != AttnDtype::BF16 && p.dtype != AttnDtype::FP16) return "dtype (bf16 or fp16 only)";
  if (!p.q || !p.k || !p.v || !p.o) return "null q/k/v/o pointer";
  if (p.d_qk != p.d_v) return reason("d_v=%lld (must equal d_qk)", p.d_v);
  if (p.d_qk != 64 && p.d_qk != 128 && p.d_qk != 256) return reason("d_qk=%lld", p.d_qk);
  if (p.b < 1 || p.h_q < 1 || p.h_kv < 1 || p.s_q < 1 || p.s_kv < 1) return "empty extent (b, h, s must be >= 1)";
  if (p.h_q % p.h_kv != 0) return reason("h_kv=%lld (must divide h_q)", p.h_kv);
  if (p.s_q > (1ll << 30) || p.s_kv > (1ll << 30)) return "sequence length over 2^30";
  if (p.b * p.h_q * ((p.s_q + 63) / 64) > (1ll << 31) - 1) return "b*h_q*s_q/64 tiles over 2^31";
  if (misaligned(p.q) || misaligned(p.k) || misaligned(p.v) || misaligned(p.o)) return "q/k/v/o not 16-byte aligned";
  // TMA addresses rows through 16-byte multiples: every stride of an extent > 1 must be a multiple of 8 elements.
  struct S {
    int64_t stride, extent;
    char const* name;
  } const strides[] = {{p.q_stride_b, p.b, "q_stride_b"},    {p.q_stride_h, p.h_q, "q_stride_h"},
                       {p.q_stride_s, p.s_q, "q_stride_s"},  {p.k_stride_b, p.b, "k_stride_b"},
                       {p.k_stride_h, p.h_kv, "k_stride_h"}, {p.k_stride_s, p.s_kv, "k_stride_s"},
                       {p.v_stride_b, p.b, "v_stride_b"},    {p.v_stride_h, p.h_kv, "v_stride_h"},
                       {p.v_stride_s, p.s_kv, "v_stride_s"}, {p.o_stride_b, p.b, "o_stride_b"},
                       {p.o_stride_h, p.h_q, "o_stride_h"},  {p.o_stride_s, p.s_q, "o_stride_s"}};
  for (auto const& s : strides) {
    if (s.extent > 1 && (s.stride % 8 != 0 || s.stride <= 0)) {
      std::snprintf(g_reason, sizeof(g_reason), "%s=%lld (must be a positive multiple of 8)", s.name,
                    (long long)s.stride);
      return g_reason;
    }
  }
  if (!find_variant(p, c)) {
    std::snprintf(g_reason, sizeof(g_reason), "knobs tile_m=%d tile_n=%d stages=%d for d=%lld", c.tile_m, c.tile_n,
                  c.stages, (long long)p.d_qk);
    return g_reason;
  }
  return nullptr;
}

cudaError_t sdpa_fwd(const SdpaFwdParams& p, const SdpaFwdConfig& c, cudaStream_t stream) {
  if (sdpa_fwd_unsupported_reason(p, c) != nullptr) return cudaErrorNotSupported;
  return find_variant(p, c)->fn(p, stream);
}

}  // namespace frost::sm90
