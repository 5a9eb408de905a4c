// Online softmax in base 2 on wgmma accumulator fragments, plus the register-layout views it needs.
#pragma once
#include <cute/tensor.hpp>
#include <cmath>

namespace frost::sm90::fwd {

using namespace cute;

// A wgmma 64xN fp32 accumulator fragment has per-thread layout ((2, 2, N/8), MMA_M, MMA_N): value mode 0 walks
// a column pair, mode 1 the row 8 below, mode 2 the 8-column blocks. View it as (rows, cols) = ((2, MMA_M),
// (2, N/8, MMA_N)) so row reductions are loops over the second mode.
template <class AccLayout>
__device__ __forceinline__ constexpr auto acc_rowcol_layout(AccLayout const& acc) {
  static_assert(decltype(rank<0>(acc))::value == 3, "expects a wgmma accumulator layout");
  auto v = get<0>(acc);
  return make_layout(make_layout(get<1>(v), get<1>(acc)), make_layout(get<0>(v), get<2>(v), get<2>(acc)));
}

// For O += P V with P in registers, a 16-bit A fragment of a 64x16 k-block is ((2, 2, 2), MMA_M, MMA_K): a k pair,
// the row 8 below, the k block 8 to the right. Those are exactly the accumulator values of two neighbouring
// 8-column blocks of S, so the converted S fragment is reinterpreted without moving data.
template <class AccLayout>
__device__ __forceinline__ constexpr auto acc_to_a_operand_layout(AccLayout const& acc) {
  auto v = get<0>(acc);                                   // (2, 2, N/8)
  auto cols = logical_divide(get<2>(v), Layout<_2>{});    // (2, N/16)
  return make_layout(make_layout(get<0>(v), get<1>(v), get<0>(cols)), get<1>(acc),
                     coalesce(make_layout(get<1>(cols), get<2>(acc))));
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 1);
  return x + __shfl_xor_sync(0xffffffff, x, 2);
}

// Lazy rescale (kLazy): a row's running maximum moves only when a key block raises it by more than this (log2
// units, after the scale). Below that the row keeps its stale maximum: P = exp2(s - m) stays <= 2^8, which FP32
// sums and 16-bit P hold with the same relative precision, and O and the sum keep their scale, so the O rescale
// (d_v / 2 multiplies per thread and key block) runs only in the blocks where some row of the warp moved: the first
// few, on most data. It pays where O is large: d 256 ran 5 % faster with it, d 64 and 128 2-7 % slower (the vote
// and the branch cost more than their 32-64 multiplies; NOTES.md v8).
constexpr float kRescaleLog2 = 8.f;

// Row state for the rows this thread holds. Scores arrive unscaled; scale*log2(e) is folded into one FMA before
// exp2. The row sum stays a per-thread partial until finalize (each quad lane scales its part the same way).
// The scale is passed to each call (read from shared memory there) rather than kept in a register for the whole
// key-block loop, which runs next to the accumulators.
template <int kRows, bool kLazy_ = false>
struct OnlineSoftmax {
  static constexpr bool kLazy = kLazy_;
  float row_max[kRows];
  float row_sum[kRows];

  __device__ __forceinline__ OnlineSoftmax() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.f;
    }
  }

  // S (rowcol view) becomes P = exp2(S*scale_log2 - max*scale_log2); returns in `rescale` the factor the
  // running O must be multiplied by (1 for a row whose maximum stayed, see kRescaleLog2), and (kLazy) whether any
  // row of this thread moved.
  template <bool kFirst, class TensorS>
  __device__ __forceinline__ bool update(TensorS& s, float (&rescale)[kRows], float scale_log2) {
    static_assert(decltype(size<0>(s))::value == kRows);
    bool moved = false;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      // Four interleaved partial maxima: a chain of kBlockN/4 dependent FMNMX per row would stall the warp (one
      // warp of each consumer warpgroup per scheduler, nothing else to issue) before the first exp2. The maximum is
      // exact, so the result is the same bits.
      float mp[4] = {row_max[r], row_max[r], row_max[r], row_max[r]};
#pragma unroll
      for (int c = 0; c < size<1>(s); ++c) mp[c % 4] = fmaxf(mp[c % 4], s(r, c));
      float m = fmaxf(fmaxf(mp[0], mp[1]), fmaxf(mp[2], mp[3]));
      m = quad_max(m);
      // A row with every key masked so far keeps max = -inf; exp2 then sees -inf - 0 and yields 0, never NaN.
      float m_used;
      if constexpr (!kLazy) {
        m_used = m == -INFINITY ? 0.f : m * scale_log2;
        rescale[r] = kFirst ? 1.f : fast_exp2(row_max[r] * scale_log2 - m_used);
        row_max[r] = m;
      } else {
        // The quad shares m and row_max, so all four lanes take the same decision. A first finite maximum after
        // -inf always moves (the difference is +inf); -inf against -inf is NaN and stays.
        bool const move = kFirst || (m - row_max[r]) * scale_log2 > kRescaleLog2;
        float const m_scaled = m == -INFINITY ? 0.f : m * scale_log2;
        rescale[r] = kFirst || !move ? 1.f : fast_exp2(row_max[r] * scale_log2 - m_scaled);
        moved |= !kFirst && move;
        if (move) row_max[r] = m;
        m_used = row_max[r] == -INFINITY ? 0.f : row_max[r] * scale_log2;
      }
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < size<1>(s); ++c) {
        float const p = fast_exp2(fmaf(s(r, c), scale_log2, -m_used));
        s(r, c) = p;
        sum += p;
      }
      row_sum[r] = kFirst ? sum : row_sum[r] * rescale[r] + sum;
    }
    return moved;
  }

  // Reduce the sums across the quad; returns the factor that normalizes O per row (0 for a row without any
  // visible key) and the LSE in base 2. sink2 (base 2, -inf for none) adds exp2(sink2) to the denominator:
  // with m the scaled row max and M = max(m, sink2), denominator = sum * 2^(m - M) + 2^(sink2 - M).
  __device__ __forceinline__ void finalize(float (&inv_sum)[kRows], float (&lse2)[kRows], float scale_log2,
                                           float sink2) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float const sum = quad_sum(row_sum[r]);
      float const m = sum == 0.f ? -INFINITY : row_max[r] * scale_log2;
      float const top = fmaxf(m, sink2);
      if (top == -INFINITY) {
        inv_sum[r] = 0.f;
        lse2[r] = -INFINITY;
      } else {
        float const keep = fast_exp2(m - top);
        float const denom = sum * keep + fast_exp2(sink2 - top);
        inv_sum[r] = keep / denom;
        lse2[r] = top + __log2f(denom);
      }
    }
  }
};

template <int kRows, class TensorO>
__device__ __forceinline__ void rescale_rows(TensorO& o, float const (&f)[kRows]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < size<1>(o); ++c) o(r, c) *= f[r];
}

}  // namespace frost::sm90::fwd
