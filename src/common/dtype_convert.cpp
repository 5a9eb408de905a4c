#include "common/dtype_convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace frost::detail {
namespace {

// A small binary floating-point format: sign bit, exp_bits, man_bits.
struct MiniFloat {
  int exp_bits;
  int man_bits;
  int bias;
  bool ieee_specials;  // all-ones exponent holds inf/NaN (HALF, BFLOAT16, E5M2)
  bool saturate;       // overflow saturates instead of producing infinity

  int max_exp_field() const { return (1 << exp_bits) - 1; }
  double max_finite() const {
    if (ieee_specials) return std::ldexp(2.0 - std::ldexp(1.0, -man_bits), max_exp_field() - 1 - bias);
    if (exp_bits == 4 && man_bits == 3) return 448.0;  // E4M3: S.1111.111 is NaN, S.1111.110 = 448
    return std::ldexp(2.0 - std::ldexp(1.0, -man_bits), max_exp_field() - bias);
  }
  uint32_t nan_bits() const {
    uint32_t all = (1u << (exp_bits + man_bits)) - 1;
    return ieee_specials ? (all & ~((1u << man_bits) - 1)) | (1u << (man_bits - 1)) : all;
  }
};

constexpr MiniFloat kHalf{5, 10, 15, true, false};
constexpr MiniFloat kBf16{8, 7, 127, true, false};
constexpr MiniFloat kE4M3{4, 3, 7, false, true};
constexpr MiniFloat kE5M2{5, 2, 15, true, false};
constexpr MiniFloat kE2M1{2, 1, 1, false, true};

double decode(const MiniFloat& f, uint32_t bits) {
  const uint32_t man = bits & ((1u << f.man_bits) - 1);
  const uint32_t ex = (bits >> f.man_bits) & ((1u << f.exp_bits) - 1);
  const bool neg = (bits >> (f.man_bits + f.exp_bits)) & 1u;
  double v;
  if (f.ieee_specials && ex == static_cast<uint32_t>(f.max_exp_field())) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieee_specials && f.exp_bits == 4 && ex == 15 && man == 7) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (ex == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(man), -f.man_bits), static_cast<int>(ex) - f.bias);
  }
  return neg ? -v : v;
}

// Rounds to the format's grid (ties to even) and applies its overflow rule.
double round_mini(const MiniFloat& f, double x) {
  if (std::isnan(x) || x == 0.0) return x;
  const double maxf = f.max_finite();
  if (std::isinf(x)) return f.saturate ? std::copysign(maxf, x) : x;
  int e2;
  std::frexp(x, &e2);  // |x| = m * 2^e2, m in [0.5, 1)
  const int min_normal_exp = 1 - f.bias;
  const int exp = std::max(e2 - 1, min_normal_exp);
  const double quantum = std::ldexp(1.0, exp - f.man_bits);
  const double r = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(r) > maxf) {
    // Values that round down to max_finite stay finite even without saturation (IEEE rule).
    if (f.saturate) return std::copysign(maxf, x);
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  }
  return r;
}

uint32_t encode_mini(const MiniFloat& f, double x) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.exp_bits + f.man_bits) : 0u;
  if (std::isnan(x)) return f.exp_bits == 2 ? 0u : f.nan_bits();  // E2M1 has no NaN: it becomes +0
  const double r = round_mini(f, x);
  const double a = std::fabs(r);
  if (a == 0.0) return sign;
  if (std::isinf(a)) return sign | (static_cast<uint32_t>(f.max_exp_field()) << f.man_bits);
  int e2;
  std::frexp(a, &e2);
  int exp = e2 - 1;
  if (exp < 1 - f.bias) {  // subnormal
    return sign | static_cast<uint32_t>(std::ldexp(a, f.bias - 1 + f.man_bits));
  }
  const uint32_t man = static_cast<uint32_t>(std::ldexp(a, -exp + f.man_bits)) & ((1u << f.man_bits) - 1);
  return sign | (static_cast<uint32_t>(exp + f.bias) << f.man_bits) | man;
}

const MiniFloat* mini_format(DataType_t dt) {
  switch (dt) {
    case DataType_t::HALF: return &kHalf;
    case DataType_t::BFLOAT16: return &kBf16;
    case DataType_t::FP8_E4M3: return &kE4M3;
    case DataType_t::FP8_E5M2: return &kE5M2;
    case DataType_t::FP4_E2M1: return &kE2M1;
    default: return nullptr;
  }
}

// E8M0: unsigned power of two 2^(e - 127); 0xFF is NaN. Rounds to the nearest power of two in
// log space (ties up), clamped to [2^-127, 2^127].
double e8m0_decode(uint8_t b) { return b == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, b - 127); }
uint8_t e8m0_encode(double x) {
  if (std::isnan(x) || x <= 0.0) return x > 0.0 ? 0xFF : (std::isnan(x) ? 0xFF : 0);
  if (std::isinf(x)) return 254;
  const double e = std::round(std::log2(x));
  return static_cast<uint8_t>(std::clamp(e + 127.0, 0.0, 254.0));
}

