// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. Four 32-bit counter words and two 32-bit key words map to four
// uniformly distributed 32-bit words; no state is carried, so any element of a random stream can be
// regenerated from its (key, counter) alone, on the host or on a device.
#pragma once

#include <array>
#include <cstdint>

namespace frost::detail {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of the Philox4x32 bijection (the published default round count).
constexpr PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const uint64_t p0 = uint64_t{kMul0} * ctr[0];
    const uint64_t p1 = uint64_t{kMul1} * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

// Word `index` of the stream keyed by `seed` at stream position `offset`: words come four per
// counter; counter = (low, high halves of index / 4, low, high halves of offset), key = (low, high
// halves of seed), and the word is lane index % 4 of the output.
constexpr uint32_t philox_word(uint64_t seed, uint64_t offset, uint64_t index) {
  const uint64_t group = index / 4;
  const PhiloxCounter out = philox4x32_10({static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
                                           static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                                          {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return out[index % 4];
}

// The word as a uniform number in [0, 1): word * 2^-32 (exact in double).
constexpr double philox_uniform(uint64_t seed, uint64_t offset, uint64_t index) {
  return static_cast<double>(philox_word(seed, offset, index)) * (1.0 / 4294967296.0);
}

}  // namespace frost::detail
