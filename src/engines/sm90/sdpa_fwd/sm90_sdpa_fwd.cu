// Dispatcher of the sm90 attention forward: validates the problem, picks a compiled variant (sm90_fwd_variants.h)
// from the head dim, dtype and knobs, and launches it.
#include "sm90_fwd_tail_split.h"
#include "sm90_fwd_variants.h"
#include "sm90_sdpa_fwd.h"
#include <cmath>
#include <cstdio>

#ifdef FROST_FWD_TIMELINE
#include "sm90_fwd_timeline.h"
namespace frost::sm90::fwd {
TimelineRecord* g_timeline = nullptr;
}  // namespace frost::sm90::fwd
#endif

namespace frost::sm90 {
namespace {

using Launcher = cudaError_t (*)(SdpaFwdParams const&, SdpaFwdConfig const&, void*, cudaStream_t);

struct Variant {
  int d, dv, m, n, stages;
  AttnDtype dtype;
  Launcher fn;
};

constexpr AttnDtype bf16 = AttnDtype::BF16;
constexpr AttnDtype fp16 = AttnDtype::FP16;
#define FROST_SM90_FWD_TABLE_ROW(D, DV, M, N, S, T, E) \
  {D, DV, M, N, S, T, &fwd::FROST_SM90_FWD_LAUNCHER_NAME(D, DV, M, N, S, T)},
constexpr Variant kVariants[] = {FROST_SM90_FWD_VARIANTS(FROST_SM90_FWD_TABLE_ROW)};
#undef FROST_SM90_FWD_TABLE_ROW

// Default key-block width per head dim. d128: 128 x 128 has its own O buffer (the next Q loads under the epilogue),
// which pays on short tiles; 128 x 176 has fewer, longer iterations and wins on long unmasked rows (H200, v4:
// s16384 686 vs 657 TFLOP/s; s4096 658 vs 669 and 633 vs 669; b16 s1024 causal 314 vs 378). Causal s16384 is a
// toss-up (two runs: 689 vs 671, 668 vs 675; v2 671 vs 659); it takes 176 from s_kv 16384 on, causal s8192 is
// unmeasured and keeps 128, and so do sliding windows.
int default_tile_n(SdpaFwdParams const& p) {
  if (p.d_qk == 64) return 128;
  if (p.d_qk == 256) return 80;
  if (p.d_qk == 192) return 112;
  if (p.has_left_bound) return 128;
  bool const right_bounded = p.causal || p.has_right_bound;
  return p.s_kv >= (right_bounded ? 16384 : 8192) ? 176 : 128;
}

Variant const* find_variant(SdpaFwdParams const& p, SdpaFwdConfig const& c) {
  int const n = c.tile_n ? c.tile_n : default_tile_n(p);
  for (auto const& v : kVariants)
    if (v.d == p.d_qk && v.dv == p.d_v && v.dtype == p.dtype && v.n == n && (c.tile_m == 0 || c.tile_m == v.m) &&
        (c.stages == 0 || c.stages == v.stages))
      return &v;
  return nullptr;
}

thread_local char g_reason[160];

char const* reason(char const* fmt, long long value) {
  std::snprintf(g_reason, sizeof(g_reason), fmt, value);
  return g_reason;
}

bool misaligned(void const* ptr, uintptr_t bytes = 16) {
  return (reinterpret_cast<uintptr_t>(ptr) & (bytes - 1)) != 0;
}

// The first feature that needs the general kernel, or nullptr when the plain one serves the problem.
const char* general_feature(const SdpaFwdParams& p) {
  for (RowStarts const* r : {&p.q_rows, &p.k_rows, &p.v_rows, &p.o_rows, &p.lse_rows})
    if (r->kind != RowStartKind::DENSE) return "ragged (THD) tensors";
  if (p.has_left_bound) return "a left band bound (sliding window)";
  if (p.seq_len_q || p.seq_len_kv || p.cu_seq_len_q || p.cu_seq_len_kv) return "a padding mask";
  if (p.scale_dev) return "attn_scale as a device tensor";
  if (p.sink) return "attention sinks";
  return nullptr;
}

// Why PACK_GQA=1 cannot serve this problem on a tile of tile_m rows, or nullptr.
const char* pack_gqa_reason(const SdpaFwdParams& p, int tile_m) {
  int64_t const group = p.h_q / p.h_kv;
  if (group < 2) return "PACK_GQA=1 needs grouped query heads (h_q > h_kv)";
  if (tile_m % group != 0) {
    std::snprintf(g_reason, sizeof(g_reason), "PACK_GQA=1 with h_q/h_kv=%lld (must divide tile_m=%d)",
                  (long long)group, tile_m);
    return g_reason;
  }
  if (char const* f = general_feature(p)) {
    std::snprintf(g_reason, sizeof(g_reason), "PACK_GQA=1 with %s", f);
    return g_reason;
  }
  return nullptr;
}

// Why SCHED_POLICY=3 cannot serve this problem on a tile of tile_m rows, or nullptr: its tiles must all span the
// same key blocks. PACK_GQA tiles split like any other (decode with few sequences: fewer tiles than SMs).
const char* tail_split_reason(const SdpaFwdParams& p, const SdpaFwdConfig& c, int tile_m) {
  if (p.causal || p.has_right_bound) return "SCHED_POLICY=3 with a causal mask or right band bound";
  if (char const* f = general_feature(p)) {
    std::snprintf(g_reason, sizeof(g_reason), "SCHED_POLICY=3 with %s", f);
    return g_reason;
  }
  return c.pack_gqa ? pack_gqa_reason(p, tile_m) : nullptr;
}

// Why TILE_CGA_M=2 cannot serve this problem on a tile of tile_m rows, or nullptr: both CTAs of a pair read every
// K/V block, so their tiles must span the same key blocks, and the pairs must cover the m-blocks.
const char* cluster_reason(const SdpaFwdParams& p, const SdpaFwdConfig& c, int tile_m) {
  char const* what = p.d_qk < 128                    ? "d_qk < 128"
                     : p.causal || p.has_right_bound ? "a causal mask or right band bound"
                     : c.pack_gqa                    ? "PACK_GQA=1"
                     : c.sched_policy == 3           ? "SCHED_POLICY=3"
                     : c.sched_policy == 4           ? "SCHED_POLICY=4"
                                                     : general_feature(p);
  int64_t const m_blocks = (p.s_q + tile_m - 1) / tile_m;
  if (what)
    std::snprintf(g_reason, sizeof(g_reason), "TILE_CGA_M=%d with %s", c.tile_cga_m, what);
  else if (m_blocks % 2 != 0)
    std::snprintf(g_reason, sizeof(g_reason), "TILE_CGA_M=%d with %lld m-blocks of tile_m=%d (must be even)",
                  c.tile_cga_m, (long long)m_blocks, tile_m);
  else
    return nullptr;
  return g_reason;
}

// Why SCHED_POLICY=4 cannot serve this problem, or nullptr: the hand-out runs in the plain single-CTA kernel.
const char* hand_out_reason(const SdpaFwdParams& p, const SdpaFwdConfig& c) {
  char const* what = c.pack_gqa ? "PACK_GQA=1" : general_feature(p);
  if (!what) return nullptr;
  std::snprintf(g_reason, sizeof(g_reason), "SCHED_POLICY=4 with %s", what);
  return g_reason;
}

// Tiles of the launch: query heads x m-blocks, or with PACK_GQA K/V heads x blocks of tile_m / group positions.
int64_t tile_count(const SdpaFwdParams& p, const SdpaFwdConfig& c, int tile_m) {
  if (!c.pack_gqa) return p.b * p.h_q * ((p.s_q + tile_m - 1) / tile_m);
  int64_t const rows = tile_m / (p.h_q / p.h_kv);
  return p.b * p.h_kv * ((p.s_q + rows - 1) / rows);
}

int sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
  return sms;
}

}  // namespace

