#include "engines/cudnn/cudnn_knobs.h"

#include <array>
#include <utility>

namespace frost::detail {
namespace {

using K = KnobType_t;

// (backend integer, frost knob) for every backend knob that has a frontend name (cudnn_graph.h of 9.19).
// Backend knob 0 (the retired SPLIT_K) and the other retired ones have no frontend name: they stay raw.
constexpr std::array<std::pair<int32_t, K>, 30> kNamed{{
    {1, K::SWIZZLE},
    {2, K::TILE_SIZE},
    {4, K::EDGE},
    {11, K::MULTIPLY},
    {12, K::SPLIT_K_BUF},
    {13, K::TILEK},
    {14, K::STAGES},
    {15, K::REDUCTION_MODE},
    {17, K::SPLIT_K_SLC},
    {18, K::IDX_MODE},
    {23, K::SPECFILT},
    {24, K::KERNEL_CFG},
    {25, K::WORKSPACE},
    {26, K::TILE_CGA},
    {27, K::TILE_CGA_M},
    {28, K::TILE_CGA_N},
    {29, K::BLOCK_SIZE},
    {30, K::OCCUPANCY},
    {31, K::ARRAY_SIZE_PER_THREAD},
    {33, K::SPLIT_COLS},
    {34, K::TILE_ROWS},
    {35, K::TILE_COLS},
    {36, K::LOAD_SIZE},
    {37, K::CTA_COUNT},
    {38, K::STREAM_K},
    {39, K::SPLIT_P_SLC},
    {40, K::TILE_M},
    {41, K::TILE_N},
    {42, K::WARP_SPEC_CFG},
    {43, K::SWAP_AB},
}};

}  // namespace

KnobType_t knob_from_backend(int32_t backend_knob) {
  for (const auto& [b, k] : kNamed)
    if (b == backend_knob) return k;
  return static_cast<KnobType_t>(kBackendKnobBand + backend_knob);
}

std::optional<int32_t> knob_to_backend(KnobType_t knob) {
  const auto v = static_cast<int32_t>(knob);
  if (v >= kBackendKnobBand && v < kBackendKnobBand + 1000) return v - kBackendKnobBand;
  for (const auto& [b, k] : kNamed)
    if (k == knob) return b;
  return std::nullopt;
}

std::vector<NumericalNote_t> numeric_notes_from_backend(const std::vector<int32_t>& notes) {
  std::vector<NumericalNote_t> r;
  for (int32_t n : notes)
    if (n >= 0 && n <= static_cast<int32_t>(NumericalNote_t::STRICT_NAN_PROP))
      r.push_back(static_cast<NumericalNote_t>(n));
  return r;
}

std::vector<BehaviorNote_t> behavior_notes_from_backend(const std::vector<int32_t>& notes) {
  std::vector<BehaviorNote_t> r;
  for (int32_t n : notes)
    if (n >= 0 && n <= static_cast<int32_t>(BehaviorNote_t::SUPPORTS_CUDA_GRAPH_NATIVE_API))
      r.push_back(static_cast<BehaviorNote_t>(n));
  return r;
}

}  // namespace frost::detail
