// RMSNorm / LayerNorm forward kernels and their launcher (formulas in sm90_norm.h).
//
// Memory-bound: each element of x is read once and y written once. A row sits in registers between the
// statistics and the output; the LayerNorm variance is the mean of squared deviations from the mean (two
// reductions over the registers), as accurate as the two-pass reference.
#include <type_traits>

#include "engines/sm90/norm/sm90_norm_launch.cuh"

namespace frost::sm90 {
namespace norm {
namespace {

__device__ __forceinline__ void write_stats(const NormFwdParams& p, int64_t row, float mean, float inv) {
  if (p.mean) p.mean[row * p.mean_stride] = mean;
  if (p.inv) p.inv[row * p.inv_stride] = inv;
}

// y for VEC elements at column col of row `row`; W is the type of scale and bias.
template <class TOut, class T, class W, int VEC>
__device__ __forceinline__ void write_y(const NormFwdParams& p, int64_t row, int64_t col, const Raw<T, VEC>& x,
                                        float mean, float inv) {
  float w[VEC], b[VEC], o[VEC];
  load_column<W, VEC>(p.scale, col, 1.f, w);
  load_column<W, VEC>(p.bias, col, 0.f, b);
#pragma unroll
  for (int i = 0; i < VEC; ++i) o[i] = (element<T, VEC>(x, i) - mean) * inv * w[i] + b[i];
  store_as<TOut, VEC>(static_cast<TOut*>(p.y) + row * p.y_row_stride + col, o);
}

// Rows held in registers. Each row group loads the next row it will visit before reducing the current one,
// so the loads of one row overlap the reductions and stores of the previous (up to 4 vectors a thread; at 8
// the registers go to the row itself).
template <class T, class W, int VEC, int CHUNKS>
__global__ void __launch_bounds__(kMaxBlock) fwd_regs(NormFwdParams p, int tpr) {
  using R = Raw<T, VEC>;
  constexpr bool kPrefetch = CHUNKS <= 4;
  __shared__ float red[2][1][kMaxWarps];
  RowReducer<1> reducer{red};
  const int groups = static_cast<int>(blockDim.x) / tpr;
  const int group = static_cast<int>(threadIdx.x) / tpr;
  const int t = static_cast<int>(threadIdx.x) - group * tpr;
  const int64_t cols = p.cols, step = int64_t{gridDim.x} * groups;
  const float inv_cols = 1.f / static_cast<float>(cols);
  const auto fetch = [&](int64_t row, R(&dst)[CHUNKS]) {
    const bool valid = row < p.rows;
    const T* x = static_cast<const T*>(p.x) + (valid ? row : 0) * p.x_row_stride;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int64_t col = (int64_t{c} * tpr + t) * VEC;
      dst[c] = valid && col < cols ? load_raw<T, VEC, true>(x + col) : zero_raw<T, VEC>();
    }
  };
  R cur[CHUNKS], next[CHUNKS];
  int64_t first = int64_t{blockIdx.x} * groups;
  fetch(first + group, cur);
  for (; first < p.rows; first += step) {
    const int64_t row = first + group;
    const bool more = first + step < p.rows;  // uniform across the CTA
    if (kPrefetch && more) fetch(row + step, next);
    float mean = 0.f;
    if (p.centered) {
      float s[1] = {0.f};
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
        for (int i = 0; i < VEC; ++i) s[0] += element<T, VEC>(cur[c], i);
      reducer.sum(s, tpr);
      mean = s[0] * inv_cols;
    }
    float q[1] = {0.f};
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      if ((int64_t{c} * tpr + t) * VEC >= cols) continue;  // padding is 0, but 0 - mean is not
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float d = element<T, VEC>(cur[c], i) - mean;
        q[0] += d * d;
      }
    }
    reducer.sum(q, tpr);
    const float inv = 1.f / sqrtf(q[0] * inv_cols + p.epsilon);
    if (row < p.rows) {
      with_type(p.y_dtype, [&](auto out) {
#pragma unroll
        for (int c = 0; c < CHUNKS; ++c) {
          const int64_t col = (int64_t{c} * tpr + t) * VEC;
          if (col < cols) write_y<decltype(out), T, W, VEC>(p, row, col, cur[c], mean, inv);
        }
      });
      if (t == 0) write_stats(p, row, mean, inv);
    }
    if (!more) break;
    if constexpr (kPrefetch) {
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) cur[c] = next[c];
    } else {
      fetch(row + step, cur);
    }
  }
}

// Rows too long for registers: one row per CTA, read once per reduction and once more for the output
// (the later reads mostly hit L2).
template <class T, class W, int VEC>
__global__ void __launch_bounds__(kMaxBlock) fwd_stream(NormFwdParams p, int) {
  __shared__ float red[2][1][kMaxWarps];
  RowReducer<1> reducer{red};
  const int tpr = static_cast<int>(blockDim.x);
  const int64_t cols = p.cols, step = int64_t{tpr} * VEC, start = int64_t{threadIdx.x} * VEC;
  const float inv_cols = 1.f / static_cast<float>(cols);
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_row_stride;
    float mean = 0.f;
    if (p.centered) {
      float s[1] = {0.f};
      for (int64_t col = start; col < cols; col += step) {
        const Raw<T, VEC> v = load_raw<T, VEC, false>(x + col);
#pragma unroll
        for (int i = 0; i < VEC; ++i) s[0] += element<T, VEC>(v, i);
      }
      reducer.sum(s, tpr);
      mean = s[0] * inv_cols;
    }
    float q[1] = {0.f};
    for (int64_t col = start; col < cols; col += step) {
      const Raw<T, VEC> v = load_raw<T, VEC, false>(x + col);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float d = element<T, VEC>(v, i) - mean;
        q[0] += d * d;
      }
    }
    reducer.sum(q, tpr);
    const float inv = 1.f / sqrtf(q[0] * inv_cols + p.epsilon);
    with_type(p.y_dtype, [&](auto out) {
      for (int64_t col = start; col < cols; col += step)
        write_y<decltype(out), T, W, VEC>(p, row, col, load_raw<T, VEC, false>(x + col), mean, inv);
    });
    if (threadIdx.x == 0) write_stats(p, row, mean, inv);
  }
}