bool sdpa_fwd_is_plain(const SdpaFwdParams& p) { return general_feature(p) == nullptr; }

const char* sdpa_fwd_unsupported_reason(const SdpaFwdParams& p, const SdpaFwdConfig& c) {
  if (p.dtype != AttnDtype::BF16 && p.dtype != AttnDtype::FP16) return "dtype (bf16 or fp16 only)";
  if (!p.q || !p.k || !p.v || !p.o) return "null q/k/v/o pointer";
  bool const dims_ok = (p.d_qk == p.d_v && (p.d_qk == 64 || p.d_qk == 128 || p.d_qk == 256)) ||
                       (p.d_qk == 192 && p.d_v == 128);
  if (!dims_ok) {
    std::snprintf(g_reason, sizeof(g_reason),
                  "d_qk=%lld with d_v=%lld (64, 128, 256 with the same d_v, or 192 with 128)", (long long)p.d_qk,
                  (long long)p.d_v);
    return g_reason;
  }
  if (p.b < 1 || p.h_q < 1 || p.h_kv < 1 || p.s_q < 1 || p.s_kv < 1) return "empty extent (b, h, s must be >= 1)";
  if (p.h_q % p.h_kv != 0) return reason("h_kv=%lld (must divide h_q)", p.h_kv);
  if (p.s_q > (1ll << 29) || p.s_kv > (1ll << 29)) return "sequence length over 2^29";
  if (p.b * p.h_q * ((p.s_q + 63) / 64) > (1ll << 31) - 1) return "b*h_q*s_q/64 tiles over 2^31";
  if (!(p.scale > 0.f && p.scale < INFINITY) && !p.scale_dev) return "attn_scale (must be positive and finite)";
  if ((p.has_left_bound && p.left_bound < 0) || (p.has_right_bound && p.right_bound < 0))
    return "diagonal band bound (must be >= 0)";
  if (misaligned(p.q) || misaligned(p.k) || misaligned(p.v) || misaligned(p.o)) return "q/k/v/o not 16-byte aligned";
  // Packed tensors are read through TMA views of tokens_q / tokens_kv rows (int32 coordinates).
  bool const packed_q = p.q_rows.kind != RowStartKind::DENSE || p.o_rows.kind != RowStartKind::DENSE;
  bool const packed_kv = p.k_rows.kind != RowStartKind::DENSE || p.v_rows.kind != RowStartKind::DENSE;
  if ((packed_q && (p.tokens_q < 1 || p.tokens_q > (1ll << 31) - 1)) ||
      (packed_kv && (p.tokens_kv < 1 || p.tokens_kv > (1ll << 31) - 1)))
    return "packed token count (max_total_seq_len) outside [1, 2^31)";
  for (RowStarts const* r : {&p.q_rows, &p.k_rows, &p.v_rows, &p.o_rows, &p.lse_rows})
    if (r->kind != RowStartKind::DENSE && !r->ptr) return "null ragged offset or cu_seq_len pointer";
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
  // A packed tensor is addressed token by token: its s stride must be a multiple of 8 even for one row.
  struct P {
    RowStarts const& rows;
    int64_t stride_s;
    char const* name;
  } const packed[] = {{p.q_rows, p.q_stride_s, "q_stride_s"},
                      {p.k_rows, p.k_stride_s, "k_stride_s"},
                      {p.v_rows, p.v_stride_s, "v_stride_s"},
                      {p.o_rows, p.o_stride_s, "o_stride_s"}};
  for (auto const& t : packed) {
    if (t.rows.kind != RowStartKind::DENSE && (t.stride_s <= 0 || t.stride_s % 8 != 0)) {
      std::snprintf(g_reason, sizeof(g_reason), "packed %s=%lld (must be a positive multiple of 8)", t.name,
                    (long long)t.stride_s);
      return g_reason;
    }
  }
  if (c.sched_policy < 0 || c.sched_policy > 4) return reason("sched_policy=%lld (0 to 4)", c.sched_policy);
  if (c.pack_gqa < 0 || c.pack_gqa > 1) return reason("pack_gqa=%lld (0 or 1)", c.pack_gqa);
  if (c.tile_cga_m < 0 || c.tile_cga_m > 2) return reason("tile_cga_m=%lld (0 to 2)", c.tile_cga_m);
  Variant const* v = find_variant(p, c);
  if (!v) {
    std::snprintf(g_reason, sizeof(g_reason), "knobs tile_m=%d tile_n=%d stages=%d for d=%lld", c.tile_m, c.tile_n,
                  c.stages, (long long)p.d_qk);
    return g_reason;
  }
  if (c.tile_cga_m > 1) return cluster_reason(p, c, v->m);
  if (c.sched_policy == 3) return tail_split_reason(p, c, v->m);
  if (c.sched_policy == 4) return hand_out_reason(p, c);
  if (c.pack_gqa) return pack_gqa_reason(p, v->m);
  return nullptr;
}

