// e4m3 -> bf16, FP32 promotion, stock epilogue: the 128x128x128 overlapped-promotion kernel of
// e4m3_e4m3_bf16_c128_plain with a 2x2 cluster, A multicast along N and B along M. At FP8 rates a 128x128 tile
// reads 32 KB from L2 per 512 tensor-core clocks; the 2x2 cluster halves that (the 2x1 cluster saves a quarter).
// Selected by TILE_CGA_N=2.
#include "../sm90_gemm_dense_plain.cuh"

FROST_SM90_GEMM_PLAIN_INSTANCE(e4m3_e4m3_bf16_c128x2_plain, cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                               Shape<_128, _128, _128>, Shape<_2, _2, _1>, frost::sm90::gemm_detail::Fp8OverlappedCooperative,
                               cutlass::epilogue::TmaWarpSpecializedCooperative)
