// SCHED_POLICY 4 (the hand-out), host and device: where its final group of heads starts.
//
// The tiles are handed to the CTAs as they come free, in policy 1's order: heads in groups whose K/V stay in L2,
// each group's m-blocks from the last (longest under a causal mask) down. A group starts with its longest tiles
// while the CTAs are still busy with the previous group's shortest, so the CTAs drift apart group by group; the last
// heads therefore form one larger group, enough for kHandOutTailWaves waves of tiles, whose longest-first order
// levels the CTAs again before the end. Simulated over 360 shapes (b*h 8-256, 17-256 m-blocks, 132 CTAs): groups
// alone end up to 58 % later than one global longest-first order, with the final group at most 2.4 % later.
#pragma once
#include <algorithm>
#include <cstdint>

namespace frost::sm90::fwd {

constexpr int kHandOutTailWaves = 4;

// First (batch, head) of the final group among total_bh, for groups of heads_per_group and m_blocks tiles per head
// on a grid of ctas: enough heads for kHandOutTailWaves waves, at least one group, at most all heads.
constexpr int hand_out_last_group_bh0(int total_bh, int heads_per_group, int m_blocks, int ctas) {
  int64_t const heads = (int64_t(kHandOutTailWaves) * ctas + m_blocks - 1) / m_blocks;
  return total_bh - int(std::clamp<int64_t>(heads, std::min(heads_per_group, total_bh), total_bh));
}

}  // namespace frost::sm90::fwd
