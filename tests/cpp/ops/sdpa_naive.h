// A naive scaled dot-product attention forward in double, written from the definition in
// frost/ops/sdpa.h, as the independent oracle for the reference engine and the GPU engines.
// Every array is a dense row-major copy in logical [b, h, s, d] order (HostTensor::values()).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace frost::test {

struct SdpaProblem {
  int64_t b = 1, h_q = 1, h_k = 1, h_v = 1, s_q = 1, s_kv = 1, d_qk = 1, d_v = 1;
  double attn_scale = 1.0;
  bool bottom_right = false;
  std::optional<int64_t> left_bound, right_bound;
  // Per-batch valid lengths under the padding mask; both empty when the mask is off.
  std::vector<int64_t> seq_len_q, seq_len_kv;
  // [b or 1, h_q or 1, s_q, s_kv] when a bias is added; empty otherwise.
  std::vector<int64_t> bias_dim;
  bool alibi = false;
  bool sink = false;  // one logit per query head
  bool stats_use_log2 = false;
  // [b or 1, h_q or 1, tiles_q, tiles_kv] tile mask (nonzero = visible); empty when off.
  std::vector<int64_t> block_mask_dim;
  std::vector<double> block_mask;
  int64_t tile_q = 128, tile_kv = 128;
  // [b, h_q, s_q, s_kv] factor each probability is multiplied by in O (dropout); empty when off.
  std::vector<double> drop_factor;
};

struct SdpaNaiveResult {
  std::vector<double> o;      // [b, h_q, s_q, d_v]
  std::vector<double> stats;  // [b, h_q, s_q, 1]
};

// The ALiBi paper's slopes: a geometric sequence from 2^(-8/n) for n a power of two; otherwise the
// sequence of the largest power of two below the head count, then every other slope of twice it.
inline std::vector<double> naive_alibi_slopes(int64_t heads) {
  auto power_of_two_slopes = [](int64_t n) {
    std::vector<double> s;
    const double start = std::pow(2.0, -8.0 / static_cast<double>(n));
    for (int64_t i = 0; i < n; ++i) s.push_back(std::pow(start, static_cast<double>(i + 1)));
    return s;
  };
  const int64_t closest = int64_t{1} << static_cast<int>(std::floor(std::log2(static_cast<double>(heads))));
  std::vector<double> slopes = power_of_two_slopes(closest);
  const std::vector<double> twice = power_of_two_slopes(2 * closest);
  for (size_t i = 0; static_cast<int64_t>(slopes.size()) < heads; i += 2) slopes.push_back(twice[i]);
  return slopes;
}

inline SdpaNaiveResult sdpa_naive(const SdpaProblem& p, const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const std::vector<double>& bias = {},
                                  const std::vector<double>& sink = {}) {
  const double inf = std::numeric_limits<double>::infinity();
  const bool padding = !p.seq_len_q.empty();
  const std::vector<double> slopes = p.alibi ? naive_alibi_slopes(p.h_q) : std::vector<double>();
  SdpaNaiveResult r;
  r.o.assign(static_cast<size_t>(p.b * p.h_q * p.s_q * p.d_v), 0.0);
  r.stats.assign(static_cast<size_t>(p.b * p.h_q * p.s_q), -inf);
  auto at4 = [](int64_t i0, int64_t i1, int64_t i2, int64_t i3, int64_t n1, int64_t n2, int64_t n3) {
    return static_cast<size_t>(((i0 * n1 + i1) * n2 + i2) * n3 + i3);
  };
  for (int64_t b = 0; b < p.b; ++b) {
    const int64_t rows = padding ? p.seq_len_q[static_cast<size_t>(b)] : p.s_q;
    const int64_t keys = padding ? p.seq_len_kv[static_cast<size_t>(b)] : p.s_kv;
    for (int64_t h = 0; h < p.h_q; ++h) {
      const int64_t kh = h * p.h_k / p.h_q, vh = h * p.h_v / p.h_q;
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t diagonal = p.bottom_right ? i + keys - rows : i;
        std::vector<double> logits;  // visible keys' logits
        std::vector<int64_t> key_of;
        for (int64_t j = 0; j < keys; ++j) {
          if (p.left_bound && !(diagonal - *p.left_bound < j)) continue;
          if (!p.block_mask_dim.empty()) {
            const int64_t bb = p.block_mask_dim[0] == 1 ? 0 : b, bh = p.block_mask_dim[1] == 1 ? 0 : h;
            if (p.block_mask[at4(bb, bh, i / p.tile_q, j / p.tile_kv, p.block_mask_dim[1], p.block_mask_dim[2],
                                 p.block_mask_dim[3])] == 0)
              continue;
          }
          if (p.right_bound && !(j <= diagonal + *p.right_bound)) continue;
          double dot = 0;
          for (int64_t d = 0; d < p.d_qk; ++d)
            dot += q[at4(b, h, i, d, p.h_q, p.s_q, p.d_qk)] * k[at4(b, kh, j, d, p.h_k, p.s_kv, p.d_qk)];
          double s = p.attn_scale * dot;
          if (!p.bias_dim.empty()) {
            const int64_t bb = p.bias_dim[0] == 1 ? 0 : b, bh = p.bias_dim[1] == 1 ? 0 : h;
            s += bias[at4(bb, bh, i, j, p.bias_dim[1], p.s_q, p.s_kv)];
          }
          if (p.alibi) s += slopes[static_cast<size_t>(h)] * static_cast<double>(j - diagonal);
          logits.push_back(s);
          key_of.push_back(j);
        }
        double m = p.sink ? sink[static_cast<size_t>(h)] : -inf;
        for (double s : logits) m = std::max(m, s);
        if (m == -inf) continue;  // O stays 0 and Stats -inf
        double z = p.sink ? std::exp(sink[static_cast<size_t>(h)] - m) : 0.0;
        for (double s : logits) z += std::exp(s - m);
        for (size_t n = 0; n < logits.size(); ++n) {
          double prob = std::exp(logits[n] - m) / z;
          if (!p.drop_factor.empty()) prob *= p.drop_factor[at4(b, h, i, key_of[n], p.h_q, p.s_q, p.s_kv)];
          for (int64_t d = 0; d < p.d_v; ++d)
            r.o[at4(b, h, i, d, p.h_q, p.s_q, p.d_v)] += prob * v[at4(b, vh, key_of[n], d, p.h_v, p.s_kv, p.d_v)];
        }
        const double lse = m + std::log(z);
        r.stats[at4(b, h, i, 0, p.h_q, p.s_q, 1)] = p.stats_use_log2 ? lse / std::log(2.0) : lse;
      }
    }
  }
  return r;
}

}  // namespace frost::test
