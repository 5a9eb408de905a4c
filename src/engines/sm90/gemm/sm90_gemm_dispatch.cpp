// Dense GEMM launcher: validates a GemmParams/GemmConfig pair against the instantiated kernels
// (sm90_gemm_registry.h), picks one, reshapes broadcast batches and launches. Host-only.
//
// Decline messages name the attribute and its value. They live in a thread-local buffer that the
// next *_unsupported_reason call on the same thread overwrites.
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <limits>

#include "sm90_gemm.h"
#include "sm90_gemm_dispatch_util.h"
#include "sm90_gemm_registry.h"

namespace frost::sm90 {
namespace gemm_detail {

int current_device() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) dev = 0;
  return dev;
}

int sm_count(int device) {
  // cudaDeviceGetAttribute is cheap but not free; launches happen millions of times.
  static std::atomic<int> cache[64];
  if (device < 0 || device >= 64) device = 0;
  int v = cache[device].load(std::memory_order_relaxed);
  if (v > 0) return v;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || v <= 0) return 0;
  cache[device].store(v, std::memory_order_relaxed);
  return v;
}

const char* reason(const char* fmt, ...) {
  static thread_local char buf[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

int dtype_bytes(GemmDtype t) {
  switch (t) {
    case GemmDtype::BF16:
    case GemmDtype::FP16: return 2;
    case GemmDtype::FP32: return 4;
    case GemmDtype::E4M3:
    case GemmDtype::E5M2: return 1;
  }
  return 0;
}

const char* dtype_name(GemmDtype t) {
  switch (t) {
    case GemmDtype::BF16: return "bf16";
    case GemmDtype::FP16: return "fp16";
    case GemmDtype::FP32: return "fp32";
    case GemmDtype::E4M3: return "e4m3";
    case GemmDtype::E5M2: return "e5m2";
  }
  return "?";
}

const char* device_reason() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no driver/device" error for the caller
    return "no CUDA device or driver: the sm90 GEMM engine needs an sm_90 GPU";
  }
  int dev = current_device(), major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major != 9 || minor != 0) return reason("device compute capability %d.%d: kernels are built for sm_90a", major, minor);
  return nullptr;
}

const char* check_tma_operand(const char* name, const void* ptr, int64_t stride_row, const char* row_attr, int esize) {
  if (ptr == nullptr) return reason("%s=null: operand pointer is required", name);
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return reason("%s: address must be 16-byte aligned (TMA)", name);
  if ((stride_row * esize) % 16 != 0 || stride_row <= 0)
    return reason("%s=%lld: must be a positive multiple of %d elements (16 bytes, TMA)", row_attr,
                  static_cast<long long>(stride_row), 16 / esize);
  if (stride_row * esize >= (int64_t(1) << 40)) return reason("%s=%lld: over TMA's 2^40-byte stride limit", row_attr,
                                                              static_cast<long long>(stride_row));
  return nullptr;
}

}  // namespace gemm_detail

