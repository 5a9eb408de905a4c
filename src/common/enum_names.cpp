// Names of the public enums, as JSON and error messages print them.
#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "frost/error.h"
#include "frost/knobs.h"
#include "frost/ops/sdpa.h"
#include "frost/types.h"

namespace frost {
namespace {

template <class E, size_t N>
using Table = std::array<std::pair<E, std::string_view>, N>;

#define FROST_N(E, x) std::pair{E::x, std::string_view(#x)}

constexpr Table<DataType_t, 19> kDataTypes{{
    FROST_N(DataType_t, NOT_SET), FROST_N(DataType_t, FLOAT), FROST_N(DataType_t, DOUBLE),
    FROST_N(DataType_t, HALF), FROST_N(DataType_t, INT8), FROST_N(DataType_t, INT32),
    FROST_N(DataType_t, INT8x4), FROST_N(DataType_t, UINT8), FROST_N(DataType_t, UINT8x4),
    FROST_N(DataType_t, INT8x32), FROST_N(DataType_t, BFLOAT16), FROST_N(DataType_t, INT64),
    FROST_N(DataType_t, BOOLEAN), FROST_N(DataType_t, FP8_E4M3), FROST_N(DataType_t, FP8_E5M2),
    FROST_N(DataType_t, FAST_FLOAT_FOR_FP8), FROST_N(DataType_t, FP8_E8M0), FROST_N(DataType_t, FP4_E2M1),
    FROST_N(DataType_t, INT4),
}};

constexpr Table<HeurMode_t, 4> kHeurModes{{
    FROST_N(HeurMode_t, A), FROST_N(HeurMode_t, B), FROST_N(HeurMode_t, FALLBACK), FROST_N(HeurMode_t, OPENSOURCE),
}};

constexpr Table<NumericalNote_t, 10> kNumericalNotes{{
    FROST_N(NumericalNote_t, TENSOR_CORE), FROST_N(NumericalNote_t, DOWN_CONVERT_INPUTS),
    FROST_N(NumericalNote_t, REDUCED_PRECISION_REDUCTION), FROST_N(NumericalNote_t, FFT),
    FROST_N(NumericalNote_t, NONDETERMINISTIC), FROST_N(NumericalNote_t, WINOGRAD),
    FROST_N(NumericalNote_t, WINOGRAD_TILE_4x4), FROST_N(NumericalNote_t, WINOGRAD_TILE_6x6),
    FROST_N(NumericalNote_t, WINOGRAD_TILE_13x13), FROST_N(NumericalNote_t, STRICT_NAN_PROP),
}};

constexpr Table<BehaviorNote_t, 4> kBehaviorNotes{{
    FROST_N(BehaviorNote_t, RUNTIME_COMPILATION), FROST_N(BehaviorNote_t, REQUIRES_FILTER_INT8x32_REORDER),
    FROST_N(BehaviorNote_t, REQUIRES_BIAS_INT8x32_REORDER), FROST_N(BehaviorNote_t, SUPPORTS_CUDA_GRAPH_NATIVE_API),
}};

constexpr Table<DiagonalAlignment_t, 2> kAlignments{{
    FROST_N(DiagonalAlignment_t, TOP_LEFT), FROST_N(DiagonalAlignment_t, BOTTOM_RIGHT),
}};

constexpr Table<NormFwdPhase_t, 3> kPhases{{
    FROST_N(NormFwdPhase_t, NOT_SET), FROST_N(NormFwdPhase_t, INFERENCE), FROST_N(NormFwdPhase_t, TRAINING),
}};

constexpr Table<ReductionMode_t, 10> kReductions{{
    FROST_N(ReductionMode_t, NOT_SET), FROST_N(ReductionMode_t, ADD), FROST_N(ReductionMode_t, MUL),
    FROST_N(ReductionMode_t, MIN), FROST_N(ReductionMode_t, MAX), FROST_N(ReductionMode_t, AMAX),
    FROST_N(ReductionMode_t, AVG), FROST_N(ReductionMode_t, NORM1), FROST_N(ReductionMode_t, NORM2),
    FROST_N(ReductionMode_t, MUL_NO_ZEROS),
}};

constexpr Table<TensorReordering_t, 4> kReorderings{{
    FROST_N(TensorReordering_t, NONE), FROST_N(TensorReordering_t, INT8x32), FROST_N(TensorReordering_t, F16x16),
    FROST_N(TensorReordering_t, F8_128x4),
}};

constexpr Table<PointwiseMode_t, 51> kPointwise{{
    FROST_N(PointwiseMode_t, NOT_SET), FROST_N(PointwiseMode_t, ADD), FROST_N(PointwiseMode_t, MUL),
    FROST_N(PointwiseMode_t, SQRT), FROST_N(PointwiseMode_t, MAX), FROST_N(PointwiseMode_t, MIN),
    FROST_N(PointwiseMode_t, RELU_FWD), FROST_N(PointwiseMode_t, TANH_FWD), FROST_N(PointwiseMode_t, SIGMOID_FWD),
    FROST_N(PointwiseMode_t, ELU_FWD), FROST_N(PointwiseMode_t, GELU_FWD), FROST_N(PointwiseMode_t, SOFTPLUS_FWD),
    FROST_N(PointwiseMode_t, SWISH_FWD), FROST_N(PointwiseMode_t, RELU_BWD), FROST_N(PointwiseMode_t, TANH_BWD),
    FROST_N(PointwiseMode_t, SIGMOID_BWD), FROST_N(PointwiseMode_t, ELU_BWD), FROST_N(PointwiseMode_t, GELU_BWD),
    FROST_N(PointwiseMode_t, SOFTPLUS_BWD), FROST_N(PointwiseMode_t, SWISH_BWD), FROST_N(PointwiseMode_t, ERF),
    FROST_N(PointwiseMode_t, IDENTITY), FROST_N(PointwiseMode_t, GELU_APPROX_TANH_BWD),
    FROST_N(PointwiseMode_t, GELU_APPROX_TANH_FWD), FROST_N(PointwiseMode_t, GEN_INDEX),
    FROST_N(PointwiseMode_t, BINARY_SELECT), FROST_N(PointwiseMode_t, EXP), FROST_N(PointwiseMode_t, LOG),
    FROST_N(PointwiseMode_t, NEG), FROST_N(PointwiseMode_t, MOD), FROST_N(PointwiseMode_t, POW),
    FROST_N(PointwiseMode_t, ABS), FROST_N(PointwiseMode_t, CEIL), FROST_N(PointwiseMode_t, COS),
    FROST_N(PointwiseMode_t, FLOOR), FROST_N(PointwiseMode_t, RSQRT), FROST_N(PointwiseMode_t, SIN),
    FROST_N(PointwiseMode_t, LOGICAL_NOT), FROST_N(PointwiseMode_t, TAN), FROST_N(PointwiseMode_t, SUB),
    FROST_N(PointwiseMode_t, ADD_SQUARE), FROST_N(PointwiseMode_t, DIV), FROST_N(PointwiseMode_t, CMP_EQ),
    FROST_N(PointwiseMode_t, CMP_NEQ), FROST_N(PointwiseMode_t, CMP_GT), FROST_N(PointwiseMode_t, CMP_GE),
    FROST_N(PointwiseMode_t, CMP_LT), FROST_N(PointwiseMode_t, CMP_LE), FROST_N(PointwiseMode_t, LOGICAL_AND),
    FROST_N(PointwiseMode_t, LOGICAL_OR), FROST_N(PointwiseMode_t, RECIPROCAL),
}};

constexpr Table<KnobType_t, 38> kKnobs{{
    FROST_N(KnobType_t, NOT_SET), FROST_N(KnobType_t, SWIZZLE), FROST_N(KnobType_t, TILE_SIZE),
    FROST_N(KnobType_t, EDGE), FROST_N(KnobType_t, MULTIPLY), FROST_N(KnobType_t, SPLIT_K_BUF),
    FROST_N(KnobType_t, TILEK), FROST_N(KnobType_t, STAGES), FROST_N(KnobType_t, REDUCTION_MODE),
    FROST_N(KnobType_t, SPLIT_K_SLC), FROST_N(KnobType_t, IDX_MODE), FROST_N(KnobType_t, SPECFILT),
    FROST_N(KnobType_t, KERNEL_CFG), FROST_N(KnobType_t, WORKSPACE), FROST_N(KnobType_t, TILE_CGA_M),
    FROST_N(KnobType_t, TILE_CGA_N), FROST_N(KnobType_t, BLOCK_SIZE), FROST_N(KnobType_t, OCCUPANCY),
    FROST_N(KnobType_t, ARRAY_SIZE_PER_THREAD), FROST_N(KnobType_t, SPLIT_COLS), FROST_N(KnobType_t, TILE_ROWS),
    FROST_N(KnobType_t, TILE_COLS), FROST_N(KnobType_t, LOAD_SIZE), FROST_N(KnobType_t, CTA_COUNT),
    FROST_N(KnobType_t, STREAM_K), FROST_N(KnobType_t, SPLIT_P_SLC), FROST_N(KnobType_t, TILE_M),
    FROST_N(KnobType_t, TILE_N), FROST_N(KnobType_t, WARP_SPEC_CFG), FROST_N(KnobType_t, SWAP_AB),
    FROST_N(KnobType_t, INPUT_TMA_ENABLE), FROST_N(KnobType_t, OUTPUT_TMA_ENABLE), FROST_N(KnobType_t, TILE_CGA),
    FROST_N(KnobType_t, SCHED_POLICY), FROST_N(KnobType_t, PACK_GQA), FROST_N(KnobType_t, SPLIT_KV),
    FROST_N(KnobType_t, SPLIT_K), FROST_N(KnobType_t, KERNEL_OVERLAP),
}};

constexpr Table<graph::AttentionImplementation_t, 3> kImplementations{{
    FROST_N(graph::AttentionImplementation_t, AUTO), FROST_N(graph::AttentionImplementation_t, COMPOSITE),
    FROST_N(graph::AttentionImplementation_t, UNIFIED),
}};

#undef FROST_N

template <class E, size_t N>
std::string_view name_in(const Table<E, N>& t, E e) {
  for (const auto& [k, n] : t)
    if (k == e) return n;
  return "UNKNOWN";
}
template <class E, size_t N>
std::optional<E> value_in(const Table<E, N>& t, std::string_view name) {
  for (const auto& [k, n] : t)
    if (n == name) return k;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(DataType_t e) { return name_in(kDataTypes, e); }
std::string_view to_string(HeurMode_t e) { return name_in(kHeurModes, e); }
std::string_view to_string(NumericalNote_t e) { return name_in(kNumericalNotes, e); }
std::string_view to_string(BehaviorNote_t e) { return name_in(kBehaviorNotes, e); }
std::string_view to_string(DiagonalAlignment_t e) { return name_in(kAlignments, e); }
std::string_view to_string(NormFwdPhase_t e) { return name_in(kPhases, e); }
std::string_view to_string(ReductionMode_t e) { return name_in(kReductions, e); }
std::string_view to_string(TensorReordering_t e) { return name_in(kReorderings, e); }
std::string_view to_string(PointwiseMode_t e) { return name_in(kPointwise, e); }
std::string_view to_string(KnobType_t e) {
  const auto v = static_cast<int32_t>(e);
  if (v >= kBackendKnobBand && v < kBackendKnobBand + 1000) {
    static const auto* const names = [] {
      auto* n = new std::array<std::string, 1000>();  // never freed: names outlive every caller
      for (size_t i = 0; i < n->size(); ++i) (*n)[i] = "CUDNN_KNOB_" + std::to_string(i);
      return n;
    }();
    return (*names)[static_cast<size_t>(v - kBackendKnobBand)];
  }
  return name_in(kKnobs, e);
}

template <> std::optional<DataType_t> from_string(std::string_view n) { return value_in(kDataTypes, n); }
template <> std::optional<HeurMode_t> from_string(std::string_view n) { return value_in(kHeurModes, n); }
template <> std::optional<NumericalNote_t> from_string(std::string_view n) { return value_in(kNumericalNotes, n); }
template <> std::optional<BehaviorNote_t> from_string(std::string_view n) { return value_in(kBehaviorNotes, n); }
template <> std::optional<DiagonalAlignment_t> from_string(std::string_view n) { return value_in(kAlignments, n); }
template <> std::optional<NormFwdPhase_t> from_string(std::string_view n) { return value_in(kPhases, n); }
template <> std::optional<ReductionMode_t> from_string(std::string_view n) { return value_in(kReductions, n); }
template <> std::optional<TensorReordering_t> from_string(std::string_view n) { return value_in(kReorderings, n); }
template <> std::optional<PointwiseMode_t> from_string(std::string_view n) { return value_in(kPointwise, n); }
std::optional<KnobType_t> knob_from_string(std::string_view n) {
  constexpr std::string_view kRaw = "CUDNN_KNOB_";
  if (n.substr(0, kRaw.size()) == kRaw && n.size() > kRaw.size() && n.size() <= kRaw.size() + 3) {
    int32_t v = 0;
    for (char c : n.substr(kRaw.size())) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    return static_cast<KnobType_t>(kBackendKnobBand + v);
  }
  return value_in(kKnobs, n);
}
template <>
std::optional<graph::AttentionImplementation_t> from_string(std::string_view n) {
  return value_in(kImplementations, n);
}
namespace graph {
std::string_view to_string(AttentionImplementation_t e) { return name_in(kImplementations, e); }
}  // namespace graph

int64_t element_bits(DataType_t dt) {
  switch (dt) {
    case DataType_t::DOUBLE: case DataType_t::INT64: return 64;
    case DataType_t::FLOAT: case DataType_t::INT32: case DataType_t::INT8x4: case DataType_t::UINT8x4:
    case DataType_t::FAST_FLOAT_FOR_FP8: return 32;
    case DataType_t::HALF: case DataType_t::BFLOAT16: return 16;
    case DataType_t::INT8: case DataType_t::UINT8: case DataType_t::BOOLEAN: case DataType_t::FP8_E4M3:
    case DataType_t::FP8_E5M2: case DataType_t::FP8_E8M0: return 8;
    case DataType_t::INT8x32: return 256;
    case DataType_t::FP4_E2M1: case DataType_t::INT4: return 4;
    case DataType_t::NOT_SET: return 0;
  }
  return 0;
}

int64_t element_size(DataType_t dt) { return element_bits(dt) % 8 == 0 ? element_bits(dt) / 8 : 0; }

const char* to_string(error_code_t c) {
  switch (c) {
    case error_code_t::OK: return "OK";
    case error_code_t::ATTRIBUTE_NOT_SET: return "ATTRIBUTE_NOT_SET";
    case error_code_t::SHAPE_DEDUCTION_FAILED: return "SHAPE_DEDUCTION_FAILED";
    case error_code_t::INVALID_TENSOR_NAME: return "INVALID_TENSOR_NAME";
    case error_code_t::INVALID_VARIANT_PACK: return "INVALID_VARIANT_PACK";
    case error_code_t::GRAPH_NOT_SUPPORTED: return "GRAPH_NOT_SUPPORTED";
    case error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED: return "GRAPH_EXECUTION_PLAN_CREATION_FAILED";
    case error_code_t::GRAPH_EXECUTION_FAILED: return "GRAPH_EXECUTION_FAILED";
    case error_code_t::HEURISTIC_QUERY_FAILED: return "HEURISTIC_QUERY_FAILED";
    case error_code_t::UNSUPPORTED_GRAPH_FORMAT: return "UNSUPPORTED_GRAPH_FORMAT";
    case error_code_t::CUDA_API_FAILED: return "CUDA_API_FAILED";
    case error_code_t::CUDNN_BACKEND_API_FAILED: return "CUDNN_BACKEND_API_FAILED";
    case error_code_t::INVALID_CUDA_DEVICE: return "INVALID_CUDA_DEVICE";
    case error_code_t::HANDLE_ERROR: return "HANDLE_ERROR";
    case error_code_t::INVALID_VALUE: return "INVALID_VALUE";
    case error_code_t::NVRTC_COMPILATION_FAILED: return "NVRTC_COMPILATION_FAILED";
  }
  return "UNKNOWN";
}

}  // namespace frost
