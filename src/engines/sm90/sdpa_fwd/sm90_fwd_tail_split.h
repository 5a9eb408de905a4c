// SCHED_POLICY 3 (tail split), host and device: the shape of the workspace.
//
// A persistent grid of G CTAs runs T tiles in T / G whole waves plus a last wave of T % G tiles, which leaves the
// other CTAs idle for a whole tile (H200, d128 b4 h16 s4096: 2048 tiles on 132 SMs = 15.5 waves, 3 % of the
// kernel). Under the tail split the CTAs share the last wave's (tile, key block) pairs in contiguous, nearly
// equal ranges; a tile cut between CTAs is finished by the CTA holding its key block 0 (the owner), which merges
// the partial results the others leave in the workspace: per CTA one slot (unnormalized FP32 O, row maxima and
// row sums of the piece it leaves) and one ready flag, zeroed before each launch.
#pragma once
#include <cstdint>

namespace frost::sm90::fwd {

// Floats of one slot for a kBlockM x d_v tile: O, then the row maxima and row sums of the two rows each consumer
// thread holds (kBlockM / 64 warpgroups of 128 threads: 8 * kBlockM floats).
// What the kernel reads of the split (all zero when the launch does not split).
struct TailSplitParams {
  float* partials;  // [ctas][split_slot_floats]
  int* ready;       // [ctas]: slot c holds its piece (1), zeroed before the launch
  int full_waves;   // waves of whole tiles before the tail: tiles [0, full_waves * ctas)
  int blocks;       // key blocks per tile
  int64_t total;    // tail tiles * blocks: the flattened (tile, key block) pairs the CTAs share
};

constexpr int64_t split_slot_floats(int64_t block_m, int64_t d_v) { return block_m * (d_v + 8); }

// The ready flags come first, padded so the slots start 256-byte aligned.
constexpr int64_t split_flags_bytes(int64_t ctas) { return (ctas * 4 + 255) / 256 * 256; }

constexpr int64_t split_workspace_bytes(int64_t ctas, int64_t block_m, int64_t d_v) {
  return split_flags_bytes(ctas) + ctas * split_slot_floats(block_m, d_v) * 4;
}

// Share of the kernel the split saves, in key blocks of the busiest CTA: without it the last wave costs a whole
// tile (`blocks` key blocks), with it ceil(tail tiles * blocks / ctas). 0 when the tiles fill whole waves.
constexpr double split_gain(int64_t tiles, int64_t blocks, int64_t ctas) {
  int64_t const waves = tiles / ctas, tail = tiles % ctas;
  if (tail == 0) return 0.0;
  int64_t const shared = (tail * blocks + ctas - 1) / ctas;
  return double(blocks - shared) / double((waves + 1) * blocks);
}

}  // namespace frost::sm90::fwd
