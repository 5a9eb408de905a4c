// Grouped (MoE) GEMM: CUTLASS's sm90 ptr-array persistent kernel fed by a tiny device kernel.
//
// The expert token offsets live in device memory and are never read on the host (a host read
// would synchronize and break CUDA-graph capture). frost_grouped_setup_kernel turns them into the
// per-group problem sizes, operand pointers and strides that the ptr-array kernel reads; the
// persistent scheduler then walks all groups' tiles with one CTA per SM. Groups with zero tokens
// contribute zero tiles. The A and B tensor maps are rewritten on the device per group; the D maps, one
// per group, are written by the setup kernel (sm90_gemm_grouped_store_maps.cuh says why).
//
// Workspace: [frost arrays, 256-byte aligned][CUTLASS workspace (per-SM A/B maps, per-group D maps)].
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "sm90_gemm.h"
#include "sm90_gemm_device_facts.h"
#include "sm90_gemm_fp8_overlap.cuh"
#include "sm90_gemm_grouped_store_maps.cuh"
#include "sm90_gemm_scaled_acc.cuh"

namespace frost::sm90::gemm_detail {

using namespace cute;

template <class ElementA_, class ElementB_, class LayoutB_, class ElementD_, class TileShape_, class ClusterShape_,
          class MainloopSchedule_, class EpilogueSchedule_>
struct GroupedGemm {
  using ElementA = ElementA_;
  using ElementB = ElementB_;
  using ElementD = ElementD_;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutD = cutlass::layout::RowMajor;
  using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
  static constexpr int kAlignA = 128 / cutlass::sizeof_bits_v<ElementA>;
  static constexpr int kAlignB = 128 / cutlass::sizeof_bits_v<ElementB>;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits_v<ElementD>;

  // D = alpha * descale_a * descale_b * acc; C is void so no source is ever loaded. (CUTLASS's ptr-array
  // linear combination would run an epilogue load warp for its scalars, which the consumers then wait on.)
  using Fusion = ScaledAccFusion<ElementD>;

  using BuiltEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape_, ClusterShape_,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD, ElementD, LayoutD*,
      kAlignD, EpilogueSchedule_, Fusion>::CollectiveOp;
  using CollectiveEpilogue = GroupStoreMapEpilogue<BuiltEpilogue>;

  using BuiltMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA*, kAlignA, ElementB, LayoutB_*, kAlignB,
      float, TileShape_, ClusterShape_,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename BuilderSchedule<MainloopSchedule_>::type>::CollectiveOp;
  using CollectiveMainloop = cute::conditional_t<BuilderSchedule<MainloopSchedule_>::kOverlappedFp8,
                                                 Fp8OverlappedPromotionMma<BuiltMainloop>, BuiltMainloop>;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;
};

// Carves the frost arrays out of the workspace; the same layout on host (sizes) and device.
template <class G>
struct GroupedArrays {
  typename G::Shape3* shapes;
  const typename G::ElementA** ptr_a;
  const typename G::ElementB** ptr_b;
  typename G::ElementD** ptr_d;
  typename G::StrideA* stride_a;
  typename G::StrideB* stride_b;
  typename G::StrideD* stride_d;
  size_t bytes;

  static size_t align(size_t v) { return (v + 255) / 256 * 256; }
  GroupedArrays(void* base, int64_t groups) {
    char* p = static_cast<char*>(base);
    size_t off = 0;
    auto take = [&](size_t each) { char* r = p ? p + off : nullptr; off += align(each * groups); return r; };
    shapes = reinterpret_cast<typename G::Shape3*>(take(sizeof(typename G::Shape3)));
    ptr_a = reinterpret_cast<const typename G::ElementA**>(take(sizeof(void*)));
    ptr_b = reinterpret_cast<const typename G::ElementB**>(take(sizeof(void*)));
    ptr_d = reinterpret_cast<typename G::ElementD**>(take(sizeof(void*)));
    stride_a = reinterpret_cast<typename G::StrideA*>(take(sizeof(typename G::StrideA)));
    stride_b = reinterpret_cast<typename G::StrideB*>(take(sizeof(typename G::StrideB)));
    stride_d = reinterpret_cast<typename G::StrideD*>(take(sizeof(typename G::StrideD)));
    bytes = off;
  }
};

template <class Stride>
CUTLASS_HOST_DEVICE Stride grouped_stride(int64_t s0, int64_t s1) {
  Stride st{};
  if constexpr (!cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<0>(st))>>) cute::get<0>(st) = s0;
  if constexpr (!cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<1>(st))>>) cute::get<1>(st) = s1;
  return st;
}

constexpr int kSetupWarps = 8;

