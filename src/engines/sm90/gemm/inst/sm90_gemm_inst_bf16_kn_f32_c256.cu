// bf16 x bf16 -> fp32; A K-major, B N-major.
// 128x256x64 tile, cluster 2x1 (the shared operand's tile multicast to both CTAs), cooperative (two consumer warpgroups split the tile's rows).
// Budget: 48 KB of shared memory per pipeline stage (stages fill what the epilogue leaves of
// 227 KB); 128 FP32 accumulators per consumer thread.
#include "../sm90_gemm_dense_tma_ws.cuh"

FROST_SM90_GEMM_DENSE_INSTANCE(bf16_kn_f32_c256, cutlass::bfloat16_t, cutlass::layout::RowMajor, cutlass::bfloat16_t, cutlass::layout::RowMajor, float,
                               Shape<_128, _256, _64>, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                               cutlass::epilogue::TmaWarpSpecializedCooperative)
