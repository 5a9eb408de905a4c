// Fused SwiGLU gate/up GEMM as sm90_gemm_inst_swiglu_bf16_kk_bf16.cu, on 128x128x64 ping-pong tiles (64
// outputs of H per tile row): each consumer warpgroup owns a tile, and its SwiGLU epilogue (exponentials, H staged
// in shared memory) runs under the other warpgroup's mainloop instead of stopping the tensor cores. Cluster 2x1.
#include "../sm90_gemm_swiglu_epilogue.cuh"

FROST_SM90_GEMM_SWIGLU_INSTANCE(swiglu_bf16_kk_bf16_p128, cutlass::bfloat16_t, cutlass::layout::RowMajor,
                                cutlass::bfloat16_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                                Shape<_128, _128, _64>, Shape<_2, _1, _1>,
                                cutlass::gemm::KernelTmaWarpSpecializedPingpong)
