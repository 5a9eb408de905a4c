// SCHED_POLICY 3 on the sm90_sdpa_fwd engine (the last wave's tiles split along their key blocks, merged through
// the workspace): results against the fp64 reference (sm90_sdpa_fwd_harness.h), the ranking, the declines that
// name the knob, a missing workspace, and CUDA-graph replays that must give the same bits for the same inputs.
#include <utility>

#include "engines/sm90/sdpa_fwd/sm90_fwd_tail_split.h"
#include "sm90_sdpa_fwd_harness.h"

namespace frost::test {
namespace {

using namespace sdpa_fwd;

graph::KnobMap split_knobs(int64_t tile_m, int64_t tile_n, int64_t pack_gqa = 0) {
  return {{KnobType_t::TILE_M, tile_m},
          {KnobType_t::TILE_N, tile_n},
          {KnobType_t::STAGES, 2},
          {KnobType_t::SCHED_POLICY, 3},
          {KnobType_t::PACK_GQA, pack_gqa}};
}

// A case and the tile it runs on.
struct Split {
  Case c;
  int64_t tile_m, tile_n;
};

int sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
  return sms;
}

// Fewer tiles than SMs (every tile cut, ranges of a few key blocks, owners merging a dozen pieces), whole waves
// plus a tail (280 tiles on 132 SMs), a masked last key block in the last piece, more SMs than key blocks (empty
// ranges), 128-row and 192-row tiles, every head dim. Sizes keep the fp64 host reference to seconds.
TEST(Sm90SdpaFwd, TailSplitMatchesTheReference) {
  REQUIRE_SM90();
  Case fp16{2, 8, 8, 1000, 777, 64, false, false, false};
  fp16.dt = DataType_t::HALF;
  Case gqa_log2{2, 8, 2, 400, 1500, 128, false, false, true, true};
  Case d192{1, 3, 3, 500, 2000, 192, false, false, true};
  d192.dv = 128;
  const Split cases[] = {
      {{1, 2, 2, 1000, 4097, 128, false, false, true}, 128, 128},
      {{2, 70, 70, 130, 1280, 128, false, false, false}, 128, 128},
      {{1, 3, 3, 300, 8191, 128, false, false, true}, 128, 176},
      {{1, 2, 2, 200, 100, 128, false, false, true}, 128, 128},
      {{1, 4, 4, 300, 3000, 256, false, false, true}, 128, 80},
      {fp16, 192, 128},
      {gqa_log2, 128, 176},
      {d192, 128, 112},
  };
  for (const auto& sc : cases) {
    const auto knobs = split_knobs(sc.tile_m, sc.tile_n);
    run_case(sc.c, &knobs);
  }
}

// PACK_GQA tiles split like any other: decode with fewer tiles than SMs (each K/V head's tile cut into pieces),
// packed positions past s_q inside a tile, a group of 3 on 192-row tiles, MQA in FP16 with a masked last key block,
// whole waves plus a tail.
TEST(Sm90SdpaFwd, TailSplitOfPackedGqaTilesMatchesTheReference) {
  REQUIRE_SM90();
  Case mqa{1, 8, 1, 3, 999, 128, false, false, true};
  mqa.dt = DataType_t::HALF;
  Case log2{2, 16, 4, 17, 4097, 128, false, false, false, true};
  const Split cases[] = {
      {{4, 64, 8, 1, 9000, 128, false, false, true}, 128, 176},
      {log2, 128, 128},
      {{3, 6, 2, 5, 3001, 64, false, false, true}, 192, 128},
      {mqa, 128, 128},
      {{2, 8, 2, 70, 1200, 256, false, false, true}, 128, 80},
      {{5, 40, 20, 200, 700, 128, false, false, true}, 128, 128},
  };
  for (const auto& sc : cases) {
    const auto knobs = split_knobs(sc.tile_m, sc.tile_n, 1);
    run_case(sc.c, &knobs);
  }
}

TEST(Sm90SdpaFwd, TailSplitIsRankedFirstWhereItPaysAndDeclinedByName) {
  REQUIRE_SM90();
  Handle h(Device::cuda(0));
  {
    // d128 h16 b1 s16384: 2048 tiles of 94 key blocks of 176 (the split is ranked from 64 blocks on).
    Built x;
    const std::string plan = first_plan_name(x, h, {1, 16, 16, 16384, 16384, 128, false, false, true});
    const int sms = sm_count();
    ASSERT_GT(sms, 0);
    const bool pays = sm90::fwd::split_gain(2048, 94, sms) >= 0.02;
    EXPECT_EQ(plan.find("SCHED_POLICY=3") != std::string::npos, pays) << plan;
    int64_t bytes = 0;
    ASSERT_TRUE(x.g.get_workspace_size(bytes).is_good());
    EXPECT_EQ(bytes > 0, pays);
  }
  {
    // d128 h16 b4 s4096: tiles of 32 key blocks, too short for the split to pay.
    Built x;
    const std::string plan = first_plan_name(x, h, {4, 16, 16, 4096, 4096, 128, false, false, true});
    EXPECT_EQ(plan.find("SCHED_POLICY=3"), std::string::npos) << plan;
  }
  {
    // Decode d128 GQA 64/8 b8 L32768: 64 packed tiles, fewer than SMs; split, they take 256 key blocks of 128.
    Built x;
    const std::string plan = first_plan_name(x, h, {8, 64, 8, 1, 32768, 128, false, false, true});
    EXPECT_NE(plan.find("PACK_GQA=1"), std::string::npos) << plan;
    const int sms = sm_count();
    ASSERT_GT(sms, 0);
    const bool pays = sm90::fwd::split_gain(64, 256, sms) >= 0.02;
    EXPECT_EQ(plan.find("SCHED_POLICY=3") != std::string::npos, pays) << plan;
    EXPECT_EQ(plan.find("TILE_N=128") != std::string::npos, pays) << plan;
  }
  auto declines = [&](const Case& c, int64_t pack, const char* what) {
    expect_decline(h, c, split_knobs(128, 128, pack), what);
  };
  declines({1, 4, 4, 300, 300, 128, true, false, true}, 0, "SCHED_POLICY=3 with a causal mask");
  declines({1, 12, 1, 17, 300, 128, false, false, true}, 1, "PACK_GQA=1 with h_q/h_kv=12");
  Case padded{2, 4, 4, 300, 300, 128, false, false, true};
  padded.len_q = {300, 3}, padded.len_kv = {5, 300};
  declines(padded, 0, "SCHED_POLICY=3 with a padding mask");
  Case window{1, 4, 4, 300, 300, 128, false, false, true};
  window.left = 64;
  declines(window, 0, "SCHED_POLICY=3 with a left band bound");
}

// The split needs its workspace: without one, execute fails with a message that names it and O stays untouched.
TEST(Sm90SdpaFwd, TailSplitWithoutWorkspaceIsAnError) {
  REQUIRE_SM90();
  expect_workspace_error({1, 2, 2, 300, 1000, 128, false, false, true}, split_knobs(128, 128));
}

// The captured graph holds the memset of the ready flags and the kernel: replays with new inputs match the
// reference, and a replay with the inputs of the one before gives the same bits.
// Unpacked tiles (whole waves plus a tail) and packed decode tiles (fewer than SMs).
TEST(Sm90SdpaFwd, TailSplitCudaGraphReplaysAreRightAndBitwiseRepeatable) {
  REQUIRE_SM90();
  for (const auto& [c, pack] : {std::pair<Case, int64_t>{{2, 9, 3, 1111, 1111, 128, false, false, true}, 0},
                                std::pair<Case, int64_t>{{4, 32, 4, 1, 5000, 128, false, false, true}, 1}}) {
    SCOPED_TRACE(name_of(c));
    replay_pairs_with_knobs(c, split_knobs(128, 128, pack), 200);
  }
}

}  // namespace
}  // namespace frost::test
