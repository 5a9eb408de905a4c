// Dense 16-bit GEMM with a short epilogue, D = cvt(act(alpha * acc + bias[n])): the path dispatch takes for the
// commonest fused epilogue (a linear layer's bias and activation) when nothing else is asked for (no residual,
// clamp, descales, output scale or amax) and the bias rows can be read 16 bytes at a time.
//
// Why not the full tree (sm90_gemm_epilogue_evt.cuh): it measured 0.58x torch's addmm + gelu at 8192^3 (NOTES.md,
// run 3) while the stock epilogue on the same mainloop runs at cuBLAS speed. This tree has three leaves (alpha,
// the accumulator, the bias row with 16-byte alignment) and one compute node, no source matrix (void C, so no C
// shared memory and no producer loads), no amax reduction and no scalar pointers; the activation stays a runtime
// choice, a warp-uniform branch per element.
#pragma once

#include "sm90_gemm_dense_plain.cuh"

namespace frost::sm90::gemm_detail {

// act(alpha * acc + bias), with the activations of the full tree (apply_act, FrostActCoef).
template <class T>
struct FrostBiasActFn {
  using Arguments = FrostActCoef;
};

template <int N>
struct FrostBiasActFn<cutlass::Array<float, N>> {
  using Arguments = FrostActCoef;
  CUTLASS_DEVICE cutlass::Array<float, N> operator()(cutlass::Array<float, N> const& alpha,
                                                     cutlass::Array<float, N> const& acc,
                                                     cutlass::Array<float, N> const& bias, Arguments const& act) const {
    cutlass::Array<float, N> z;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) z[i] = apply_act(act, fmaf(alpha[i], acc[i], bias[i]));
    return z;
  }
};

// Bias rows are read as 16-byte vectors: dispatch sends only 16-byte aligned biases with n a multiple of 8 here.
template <class TileShape, class ElementD>
using BiasActFusion = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<FrostBiasActFn, ElementD, float, cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90ScalarBroadcast<float>, cutlass::epilogue::fusion::Sm90AccFetch,
    cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, ElementD, float, cute::Stride<cute::_0, cute::_1, cute::_0>,
                                                 128 / cutlass::sizeof_bits_v<ElementD>>>;

template <class ElementA_, class LayoutA_, class ElementB_, class LayoutB_, class ElementD_, class TileShape_,
          class ClusterShape_, class MainloopSchedule_, class EpilogueSchedule_>
struct DenseBiasActGemm {
  using ElementA = ElementA_;
  using ElementB = ElementB_;
  using ElementD = ElementD_;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignA = 128 / cutlass::sizeof_bits_v<ElementA>;
  static constexpr int kAlignB = 128 / cutlass::sizeof_bits_v<ElementB>;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits_v<ElementD>;
  using Fusion = BiasActFusion<TileShape_, ElementD>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape_, ClusterShape_,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignD, ElementD, LayoutD,
      kAlignD, EpilogueSchedule_, Fusion>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA_, kAlignA, ElementB, LayoutB_, kAlignB,
      float, TileShape_, ClusterShape_,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule_>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <class G>
typename G::Kernel::Arguments make_bias_act_args(const GemmParams& p, const GemmConfig& cfg) {
  using Kernel = typename G::Kernel;
  typename Kernel::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), static_cast<int>(p.batch)};
  args.mainloop.ptr_A = static_cast<const typename G::ElementA*>(p.a);
  args.mainloop.dA = make_stride3<typename Kernel::StrideA>(p.a_stride_m, p.a_stride_k, p.a_stride_batch);
  args.mainloop.ptr_B = static_cast<const typename G::ElementB*>(p.b);
  args.mainloop.dB = make_stride3<typename Kernel::StrideB>(p.b_stride_n, p.b_stride_k, p.b_stride_batch);
  // Sm90EVT's arguments: the children in order (alpha, accumulator, bias), then the node.
  auto& t = args.epilogue.thread;
  t.op_0.scalars[0] = p.alpha;
  t.op_2.ptr_row = static_cast<const typename G::ElementD*>(p.bias);
  t.op_2.null_default = typename G::ElementD(0);
  t.op_3 = act_coef(int(p.act));
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = make_stride3<typename Kernel::StrideC>(p.d_stride_m, p.d_stride_n, p.d_stride_batch);
  args.epilogue.ptr_D = static_cast<typename G::ElementD*>(p.d);
  args.epilogue.dD = make_stride3<typename Kernel::StrideD>(p.d_stride_m, p.d_stride_n, p.d_stride_batch);
  args.hw_info.device_id = current_device();
  args.hw_info.sm_count = sm_count(args.hw_info.device_id);
  args.scheduler.max_swizzle_size = cfg.swizzle > 0 ? cfg.swizzle : 1;
  return args;
}

template <class G>
cudaError_t bias_act_run(const GemmParams& p, const GemmConfig& cfg, void* workspace, cudaStream_t stream) {
  auto args = make_bias_act_args<G>(p, cfg);
  typename G::Adapter op;
  cutlass::Status st = op.initialize(args, workspace, stream);
  if (st != cutlass::Status::kSuccess) return status_to_cuda(st);
  st = op.run(stream);
  if (st != cutlass::Status::kSuccess) return status_to_cuda(st);
  return cudaGetLastError();
}

}  // namespace frost::sm90::gemm_detail

#define FROST_SM90_GEMM_BIAS_ACT_INSTANCE(NAME, ...)                                                        \
  namespace frost::sm90::gemm_detail {                                                                     \
  using NAME##_t = DenseBiasActGemm<__VA_ARGS__>;                                                          \
  size_t NAME##_workspace(const GemmParams& p, const GemmConfig& c) {                                      \
    return NAME##_t::Adapter::get_workspace_size(make_bias_act_args<NAME##_t>(p, c));                      \
  }                                                                                                        \
  cudaError_t NAME##_run(const GemmParams& p, const GemmConfig& c, void* w, cudaStream_t s) {             \
    return bias_act_run<NAME##_t>(p, c, w, s);                                                             \
  }                                                                                                        \
  }
