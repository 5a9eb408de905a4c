// e4m3 -> bf16, fast accumulation, with the stock epilogue (D = alpha * acc): dispatch's fast path for GEMMs
// without fused epilogue work. Tile 128x256x128, cluster 2x1, same mainloop as e4m3_e4m3_bf16_f256.
#include "../sm90_gemm_dense_plain.cuh"

FROST_SM90_GEMM_PLAIN_INSTANCE(e4m3_e4m3_bf16_f256_plain, cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                               Shape<_128, _256, _128>, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                               cutlass::epilogue::TmaWarpSpecializedCooperative)
