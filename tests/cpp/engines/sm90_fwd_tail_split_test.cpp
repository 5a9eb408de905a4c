// The host arithmetic of sm90_sdpa_fwd's SCHED_POLICY 3 (sm90_fwd_tail_split.h): the predicted gain the engine
// ranks by, and the workspace layout the kernel and the plan must agree on.
#include "engines/sm90/sdpa_fwd/sm90_fwd_tail_split.h"

#include <gtest/gtest.h>

namespace frost::sm90::fwd {
namespace {

TEST(Sm90FwdTailSplit, GainCountsTheBusiestCtasKeyBlocks) {
  // d128 h16 b4 s4096 on 132 SMs: 15 whole waves and 68 tiles of 32 key blocks; the split gives every CTA
  // ceil(68 * 32 / 132) = 17 of them instead of 32 to the busiest ones: (32 - 17) / (16 * 32).
  EXPECT_DOUBLE_EQ(split_gain(2048, 32, 132), 15.0 / 512.0);
  // Whole waves leave no tail.
  EXPECT_EQ(split_gain(1056, 32, 132), 0.0);
  // Fewer tiles than CTAs: each tile's 256 key blocks shared by ~8 CTAs (decode-like shapes).
  EXPECT_DOUBLE_EQ(split_gain(16, 256, 132), (256.0 - 32.0) / 256.0);
  // One key block per tile cannot be shared.
  EXPECT_EQ(split_gain(16, 1, 132), 0.0);
  // d64 h32 b2 s8192 (192-row tiles): 2752 tiles, a tail of 112: under the 2 % the engine asks for.
  EXPECT_LT(split_gain(2752, 64, 132), 0.02);
}

TEST(Sm90FwdTailSplit, WorkspaceHoldsFlagsThenOneAlignedSlotPerCta) {
  EXPECT_EQ(split_flags_bytes(132), 768);
  EXPECT_EQ(split_flags_bytes(64), 256);
  EXPECT_EQ(split_slot_floats(128, 128), 128 * 136);
  EXPECT_EQ(split_workspace_bytes(132, 128, 128), 768 + 132 * 128 * 136 * 4);
  // Slots start 256-byte aligned (float4 stores of whole warps).
  EXPECT_EQ(split_flags_bytes(133) % 256, 0);
  EXPECT_EQ(split_slot_floats(192, 64) * 4 % 256, 0);
}

}  // namespace
}  // namespace frost::sm90::fwd
