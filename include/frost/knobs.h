// Knob types: the backend-mirrored band keeps cuDNN Frontend's integers; frost's own band starts at
// 1000. Both bands are append-only. A cuDNN backend knob that has no name here is still kept: it
// becomes kBackendKnobBand + the backend's integer, named "CUDNN_KNOB_<integer>".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace frost {

enum class KnobType_t : int32_t {
  NOT_SET = 0,
  SWIZZLE = 1,
  TILE_SIZE = 2,
  EDGE = 3,
  MULTIPLY = 4,
  SPLIT_K_BUF = 5,
  TILEK = 6,
  STAGES = 7,
  REDUCTION_MODE = 8,
  SPLIT_K_SLC = 9,
  IDX_MODE = 10,
  SPECFILT = 11,
  KERNEL_CFG = 12,
  WORKSPACE = 13,
  TILE_CGA_M = 14,
  TILE_CGA_N = 15,
  BLOCK_SIZE = 16,
  OCCUPANCY = 17,
  ARRAY_SIZE_PER_THREAD = 18,
  SPLIT_COLS = 19,
  TILE_ROWS = 20,
  TILE_COLS = 21,
  LOAD_SIZE = 22,
  CTA_COUNT = 23,
  STREAM_K = 24,
  SPLIT_P_SLC = 25,
  TILE_M = 26,
  TILE_N = 27,
  WARP_SPEC_CFG = 28,
  SWAP_AB = 29,
  INPUT_TMA_ENABLE = 30,
  OUTPUT_TMA_ENABLE = 31,
  TILE_CGA = 32,
  // frost's band
  SCHED_POLICY = 1000,
  PACK_GQA = 1001,
  SPLIT_KV = 1002,
  SPLIT_K = 1003,
  KERNEL_OVERLAP = 1004,  // 1: a plan's kernels may run at once where it can; 0: one after the other
};

// Backend knobs without a frost name: KnobType_t(kBackendKnobBand + n) for backend knob n < 1000.
inline constexpr int32_t kBackendKnobBand = 2000;

std::string_view to_string(KnobType_t);
std::optional<KnobType_t> knob_from_string(std::string_view);

// The range a knob takes: values minValue, minValue + stride, ..., maxValue.
struct Knob {
  KnobType_t type = KnobType_t::NOT_SET;
  int64_t minValue = 0;
  int64_t maxValue = 0;
  int64_t stride = 1;

  bool accepts(int64_t v) const { return v >= minValue && v <= maxValue && (stride <= 0 || (v - minValue) % stride == 0); }
};

}  // namespace frost
