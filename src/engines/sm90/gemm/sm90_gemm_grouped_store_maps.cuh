// Grouped (MoE) epilogue whose D tensor maps, one per group, are written before the GEMM kernel runs.
//
// CUTLASS's ptr-array epilogue keeps one D tensor map per consumer warpgroup and rewrites it whenever the
// warpgroup's next tile belongs to another group: warp 0 reads the group's pointer, shape and stride from
// global memory, waits until its last TMA stores have read shared memory, patches the map and copies it
// out with a release fence, while the other three warps wait at the next tile's first wgmma. With many
// experts nearly every tile of a CTA changes group. frost's setup kernel (sm90_gemm_grouped_ptr_array.cuh)
// instead writes every group's map into the epilogue's workspace through write_group_map; a group change
// then only selects its map and acquires it (the acquire orders the tensor-map proxy after the setup
// kernel's generic writes).
//
// Workspace: the base's fusion workspace, then one map per group (the base keeps one per SM and warpgroup).
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_epilogue.hpp"

namespace frost::sm90::gemm_detail {

template <class Base>
class GroupStoreMapEpilogue : public Base {
 public:
  using Params = typename Base::Params;
  using Arguments = typename Base::Arguments;
  using TensorStorage = typename Base::TensorStorage;
  using TensorMapStorage = typename Base::TensorMapStorage;
  using ElementD = typename Base::ElementD;
  using InternalStrideD = typename Base::InternalStrideD;

  CUTLASS_DEVICE GroupStoreMapEpilogue(Params const& params, TensorStorage& shared_tensors)
      : Base(params, shared_tensors), group_maps_(params.tensormaps) {}

  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const& problem_shape, Arguments const& args, int /*sm_count*/) {
    // With no SMs the base counts only its fusion workspace, rounded to where it places the maps.
    return Base::get_workspace_size(problem_shape, args, 0) +
           static_cast<size_t>(problem_shape.groups()) * sizeof(cute::TmaDescriptor);
  }

  // Group g's D map: the host-built template with g's address, rows and stride. One whole warp calls this;
  // slot is a 128-byte aligned shared-memory staging area of that warp.
  CUTLASS_DEVICE static void write_group_map(Params const& params, int32_t group, ElementD* ptr_d, int32_t rows,
                                             int32_t n, InternalStrideD stride_d, cute::TmaDescriptor& slot) {
    using namespace cute;
    if (elect_one_sync()) {
      auto const* tmpl = reinterpret_cast<uint4 const*>(params.tma_store_d.get_tma_descriptor());
      auto* dst = reinterpret_cast<uint4*>(&slot);
      for (int i = 0; i < int(sizeof(TmaDescriptor) / sizeof(uint4)); ++i) dst[i] = tmpl[i];
      tma_descriptor_replace_addr_in_shared_mem(slot, ptr_d);
      cute::array<uint32_t, 5> shape = {1, 1, 1, 1, 1};
      cute::array<uint64_t, 5> stride = {0, 0, 0, 0, 0};
      Tensor tensor_d =
          make_tensor(static_cast<ElementD const*>(nullptr), make_layout(make_shape(rows, n, Int<1>{}), stride_d));
      cute::detail::fill_tma_gmem_shape_stride(params.tma_store_d, tensor_d, shape, stride);
      for (uint64_t& s : stride) s = s * cute::sizeof_bits_v<ElementD> / 8;
      tma_descriptor_replace_dims_strides_in_shared_mem(slot, shape, stride);
    }
    __syncwarp();
    tma_descriptor_cp_fence_release(params.tensormaps + group, slot);
  }

  CUTLASS_DEVICE auto store_init(Params const&, TensorMapStorage&, int32_t, int32_t, int32_t) {
    return cute::make_tuple(static_cast<cute::TmaDescriptor const*>(group_maps_));
  }

  template <bool IsLoad, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage& shared_tensormaps, Params const& params,
                                                cute::TmaDescriptor const* tensormap, ProblemShapeMNKL shape,
                                                int32_t next_batch, int32_t warp_group_idx) {
    if constexpr (IsLoad)
      Base::template tensormaps_perform_update<IsLoad>(shared_tensormaps, params, tensormap, shape, next_batch,
                                                       warp_group_idx);
    else
      group_ = next_batch;
  }

  template <bool IsLoad>
  CUTLASS_DEVICE void tensormaps_cp_fence_release(TensorMapStorage& shared_tensormaps,
                                                  cute::TmaDescriptor const* tensormap,
                                                  int32_t const warp_group_idx = 0) {
    if constexpr (IsLoad)
      Base::template tensormaps_cp_fence_release<IsLoad>(shared_tensormaps, tensormap, warp_group_idx);
  }

  template <bool IsLoad>
  CUTLASS_DEVICE void tensormaps_fence_acquire(cute::TmaDescriptor const* tensormap) {
    if constexpr (IsLoad)
      Base::template tensormaps_fence_acquire<IsLoad>(tensormap);
    else
      cute::tma_descriptor_fence_acquire(group_maps_ + group_);
  }

  // Only warp 0 of a warpgroup issues the stores, and only its threads follow the group (perform_update).
  template <class LoadPipeline, class LoadState, class StorePipeline, class StoreState, class ProblemShapeMNKL,
            class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout, class TiledMma, class TensorMapD>
  CUTLASS_DEVICE auto store(LoadPipeline load_pipeline, LoadState load_state, StorePipeline store_pipeline,
                            StoreState store_state, ProblemShapeMNKL problem_shape, TileShapeMNK tile_shape,
                            TileCoordMNKL tile_coord, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, TensorStorage& shared_tensors,
                            TensorMapD const& /*store_init's map, unused*/, int subtile_idx = -1) {
    return Base::store(load_pipeline, load_state, store_pipeline, store_state, problem_shape, tile_shape, tile_coord,
                       accumulators, tiled_mma, thread_idx, shared_tensors, group_maps_ + group_, subtile_idx);
  }

 private:
  cute::TmaDescriptor const* group_maps_;
  int32_t group_ = 0;
};

}  // namespace frost::sm90::gemm_detail
