// Device building blocks of the sm90 normalization kernels: conversions, 16-byte vector loads and stores,
// and the row reduction. Framework-free; see sm90_norm.h for the formulas.
//
// Work layout: a CTA of `block` threads normalizes block / tpr rows at a time, `tpr` threads per row
// (a multiple of 32, so a row never shares a warp). Thread t of a row owns the vectors starting at
// columns (c * tpr + t) * VEC for c < CHUNKS, the same columns for every row it visits, so row data stays
// in registers and the backward's column sums of dscale and dbias accumulate in registers across rows.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "engines/sm90/norm/sm90_norm.h"

namespace frost::sm90::norm {

// 512 threads per CTA at most, so __launch_bounds__ leaves 128 registers a thread: the backward holds
// the current and the next rows of x and dy, packed, and two FP32 column accumulators.
constexpr int kMaxBlock = 512;
constexpr int kMaxWarps = kMaxBlock / 32;

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// VEC elements at p as floats. VEC > 1 moves 16 bytes per instruction (p is 16-byte aligned: checked by
// the launcher). kOnce: data read exactly once (evict-first); otherwise the read-only path, for rows and
// weights read again.
template <class T, int VEC, bool kOnce>
__device__ __forceinline__ void load(const T* p, float (&out)[VEC]) {
  if constexpr (VEC == 1) {
    out[0] = to_f(kOnce ? __ldcs(p) : __ldg(p));
  } else {
    constexpr int kWords = VEC * static_cast<int>(sizeof(T)) / 16;
    static_assert(kWords * 16 == VEC * static_cast<int>(sizeof(T)), "vectorized loads move 16 bytes at a time");
    constexpr int kPerWord = VEC / kWords;
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      const uint4* src = reinterpret_cast<const uint4*>(p) + k;
      const uint4 raw = kOnce ? __ldcs(src) : __ldg(src);
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int i = 0; i < kPerWord; ++i) out[k * kPerWord + i] = to_f(e[i]);
    }
  }
}

// A vector as loaded: 16 bytes (uint4) when VEC > 1, the element itself when VEC == 1. Rows stay packed in
// registers (half the registers of floats for 16-bit data, which leaves room to load the next row while
// this one is reduced) and are converted to FP32 on use.
template <class T, int VEC>
using Raw = std::conditional_t<VEC == 1, T, uint4>;

template <class T, int VEC, bool kOnce>
__device__ __forceinline__ Raw<T, VEC> load_raw(const T* p) {
  if constexpr (VEC == 1) {
    return kOnce ? __ldcs(p) : __ldg(p);
  } else {
    static_assert(VEC * sizeof(T) == 16, "a packed vector is 16 bytes");
    const uint4* src = reinterpret_cast<const uint4*>(p);
    return kOnce ? __ldcs(src) : __ldg(src);
  }
}

template <class T, int VEC>
__device__ __forceinline__ Raw<T, VEC> zero_raw() {
  if constexpr (VEC == 1) {
    return from_f<T>(0.f);
  } else {
    return make_uint4(0, 0, 0, 0);  // all-zero bits are +0 in every type served
  }
}

// Element i (a compile-time index in unrolled loops) of a packed vector, as FP32.
template <class T, int VEC>
__device__ __forceinline__ float element(const Raw<T, VEC>& r, int i) {
  if constexpr (VEC == 1) {
    return to_f(r);
  } else {
    return to_f(reinterpret_cast<const T*>(&r)[i]);
  }
}

// VEC elements of a per-column operand (scale or bias, of type W; null means `none`) from column col.
// Re-read per row: they stay in L1 (every CTA of an SM reads the same ones), and holding them would cost
// the registers that keep rows in flight.
template <class W, int VEC>
__device__ __forceinline__ void load_column(const void* p, int64_t col, float none, float (&out)[VEC]) {
  if (p) {
    load<W, VEC, false>(static_cast<const W*>(p) + col, out);
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) out[i] = none;
  }
}

template <class T, int VEC>
__device__ __forceinline__ void store_as(T* p, const float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    *p = from_f<T>(v[0]);
  } else {
    constexpr int kBytes = VEC * static_cast<int>(sizeof(T));
    alignas(16) T e[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) e[i] = from_f<T>(v[i]);
    if constexpr (kBytes >= 16) {
#pragma unroll
      for (int k = 0; k < kBytes / 16; ++k) reinterpret_cast<uint4*>(p)[k] = reinterpret_cast<const uint4*>(e)[k];
    } else if constexpr (kBytes == 8) {
      *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(e);
    } else {
      static_assert(kBytes == 4, "4, 8 or a multiple of 16 bytes per store");
      *reinterpret_cast<uint32_t*>(p) = *reinterpret_cast<const uint32_t*>(e);
    }
  }
}

// Calls f(TOut{}) with the C++ type of a run-time dtype. Kernels switch once per row, outside their unrolled
// loops, so each branch keeps straight-line stores.
template <class F>
__device__ __forceinline__ void with_type(NormDtype dt, F&& f) {
  switch (dt) {
    case NormDtype::BF16:
      f(__nv_bfloat16{});
      break;
    case NormDtype::FP16:
      f(__half{});
      break;
    default:
      f(float{});
      break;
  }
}

// XOR butterfly: every lane ends with the same bits (float addition is commutative).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sums N values over the tpr threads of each row; every thread of the row gets the same bits, in a fixed
// order (deterministic). Every thread of the CTA must call it (it may hold a barrier). Two alternating
// buffers: a thread can only reach the next reduction's write after everyone passed this one's barrier.
template <int N>
struct RowReducer {
  float (*smem)[N][kMaxWarps];  // [2][N][kMaxWarps]
  int parity = 0;

  __device__ __forceinline__ void sum(float (&v)[N], int tpr) {
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = warp_sum(v[k]);
    if (tpr == 32) return;
    const int warp = static_cast<int>(threadIdx.x) >> 5;
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
      for (int k = 0; k < N; ++k) smem[parity][k][warp] = v[k];
    }
    __syncthreads();
    const int warps = tpr >> 5;
    const int first = (static_cast<int>(threadIdx.x) / tpr) * warps;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float s = 0.f;
      for (int w = 0; w < warps; ++w) s += smem[parity][k][first + w];
      v[k] = s;
    }
    parity ^= 1;
  }
};

}  // namespace frost::sm90::norm
