// Layout of the caller-provided workspace of the attention backward (byte offsets, each region 256-byte aligned).
// With s_pad = ceil(s_q / tile_m) * tile_m:
//   dq_acc [b][h_q][s_pad][d_qk] FP32 (each tile_m-row block in fragment order), lse2 and delta [b][h_q][s_pad]
//   FP32, sema [b][h_q][s_pad / tile_m] int32. Linear in the sequence length: 4 * b * h_q * s_pad * (d_qk + 2) bytes
//   plus the counters.
#pragma once
#include <cstdint>

namespace frost::sm90::bwd {

struct BwdWorkspace {
  int64_t dq_acc, lse2, delta, sema, total;
};

inline BwdWorkspace bwd_workspace(int64_t b, int64_t h_q, int64_t s_q, int64_t d_qk, int tile_m) {
  auto align = [](int64_t x) { return (x + 255) / 256 * 256; };
  int64_t const num_m = (s_q + tile_m - 1) / tile_m;
  int64_t const rows = b * h_q * num_m * tile_m;
  BwdWorkspace w{};
  w.dq_acc = 0;
  w.lse2 = align(rows * d_qk * 4);
  w.delta = w.lse2 + align(rows * 4);
  w.sema = w.delta + align(rows * 4);
  w.total = w.sema + align(b * h_q * num_m * 4);
  return w;
}

}  // namespace frost::sm90::bwd
