// Enumerations of the graph API, with the names cuDNN Frontend uses.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace frost {

enum class DataType_t {
  NOT_SET,
  FLOAT,
  DOUBLE,
  HALF,
  INT8,
  INT32,
  INT8x4,
  UINT8,
  UINT8x4,
  INT8x32,
  BFLOAT16,
  INT64,
  BOOLEAN,
  FP8_E4M3,
  FP8_E5M2,
  FAST_FLOAT_FOR_FP8,
  FP8_E8M0,
  FP4_E2M1,
  INT4,
};

enum class HeurMode_t { A, B, FALLBACK, OPENSOURCE };

enum class BuildPlanPolicy_t { HEURISTICS_CHOICE, ALL };

enum class NumericalNote_t {
  TENSOR_CORE,
  DOWN_CONVERT_INPUTS,
  REDUCED_PRECISION_REDUCTION,
  FFT,
  NONDETERMINISTIC,
  WINOGRAD,
  WINOGRAD_TILE_4x4,
  WINOGRAD_TILE_6x6,
  WINOGRAD_TILE_13x13,
  STRICT_NAN_PROP,
};

enum class BehaviorNote_t {
  RUNTIME_COMPILATION,
  REQUIRES_FILTER_INT8x32_REORDER,
  REQUIRES_BIAS_INT8x32_REORDER,
  SUPPORTS_CUDA_GRAPH_NATIVE_API,
};

enum class DiagonalAlignment_t { TOP_LEFT, BOTTOM_RIGHT };

enum class NormFwdPhase_t { NOT_SET, INFERENCE, TRAINING };

enum class ReductionMode_t { NOT_SET, ADD, MUL, MIN, MAX, AMAX, AVG, NORM1, NORM2, MUL_NO_ZEROS };

enum class TensorReordering_t { NONE, INT8x32, F16x16, F8_128x4 };

enum class PointwiseMode_t {
  NOT_SET,
  ADD,
  MUL,
  SQRT,
  MAX,
  MIN,
  RELU_FWD,
  TANH_FWD,
  SIGMOID_FWD,
  ELU_FWD,
  GELU_FWD,
  SOFTPLUS_FWD,
  SWISH_FWD,
  RELU_BWD,
  TANH_BWD,
  SIGMOID_BWD,
  ELU_BWD,
  GELU_BWD,
  SOFTPLUS_BWD,
  SWISH_BWD,
  ERF,
  IDENTITY,
  GELU_APPROX_TANH_BWD,
  GELU_APPROX_TANH_FWD,
  GEN_INDEX,
  BINARY_SELECT,
  EXP,
  LOG,
  NEG,
  MOD,
  POW,
  ABS,
  CEIL,
  COS,
  FLOOR,
  RSQRT,
  SIN,
  LOGICAL_NOT,
  TAN,
  SUB,
  ADD_SQUARE,
  DIV,
  CMP_EQ,
  CMP_NEQ,
  CMP_GT,
  CMP_GE,
  CMP_LT,
  CMP_LE,
  LOGICAL_AND,
  LOGICAL_OR,
  RECIPROCAL,
};

// Names as they appear in JSON ("BFLOAT16", "ADD", "TOP_LEFT") and parsing back.
std::string_view to_string(DataType_t);
std::string_view to_string(HeurMode_t);
std::string_view to_string(NumericalNote_t);
std::string_view to_string(BehaviorNote_t);
std::string_view to_string(DiagonalAlignment_t);
std::string_view to_string(NormFwdPhase_t);
std::string_view to_string(ReductionMode_t);
std::string_view to_string(TensorReordering_t);
std::string_view to_string(PointwiseMode_t);

template <class E>
std::optional<E> from_string(std::string_view name);

// Bytes per element; 0 for sub-byte types (FP4_E2M1, INT4 pack two per byte) and NOT_SET.
int64_t element_size(DataType_t);
// Bits per element (4 for FP4_E2M1 and INT4).
int64_t element_bits(DataType_t);

}  // namespace frost
