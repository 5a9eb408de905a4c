// e4m3 x e4m3 -> bf16; A K-major, B K-major.
// 128x256x128 tile, cluster 2x1 (the shared operand's tile multicast to both CTAs), cooperative, FP8 fast accumulation (no periodic FP32 promotion).
// Budget: 48 KB of shared memory per pipeline stage (stages fill what the epilogue leaves of
// 227 KB); 128 FP32 accumulators per consumer thread.
#include "../sm90_gemm_dense_tma_ws.cuh"

FROST_SM90_GEMM_DENSE_INSTANCE(e4m3_e4m3_bf16_f256, cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                               Shape<_128, _256, _128>, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                               cutlass::epilogue::TmaWarpSpecializedCooperative)
