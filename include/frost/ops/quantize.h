// Block-scaled quantization: block_scale_quantize (X -> values Y and per-block SCALE) and
// block_scale_dequantize (values X and SCALE -> Y). JSON tags BLOCK_SCALE_QUANTIZE and
// BLOCK_SCALE_DEQUANTIZE; ports X, SCALE, GLOBAL_SCALE (inputs), Y, SCALE (outputs).
//
// Blocks are block_size consecutive elements along `axis` (default: the last); SCALE has X's dims
// with that axis divided by block_size. The scale's data type picks the rule (docs/ops/quantize.md):
// - FP8_E8M0 (MX formats, OCP Microscaling v1.0): scale = 2^(floor(log2(amax)) - emax_elem), with
//   emax_elem 8 for FP8_E4M3, 15 for FP8_E5M2, 2 for FP4_E2M1; clamped to [2^-127, 2^127].
//   MXFP8 is block 32 with FP8 values; MXFP4 block 32 with FP4_E2M1 values.
// - FP8_E4M3 (NVFP4: block 16, FP4_E2M1 values): scale = e4m3(amax / (6 * global_scale)), where
//   global_scale is the optional one-element FP32 GLOBAL_SCALE input (1 when absent).
// Values: y = saturate(round_to_nearest_even(x / (scale * global_scale))); dequantize:
// y = x * scale * global_scale. A block with a NaN or infinity gets a NaN scale.
// Unset output data types: Y FP8_E4M3 for block 32 and FP4_E2M1 for block 16; SCALE FP8_E8M0 for
// FP8 values and block 32 FP4 values, FP8_E4M3 for block 16 FP4 values; dequantized Y FLOAT.
#pragma once

#include <cstdint>
#include <optional>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class BlockScaleInput { X, SCALE, GLOBAL_SCALE };
enum class BlockScaleOutput { Y, SCALE };

// transpose (cuDNN's column-wise MXFP8 layout) is kept for parity and rejected by validation.
class Block_scale_quantize_attributes
    : public Attributes<Block_scale_quantize_attributes, BlockScaleInput, BlockScaleOutput> {
 public:
  int32_t block_size = 0;
  std::optional<int64_t> axis;
  bool transpose = false;

  Block_scale_quantize_attributes& set_block_size(int32_t v) { block_size = v; return *this; }
  Block_scale_quantize_attributes& set_axis(int64_t v) { axis = v; return *this; }
  Block_scale_quantize_attributes& set_transpose(bool v) { transpose = v; return *this; }
  Block_scale_quantize_attributes& set_global_scale(TensorPtr t) {
    inputs[BlockScaleInput::GLOBAL_SCALE] = std::move(t);
    return *this;
  }
};

class Block_scale_dequantize_attributes
    : public Attributes<Block_scale_dequantize_attributes, BlockScaleInput, BlockScaleOutput> {
 public:
  int32_t block_size = 0;
  std::optional<int64_t> axis;

  Block_scale_dequantize_attributes& set_block_size(int32_t v) { block_size = v; return *this; }
  Block_scale_dequantize_attributes& set_axis(int64_t v) { axis = v; return *this; }
  Block_scale_dequantize_attributes& set_global_scale(TensorPtr t) {
    inputs[BlockScaleInput::GLOBAL_SCALE] = std::move(t);
    return *this;
  }
};

}  // namespace frost::graph
