// The host side of sm90_sdpa_fwd's tile order (sm90_fwd_tile_order.h) and of SCHED_POLICY 4's final group
// (sm90_fwd_hand_out.h): every tile is taken once, groups come in order with their m-blocks longest first, and the
// final group spans enough heads for four waves of tiles.
#include "engines/sm90/sdpa_fwd/sm90_fwd_hand_out.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "engines/sm90/sdpa_fwd/sm90_fwd_tile_order.h"

namespace frost::sm90::fwd {
namespace {

template <int kCluster>
struct Order {
  static constexpr int kClusterM = kCluster;
  int num_m_blocks, heads_per_group, last_group_bh0, h_q, batch;
};

// How many different tiles a walk holds.
size_t distinct(std::vector<std::pair<int, int>> const& tiles) {
  return std::set<std::pair<int, int>>(tiles.begin(), tiles.end()).size();
}

// The (batch * h_q + head, m_block) of every tile, in order.
template <int kCluster>
std::vector<std::pair<int, int>> walk(Order<kCluster> const& o) {
  std::vector<std::pair<int, int>> tiles;
  for (int t = 0; t < o.num_m_blocks * o.h_q * o.batch; ++t) {
    TileCoord const c = decode_tile(t, o);
    EXPECT_GE(c.m_block, 0);
    EXPECT_LT(c.m_block, o.num_m_blocks);
    EXPECT_GE(c.head, 0);
    EXPECT_LT(c.head, o.h_q);
    EXPECT_GE(c.batch, 0);
    EXPECT_LT(c.batch, o.batch);
    tiles.emplace_back(c.batch * o.h_q + c.head, c.m_block);
  }
  return tiles;
}

TEST(Sm90FwdTileOrder, EveryTileOnceInGroupsLongestFirst) {
  // b2 h7: groups of 3 heads (the third short: heads 6-7), the final group from head 8 on, 5 m-blocks.
  Order<1> const o{5, 3, 8, 7, 2};
  auto const tiles = walk(o);
  EXPECT_EQ(distinct(tiles), tiles.size());
  auto group_of = [](int bh) { return bh < 8 ? bh / 3 : 3; };
  for (size_t i = 1; i < tiles.size(); ++i) {
    auto const [bh0, m0] = tiles[i - 1];
    auto const [bh1, m1] = tiles[i];
    ASSERT_LE(group_of(bh0), group_of(bh1)) << i;
    if (group_of(bh0) == group_of(bh1)) {
      EXPECT_TRUE(m1 < m0 || (m1 == m0 && bh1 == bh0 + 1)) << i;
    }
  }
  // The first tiles: group 0's last m-block, head by head; the final group starts after 8 heads' tiles.
  EXPECT_EQ(tiles[0], std::make_pair(0, 4));
  EXPECT_EQ(tiles[2], std::make_pair(2, 4));
  EXPECT_EQ(tiles[3], std::make_pair(0, 3));
  EXPECT_EQ(tiles[6 * 5], std::make_pair(6, 4));
  EXPECT_EQ(tiles[8 * 5], std::make_pair(8, 4));
  EXPECT_EQ(tiles.back(), std::make_pair(13, 0));
}

TEST(Sm90FwdTileOrder, WithoutFinalGroupAndInClusterUnits) {
  // The static policies pass b * h_q as the final group's start: plain groups, the last one short.
  Order<1> const plain{4, 4, 10, 5, 2};
  auto const a = walk(plain);
  EXPECT_EQ(distinct(a), a.size());
  EXPECT_EQ(a[4 * 4], std::make_pair(4, 3));  // the second group
  EXPECT_EQ(a[8 * 4], std::make_pair(8, 3));  // the short third one
  // CTA pairs take two adjacent m-blocks per unit, the even one first.
  Order<2> const pairs{6, 2, 4, 4, 1};
  auto const b = walk(pairs);
  EXPECT_EQ(distinct(b), b.size());
  EXPECT_EQ(b[0], std::make_pair(0, 4));
  EXPECT_EQ(b[1], std::make_pair(0, 5));
  EXPECT_EQ(b[2], std::make_pair(1, 4));
}

TEST(Sm90FwdHandOut, FinalGroupSpansFourWavesOfTiles) {
  // d128 h16 b4 s4096 causal on 132 SMs: 64 heads of 32 m-blocks in groups of 4; ceil(4 * 132 / 32) = 17 heads.
  EXPECT_EQ(hand_out_last_group_bh0(64, 4, 32, 132), 47);
  // d256 h8 b2 s8192: 16 heads of 64 m-blocks, one per group; ceil(528 / 64) = 9.
  EXPECT_EQ(hand_out_last_group_bh0(16, 1, 64, 132), 7);
  // Too few heads for four waves: all of them form the final group.
  EXPECT_EQ(hand_out_last_group_bh0(8, 2, 20, 132), 0);
  // Long rows: at least one whole group.
  EXPECT_EQ(hand_out_last_group_bh0(64, 8, 1024, 132), 56);
  EXPECT_EQ(hand_out_last_group_bh0(3, 8, 1024, 132), 0);
}

}  // namespace
}  // namespace frost::sm90::fwd
