// TILE_CGA_M 2 on the sm90_sdpa_fwd engine (CTA pairs on adjacent m-blocks, each loading half of every K/V block
// into both CTAs): results against the fp64 reference (sm90_sdpa_fwd_harness.h), the ranking, the declines that
// name the knob, and CUDA-graph replays.
#include <utility>

#include "sm90_sdpa_fwd_harness.h"

namespace frost::test {
namespace {

using namespace sdpa_fwd;

graph::KnobMap pair_knobs(int64_t tile_n) {
  return {{KnobType_t::TILE_M, 128},     {KnobType_t::TILE_N, tile_n}, {KnobType_t::STAGES, 2},
          {KnobType_t::SCHED_POLICY, 1}, {KnobType_t::PACK_GQA, 0},    {KnobType_t::TILE_CGA_M, 2}};
}

// A masked last key block, GQA, both layouts, both d128 key-block widths, FP16 with LSE in base 2, d256 and
// d192/128, and 280 tiles (140 pairs: more than one wave of clusters).
TEST(Sm90SdpaFwd, ClusterPairsMatchTheReference) {
  REQUIRE_SM90();
  Case fp16{1, 4, 1, 250, 1111, 128, false, false, true, true};
  fp16.dt = DataType_t::HALF;
  Case d192{1, 3, 3, 256, 700, 192, false, false, true};
  d192.dv = 128;
  const std::pair<Case, int64_t> cases[] = {
      {{2, 4, 2, 256, 1000, 128, false, false, true}, 128}, {{2, 70, 70, 256, 300, 128, false, false, false}, 128},
      {{1, 6, 3, 512, 777, 128, false, false, true}, 176},  {fp16, 128},
      {{1, 5, 5, 256, 1200, 256, false, false, false}, 80}, {d192, 112},
  };
  for (const auto& [c, tile_n] : cases) {
    const auto knobs = pair_knobs(tile_n);
    run_case(c, &knobs);
  }
}

TEST(Sm90SdpaFwd, ClusterPairsAreRankedFirstForUnmaskedRowsAndDeclinedByName) {
  REQUIRE_SM90();
  Handle h(Device::cuda(0));
  {
    Built x;  // d128 h16 b4 s4096: 32 m-blocks per head
    const std::string plan = first_plan_name(x, h, {4, 16, 16, 4096, 4096, 128, false, false, true});
    EXPECT_NE(plan.find("TILE_CGA_M=2"), std::string::npos) << plan;
  }
  {
    Built x;  // an odd m-block count: single CTAs
    const std::string plan = first_plan_name(x, h, {1, 16, 16, 300, 4096, 128, false, false, true});
    EXPECT_NE(plan.find("TILE_CGA_M=1"), std::string::npos) << plan;
  }
  auto declines = [&](const Case& c, const graph::KnobMap& knobs, const char* what) {
    expect_decline(h, c, knobs, what);
  };
  declines({1, 4, 4, 256, 256, 128, true, false, true}, pair_knobs(128), "TILE_CGA_M=2 with a causal mask");
  declines({1, 4, 4, 300, 300, 128, false, false, true}, pair_knobs(128), "TILE_CGA_M=2 with 3 m-blocks");
  Case padded{2, 4, 4, 256, 256, 128, false, false, true};
  padded.len_q = {256, 3}, padded.len_kv = {5, 256};
  declines(padded, pair_knobs(128), "TILE_CGA_M=2 with a padding mask");
  auto packed = pair_knobs(128);
  packed[KnobType_t::PACK_GQA] = 1;
  declines({1, 8, 2, 256, 256, 128, false, false, true}, packed, "TILE_CGA_M=2 with PACK_GQA=1");
  auto split = pair_knobs(128);
  split[KnobType_t::SCHED_POLICY] = 3;
  declines({1, 4, 4, 256, 256, 128, false, false, true}, split, "TILE_CGA_M=2 with SCHED_POLICY=3");
  graph::KnobMap d64 = pair_knobs(128);
  d64[KnobType_t::TILE_M] = 192;
  declines({1, 4, 4, 384, 384, 64, false, false, true}, d64, "TILE_CGA_M=2 with d_qk < 128");
}

// Replays with new inputs match the reference; a replay with the inputs of the one before gives the same bits.
TEST(Sm90SdpaFwd, ClusterPairsCudaGraphReplaysAreRightAndBitwiseRepeatable) {
  REQUIRE_SM90();
  replay_pairs_with_knobs({2, 9, 3, 512, 1111, 128, false, false, true}, pair_knobs(128), 300);
}

}  // namespace
}  // namespace frost::test
