#include "ops/common/philox.h"

#include <gtest/gtest.h>

namespace frost::test {
namespace {

using detail::philox4x32_10;
using detail::PhiloxCounter;

// The known-answer vectors published with Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST(Philox, MatchesPublishedKnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

// Usable at compile time, so a kernel test can pin values without running anything.
static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u, "Philox4x32-10 known answer");

TEST(Philox, WordsFollowTheDocumentedCounterLayout) {
  const uint64_t seed = 0x0123456789abcdefull, offset = 0xfedcba9876543210ull;
  for (uint64_t index : {uint64_t{0}, uint64_t{5}, uint64_t{1} << 33}) {
    const uint64_t g = index / 4;
    const PhiloxCounter out =
        philox4x32_10({static_cast<uint32_t>(g), static_cast<uint32_t>(g >> 32), 0x76543210u, 0xfedcba98u},
                      {0x89abcdefu, 0x01234567u});
    EXPECT_EQ(detail::philox_word(seed, offset, index), out[index % 4]);
  }
  // Uniforms stay in [0, 1) and average one half.
  double sum = 0;
  for (uint64_t i = 0; i < 40000; ++i) {
    const double u = detail::philox_uniform(7, 3, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 40000, 0.5, 0.01);
}

}  // namespace
}  // namespace frost::test