namespace {
using namespace gemm_detail;

struct DenseEntry {
  const char* name;
  GemmDtype a, b, d;
  bool a_kmajor, b_kmajor;
  int tile_m, tile_n, tile_k, cluster_m, cluster_n, sched;
  bool stream_k;
  DenseRunFn run;
  DenseWorkspaceFn workspace;
};

#define FROST_SM90_GEMM_ROW(NAME, A, B, D, AK, BK, TM, TN, TK, CM, CN, S, SK)                                \
  DenseEntry{#NAME, GemmDtype::A, GemmDtype::B, GemmDtype::D, AK != 0, BK != 0, TM, TN, TK, CM, CN, S, SK != 0, \
             NAME##_run, NAME##_workspace},
const DenseEntry kDense[] = {FROST_SM90_GEMM_DENSE_LIST(FROST_SM90_GEMM_ROW)};
const DenseEntry kPlain[] = {FROST_SM90_GEMM_PLAIN_LIST(FROST_SM90_GEMM_ROW)};
const DenseEntry kBiasAct[] = {FROST_SM90_GEMM_BIAS_ACT_LIST(FROST_SM90_GEMM_ROW)};
#undef FROST_SM90_GEMM_ROW

bool is_fp8(GemmDtype t) { return t == GemmDtype::E4M3 || t == GemmDtype::E5M2; }

// The instantiated-kernel lookup. Writes the decline reason into *why when nothing matches.
// No fused epilogue work asked for: the stock-epilogue kernels apply. Their FP8 kernels also
// apply the input descales (one scalar product per CTA); their 16-bit kernels do not.
bool plain_epilogue(const GemmParams& p) {
  const bool descaled = p.descale_a != nullptr || p.descale_b != nullptr;
  return p.bias == nullptr && (p.c == nullptr || p.beta == 0.f) && p.act == GemmAct::NONE &&
         p.clamp_min == -std::numeric_limits<float>::infinity() && p.clamp_max == std::numeric_limits<float>::infinity() &&
         (!descaled || is_fp8(p.a_type)) && p.scale_d == nullptr && p.amax == nullptr;
}

// Only alpha, a bias and an activation asked for, the bias readable as 16-byte vectors: the short epilogue's kernels
// apply (sm90_gemm_bias_act.cuh). Other biases, and everything else, take the full tree.
bool bias_act_epilogue(const GemmParams& p) {
  const bool bias_vectors = p.bias == nullptr || ((reinterpret_cast<uintptr_t>(p.bias) & 15) == 0 && p.n % 8 == 0);
  return bias_vectors && (p.c == nullptr || p.beta == 0.f) &&
         p.clamp_min == -std::numeric_limits<float>::infinity() && p.clamp_max == std::numeric_limits<float>::infinity() &&
         p.descale_a == nullptr && p.descale_b == nullptr && p.scale_d == nullptr && p.amax == nullptr;
}

template <size_t N>
const DenseEntry* match(const DenseEntry (&table)[N], const GemmParams& p, const GemmConfig& c, bool a_k, bool b_k,
                        bool* dtype_seen, bool* layout_seen) {
  for (const DenseEntry& e : table) {
    if (e.a != p.a_type || e.b != p.b_type || e.d != p.d_type) continue;
    *dtype_seen = true;
    if (e.a_kmajor != a_k || e.b_kmajor != b_k) continue;
    *layout_seen = true;
    if (c.tile_m && c.tile_m != e.tile_m) continue;
    if (c.tile_n && c.tile_n != e.tile_n) continue;
    if (c.tile_k && c.tile_k != e.tile_k) continue;
    if (c.cluster_m && c.cluster_m != e.cluster_m) continue;
    if (c.cluster_n && c.cluster_n != e.cluster_n) continue;
    if (c.stream_k && !e.stream_k) continue;
    // FP8 fast accumulation changes numerics: chosen by the parameter, never by a knob.
    if ((e.sched == 2) != (is_fp8(p.a_type) && p.fp8_fast_accum)) continue;
    return &e;
  }
  return nullptr;
}

const DenseEntry* find_dense(const GemmParams& p, const GemmConfig& c, bool a_k, bool b_k, const char** why) {
  bool dtype_seen = false, layout_seen = false;
  if (plain_epilogue(p))
    if (const DenseEntry* e = match(kPlain, p, c, a_k, b_k, &dtype_seen, &layout_seen)) return e;
  if (bias_act_epilogue(p))
    if (const DenseEntry* e = match(kBiasAct, p, c, a_k, b_k, &dtype_seen, &layout_seen)) return e;
  if (const DenseEntry* e = match(kDense, p, c, a_k, b_k, &dtype_seen, &layout_seen)) return e;
  if (!dtype_seen)
    *why = reason("a_type=%s b_type=%s d_type=%s: no kernel for this dtype combination", dtype_name(p.a_type),
                  dtype_name(p.b_type), dtype_name(p.d_type));
  else if (!layout_seen)
    *why = reason("layout A %s-major, B %s-major with d_type=%s: not instantiated (fp32 output needs K-major A)",
                  a_k ? "K" : "M", b_k ? "K" : "N", dtype_name(p.d_type));
  else
    *why = reason("tile %dx%dx%d cluster %dx%d stream_k %d: no instantiated kernel has this configuration", c.tile_m,
                  c.tile_n, c.tile_k, c.cluster_m, c.cluster_n, c.stream_k);
  return nullptr;
}

struct DensePlan {
  const DenseEntry* entry = nullptr;
  GemmParams p;        // possibly reshaped (folded batch)
  int64_t loops = 1;   // > 1: launch per batch (a broadcast that cannot fold)
  int64_t a_step = 0, b_step = 0, d_step = 0;
};

const char* plan_dense(const GemmParams& in, const GemmConfig& cfg, DensePlan* plan) {
  if (const char* r = device_reason()) return r;
  GemmParams p = in;
  if (p.m < 1 || p.n < 1 || p.k < 1) return reason("m=%lld n=%lld k=%lld: every extent must be >= 1", (long long)p.m,
                                                   (long long)p.n, (long long)p.k);
  if (p.batch < 1) return reason("batch=%lld: must be >= 1", (long long)p.batch);
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX)
    return reason("m=%lld n=%lld k=%lld: each extent must fit in int32", (long long)p.m, (long long)p.n, (long long)p.k);
  if (cfg.split_k > 1) return reason("split_k=%d: split-K is not instantiated", cfg.split_k);
  if (cfg.stages != 0) return reason("stages=%d: stage count is derived from shared memory, not selectable", cfg.stages);
  if (cfg.stream_k != 0 && cfg.stream_k != 1) return reason("stream_k=%d: must be 0 or 1", cfg.stream_k);
  if (cfg.stream_k == 1 && cfg.split_k == 1)
    return "stream_k=1 with split_k=1: split_k 1 asks for data-parallel tiles only";
  const int ea = dtype_bytes(p.a_type), eb = dtype_bytes(p.b_type), ed = dtype_bytes(p.d_type);
  if (is_fp8(p.a_type) != is_fp8(p.b_type))
    return reason("a_type=%s b_type=%s: mixed 8/16-bit inputs are not supported", dtype_name(p.a_type),
                  dtype_name(p.b_type));

  // Majorness from strides. A unit extent makes its stride meaningless; such a stride is then
  // replaced by a valid one (TMA wants every non-unit stride a positive multiple of 16 bytes).
  const bool fp8 = is_fp8(p.a_type);
  auto pad16 = [](int64_t elems, int esize) { int64_t v = 16 / esize; return (elems + v - 1) / v * v; };
  bool a_k;
  if (p.a_stride_k == 1 || (p.k == 1 && !(p.a_stride_m == 1 && p.m > 1))) a_k = true;
  else if (p.a_stride_m == 1 || p.m == 1) a_k = false;
  else
    return reason("a_stride_k=%lld a_stride_m=%lld: K must be contiguous or M must be", (long long)p.a_stride_k,
                  (long long)p.a_stride_m);
  bool b_k;
  if (p.b_stride_k == 1 && (fp8 || p.b_stride_n != 1 || p.n == 1)) b_k = true;
  else if (p.b_stride_n == 1 || p.n == 1) b_k = false;
  else if (p.k == 1) b_k = true;
  else
    return reason("b_stride_k=%lld b_stride_n=%lld: K must be contiguous or N must be", (long long)p.b_stride_k,
                  (long long)p.b_stride_n);
  if (fp8 && (!a_k || !b_k))
    return reason("a_stride_k=%lld b_stride_k=%lld: FP8 needs K-contiguous A and B (Hopper FP8 wgmma reads K-major)",
                  (long long)p.a_stride_k, (long long)p.b_stride_k);
  if (p.d_stride_n != 1 && p.n != 1) return reason("d_stride_n=%lld: D must be row-major (d_stride_n == 1)",
                                                   (long long)p.d_stride_n);
  if (a_k) { p.a_stride_k = 1; if (p.m == 1) p.a_stride_m = pad16(p.k, ea); }
  else     { p.a_stride_m = 1; if (p.k == 1) p.a_stride_k = pad16(p.m, ea); }
  if (b_k) { p.b_stride_k = 1; if (p.n == 1) p.b_stride_n = pad16(p.k, eb); }
  else     { p.b_stride_n = 1; if (p.k == 1) p.b_stride_k = pad16(p.n, eb); }
  p.d_stride_n = 1;
  if (p.m == 1) p.d_stride_m = pad16(p.n, ed);

  // The contiguous extent of every TMA operand must fill whole 16-byte units as well (CUTLASS's
  // own alignment rule): with n = 111 or 333 and a padded leading dimension, outputs came back
  // with unwritten elements on the H200, so such shapes are declined rather than computed wrong.
  {
    const int64_t a_len = a_k ? p.k : p.m, b_len = b_k ? p.k : p.n;
    if ((a_len * ea) % 16)
      return reason("%s=%lld: A's contiguous extent must be a multiple of %d elements (16 bytes)", a_k ? "k" : "m",
                    (long long)a_len, 16 / ea);
    if ((b_len * eb) % 16)
      return reason("%s=%lld: B's contiguous extent must be a multiple of %d elements (16 bytes)", b_k ? "k" : "n",
                    (long long)b_len, 16 / eb);
    if ((p.n * ed) % 16)
      return reason("n=%lld: D's row length must be a multiple of %d elements (16 bytes)", (long long)p.n, 16 / ed);
  }
  const char* r;
  if ((r = check_tma_operand("a", p.a, a_k ? p.a_stride_m : p.a_stride_k, a_k ? "a_stride_m" : "a_stride_k", ea)))
    return r;
  if ((r = check_tma_operand("b", p.b, b_k ? p.b_stride_n : p.b_stride_k, b_k ? "b_stride_n" : "b_stride_k", eb)))
    return r;
  if ((r = check_tma_operand("d", p.d, p.d_stride_m, "d_stride_m", ed))) return r;
  if (p.c && p.beta != 0.f && reinterpret_cast<uintptr_t>(p.c) % 16 != 0)
    return "c: address must be 16-byte aligned (TMA)";

  // Batches. A batch stride of 0 broadcasts; TMA descriptors get no zero strides, so a broadcast
  // B folds the batch into M when A and D are packed over batches, and otherwise launches per batch.
  plan->loops = 1;
  if (p.batch > 1) {
    if (p.d_stride_batch == 0) return "d_stride_batch=0: batches of D would overlap";
    const bool fold = p.b_stride_batch == 0 && a_k && p.a_stride_batch == p.m * p.a_stride_m &&
                      p.d_stride_batch == p.m * p.d_stride_m && p.m * p.batch <= INT32_MAX;
    if (fold) {
      p.m *= p.batch;
      p.batch = 1;
    } else if (p.a_stride_batch == 0 || p.b_stride_batch == 0) {
      plan->loops = p.batch;
      plan->a_step = p.a_stride_batch * ea;
      plan->b_step = p.b_stride_batch * eb;
      plan->d_step = p.d_stride_batch * ed;
      if (plan->a_step % 16 || plan->b_step % 16 || plan->d_step % 16)
        return reason("batch strides a=%lld b=%lld d=%lld: each must be a multiple of 16 bytes (TMA)",
                      (long long)p.a_stride_batch, (long long)p.b_stride_batch, (long long)p.d_stride_batch);
      p.batch = 1;
    } else {
      if ((p.a_stride_batch * ea) % 16 || (p.b_stride_batch * eb) % 16 || (p.d_stride_batch * ed) % 16)
        return reason("batch strides a=%lld b=%lld d=%lld: each must be a multiple of 16 bytes (TMA)",
                      (long long)p.a_stride_batch, (long long)p.b_stride_batch, (long long)p.d_stride_batch);
    }
  }
  if (p.batch == 1) {
    // Any valid non-zero stride: the batch mode of a TMA descriptor must not have stride 0.
    p.a_stride_batch = (a_k ? p.a_stride_m : p.a_stride_k) * 16;
    p.b_stride_batch = (b_k ? p.b_stride_n : p.b_stride_k) * 16;
    p.d_stride_batch = p.d_stride_m * 16;
  }
  const DenseEntry* e = find_dense(p, cfg, a_k, b_k, &r);
  if (!e) return r;
  plan->entry = e;
  plan->p = p;
  return nullptr;
}

}  // namespace