// One warp per group: lane 0 writes the group's problem size, pointers and strides, then the warp writes
// its D tensor map (epi: the epilogue's parameters, built by the adapter's initialize()).
template <class G>
__global__ void __launch_bounds__(kSetupWarps * 32)
    frost_grouped_setup_kernel(GroupedArrays<G> w, typename G::CollectiveEpilogue::Params epi, const int32_t* offsets,
                               int groups, int n, int k, const typename G::ElementA* a, const typename G::ElementB* b,
                               typename G::ElementD* d, int64_t a_stride_m, int64_t b_stride_group, int64_t b_stride_k,
                               int64_t b_stride_n, int64_t d_stride_m) {
  __shared__ alignas(128) cute::TmaDescriptor map_slots[kSetupWarps];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int g = static_cast<int>(blockIdx.x) * kSetupWarps + warp;
  if (g < groups) {
    const int64_t row0 = offsets[g];
    const int rows = max(offsets[g + 1] - offsets[g], 0);
    typename G::ElementD* d_group = d + row0 * d_stride_m;
    const auto stride_d = grouped_stride<typename G::StrideD>(d_stride_m, 1);
    if (threadIdx.x % 32 == 0) {
      w.shapes[g] = typename G::Shape3{rows, n, k};
      w.ptr_a[g] = a + row0 * a_stride_m;
      w.ptr_b[g] = b + g * b_stride_group;
      w.ptr_d[g] = d_group;
      w.stride_a[g] = grouped_stride<typename G::StrideA>(a_stride_m, 1);
      // CUTLASS's B is (N, K): its mode 0 is frost's n, mode 1 frost's k.
      w.stride_b[g] = grouped_stride<typename G::StrideB>(b_stride_n, b_stride_k);
      w.stride_d[g] = stride_d;
    }
    // A group without rows has no tiles, so nothing reads its map.
    if (rows > 0) G::CollectiveEpilogue::write_group_map(epi, g, d_group, rows, n, stride_d, map_slots[warp]);
  }
}

template <class G>
typename G::Kernel::Arguments make_grouped_args(const GroupedGemmParams& p, const GemmConfig& cfg,
                                                GroupedArrays<G> const& w) {
  typename G::Kernel::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  // No host problem shapes: the grid is one CTA per SM and the scheduler reads the device shapes.
  args.problem_shape = {static_cast<int>(p.groups), w.shapes, nullptr};
  args.mainloop.ptr_A = w.ptr_a;
  args.mainloop.dA = w.stride_a;
  args.mainloop.ptr_B = w.ptr_b;
  args.mainloop.dB = w.stride_b;
  set_scaled_acc_args(args.epilogue.thread, p.alpha, p.descale_a, p.descale_b);
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = nullptr;
  args.epilogue.ptr_D = w.ptr_d;
  args.epilogue.dD = w.stride_d;
  args.hw_info.device_id = current_device();
  args.hw_info.sm_count = sm_count(args.hw_info.device_id);
  args.scheduler.max_swizzle_size = cfg.swizzle > 0 ? cfg.swizzle : 1;
  return args;
}

template <class G>
size_t grouped_workspace(const GroupedGemmParams& p, const GemmConfig& cfg) {
  GroupedArrays<G> w(nullptr, p.groups);
  auto args = make_grouped_args<G>(p, cfg, w);
  return w.bytes + G::Adapter::get_workspace_size(args);
}

template <class G>
cudaError_t grouped_run(const GroupedGemmParams& p, const GemmConfig& cfg, void* workspace, cudaStream_t stream) {
  GroupedArrays<G> w(workspace, p.groups);
  auto args = make_grouped_args<G>(p, cfg, w);
  typename G::Adapter op;
  // initialize() builds the kernel parameters, whose D map template the setup kernel copies; the GEMM starts
  // at run().
  cutlass::Status st = op.initialize(args, static_cast<char*>(workspace) + w.bytes, stream);
  if (st != cutlass::Status::kSuccess) return cudaErrorNotSupported;
  const int blocks = static_cast<int>((p.groups + kSetupWarps - 1) / kSetupWarps);
  frost_grouped_setup_kernel<G><<<blocks, kSetupWarps * 32, 0, stream>>>(
      w, op.params().epilogue, p.offsets, static_cast<int>(p.groups), static_cast<int>(p.n), static_cast<int>(p.k),
      static_cast<const typename G::ElementA*>(p.a), static_cast<const typename G::ElementB*>(p.b),
      static_cast<typename G::ElementD*>(p.d), p.a_stride_m, p.b_stride_group, p.b_stride_k, p.b_stride_n, p.d_stride_m);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  st = op.run(stream);
  if (st != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
  return cudaGetLastError();
}

}  // namespace frost::sm90::gemm_detail

#define FROST_SM90_GEMM_GROUPED_INSTANCE(NAME, ...)                                                        \
  namespace frost::sm90::gemm_detail {                                                                     \
  using NAME##_t = GroupedGemm<__VA_ARGS__>;                                                              \
  size_t NAME##_workspace(const GroupedGemmParams& p, const GemmConfig& c) {                               \
    return grouped_workspace<NAME##_t>(p, c);                                                              \
  }                                                                                                        \
  cudaError_t NAME##_run(const GroupedGemmParams& p, const GemmConfig& c, void* w, cudaStream_t s) {      \
    return grouped_run<NAME##_t>(p, c, w, s);                                                              \
  }                                                                                                        \
  }
