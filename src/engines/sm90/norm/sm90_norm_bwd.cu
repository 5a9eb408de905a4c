// RMSNorm / LayerNorm backward kernels and their launcher (formulas in sm90_norm.h).
//
// Pass 1 reads x and dy once per row, writes dx, and accumulates dy * xhat and dy for the columns each
// thread owns across all the rows its CTA visits; at the end each row group writes its FP32 column sums
// as one partial row of the workspace. Pass 2 (finalize) sums the partial rows of every column in a fixed
// order. No atomics anywhere: the gradients are bitwise reproducible for a given plan.
// g = dy * scale is rounded on its own (__fmul_rn) wherever it is formed, so the g summed into sum(g) and
// the g that dx subtracts it from are the same number: a one-element LayerNorm row gets dx = 0 exactly
// (a fused multiply-add in one place only leaves the product's rounding error, times inv = 1/sqrt(eps)).
// Workspace: [2][partial_rows][cols] FP32 (the dbias half only when dbias is requested).
#include <type_traits>

#include "engines/sm90/norm/sm90_norm_launch.cuh"

namespace frost::sm90 {
namespace norm {
namespace {

struct RowStats {
  float mean, inv;
};

__device__ __forceinline__ RowStats row_stats(const NormBwdParams& p, int64_t row) {
  return {p.centered ? p.mean[row * p.mean_stride] : 0.f, p.inv[row * p.inv_stride]};
}

// Rows held in registers, packed. Each row group loads the next row it will visit (x, dy and the statistics)
// before reducing the current one. Two vectors a thread at most: with the column sums (4 * CHUNKS * VEC
// floats) that is 124 of the 128 registers at VEC = 8.
template <class T, class W, int VEC, int CHUNKS>
__global__ void __launch_bounds__(kMaxBlock) bwd_regs(NormBwdParams p, int tpr, float* partial) {
  using R = Raw<T, VEC>;
  __shared__ float red[2][2][kMaxWarps];
  RowReducer<2> reducer{red};
  const int groups = static_cast<int>(blockDim.x) / tpr;
  const int group = static_cast<int>(threadIdx.x) / tpr;
  const int t = static_cast<int>(threadIdx.x) - group * tpr;
  const int64_t cols = p.cols, step = int64_t{gridDim.x} * groups;
  const float inv_cols = 1.f / static_cast<float>(cols);
  const auto fetch = [&](int64_t row, R(&xd)[CHUNKS], R(&dd)[CHUNKS], RowStats& st) {
    const bool valid = row < p.rows;
    const T* x = static_cast<const T*>(p.x) + (valid ? row : 0) * p.x_row_stride;
    const T* dy = static_cast<const T*>(p.dy) + (valid ? row : 0) * p.dy_row_stride;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int64_t col = (int64_t{c} * tpr + t) * VEC;
      const bool in = valid && col < cols;
      xd[c] = in ? load_raw<T, VEC, true>(x + col) : zero_raw<T, VEC>();
      dd[c] = in ? load_raw<T, VEC, true>(dy + col) : zero_raw<T, VEC>();  // dy = 0 keeps padding out of sums
    }
    st = valid ? row_stats(p, row) : RowStats{0.f, 0.f};
  };
  const auto scale_of = [&](int64_t col, float(&w)[VEC]) {
    if (col < cols) {
      load_column<W, VEC>(p.scale, col, 1.f, w);
    } else {
#pragma unroll
      for (int i = 0; i < VEC; ++i) w[i] = 0.f;
    }
  };
  float ds[CHUNKS][VEC], db[CHUNKS][VEC];  // this thread's columns of sum(dy * xhat) and sum(dy)
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
    for (int i = 0; i < VEC; ++i) ds[c][i] = db[c][i] = 0.f;
  R xc[CHUNKS], dc[CHUNKS], xn[CHUNKS], dn[CHUNKS];
  RowStats st, st_next{0.f, 0.f};
  int64_t first = int64_t{blockIdx.x} * groups;
  fetch(first + group, xc, dc, st);
  for (; first < p.rows; first += step) {
    const int64_t row = first + group;
    const bool more = first + step < p.rows;  // uniform across the CTA
    if (more) fetch(row + step, xn, dn, st_next);
    float s[2] = {0.f, 0.f};  // sum(g * xhat), sum(g)
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      float w[VEC];
      scale_of((int64_t{c} * tpr + t) * VEC, w);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float dyv = element<T, VEC>(dc[c], i);
        const float xhat = (element<T, VEC>(xc[c], i) - st.mean) * st.inv;
        const float g = __fmul_rn(dyv, w[i]);
        s[0] += g * xhat;
        s[1] += g;
        ds[c][i] += dyv * xhat;
        db[c][i] += dyv;
      }
    }
    reducer.sum(s, tpr);
    if (row < p.rows) {
      const float c1 = s[0] * inv_cols, c2 = p.centered ? s[1] * inv_cols : 0.f;
      with_type(p.dx_dtype, [&](auto out) {
        using TOut = decltype(out);
#pragma unroll
        for (int c = 0; c < CHUNKS; ++c) {
          const int64_t col = (int64_t{c} * tpr + t) * VEC;
          if (col >= cols) continue;
          float w[VEC], o[VEC];
          scale_of(col, w);  // again, from L1: cheaper than holding it through the reduction
#pragma unroll
          for (int i = 0; i < VEC; ++i) {
            const float xhat = (element<T, VEC>(xc[c], i) - st.mean) * st.inv;
            o[i] = st.inv * (__fmul_rn(element<T, VEC>(dc[c], i), w[i]) - c2 - xhat * c1);
          }
          store_as<TOut, VEC>(static_cast<TOut*>(p.dx) + row * p.dx_row_stride + col, o);
        }
      });
    }
    if (!more) break;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) xc[c] = xn[c], dc[c] = dn[c];
    st = st_next;
  }
  const int64_t partial_rows = int64_t{gridDim.x} * groups;
  const int64_t prow = int64_t{blockIdx.x} * groups + group;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t col = (int64_t{c} * tpr + t) * VEC;
    if (col >= cols) continue;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      partial[prow * cols + col + i] = ds[c][i];
      if (p.dbias) partial[(partial_rows + prow) * cols + col + i] = db[c][i];
    }
  }
}

