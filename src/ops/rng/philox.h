// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator; each (counter, key) pair maps to four independent 32-bit words.
// Kept in the rng op's folder under its own namespace so it can sit beside other copies until
// they are merged.
#pragma once

#include <array>
#include <cstdint>

namespace frost::detail::rng_philox {

using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;

// Multipliers and Weyl key increments of the published algorithm.
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

constexpr Counter philox4x32_round(const Counter& c, const Key& k) {
  const uint64_t p0 = uint64_t{kMul0} * c[0];
  const uint64_t p1 = uint64_t{kMul1} * c[2];
  const auto hi = [](uint64_t p) { return static_cast<uint32_t>(p >> 32); };
  const auto lo = [](uint64_t p) { return static_cast<uint32_t>(p); };
  return {hi(p1) ^ c[1] ^ k[0], lo(p1), hi(p0) ^ c[3] ^ k[1], lo(p0)};
}

// Ten rounds; the key advances by the Weyl increments between rounds.
constexpr Counter philox4x32_10(Counter c, Key k) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) k = {k[0] + kWeyl0, k[1] + kWeyl1};
    c = philox4x32_round(c, k);
  }
  return c;
}

}  // namespace frost::detail::rng_philox
