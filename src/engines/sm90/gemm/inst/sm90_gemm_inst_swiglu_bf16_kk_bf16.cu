// Fused SwiGLU gate/up GEMM, bf16 -> bf16, A [m][k] row-major, W [k][2f] N-major or K-major
// (W^T stored as [2f][k], nn.Linear's layout). 128x256x64 cooperative tiles (= 128 outputs of H
// per tile row), cluster 2x1; no epilogue shared memory, so all of it goes to mainloop stages. Selected by
// TILE_N=256 (the ping-pong 128x128 kernel ranks first).
#include "../sm90_gemm_swiglu_epilogue.cuh"

FROST_SM90_GEMM_SWIGLU_INSTANCE(swiglu_bf16_kk_bf16, cutlass::bfloat16_t, cutlass::layout::RowMajor,
                                cutlass::bfloat16_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                                Shape<_128, _256, _64>, Shape<_2, _1, _1>,
                                cutlass::gemm::KernelTmaWarpSpecializedCooperative)
