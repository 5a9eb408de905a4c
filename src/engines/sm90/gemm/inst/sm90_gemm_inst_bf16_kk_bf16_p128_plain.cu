// bf16, A K-major, B K-major (a W[n][k] weight), with the stock epilogue (D = alpha * acc). 128x128x64 tile,
// cluster 2x1, ping-pong: each consumer warpgroup owns a tile and its epilogue runs under the other's mainloop.
#include "../sm90_gemm_dense_plain.cuh"

FROST_SM90_GEMM_PLAIN_INSTANCE(bf16_kk_bf16_p128_plain, cutlass::bfloat16_t, cutlass::layout::RowMajor, cutlass::bfloat16_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                               Shape<_128, _128, _64>, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                               cutlass::epilogue::TmaWarpSpecialized)
