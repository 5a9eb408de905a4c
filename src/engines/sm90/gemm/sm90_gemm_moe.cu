// moe_grouped_matmul (frost/ops/moe.h) on the grouped GEMM: small routing kernels around it.
//   offsets: first_token_offset (INT32 or INT64, E values) becomes the grouped kernel's int32 [E + 1]
//            table, each value clamped to [0, R] and R appended, so that no device value can send a
//            tile outside the buffers;
//   NONE:    the grouped GEMM reads TOKEN and writes OUTPUT; rows before offsets[0] are zeroed;
//   GATHER:  TOKEN rows are first gathered into a routed [R, K] copy in the workspace;
//   SCATTER: the grouped GEMM writes a routed [R, N] copy in the workspace, OUTPUT is zeroed and
//            each routed row is copied to its slot token_index * top_k + token_ks.
// Every routing value is read on the device: nothing synchronizes, and the launch is capturable.
// Rows move as 16-byte vectors (the TMA rules already require 16-byte rows and strides), whatever the
// element size: FP8 TOKEN rows (k bytes) and BF16 OUTPUT rows (2n bytes) alike.
// FP8: the per-tensor descales reach the grouped GEMM's epilogue, which reads them on the device and scales
// by alpha * descale_token * descale_weight, so they too are never read on the host.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "sm90_gemm.h"

namespace frost::sm90 {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

__device__ __forceinline__ int64_t load_index(const void* p, IndexType t, int64_t i) {
  return t == IndexType::INT64 ? static_cast<const int64_t*>(p)[i] : static_cast<const int32_t*>(p)[i];
}

__global__ void moe_offsets_kernel(const void* first_token_offset, IndexType type, int64_t experts, int64_t rows,
                                   int32_t* offsets) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e <= experts; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t v = e == experts ? rows : load_index(first_token_offset, type, e);
    offsets[e] = static_cast<int32_t>(v < 0 ? 0 : (v > rows ? rows : v));
  }
}

// One warp per row. Zeroes rows [0, offsets[0]) (every row with offsets == nullptr).
__global__ void moe_zero_rows_kernel(uint4* out, int64_t stride_vec, int64_t rows, int64_t row_vecs,
                                     const int32_t* offsets) {
  const int64_t end = offsets ? offsets[0] : rows;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; r < end; r += warps)
    for (int64_t c = threadIdx.x % 32; c < row_vecs; c += 32) out[r * stride_vec + c] = make_uint4(0, 0, 0, 0);
}

// GATHER: routed row r reads TOKEN row token_index[r] (clamped into [0, token_rows)).
__global__ void moe_gather_kernel(const uint4* token, int64_t token_stride_vec, int64_t token_rows,
                                  const void* token_index, IndexType index_type, uint4* routed, int64_t rows,
                                  int64_t row_vecs) {
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; r < rows; r += warps) {
    int64_t src = load_index(token_index, index_type, r);
    src = src < 0 ? 0 : (src >= token_rows ? token_rows - 1 : src);
    for (int64_t c = threadIdx.x % 32; c < row_vecs; c += 32) routed[r * row_vecs + c] = token[src * token_stride_vec + c];
  }
}

// SCATTER: routed rows from offsets[0] on go to slot token_index[r] * top_k + token_ks[r]; slots
// outside [0, rows) are skipped.
__global__ void moe_scatter_kernel(const uint4* routed, int64_t rows, int64_t row_vecs, const int32_t* offsets,
                                   const void* token_index, IndexType index_type, const void* token_ks,
                                   IndexType ks_type, int64_t top_k, uint4* out, int64_t out_stride_vec) {
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t r = offsets[0] + (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32; r < rows; r += warps) {
    const int64_t slot = load_index(token_index, index_type, r) * top_k + load_index(token_ks, ks_type, r);
    if (slot < 0 || slot >= rows) continue;
    for (int64_t c = threadIdx.x % 32; c < row_vecs; c += 32) out[slot * out_stride_vec + c] = routed[r * row_vecs + c];
  }
}

int row_blocks(int64_t rows) {
  constexpr int kWarpsPerBlock = 8;
  return static_cast<int>(std::clamp<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 1, 4096));
}

// Workspace: [offsets][routed copy][grouped GEMM workspace], each 256-byte aligned.
struct MoeWorkspace {
  size_t offsets = 0, routed = 0, grouped = 0;
};

int elem_bytes(GemmDtype t) { return t == GemmDtype::E4M3 || t == GemmDtype::E5M2 ? 1 : 2; }

GroupedGemmParams grouped_params(const MoeParams& p) {
  GroupedGemmParams g;
  g.a_type = g.b_type = p.dtype;
  g.d_type = p.out_dtype;
  g.descale_a = p.descale_token;
  g.descale_b = p.descale_weight;
  g.groups = p.experts, g.max_tokens = p.rows, g.n = p.n, g.k = p.k;
  // Placeholders with the operands' alignment; the launcher sets the real pointers.
  g.offsets = reinterpret_cast<const int32_t*>(uintptr_t{kAlign});
  g.a = p.mode == MoeMode::GATHER ? reinterpret_cast<const void*>(uintptr_t{kAlign}) : p.token;
  g.a_stride_m = p.mode == MoeMode::GATHER ? p.k : p.token_stride_row;
  g.b = p.weight, g.b_stride_group = p.w_stride_expert, g.b_stride_k = p.w_stride_k, g.b_stride_n = p.w_stride_n;
  g.d = p.mode == MoeMode::SCATTER ? reinterpret_cast<void*>(uintptr_t{kAlign}) : p.output;
  g.d_stride_m = p.mode == MoeMode::SCATTER ? p.n : p.out_stride_row;
  return g;
}