int64_t sdpa_fwd_workspace_size(const SdpaFwdParams& p, const SdpaFwdConfig& c) {
  if ((c.sched_policy != 3 && c.sched_policy != 4) || sdpa_fwd_unsupported_reason(p, c) != nullptr) return 0;
  if (c.sched_policy == 4) return 256;  // the hand-out's counter
  int const sms = sm_count();
  Variant const* v = find_variant(p, c);
  int64_t const tiles = tile_count(p, c, v->m);
  if (sms == 0 || tiles % sms == 0) return 0;
  return fwd::split_workspace_bytes(sms, v->m, v->dv);
}

double sdpa_fwd_tail_split_gain(const SdpaFwdParams& p, const SdpaFwdConfig& c) {
  SdpaFwdConfig split = c;
  split.sched_policy = 3;
  if (sdpa_fwd_unsupported_reason(p, split) != nullptr) return 0.0;
  int const sms = sm_count();
  Variant const* v = find_variant(p, split);
  if (sms == 0) return 0.0;
  return fwd::split_gain(tile_count(p, split, v->m), (p.s_kv + v->n - 1) / v->n, sms);
}

cudaError_t sdpa_fwd(const SdpaFwdParams& p, const SdpaFwdConfig& c, void* workspace, cudaStream_t stream) {
  if (sdpa_fwd_unsupported_reason(p, c) != nullptr) return cudaErrorNotSupported;
  // The launch itself rejects a null workspace when it splits (the size is 0 when the tiles fill whole waves).
  if (c.sched_policy >= 3 && misaligned(workspace, 256)) return cudaErrorInvalidValue;
  return find_variant(p, c)->fn(p, c, workspace, stream);
}

}  // namespace frost::sm90
