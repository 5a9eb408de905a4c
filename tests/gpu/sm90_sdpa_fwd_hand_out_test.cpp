// SCHED_POLICY 4 on the sm90_sdpa_fwd engine (tiles handed to the CTAs as they come free, through a counter in the
// workspace): results against the fp64 reference (sm90_sdpa_fwd_harness.h), the ranking, the declines that name the
// knob, a missing workspace, and CUDA-graph replays that must give the same bits for the same inputs whichever CTA
// took which tile.
#include <utility>

#include "sm90_sdpa_fwd_harness.h"

namespace frost::test {
namespace {

using namespace sdpa_fwd;

graph::KnobMap hand_out_knobs(int64_t tile_m, int64_t tile_n) {
  return {{KnobType_t::TILE_M, tile_m},  {KnobType_t::TILE_N, tile_n}, {KnobType_t::STAGES, 2},
          {KnobType_t::SCHED_POLICY, 4}, {KnobType_t::PACK_GQA, 0},    {KnobType_t::TILE_CGA_M, 1}};
}

// More tiles than SMs under both causal alignments (162 and 480 tiles; the latter mostly without keys, s_q > s_kv
// bottom-right), unmasked rows with a masked last key block, every head dim, FP16 and GQA. Sizes keep the fp64 host
// reference to seconds.
TEST(Sm90SdpaFwd, HandOutMatchesTheReference) {
  REQUIRE_SM90();
  Case fp16{2, 8, 2, 700, 1000, 128, true, true, false};
  fp16.dt = DataType_t::HALF;
  Case d192{1, 6, 6, 900, 900, 192, true, false, true};
  d192.dv = 128;
  struct Handed {
    Case c;
    int64_t tile_m, tile_n;
  };
  const Handed cases[] = {
      {{2, 9, 3, 1111, 1111, 128, true, false, true}, 128, 128},
      {{1, 24, 8, 2560, 256, 128, true, true, true}, 128, 176},
      {{2, 12, 12, 500, 777, 128, false, false, false}, 128, 128},
      {fp16, 128, 128},
      {{2, 6, 2, 1000, 1000, 64, true, false, true}, 192, 128},
      {{1, 5, 5, 1200, 1200, 256, true, false, false}, 128, 80},
      {d192, 128, 112},
  };
  for (const auto& [c, tile_m, tile_n] : cases) {
    const auto knobs = hand_out_knobs(tile_m, tile_n);
    run_case(c, &knobs);
  }
}

TEST(Sm90SdpaFwd, HandOutIsRankedFirstForLongCausalRowsAndDeclinedByName) {
  REQUIRE_SM90();
  Handle h(Device::cuda(0));
  {
    Built x;  // d128 h16 b4 s4096 causal: 32 m-blocks per head
    const std::string plan = first_plan_name(x, h, {4, 16, 16, 4096, 4096, 128, true, false, true});
    EXPECT_NE(plan.find("SCHED_POLICY=4"), std::string::npos) << plan;
    int64_t bytes = 0;
    ASSERT_TRUE(x.g.get_workspace_size(bytes).is_good());
    EXPECT_EQ(bytes, 256);
  }
  {
    Built x;  // 8 m-blocks: heads grouped for L2, in waves
    const std::string plan = first_plan_name(x, h, {16, 16, 16, 1024, 1024, 128, true, false, true});
    EXPECT_NE(plan.find("SCHED_POLICY=1"), std::string::npos) << plan;
  }
  {
    Built x;  // a padding mask needs the general kernel: the global longest-first order
    Case padded{2, 4, 4, 4096, 4096, 128, true, false, true};
    padded.len_q = {4096, 3000}, padded.len_kv = {4096, 3000};
    const std::string plan = first_plan_name(x, h, padded);
    EXPECT_NE(plan.find("SCHED_POLICY=2"), std::string::npos) << plan;
  }
  auto declines = [&](const Case& c, const graph::KnobMap& knobs, const char* what) {
    expect_decline(h, c, knobs, what);
  };
  Case padded{2, 4, 4, 256, 256, 128, true, false, true};
  padded.len_q = {256, 3}, padded.len_kv = {5, 256};
  declines(padded, hand_out_knobs(128, 128), "SCHED_POLICY=4 with a padding mask");
  auto packed = hand_out_knobs(128, 128);
  packed[KnobType_t::PACK_GQA] = 1;
  declines({1, 8, 2, 256, 256, 128, true, false, true}, packed, "SCHED_POLICY=4 with PACK_GQA=1");
  auto paired = hand_out_knobs(128, 128);
  paired[KnobType_t::TILE_CGA_M] = 2;
  declines({1, 4, 4, 256, 256, 128, false, false, true}, paired, "TILE_CGA_M=2 with SCHED_POLICY=4");
}

// The hand-out needs its counter: without a workspace, execute fails with a message that names it and O stays
// untouched.
TEST(Sm90SdpaFwd, HandOutWithoutWorkspaceIsAnError) {
  REQUIRE_SM90();
  expect_workspace_error({1, 2, 2, 300, 300, 128, true, false, true}, hand_out_knobs(128, 128));
}

// The captured graph holds the memset of the counter and the kernel: replays with new inputs match the reference,
// and a replay with the inputs of the one before gives the same bits.
TEST(Sm90SdpaFwd, HandOutCudaGraphReplaysAreRightAndBitwiseRepeatable) {
  REQUIRE_SM90();
  replay_pairs_with_knobs({2, 9, 3, 1111, 1111, 128, true, true, true}, hand_out_knobs(128, 128), 400);
}

}  // namespace
}  // namespace frost::test