template <class I>
I clamp_int(double x) {
  if (std::isnan(x)) return 0;
  const double r = std::nearbyint(x);
  if (r <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

template <class T>
T load_as(const void* base, int64_t index) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <class T>
void store_as(void* base, int64_t index, T v) {
  std::memcpy(static_cast<char*>(base) + index * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

}  // namespace

bool is_floating(DataType_t dt) {
  switch (dt) {
    case DataType_t::FLOAT: case DataType_t::DOUBLE: case DataType_t::HALF: case DataType_t::BFLOAT16:
    case DataType_t::FP8_E4M3: case DataType_t::FP8_E5M2: case DataType_t::FP8_E8M0: case DataType_t::FP4_E2M1:
      return true;
    default:
      return false;
  }
}

bool is_storable(DataType_t dt) {
  switch (dt) {
    case DataType_t::FLOAT: case DataType_t::DOUBLE: case DataType_t::HALF: case DataType_t::BFLOAT16:
    case DataType_t::FP8_E4M3: case DataType_t::FP8_E5M2: case DataType_t::FP8_E8M0: case DataType_t::FP4_E2M1:
    case DataType_t::INT8: case DataType_t::UINT8: case DataType_t::INT32: case DataType_t::INT64:
    case DataType_t::BOOLEAN: case DataType_t::INT4:
      return true;
    default:
      return false;
  }
}

double read_element(const void* base, DataType_t dt, int64_t i) {
  switch (dt) {
    case DataType_t::FLOAT: return load_as<float>(base, i);
    case DataType_t::DOUBLE: return load_as<double>(base, i);
    case DataType_t::HALF: return decode(kHalf, load_as<uint16_t>(base, i));
    case DataType_t::BFLOAT16: return decode(kBf16, load_as<uint16_t>(base, i));
    case DataType_t::FP8_E4M3: return decode(kE4M3, load_as<uint8_t>(base, i));
    case DataType_t::FP8_E5M2: return decode(kE5M2, load_as<uint8_t>(base, i));
    case DataType_t::FP8_E8M0: return e8m0_decode(load_as<uint8_t>(base, i));
    case DataType_t::INT8: return load_as<int8_t>(base, i);
    case DataType_t::UINT8: return load_as<uint8_t>(base, i);
    case DataType_t::INT32: return load_as<int32_t>(base, i);
    case DataType_t::INT64: return static_cast<double>(load_as<int64_t>(base, i));
    case DataType_t::BOOLEAN: return load_as<uint8_t>(base, i) != 0 ? 1.0 : 0.0;
    case DataType_t::FP4_E2M1:
    case DataType_t::INT4: {
      const uint8_t byte = load_as<uint8_t>(base, i / 2);
      const uint32_t nib = (i % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      if (dt == DataType_t::FP4_E2M1) return decode(kE2M1, nib);
      return static_cast<double>(static_cast<int>(nib) - ((nib & 0x8) ? 16 : 0));
    }
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void write_element(void* base, DataType_t dt, int64_t i, double v) {
  switch (dt) {
    case DataType_t::FLOAT: store_as<float>(base, i, static_cast<float>(v)); return;
    case DataType_t::DOUBLE: store_as<double>(base, i, v); return;
    case DataType_t::HALF: store_as<uint16_t>(base, i, static_cast<uint16_t>(encode_mini(kHalf, v))); return;
    case DataType_t::BFLOAT16: store_as<uint16_t>(base, i, static_cast<uint16_t>(encode_mini(kBf16, v))); return;
    case DataType_t::FP8_E4M3: store_as<uint8_t>(base, i, static_cast<uint8_t>(encode_mini(kE4M3, v))); return;
    case DataType_t::FP8_E5M2: store_as<uint8_t>(base, i, static_cast<uint8_t>(encode_mini(kE5M2, v))); return;
    case DataType_t::FP8_E8M0: store_as<uint8_t>(base, i, e8m0_encode(v)); return;
    case DataType_t::INT8: store_as<int8_t>(base, i, clamp_int<int8_t>(v)); return;
    case DataType_t::UINT8: store_as<uint8_t>(base, i, clamp_int<uint8_t>(v)); return;
    case DataType_t::INT32: store_as<int32_t>(base, i, clamp_int<int32_t>(v)); return;
    case DataType_t::INT64: store_as<int64_t>(base, i, clamp_int<int64_t>(v)); return;
    case DataType_t::BOOLEAN: store_as<uint8_t>(base, i, v != 0.0 ? 1 : 0); return;
    case DataType_t::FP4_E2M1:
    case DataType_t::INT4: {
      uint32_t nib;
      if (dt == DataType_t::FP4_E2M1) {
        nib = encode_mini(kE2M1, v) & 0xF;
      } else {
        const auto q = static_cast<int32_t>(std::clamp(std::nearbyint(std::isnan(v) ? 0.0 : v), -8.0, 7.0));
        nib = static_cast<uint32_t>(q) & 0xF;  // two's complement nibble
      }
      uint8_t byte = load_as<uint8_t>(base, i / 2);
      byte = (i % 2 == 0) ? static_cast<uint8_t>((byte & 0xF0) | nib) : static_cast<uint8_t>((byte & 0x0F) | (nib << 4));
      store_as<uint8_t>(base, i / 2, byte);
      return;
    }
    default: return;
  }
}

double round_to(DataType_t dt, double v) {
  if (dt == DataType_t::FLOAT) return static_cast<float>(v);
  if (dt == DataType_t::DOUBLE) return v;
  if (const MiniFloat* f = mini_format(dt)) {
    if (dt == DataType_t::FP4_E2M1 && std::isnan(v)) return 0.0;
    return round_mini(*f, v);
  }
  unsigned char scratch[8] = {};
  write_element(scratch, dt, 0, v);
  return read_element(scratch, dt, 0);
}

double round_to_saturated(DataType_t dt, double v) {
  if (std::isnan(v)) return round_to(dt, v);
  double largest = std::numeric_limits<double>::infinity();
  if (dt == DataType_t::FLOAT) largest = std::numeric_limits<float>::max();
  if (const MiniFloat* f = mini_format(dt)) largest = f->max_finite();
  return round_to(dt, std::clamp(v, -largest, largest));
}

}  // namespace frost::detail
