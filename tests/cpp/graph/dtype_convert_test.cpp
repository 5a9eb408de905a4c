// Storage conversions: round to nearest even, each type's overflow rule, sub-byte packing.
#include <cmath>
#include <limits>

#include "common/dtype_convert.h"
#include "test_util.h"

namespace frost::test {
namespace {

using detail::read_element;
using detail::round_to;
using detail::write_element;

double roundtrip(DataType_t dt, double v) {
  uint8_t buf[8] = {};
  write_element(buf, dt, 0, v);
  return read_element(buf, dt, 0);
}

TEST(DtypeConvert, HalfAndBfloat16RoundToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and the next half (1 + 2^-10): ties go to the even mantissa (1).
  EXPECT_EQ(roundtrip(DataType_t::HALF, 1.0 + std::ldexp(1.0, -11)), 1.0);
  EXPECT_EQ(roundtrip(DataType_t::HALF, 1.0 + 3 * std::ldexp(1.0, -11)), 1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(roundtrip(DataType_t::BFLOAT16, 1.0 + std::ldexp(1.0, -8)), 1.0);
  EXPECT_EQ(roundtrip(DataType_t::BFLOAT16, 1.0 + 3 * std::ldexp(1.0, -8)), 1.0 + std::ldexp(1.0, -6));
  EXPECT_EQ(roundtrip(DataType_t::HALF, 65504.0), 65504.0);
  EXPECT_EQ(roundtrip(DataType_t::HALF, 65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(roundtrip(DataType_t::HALF, 65520.0)));
  EXPECT_EQ(roundtrip(DataType_t::HALF, std::ldexp(1.0, -24)), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(roundtrip(DataType_t::HALF, std::ldexp(1.0, -26)), 0.0);
  EXPECT_TRUE(std::isnan(roundtrip(DataType_t::BFLOAT16, NAN)));
  EXPECT_EQ(std::signbit(roundtrip(DataType_t::HALF, -0.0)), true);
}

TEST(DtypeConvert, Fp8OverflowRules) {
  EXPECT_EQ(roundtrip(DataType_t::FP8_E4M3, 448.0), 448.0);
  EXPECT_EQ(roundtrip(DataType_t::FP8_E4M3, 1000.0), 448.0);   // saturates: E4M3 has no infinity
  EXPECT_EQ(roundtrip(DataType_t::FP8_E4M3, -1e9), -448.0);
  EXPECT_TRUE(std::isnan(roundtrip(DataType_t::FP8_E4M3, NAN)));
  EXPECT_EQ(roundtrip(DataType_t::FP8_E4M3, std::ldexp(1.0, -9)), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(roundtrip(DataType_t::FP8_E5M2, 57344.0), 57344.0);
  EXPECT_TRUE(std::isinf(roundtrip(DataType_t::FP8_E5M2, 70000.0)));
  EXPECT_EQ(roundtrip(DataType_t::FP8_E4M3, 1.0625), 1.0);  // tie between 1 and 1.125 goes to even
  EXPECT_EQ(roundtrip(DataType_t::FP8_E4M3, 1.1875), 1.25);
}

TEST(DtypeConvert, EveryEightBitCodeRoundTrips) {
  for (DataType_t dt : {DataType_t::FP8_E4M3, DataType_t::FP8_E5M2, DataType_t::FP8_E8M0}) {
    for (int code = 0; code < 256; ++code) {
      uint8_t in = static_cast<uint8_t>(code), out = 0;
      const double v = read_element(&in, dt, 0);
      if (std::isnan(v)) continue;
      write_element(&out, dt, 0, v);
      EXPECT_EQ(read_element(&out, dt, 0), v) << to_string(dt) << " code " << code;
    }
  }
}

TEST(DtypeConvert, E8M0AndFp4) {
  EXPECT_EQ(roundtrip(DataType_t::FP8_E8M0, 8.0), 8.0);
  EXPECT_EQ(roundtrip(DataType_t::FP8_E8M0, 0.25), 0.25);
  EXPECT_EQ(roundtrip(DataType_t::FP8_E8M0, 5.0), 4.0);  // nearest power of two in log space
  const double fp4[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (double v : fp4) {
    EXPECT_EQ(roundtrip(DataType_t::FP4_E2M1, v), v);
    EXPECT_EQ(roundtrip(DataType_t::FP4_E2M1, -v), -v);
  }
  EXPECT_EQ(roundtrip(DataType_t::FP4_E2M1, 100.0), 6.0);  // saturates
  EXPECT_EQ(roundtrip(DataType_t::FP4_E2M1, 2.5), 2.0);    // tie to even mantissa
  // Two per byte, low nibble first, neighbours untouched.
  uint8_t packed[2] = {0xFF, 0xFF};
  write_element(packed, DataType_t::FP4_E2M1, 2, 1.0);
  EXPECT_EQ(packed[0], 0xFF);
  EXPECT_EQ(packed[1] & 0x0F, 0x2);
  EXPECT_EQ(packed[1] >> 4, 0xF);
  EXPECT_EQ(roundtrip(DataType_t::INT4, -9.0), -8.0);
  EXPECT_EQ(roundtrip(DataType_t::INT4, 7.4), 7.0);
}

TEST(DtypeConvert, IntegersClampAndRoundHalfEven) {
  EXPECT_EQ(roundtrip(DataType_t::INT8, 200.0), 127.0);
  EXPECT_EQ(roundtrip(DataType_t::UINT8, -3.0), 0.0);
  EXPECT_EQ(roundtrip(DataType_t::INT32, 2.5), 2.0);
  EXPECT_EQ(roundtrip(DataType_t::INT32, 3.5), 4.0);
  EXPECT_EQ(roundtrip(DataType_t::INT64, 9007199254740992.0), 9007199254740992.0);
  EXPECT_EQ(roundtrip(DataType_t::BOOLEAN, 0.3), 1.0);
  EXPECT_EQ(round_to(DataType_t::FLOAT, 1.0 + 1e-12), 1.0);
}

}  // namespace
}  // namespace frost::test
