// e4m3 -> bf16, FP32 promotion, with the stock epilogue (D = alpha * descale_a * descale_b * acc): dispatch's fast
// path for GEMMs without fused epilogue work. Tile 128x128x128, cluster 2x1, cooperative, with the promotion adds
// overlapped with the next k-tile's wgmmas (sm90_gemm_fp8_overlap.cuh): 3 x 64 FP32 registers per consumer thread.
// Stream-K scheduler: a tail wave less than half full is spread over all CTAs (split_k 1: data-parallel only).
#include "../sm90_gemm_dense_plain.cuh"

FROST_SM90_GEMM_PLAIN_INSTANCE(e4m3_e4m3_bf16_c128_plain, cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                               Shape<_128, _128, _128>, Shape<_2, _1, _1>, frost::sm90::gemm_detail::Fp8OverlappedCooperative,
                               cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler)
