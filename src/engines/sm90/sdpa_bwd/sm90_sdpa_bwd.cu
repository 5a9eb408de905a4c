// Dispatcher of the sm90 attention backward: validates the problem, picks a compiled variant (sm90_bwd_variants.h)
// from the head dim, dtype and knobs, and launches it.
#include "sm90_bwd_variants.h"
#include "sm90_bwd_workspace.h"
#include "sm90_sdpa_bwd.h"
#include <cstdio>

namespace frost::sm90 {
namespace {

using Launcher = cudaError_t (*)(SdpaBwdParams const&, void*, cudaStream_t);

struct Variant {
  int d, dv, m, n;
  BwdDtype dtype;
  int warp_spec;  // 0: BwdTraits; 1, 2: BwdTraitsSplitD (dQ added from registers)
  int mode;       // kEitherMode (the mode is a run-time flag), or the one mode it serves: kDefault, kOrdered
  Launcher fn;
};
constexpr int kEitherMode = -1, kDefault = 0, kOrdered = 1;

constexpr BwdDtype bf16 = BwdDtype::BF16;
constexpr BwdDtype fp16 = BwdDtype::FP16;
#define FROST_SM90_BWD_TABLE_ROW(D, M, N, T, E) \
  {D, D, M, N, T, 0, kEitherMode, &bwd::FROST_SM90_BWD_LAUNCHER_NAME(D, M, N, T)},
#define FROST_SM90_BWD_SPLITD_ROW(D, DV, W, T, E) \
  {D, DV, 64, 64, T, W, kDefault, &bwd::FROST_SM90_BWD_SPLITD_LAUNCHER_NAME(D, DV, W, T)},
#define FROST_SM90_BWD_SPLITD_DET_ROW(D, DV, T, E) \
  {D, DV, 64, 64, T, 1, kOrdered, &bwd::FROST_SM90_BWD_SPLITD_DET_LAUNCHER_NAME(D, DV, T)},
constexpr Variant kVariants[] = {FROST_SM90_BWD_VARIANTS(FROST_SM90_BWD_TABLE_ROW)
                                     FROST_SM90_BWD_SPLITD_VARIANTS(FROST_SM90_BWD_SPLITD_ROW)
                                         FROST_SM90_BWD_SPLITD_DET_VARIANTS(FROST_SM90_BWD_SPLITD_DET_ROW)};
#undef FROST_SM90_BWD_TABLE_ROW
#undef FROST_SM90_BWD_SPLITD_ROW
#undef FROST_SM90_BWD_SPLITD_DET_ROW

Variant const* find_variant(SdpaBwdParams const& p, SdpaBwdConfig const& c) {
  for (auto const& v : kVariants)
    if (v.d == p.d_qk && v.dv == p.d_v && v.dtype == p.dtype && (c.tile_m == 0 || c.tile_m == v.m) &&
        (c.tile_n == 0 || c.tile_n == v.n) && (c.warp_spec == 0 || c.warp_spec == v.warp_spec) &&
        (v.mode == kEitherMode || v.mode == (p.deterministic ? kOrdered : kDefault)))
      return &v;
  return nullptr;
}

bool served_dims(int64_t d_qk, int64_t d_v) {
  for (auto const& v : kVariants)
    if (v.d == d_qk && v.dv == d_v) return true;
  return false;
}

thread_local char g_reason[112];

char const* reason(char const* fmt, long long value) {
  std::snprintf(g_reason, sizeof(g_reason), fmt, value);
  return g_reason;
}

bool misaligned(void const* ptr, uintptr_t bytes = 16) { return (reinterpret_cast<uintptr_t>(ptr) & (bytes - 1)) != 0; }

}  // namespace

const char* sdpa_bwd_unsupported_reason(const SdpaBwdParams& p, const SdpaBwdConfig& c) {
  if (p.dtype != BwdDtype::BF16 && p.dtype != BwdDtype::FP16) return "dtype (bf16 or fp16 only)";
  if (!p.q || !p.k || !p.v || !p.o || !p.d_o || !p.stats || !p.dq || !p.dk || !p.dv)
    return "null q/k/v/o/dO/stats/dq/dk/dv pointer";
  if (!served_dims(p.d_qk, p.d_v)) {
    std::snprintf(g_reason, sizeof(g_reason), "d_qk=%lld d_v=%lld (d_qk = d_v in {64, 128, 256}, or 192/128)",
                  (long long)p.d_qk, (long long)p.d_v);
    return g_reason;
  }
  if (p.b < 1 || p.h_q < 1 || p.h_kv < 1 || p.s_q < 1 || p.s_kv < 1) return "empty extent (b, h, s must be >= 1)";
  if (p.h_q % p.h_kv != 0) return reason("h_kv=%lld (must divide h_q)", p.h_kv);
  if (p.s_q > (1ll << 28) || p.s_kv > (1ll << 28)) return "sequence length over 2^28";
  if (p.b > 65535 || p.h_q > 65535) return "b or h_q over 65535";
  if (p.b * p.h_kv * ((p.s_kv + 63) / 64) > (1ll << 31) - 1) return "b*h_kv*s_kv/64 tiles over 2^31";
  if (p.has_left && p.left < 0) return reason("left bound %lld (must be >= 0)", p.left);
  if (p.has_right && p.right < 0) return reason("right bound %lld (must be >= 0)", p.right);
  // Packed (THD) tensors: their side's lengths, and their row starts (ragged offsets, or the side's cu_seq_len).
  auto packed_problem = [](BwdRowStarts const& r, bool has_len, int32_t const* cu) -> char const* {
    if (r.kind == BwdRowKind::DENSE) return nullptr;
    if (!has_len) return "packed (THD) tensor without seq_len or cu_seq_len of its side";
    if (r.kind == BwdRowKind::CU_TOKENS ? cu == nullptr : r.ptr == nullptr)
      return "packed (THD) tensor without its ragged offsets or cu_seq_len";
    return nullptr;
  };
  bool const len_q = p.seq_len_q || p.cu_seq_len_q, len_kv = p.seq_len_kv || p.cu_seq_len_kv;
  for (BwdRowStarts const* r : {&p.q_rows, &p.o_rows, &p.do_rows, &p.dq_rows, &p.stats_rows})
    if (char const* why = packed_problem(*r, len_q, p.cu_seq_len_q)) return why;
  for (BwdRowStarts const* r : {&p.k_rows, &p.v_rows, &p.dk_rows, &p.dv_rows})
    if (char const* why = packed_problem(*r, len_kv, p.cu_seq_len_kv)) return why;
  if (p.tokens_q > (1ll << 31) - 1 || p.tokens_kv > (1ll << 31) - 1) return "max_total_seq_len over 2^31";
  if (p.dsink && !p.sink) return "dsink without sink";
  for (void const* ptr : {p.q, p.k, p.v, p.o, p.d_o, static_cast<void const*>(p.dq), static_cast<void const*>(p.dk),
                          static_cast<void const*>(p.dv)})
    if (misaligned(ptr)) return "q/k/v/o/dO/dq/dk/dv not 16-byte aligned";
  if (misaligned(p.stats, 4)) return "stats not 4-byte aligned";
  // TMA and the 16-byte loads address rows through 16-byte multiples: every stride of an extent > 1 must be a
  // multiple of 8 elements.
  struct S {
    int64_t const* stride;
    int64_t h, s;
    char const* name;
  } const tensors[] = {{p.q_stride, p.h_q, p.s_q, "q"},     {p.k_stride, p.h_kv, p.s_kv, "k"},
                       {p.v_stride, p.h_kv, p.s_kv, "v"},   {p.o_stride, p.h_q, p.s_q, "o"},
                       {p.do_stride, p.h_q, p.s_q, "dO"},   {p.dq_stride, p.h_q, p.s_q, "dq"},
                       {p.dk_stride, p.h_kv, p.s_kv, "dk"}, {p.dv_stride, p.h_kv, p.s_kv, "dv"}};
  for (auto const& t : tensors) {
    int64_t const extents[3] = {p.b, t.h, t.s};
    for (int i = 0; i < 3; ++i) {
      if (extents[i] > 1 && (t.stride[i] % 8 != 0 || t.stride[i] <= 0)) {
        static char const* const dims[3] = {"b", "h", "s"};
        std::snprintf(g_reason, sizeof(g_reason), "%s stride over %s = %lld (must be a positive multiple of 8)",
                      t.name, dims[i], (long long)t.stride[i]);
        return g_reason;
      }
    }
  }
  if (p.deterministic && c.warp_spec == 2)
    return "deterministic_algorithm with WARP_SPEC_CFG 2 (the ordered dQ adds are built for WARP_SPEC_CFG 1)";
  Variant const* v = find_variant(p, c);
  if (!v) {
    std::snprintf(g_reason, sizeof(g_reason), "knobs tile_m=%d tile_n=%d warp_spec=%d for d=%lld", c.tile_m,
                  c.tile_n, c.warp_spec, (long long)p.d_qk);
    return g_reason;
  }
  return nullptr;
}

int64_t sdpa_bwd_workspace_size(const SdpaBwdParams& p, const SdpaBwdConfig& c) {
  Variant const* v = find_variant(p, c);
  if (v == nullptr) return 0;
  return bwd::bwd_workspace(p.b, p.h_q, p.s_q, p.d_qk, v->m).total;
}

cudaError_t sdpa_bwd(const SdpaBwdParams& p, const SdpaBwdConfig& c, void* workspace, cudaStream_t stream) {
  if (sdpa_bwd_unsupported_reason(p, c) != nullptr) return cudaErrorNotSupported;
  if (workspace == nullptr || misaligned(workspace, 256)) return cudaErrorInvalidValue;
  return find_variant(p, c)->fn(p, workspace, stream);
}

}  // namespace frost::sm90
