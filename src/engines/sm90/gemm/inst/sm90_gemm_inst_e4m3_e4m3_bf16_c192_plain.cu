// e4m3 -> bf16, FP32 promotion, with the stock epilogue (D = alpha * acc). Tile 128x192x128, cluster 2x1,
// cooperative: each consumer warpgroup holds 64x192, 96 FP32 accumulators + 96 promotion temporaries per thread
// (192 of the consumers' registers; 128x256 needs 256 and spills, 128x128 leaves the tensor cores waiting on the
// promotion). Selected by TILE_N=192.
#include "../sm90_gemm_dense_plain.cuh"

FROST_SM90_GEMM_PLAIN_INSTANCE(e4m3_e4m3_bf16_c192_plain, cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                               Shape<_128, _192, _128>, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                               cutlass::epilogue::TmaWarpSpecializedCooperative)