// Rows too long for registers: one row per CTA; x and dy are read twice (the second time mostly from L2)
// and the CTA's column sums live in its own workspace row, updated by the thread that owns the column.
template <class T, class W, int VEC>
__global__ void __launch_bounds__(kMaxBlock) bwd_stream(NormBwdParams p, int, float* partial) {
  __shared__ float red[2][2][kMaxWarps];
  RowReducer<2> reducer{red};
  const int tpr = static_cast<int>(blockDim.x);
  const int64_t cols = p.cols, step = int64_t{tpr} * VEC, start = int64_t{threadIdx.x} * VEC;
  const float inv_cols = 1.f / static_cast<float>(cols);
  float* pds = partial + int64_t{blockIdx.x} * cols;
  float* pdb = partial + (int64_t{gridDim.x} + blockIdx.x) * cols;
  bool first = true;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_row_stride;
    const T* dy = static_cast<const T*>(p.dy) + row * p.dy_row_stride;
    const RowStats st = row_stats(p, row);
    float xv[VEC], dv[VEC], w[VEC];
    float s[2] = {0.f, 0.f};
    for (int64_t col = start; col < cols; col += step) {
      load<T, VEC, false>(x + col, xv);
      load<T, VEC, false>(dy + col, dv);
      load_column<W, VEC>(p.scale, col, 1.f, w);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float g = __fmul_rn(dv[i], w[i]);
        s[0] += g * (xv[i] - st.mean) * st.inv;
        s[1] += g;
      }
    }
    reducer.sum(s, tpr);
    const float c1 = s[0] * inv_cols, c2 = p.centered ? s[1] * inv_cols : 0.f;
    with_type(p.dx_dtype, [&](auto out) {
      using TOut = decltype(out);
      for (int64_t col = start; col < cols; col += step) {
        load<T, VEC, false>(x + col, xv);
        load<T, VEC, false>(dy + col, dv);
        load_column<W, VEC>(p.scale, col, 1.f, w);
        float o[VEC];
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          const float xhat = (xv[i] - st.mean) * st.inv;
          o[i] = st.inv * (__fmul_rn(dv[i], w[i]) - c2 - xhat * c1);
          pds[col + i] = first ? dv[i] * xhat : pds[col + i] + dv[i] * xhat;
          if (p.dbias) pdb[col + i] = first ? dv[i] : pdb[col + i] + dv[i];
        }
        store_as<TOut, VEC>(static_cast<TOut*>(p.dx) + row * p.dx_row_stride + col, o);
      }
    });
    first = false;
  }
}

