// Reading and writing single elements of every storable data type, as doubles.
// Rounding is to nearest, ties to even. Overflow: HALF, BFLOAT16 and FP8_E5M2 go to infinity;
// FP8_E4M3 and FP4_E2M1 (no infinity) saturate to their largest finite value; integers clamp.
#pragma once

#include <cstdint>

#include "frost/types.h"

namespace frost::detail {

// Element `index` of a buffer of type `dt` (sub-byte types: two per byte, low nibble first).
double read_element(const void* base, DataType_t dt, int64_t index);
void write_element(void* base, DataType_t dt, int64_t index, double value);

// The value `value` becomes after a round trip through `dt`.
double round_to(DataType_t dt, double value);
// round_to, except that values beyond the largest finite value of a floating type become that
// value with their sign (the "satfinite" conversion FP8 recipes store with). NaN stays NaN.
double round_to_saturated(DataType_t dt, double value);

bool is_floating(DataType_t dt);
bool is_storable(DataType_t dt);

}  // namespace frost::detail
