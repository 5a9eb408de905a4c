// bf16, A K-major, B N-major (x @ W with W [k, n]), D = act(alpha * acc + bias[n]) (sm90_gemm_bias_act.cuh).
// 128x128x64 tile, cluster 2x1, ping-pong: each consumer warpgroup's epilogue runs under the other's mainloop.
#include "../sm90_gemm_bias_act.cuh"

FROST_SM90_GEMM_BIAS_ACT_INSTANCE(bf16_kn_bf16_p128_bias_act, cutlass::bfloat16_t, cutlass::layout::RowMajor, cutlass::bfloat16_t,
                                  cutlass::layout::RowMajor, cutlass::bfloat16_t, Shape<_128, _128, _64>, Shape<_2, _1, _1>,
                                  cutlass::gemm::KernelTmaWarpSpecializedPingpong, cutlass::epilogue::TmaWarpSpecialized)
