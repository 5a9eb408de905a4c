// bf16, A K-major, B N-major (torch's A @ B), with the stock epilogue (D = alpha * acc): dispatch's fast path for GEMMs
// without fused epilogue work. Tile 128x256x64, cluster 2x1, same mainloop as bf16_kn_bf16_c256.
// Stream-K scheduler: STREAM_K=1 splits the k-loops of the last waves over all CTAs (wave tails of large-k GEMMs).
#include "../sm90_gemm_dense_plain.cuh"

FROST_SM90_GEMM_PLAIN_INSTANCE(bf16_kn_bf16_c256_plain, cutlass::bfloat16_t, cutlass::layout::RowMajor, cutlass::bfloat16_t, cutlass::layout::RowMajor, cutlass::bfloat16_t,
                               Shape<_128, _256, _64>, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                               cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler)