MoeWorkspace layout(const MoeParams& p, const GemmConfig& c) {
  MoeWorkspace w;
  w.offsets = aligned(static_cast<size_t>(p.experts + 1) * sizeof(int32_t));
  if (p.mode == MoeMode::GATHER) w.routed = aligned(static_cast<size_t>(p.rows * p.k * elem_bytes(p.dtype)));
  if (p.mode == MoeMode::SCATTER) w.routed = aligned(static_cast<size_t>(p.rows * p.n * elem_bytes(p.out_dtype)));
  w.grouped = grouped_gemm_workspace_size(grouped_params(p), c);
  return w;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

const char* moe_unsupported_reason(const MoeParams& p, const GemmConfig& c) {
  const bool bf16 = p.dtype == GemmDtype::BF16, fp8 = p.dtype == GemmDtype::E4M3;
  if (!bf16 && !fp8) return "moe: TOKEN and WEIGHT must be BFLOAT16 or FP8_E4M3 (the instantiated grouped kernels)";
  if (p.out_dtype != GemmDtype::BF16) return "moe: OUTPUT must be BFLOAT16 (the instantiated grouped kernels)";
  if (bf16 && (p.descale_token || p.descale_weight)) return "moe: descales apply to FP8 inputs only";
  if (fp8 && p.w_stride_k != 1 && p.k > 1)
    return "moe: FP8 WEIGHT must be K-major (WEIGHT.stride[1] == 1): Hopper's FP8 tensor cores read K-major tiles";
  if (p.rows < 1 || p.experts < 1) return "moe: needs at least one routed row and one expert";
  if (p.mode == MoeMode::GATHER && p.token_rows < 1) return "moe: GATHER needs at least one token row";
  if (p.mode == MoeMode::SCATTER && p.top_k < 1) return "moe: top_k must be positive";
  if (!aligned16(p.token) || !aligned16(p.output) || (p.token_stride_row * elem_bytes(p.dtype)) % 16 ||
      (p.out_stride_row * elem_bytes(p.out_dtype)) % 16)
    return "moe: TOKEN and OUTPUT rows must start on 16-byte boundaries";
  return grouped_gemm_unsupported_reason(grouped_params(p), c);
}

size_t moe_workspace_size(const MoeParams& p, const GemmConfig& c) {
  if (moe_unsupported_reason(p, c)) return 0;
  const MoeWorkspace w = layout(p, c);
  return w.offsets + w.routed + w.grouped;
}

cudaError_t moe_grouped_matmul(const MoeParams& p, const GemmConfig& c, void* workspace, cudaStream_t stream) {
  if (moe_unsupported_reason(p, c)) return cudaErrorNotSupported;
  if (!workspace || reinterpret_cast<uintptr_t>(workspace) % kAlign) return cudaErrorInvalidValue;
  const MoeWorkspace w = layout(p, c);
  char* base = static_cast<char*>(workspace);
  auto* offsets = reinterpret_cast<int32_t*>(base);
  void* routed = base + w.offsets;
  const int ea = elem_bytes(p.dtype), ed = elem_bytes(p.out_dtype);
  const int64_t k_vecs = p.k * ea / 16, n_vecs = p.n * ed / 16;
  const int64_t token_stride_vec = p.token_stride_row * ea / 16, out_stride_vec = p.out_stride_row * ed / 16;

  moe_offsets_kernel<<<static_cast<int>(std::min<int64_t>((p.experts + 256) / 256, 1024)), 256, 0, stream>>>(
      p.first_token_offset, p.offset_type, p.experts, p.rows, offsets);
  const int blocks = row_blocks(p.rows);
  if (p.mode == MoeMode::GATHER)
    moe_gather_kernel<<<blocks, 256, 0, stream>>>(static_cast<const uint4*>(p.token), token_stride_vec, p.token_rows,
                                                  p.token_index, p.index_type, static_cast<uint4*>(routed), p.rows,
                                                  k_vecs);
  auto* out = static_cast<uint4*>(p.output);
  moe_zero_rows_kernel<<<blocks, 256, 0, stream>>>(out, out_stride_vec, p.rows, n_vecs,
                                                   p.mode == MoeMode::SCATTER ? nullptr : offsets);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;

  GroupedGemmParams g = grouped_params(p);
  g.offsets = offsets;
  if (p.mode == MoeMode::GATHER) g.a = routed;
  if (p.mode == MoeMode::SCATTER) g.d = routed;
  if (cudaError_t e = grouped_gemm(g, c, base + w.offsets + w.routed, stream); e != cudaSuccess) return e;
  if (p.mode == MoeMode::SCATTER)
    moe_scatter_kernel<<<blocks, 256, 0, stream>>>(static_cast<const uint4*>(routed), p.rows, n_vecs, offsets,
                                                   p.token_index, p.index_type, p.token_ks, p.ks_type, p.top_k, out,
                                                   out_stride_vec);
  return cudaGetLastError();
}

}  // namespace frost::sm90
