// Warp-level tensor-core pieces of the GDN kernels: cp.async, ldmatrix and mma.sync m16n8k16 (FP32
// accumulation), with the fragment addressing for each operand layout the kernels keep in shared
// memory. Row strides are padded by 16 bytes so that 8 rows at one column hit 8 distinct bank groups.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace frost::sm90::gdn {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; `valid` false fills zeros without reading `src`.
__device__ __forceinline__ void cp16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Calls f(row, col) for the 16-byte pieces of a kRows x kCols tile of 16-bit elements that thread tid of kThreads
// takes: pieces tid, tid + kThreads, ..., row-major. The trip count is known at compile time, so the copies unroll
// and their addressing (a constant step per piece) leaves the per-chunk loops of the state passes; with
// `for (i = tid; i < n; i += kThreads)` the compiler unrolled by four behind remainder branches, and the loads took
// over half of a pass's instructions per chunk.
template <int kRows, int kCols, int kThreads, class F>
__device__ __forceinline__ void for_each_piece(int tid, F&& f) {
  constexpr int kPerRow = kCols / 8;
  static_assert(kCols % 8 == 0 && kThreads % kPerRow == 0 && kRows * kPerRow % kThreads == 0);
  const int r0 = tid / kPerRow, col = (tid % kPerRow) * 8;
#pragma unroll
  for (int j = 0; j < kRows * kPerRow / kThreads; ++j) f(r0 + j * (kThreads / kPerRow), col);
}

__device__ __forceinline__ void ldsm4(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm4_t(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// Element offsets (row stride ld) of this lane's ldmatrix row for a 16 x 16 block:
// A stored row-major [m][k]; B stored [n][k] (two n-tiles: regs 0-1 and 2-3); B stored [k][n]
// (with .trans, same register split). An A stored [k][m] is read with .trans from rows
// k0 + (lane & 7) + (lane >> 4) * 8 at column m0 + ((lane >> 3) & 1) * 8 (the state pass's K^T).
__device__ __forceinline__ int frag_a(int lane, int m0, int k0, int ld) {
  return (m0 + (lane & 15)) * ld + k0 + (lane >> 4) * 8;
}
__device__ __forceinline__ int frag_b_nk(int lane, int n0, int k0, int ld) {
  return (n0 + (lane & 7) + (lane >> 4) * 8) * ld + k0 + ((lane >> 3) & 1) * 8;
}
__device__ __forceinline__ int frag_b_kn(int lane, int k0, int n0, int ld) {
  return (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0 + (lane >> 4) * 8;
}

template <class E>
struct Mma;

template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ float2 unpack(uint32_t x) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x));
  }
  static __device__ __forceinline__ void run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct Mma<__half> {
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    const __half2 v = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ float2 unpack(uint32_t x) {
    return __half22float2(*reinterpret_cast<const __half2*>(&x));
  }
  static __device__ __forceinline__ void run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// TF32 (FP32's exponent range, 10 mantissa bits) m16n8k8 with FP32 accumulation; operands rounded to nearest.
__device__ __forceinline__ uint32_t tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void mma_tf32(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace frost::sm90::gdn
