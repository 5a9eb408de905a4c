// Host-side launch choices shared by the forward and backward launchers.
#pragma once
#include <algorithm>
#include <cstdint>

#include "engines/sm90/norm/sm90_norm.h"
#include "engines/sm90/norm/sm90_norm_kernels.cuh"

namespace frost::sm90::norm {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

inline int element_bytes(NormDtype dt) { return dt == NormDtype::FP32 ? 4 : 2; }

// Threads per row and vectors per thread for rows of `cols` elements read `vec` at a time.
// `vectors_per_thread` 16-byte vectors a thread (the launchers say how many and why); with the next row
// loaded during this one's reductions, 2 to 4 keep 32 KB or more of loads in flight per SM at the occupancy
// their registers allow. Rows longer than 512 threads x max_chunks vectors are streamed: read twice, one row
// per CTA of 512 threads.
inline NormLaunch choose_launch(int64_t cols, int vec, int threads_per_row, int vectors_per_thread, int max_chunks) {
  NormLaunch l;
  l.vec = vec;
  const int64_t vectors = ceil_div(cols, vec);
  int64_t tpr = threads_per_row;
  if (tpr == 0) tpr = std::clamp<int64_t>(pow2_ceil(ceil_div(vectors, vectors_per_thread)), 32, kMaxBlock);
  const int64_t chunks = ceil_div(vectors, tpr);
  if (chunks > max_chunks) {
    l.stream = true;
    l.tpr = l.block = kMaxBlock;
    return l;
  }
  l.tpr = static_cast<int>(tpr);
  l.chunks = static_cast<int>(pow2_ceil(chunks));
  // Short rows: several rows per CTA so that a CTA still has 128 threads.
  l.block = (tpr < 128 && 128 % tpr == 0) ? 128 : l.tpr;
  return l;
}

// Persistent grid: as many CTAs as fit on the device at once, fewer when there are fewer row groups.
template <class Kernel>
cudaError_t size_grid(Kernel kernel, int64_t rows, NormLaunch& l) {
  int device = 0, sms = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, l.block, 0);
  if (e != cudaSuccess) return e;
  const int64_t groups = l.block / l.tpr;
  const int64_t wanted = ceil_div(rows, groups);
  l.grid = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, int64_t{std::max(per_sm, 1)} * sms)));
  l.partial_rows = int64_t{l.grid} * groups;
  return cudaSuccess;
}

// Null pointers count as aligned: an absent operand never forces the element-wise path.
inline bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The type of the per-column operands: the scale's, else the bias's, else (neither present) x's.
inline NormDtype weight_dtype(NormDtype x, const void* scale, NormDtype scale_dtype, const void* bias,
                              NormDtype bias_dtype) {
  return scale ? scale_dtype : bias ? bias_dtype : x;
}

// Row strides of every row-indexed operand must keep each vector on a vec-element boundary.
inline bool strides_fit(int64_t rows, int vec, std::initializer_list<int64_t> strides) {
  if (rows <= 1) return true;
  for (int64_t s : strides)
    if (s % vec != 0) return false;
  return true;
}

}  // namespace frost::sm90::norm