const char* gemm_unsupported_reason(const GemmParams& p, const GemmConfig& c) {
  DensePlan plan;
  return plan_dense(p, c, &plan);
}

bool stream_k_pays(const GemmParams& p) {
  GemmConfig c;
  c.tile_n = 256;
  c.stream_k = 1;
  return p.m >= 4096 && p.n >= 4096 && p.k >= 8192 && p.batch == 1 && gemm_unsupported_reason(p, c) == nullptr;
}

size_t gemm_workspace_size(const GemmParams& p, const GemmConfig& c) {
  DensePlan plan;
  if (plan_dense(p, c, &plan)) return 0;
  return plan.entry->workspace(plan.p, c);
}

cudaError_t gemm(const GemmParams& in, const GemmConfig& c, void* workspace, cudaStream_t stream) {
  DensePlan plan;
  if (plan_dense(in, c, &plan)) return cudaErrorNotSupported;
  GemmParams p = plan.p;
  if (p.amax) {
    cudaError_t e = cudaMemsetAsync(p.amax, 0, sizeof(float), stream);
    if (e != cudaSuccess) return e;
  }
  for (int64_t i = 0; i < plan.loops; ++i) {
    p.a = static_cast<const char*>(plan.p.a) + i * plan.a_step;
    p.b = static_cast<const char*>(plan.p.b) + i * plan.b_step;
    p.d = static_cast<char*>(plan.p.d) + i * plan.d_step;
    if (plan.p.c) p.c = static_cast<const char*>(plan.p.c) + i * plan.d_step;
    cudaError_t e = plan.entry->run(p, c, workspace, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace frost::sm90