using FwdKernel = void (*)(NormFwdParams, int);

template <class T, class W, int VEC>
FwdKernel fwd_kernel(const NormLaunch& l) {
  if (l.stream) return fwd_stream<T, W, VEC>;
  switch (l.chunks) {
    case 1:
      return fwd_regs<T, W, VEC, 1>;
    case 2:
      return fwd_regs<T, W, VEC, 2>;
    case 4:
      return fwd_regs<T, W, VEC, 4>;
    case 8:
      return fwd_regs<T, W, VEC, 8>;
    default:
      return nullptr;
  }
}

template <class T, class W>
FwdKernel fwd_kernel_for(const NormLaunch& l) {
  constexpr int kVec = 16 / sizeof(T);
  return l.vec == 1 ? fwd_kernel<T, W, 1>(l) : fwd_kernel<T, W, kVec>(l);
}

// Scale and bias are x's type or FP32 (norm_fwd_unsupported_reason).
template <class T>
FwdKernel fwd_kernel_for(NormDtype weights, const NormLaunch& l) {
  if constexpr (std::is_same_v<T, float>) {
    return fwd_kernel_for<float, float>(l);
  } else {
    return weights == NormDtype::FP32 ? fwd_kernel_for<T, float>(l) : fwd_kernel_for<T, T>(l);
  }
}

FwdKernel pick(const NormFwdParams& p, const NormLaunch& l) {
  const NormDtype weights = weight_dtype(p.x_dtype, p.scale, p.scale_dtype, p.bias, p.bias_dtype);
  switch (p.x_dtype) {
    case NormDtype::BF16:
      return fwd_kernel_for<__nv_bfloat16>(weights, l);
    case NormDtype::FP16:
      return fwd_kernel_for<__half>(weights, l);
    default:
      return fwd_kernel_for<float>(weights, l);
  }
}

constexpr int kFwdMaxChunks = 8;
// Four 16-byte vectors a thread by default: on the H200 at 16384 x 4096 bf16, 128 threads per row (4 vectors)
// gave 3309 GB/s RMSNorm and 3211 LayerNorm against 3273 and 2760 at 256 threads (2 vectors), 2506 and
// 1830 at 512 (bench/results/2026-11-30-h200-norm.json).
constexpr int kFwdVectorsPerThread = 4;

}  // namespace
}  // namespace norm

const char* norm_fwd_unsupported_reason(const NormFwdParams& p) {
  using namespace norm;
  if (p.scale && p.scale_dtype != p.x_dtype && p.scale_dtype != NormDtype::FP32)
    return "SCALE data type (X's type or FLOAT)";
  if (p.bias && p.bias_dtype != p.x_dtype && p.bias_dtype != NormDtype::FP32)
    return "BIAS data type (X's type or FLOAT)";
  if (p.scale && p.bias && p.scale_dtype != p.bias_dtype) return "BIAS data type differs from SCALE's";
  return nullptr;
}

cudaError_t norm_fwd_plan(const NormFwdParams& p, int threads_per_row, NormKernelPlan& out) {
  using namespace norm;
  out = {};
  const int vec = 16 / element_bytes(p.x_dtype);
  out.has_vectorized = p.cols % vec == 0 && strides_fit(p.rows, vec, {p.x_row_stride, p.y_row_stride});
  out.scalar = choose_launch(p.cols, 1, threads_per_row, kFwdVectorsPerThread, kFwdMaxChunks);
  if (cudaError_t e = size_grid(pick(p, out.scalar), p.rows, out.scalar); e != cudaSuccess) return e;
  if (out.has_vectorized) {
    out.vectorized = choose_launch(p.cols, vec, threads_per_row, kFwdVectorsPerThread, kFwdMaxChunks);
    if (cudaError_t e = size_grid(pick(p, out.vectorized), p.rows, out.vectorized); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t norm_fwd(const NormFwdParams& p, const NormKernelPlan& plan, cudaStream_t stream) {
  using namespace norm;
  if (p.rows == 0 || p.cols == 0) return cudaSuccess;
  const int vec = plan.vectorized.vec;
  const bool use_vec = plan.has_vectorized && aligned(p.x, 16) && aligned(p.scale, 16) && aligned(p.bias, 16) &&
                       aligned(p.y, std::min<int64_t>(16, int64_t{vec} * element_bytes(p.y_dtype)));
  const NormLaunch& l = use_vec ? plan.vectorized : plan.scalar;
  const FwdKernel kernel = pick(p, l);
  if (!kernel || l.grid == 0) return cudaErrorInvalidConfiguration;
  kernel<<<l.grid, l.block, 0, stream>>>(p, l.tpr);
  return cudaGetLastError();
}

}  // namespace frost::sm90
