// The order in which the sm90 attention forward's schedulers take their tiles (host and device, so that host tests
// can walk it).
//
// Heads are taken in groups (heads_per_group, chosen on the host by the scheduling policy: K/V within ~8-24 MB of
// L2 or two heads for short rows, or all heads so the longest-first order is global); inside a group the m-blocks
// are walked from the last one down with the heads of the group innermost. Under a causal mask the last m-blocks
// see the most keys, so the longest tiles go first and the short ones fill the tail. SCHED_POLICY 4 ends with one
// larger group (sm90_fwd_hand_out.h). Tiles cover the longest sequence (s_q); a tile past its batch's length has no
// work and is left early.
#pragma once

#ifdef __CUDACC__
#define FROST_FWD_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FROST_FWD_HOST_DEVICE inline
#endif

namespace frost::sm90::fwd {

struct TileCoord {
  int m_block, head, batch;
};

// The tile-th tile of the order. Heads (batch-major: bh = batch * h_q + head) [0, last_group_bh0) go in groups of
// heads_per_group, the last of them possibly short; the heads from last_group_bh0 on form one final group
// (SCHED_POLICY 4; the other policies pass b * h_q). The m-blocks of a head are taken in units of kClusterM adjacent
// blocks (a cluster's tiles; num_m_blocks is then a multiple of kClusterM).
template <class Params>
FROST_FWD_HOST_DEVICE TileCoord decode_tile(int tile, Params const& p) {
  constexpr int kCluster = Params::kClusterM;
  int const m_units = p.num_m_blocks / kCluster;
  int r = tile / kCluster;
  int const grouped = p.last_group_bh0 * m_units;
  int bh0, gsize;
  if (r < grouped) {
    int const per_group = p.heads_per_group * m_units;
    int const group = r / per_group;
    r -= group * per_group;
    bh0 = group * p.heads_per_group;
    gsize = p.heads_per_group < p.last_group_bh0 - bh0 ? p.heads_per_group : p.last_group_bh0 - bh0;
  } else {
    r -= grouped;
    bh0 = p.last_group_bh0;
    gsize = p.h_q * p.batch - bh0;
  }
  int const m_rev = r / gsize;
  int const bh = bh0 + (r - m_rev * gsize);
  int const batch = bh / p.h_q;
  return {(m_units - 1 - m_rev) * kCluster + tile % kCluster, bh - batch * p.h_q, batch};
}

}  // namespace frost::sm90::fwd
