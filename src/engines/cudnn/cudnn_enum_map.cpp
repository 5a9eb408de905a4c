// frost enums in the backend's spelling (values from cudnn_backend_abi.h).
#include <array>
#include <utility>

#include "engines/cudnn/cudnn_lowering.h"

namespace frost::detail {
namespace {

template <class E, size_t N>
bool lookup(const std::array<std::pair<E, int32_t>, N>& table, E e, int32_t& out) {
  for (const auto& [k, v] : table)
    if (k == e) {
      out = v;
      return true;
    }
  return false;
}

namespace d = cudnn_abi::dtype;
using DT = DataType_t;
constexpr std::array<std::pair<DT, int32_t>, 18> kDataTypes{{
    {DT::FLOAT, d::FLOAT},
    {DT::DOUBLE, d::DOUBLE},
    {DT::HALF, d::HALF},
    {DT::INT8, d::INT8},
    {DT::INT32, d::INT32},
    {DT::INT8x4, d::INT8x4},
    {DT::UINT8, d::UINT8},
    {DT::UINT8x4, d::UINT8x4},
    {DT::INT8x32, d::INT8x32},
    {DT::BFLOAT16, d::BFLOAT16},
    {DT::INT64, d::INT64},
    {DT::BOOLEAN, d::BOOLEAN},
    {DT::FP8_E4M3, d::FP8_E4M3},
    {DT::FP8_E5M2, d::FP8_E5M2},
    {DT::FAST_FLOAT_FOR_FP8, d::FAST_FLOAT_FOR_FP8},
    {DT::FP8_E8M0, d::FP8_E8M0},
    {DT::FP4_E2M1, d::FP4_E2M1},
    {DT::INT4, d::INT4},
}};

namespace p = cudnn_abi::pw;
using M = PointwiseMode_t;
constexpr std::array<std::pair<M, int32_t>, 50> kPointwise{{
    {M::ADD, p::ADD},
    {M::MUL, p::MUL},
    {M::SQRT, p::SQRT},
    {M::MAX, p::MAX},
    {M::MIN, p::MIN},
    {M::RELU_FWD, p::RELU_FWD},
    {M::TANH_FWD, p::TANH_FWD},
    {M::SIGMOID_FWD, p::SIGMOID_FWD},
    {M::ELU_FWD, p::ELU_FWD},
    {M::GELU_FWD, p::GELU_FWD},
    {M::SOFTPLUS_FWD, p::SOFTPLUS_FWD},
    {M::SWISH_FWD, p::SWISH_FWD},
    {M::RELU_BWD, p::RELU_BWD},
    {M::TANH_BWD, p::TANH_BWD},
    {M::SIGMOID_BWD, p::SIGMOID_BWD},
    {M::ELU_BWD, p::ELU_BWD},
    {M::GELU_BWD, p::GELU_BWD},
    {M::SOFTPLUS_BWD, p::SOFTPLUS_BWD},
    {M::SWISH_BWD, p::SWISH_BWD},
    {M::ERF, p::ERF},
    {M::IDENTITY, p::IDENTITY},
    {M::GELU_APPROX_TANH_BWD, p::GELU_APPROX_TANH_BWD},
    {M::GELU_APPROX_TANH_FWD, p::GELU_APPROX_TANH_FWD},
    {M::GEN_INDEX, p::GEN_INDEX},
    {M::BINARY_SELECT, p::BINARY_SELECT},
    {M::EXP, p::EXP},
    {M::LOG, p::LOG},
    {M::NEG, p::NEG},
    {M::MOD, p::MOD},
    {M::POW, p::POW},
    {M::ABS, p::ABS},
    {M::CEIL, p::CEIL},
    {M::COS, p::COS},
    {M::FLOOR, p::FLOOR},
    {M::RSQRT, p::RSQRT},
    {M::SIN, p::SIN},
    {M::LOGICAL_NOT, p::LOGICAL_NOT},
    {M::TAN, p::TAN},
    {M::SUB, p::SUB},
    {M::ADD_SQUARE, p::ADD_SQUARE},
    {M::DIV, p::DIV},
    {M::CMP_EQ, p::CMP_EQ},
    {M::CMP_NEQ, p::CMP_NEQ},
    {M::CMP_GT, p::CMP_GT},
    {M::CMP_GE, p::CMP_GE},
    {M::CMP_LT, p::CMP_LT},
    {M::CMP_LE, p::CMP_LE},
    {M::LOGICAL_AND, p::LOGICAL_AND},
    {M::LOGICAL_OR, p::LOGICAL_OR},
    {M::RECIPROCAL, p::RECIPROCAL},
}};

namespace r = cudnn_abi::reduce;
using R = ReductionMode_t;
constexpr std::array<std::pair<R, int32_t>, 9> kReductions{{
    {R::ADD, r::ADD},
    {R::MUL, r::MUL},
    {R::MIN, r::MIN},
    {R::MAX, r::MAX},
    {R::AMAX, r::AMAX},
    {R::AVG, r::AVG},
    {R::NORM1, r::NORM1},
    {R::NORM2, r::NORM2},
    {R::MUL_NO_ZEROS, r::MUL_NO_ZEROS},
}};

}  // namespace

bool backend_dtype(DataType_t dt, int32_t& out) { return lookup(kDataTypes, dt, out); }
bool backend_pointwise_mode(PointwiseMode_t m, int32_t& out) { return lookup(kPointwise, m, out); }
bool backend_reduction_mode(ReductionMode_t m, int32_t& out) { return lookup(kReductions, m, out); }

}  // namespace frost::detail