// Sums the partial rows of each column: 32 columns x 8 slices of rows per CTA, slices combined in order.
// blockIdx.y: 0 dscale, 1 dbias.
__global__ void __launch_bounds__(256)
    bwd_finalize(const float* partial, int64_t partial_rows, int64_t cols, void* dscale, NormDtype dscale_dtype,
                 void* dbias, NormDtype dbias_dtype) {
  __shared__ float acc[8][33];
  const int64_t col = int64_t{blockIdx.x} * 32 + threadIdx.x;
  const float* src = partial + int64_t{blockIdx.y} * partial_rows * cols;
  float s = 0.f;
  if (col < cols) {
#pragma unroll 4
    for (int64_t r = threadIdx.y; r < partial_rows; r += 8) s += src[r * cols + col];
  }
  acc[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
  float total[1] = {0.f};
#pragma unroll
  for (int k = 0; k < 8; ++k) total[0] += acc[k][threadIdx.x];
  void* dst = blockIdx.y == 0 ? dscale : dbias;
  with_type(blockIdx.y == 0 ? dscale_dtype : dbias_dtype,
            [&](auto out) { store_as<decltype(out), 1>(static_cast<decltype(out)*>(dst) + col, total); });
}

using BwdKernel = void (*)(NormBwdParams, int, float*);

template <class T, class W, int VEC>
BwdKernel bwd_kernel(const NormLaunch& l) {
  if (l.stream) return bwd_stream<T, W, VEC>;
  switch (l.chunks) {
    case 1:
      return bwd_regs<T, W, VEC, 1>;
    case 2:
      return bwd_regs<T, W, VEC, 2>;
    default:
      return nullptr;
  }
}

template <class T, class W>
BwdKernel bwd_kernel_for(const NormLaunch& l) {
  constexpr int kVec = 16 / sizeof(T);
  return l.vec == 1 ? bwd_kernel<T, W, 1>(l) : bwd_kernel<T, W, kVec>(l);
}

// The scale is x's type or FP32 (norm_bwd_unsupported_reason).
template <class T>
BwdKernel bwd_kernel_for(NormDtype weights, const NormLaunch& l) {
  if constexpr (std::is_same_v<T, float>) {
    return bwd_kernel_for<float, float>(l);
  } else {
    return weights == NormDtype::FP32 ? bwd_kernel_for<T, float>(l) : bwd_kernel_for<T, T>(l);
  }
}

BwdKernel pick(const NormBwdParams& p, const NormLaunch& l) {
  switch (p.x_dtype) {
    case NormDtype::BF16:
      return bwd_kernel_for<__nv_bfloat16>(p.scale_dtype, l);
    case NormDtype::FP16:
      return bwd_kernel_for<__half>(p.scale_dtype, l);
    default:
      return bwd_kernel_for<float>(p.scale_dtype, l);
  }
}

constexpr int kBwdMaxChunks = 2;
// Two vectors a thread: on the H200 at 16384 x 4096 bf16, 256 threads per row gave 2739 GB/s RMSNorm and
// 2515 LayerNorm against 2049 and 1987 at 512 (one vector); 128 would need 4 and stream instead.
constexpr int kBwdVectorsPerThread = 2;

}  // namespace
}  // namespace norm

const char* norm_bwd_unsupported_reason(const NormBwdParams& p) {
  if (!p.scale) return "SCALE is required";
  if (p.scale_dtype != p.x_dtype && p.scale_dtype != NormDtype::FP32) return "SCALE data type (X's type or FLOAT)";
  return nullptr;
}

cudaError_t norm_bwd_plan(const NormBwdParams& p, int threads_per_row, NormKernelPlan& out) {
  using namespace norm;
  out = {};
  const int vec = 16 / element_bytes(p.x_dtype);
  out.has_vectorized =
      p.cols % vec == 0 && strides_fit(p.rows, vec, {p.x_row_stride, p.dy_row_stride, p.dx_row_stride});
  out.scalar = choose_launch(p.cols, 1, threads_per_row, kBwdVectorsPerThread, kBwdMaxChunks);
  if (cudaError_t e = size_grid(pick(p, out.scalar), p.rows, out.scalar); e != cudaSuccess) return e;
  int64_t partial_rows = out.scalar.partial_rows;
  if (out.has_vectorized) {
    out.vectorized = choose_launch(p.cols, vec, threads_per_row, kBwdVectorsPerThread, kBwdMaxChunks);
    if (cudaError_t e = size_grid(pick(p, out.vectorized), p.rows, out.vectorized); e != cudaSuccess) return e;
    partial_rows = std::max(partial_rows, out.vectorized.partial_rows);
  }
  out.workspace_bytes = (p.dbias ? 2 : 1) * partial_rows * p.cols * int64_t{sizeof(float)};
  return cudaSuccess;
}

cudaError_t norm_bwd(const NormBwdParams& p, const NormKernelPlan& plan, void* workspace, cudaStream_t stream) {
  using namespace norm;
  if (p.cols == 0) return cudaSuccess;
  float* partial = static_cast<float*>(workspace);
  int64_t partial_rows = 0;
  if (p.rows > 0) {
    const int vec = plan.vectorized.vec;
    const bool use_vec = plan.has_vectorized && aligned(p.x, 16) && aligned(p.dy, 16) && aligned(p.scale, 16) &&
                         aligned(p.dx, std::min<int64_t>(16, int64_t{vec} * element_bytes(p.dx_dtype)));
    const NormLaunch& l = use_vec ? plan.vectorized : plan.scalar;
    const BwdKernel kernel = pick(p, l);
    if (!kernel || l.grid == 0) return cudaErrorInvalidConfiguration;
    kernel<<<l.grid, l.block, 0, stream>>>(p, l.tpr, partial);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    partial_rows = l.partial_rows;
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(p.cols, 32)), p.dbias ? 2u : 1u);
  bwd_finalize<<<grid, dim3(32, 8), 0, stream>>>(partial, partial_rows, p.cols, p.dscale, p.dscale_dtype, p.dbias,
                                                 p.dbias_dtype);
  return cudaGetLastError();
}

}  // namespace frost::sm90
