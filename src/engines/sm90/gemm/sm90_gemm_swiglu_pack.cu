// Gate and up weights held apart, copied into the layout of the fused SwiGLU GEMM (sm90_gemm.h):
// columns (N-major) or rows (K-major) interleaved in blocks of kSwigluInterleave = 8. For 16-bit types a
// block of 8 contiguous elements is one 16-byte vector, so both layouts move whole uint4s:
//   N-major, per k row:   dst[kk][2q] = gate[kk][q], dst[kk][2q + 1] = up[kk][q]   (q: 8-column block)
//   K-major, per f row j: dst row 16*(j/8) + j%8 = gate row j, dst row 16*(j/8) + 8 + j%8 = up row j
// Memory-bound: one read and one write of 2*k*f elements, no synchronization, capturable.
#include <algorithm>
#include <cstdint>

#include "sm90_gemm.h"

namespace frost::sm90 {
namespace {

static_assert(kSwigluInterleave == 8, "one interleave block of a 16-bit type is one 16-byte vector");

// N-major: vectors of the destination in row order; each reads the matching vector of gate or up.
__global__ void swiglu_pack_n_major(const uint4* gate, const uint4* up, int64_t gate_row_vecs, int64_t up_row_vecs,
                                    int64_t k, int64_t f_vecs, uint4* dst) {
  const int64_t total = k * 2 * f_vecs;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / (2 * f_vecs), col = i % (2 * f_vecs);
    const int64_t q = col / 2;
    dst[i] = col % 2 == 0 ? gate[row * gate_row_vecs + q] : up[row * up_row_vecs + q];
  }
}

// K-major: destination rows of k elements (k_vecs vectors); row d comes from gate or up row j.
__global__ void swiglu_pack_k_major_kernel(const uint4* gate, const uint4* up, int64_t gate_row_vecs,
                                           int64_t up_row_vecs, int64_t f, int64_t k_vecs, uint4* dst) {
  const int64_t total = 2 * f * k_vecs;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = i / k_vecs, c = i % k_vecs;
    const int64_t block = d / 16, r = d % 16;
    const int64_t j = block * 8 + (r % 8);
    dst[i] = r < 8 ? gate[j * gate_row_vecs + c] : up[j * up_row_vecs + c];
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
bool is_16bit(GemmDtype t) { return t == GemmDtype::BF16 || t == GemmDtype::FP16; }

}  // namespace

bool swiglu_pack_k_major(const SwigluPackParams& p) {
  return p.gate_stride_k == 1 && p.up_stride_k == 1 && p.gate_stride_n != 1;
}

const char* swiglu_pack_unsupported_reason(const SwigluPackParams& p) {
  if (!is_16bit(p.type)) return "swiglu pack: weights must be BF16 or FP16";
  if (p.k < 1 || p.f < kSwigluInterleave || p.f % kSwigluInterleave)
    return "swiglu pack: f must be a positive multiple of 8 (the gate/up interleave block) and k positive";
  if (!p.gate || !p.up || !p.dst || !aligned16(p.gate) || !aligned16(p.up) || !aligned16(p.dst))
    return "swiglu pack: gate, up and the destination must be 16-byte aligned device pointers";
  const bool n_major = p.gate_stride_n == 1 && p.up_stride_n == 1;
  if (!n_major && !swiglu_pack_k_major(p))
    return "swiglu pack: gate and up must both be N-contiguous (stride_n == 1) or both K-contiguous (stride_k == 1)";
  // Row strides of both, in 16-byte vectors; a K-major pack also moves k in whole vectors.
  const int64_t gs = n_major ? p.gate_stride_k : p.gate_stride_n, us = n_major ? p.up_stride_k : p.up_stride_n;
  if (gs % 8 || us % 8 || gs < 1 || us < 1) return "swiglu pack: weight row strides must be multiples of 8 elements";
  if (!n_major && p.k % 8) return "swiglu pack: K-major weights need k a multiple of 8";
  return nullptr;
}

cudaError_t swiglu_pack_weights(const SwigluPackParams& p, cudaStream_t stream) {
  if (swiglu_pack_unsupported_reason(p)) return cudaErrorNotSupported;
  const bool k_major = swiglu_pack_k_major(p);
  const auto* gate = static_cast<const uint4*>(p.gate);
  const auto* up = static_cast<const uint4*>(p.up);
  auto* dst = static_cast<uint4*>(p.dst);
  const int64_t vectors = 2 * p.k * p.f / 8;
  const int blocks = static_cast<int>(std::clamp<int64_t>((vectors + 255) / 256, 1, 132 * 16));
  if (k_major)
    swiglu_pack_k_major_kernel<<<blocks, 256, 0, stream>>>(gate, up, p.gate_stride_n / 8, p.up_stride_n / 8, p.f,
                                                           p.k / 8, dst);
  else
    swiglu_pack_n_major<<<blocks, 256, 0, stream>>>(gate, up, p.gate_stride_k / 8, p.up_stride_k / 8, p.k, p.f / 8,
                                                    dst);
  return cudaGetLastError();
}

}  // namespace frost::sm90
