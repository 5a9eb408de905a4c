// Rotary position embedding (frost's own op: cuDNN Frontend has no rope node). JSON tags ROPE and
// ROPE_BACKWARD; ports X, DY, COS, SIN (inputs), Y, DX (outputs).
//
// X [b, h, s, d]; COS and SIN [s, r/2] or [1, 1, s, r/2], r = rotary_dim (default d, even, <= d).
// Each pair (a, b) of the first r channels is rotated by the angle of its position and frequency i:
//   interleaved: pairs (2i, 2i+1);  half (rotate_half, the default): pairs (i, i + r/2);
//   y_a = x_a cos[s, i] - x_b sin[s, i],  y_b = x_b cos[s, i] + x_a sin[s, i].
// Channels r..d-1 are copied. The backward applies the transposed (inverse) rotation to DY:
//   dx_a = dy_a cos + dy_b sin,  dx_b = dy_b cos - dy_a sin, which is the exact gradient for any
//   tables. The tables are inputs, never differentiated.
#pragma once

#include <cstdint>
#include <optional>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class RopeInput { X, DY, COS, SIN };
enum class RopeOutput { Y, DX };

class Rope_attributes : public Attributes<Rope_attributes, RopeInput, RopeOutput> {
 public:
  bool interleaved = false;
  std::optional<int64_t> rotary_dim;
  Rope_attributes& set_interleaved(bool v) { interleaved = v; return *this; }
  Rope_attributes& set_rotary_dim(int64_t v) { rotary_dim = v; return *this; }
};

class Rope_backward_attributes : public Attributes<Rope_backward_attributes, RopeInput, RopeOutput> {
 public:
  bool interleaved = false;
  std::optional<int64_t> rotary_dim;
  Rope_backward_attributes& set_interleaved(bool v) { interleaved = v; return *this; }
  Rope_backward_attributes& set_rotary_dim(int64_t v) { rotary_dim = v; return *this; }
};

}  // namespace frost::graph
