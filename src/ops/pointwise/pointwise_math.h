// Scalar definitions of every pointwise mode. Backward modes take (dy, x) and return dx.
#pragma once

#include <cmath>

#include "frost/ops/pointwise.h"

namespace frost::detail {

template <class T>
struct PointwiseParams {
  T relu_lower = 0, relu_upper = INFINITY, relu_slope = 0;
  T swish_beta = 1, elu_alpha = 1, softplus_beta = 1;
};

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
T gelu_tanh_inner(T x) {
  const T k = T(0.7978845608028654);  // sqrt(2 / pi)
  return k * (x + T(0.044715) * x * x * x);
}

// Returns false for modes that need a different path (GEN_INDEX, NOT_SET).
template <class T>
bool pointwise_apply(PointwiseMode_t m, const PointwiseParams<T>& p, T a, T b, T c, T& out) {
  using M = PointwiseMode_t;
  const T inv_sqrt2 = T(0.7071067811865476);
  const T inv_sqrt_2pi = T(0.3989422804014327);
  switch (m) {
    case M::ADD: out = a + b; return true;
    case M::SUB: out = a - b; return true;
    case M::MUL: out = a * b; return true;
    case M::DIV: out = a / b; return true;
    case M::ADD_SQUARE: out = a + b * b; return true;
    case M::MAX: out = std::fmax(a, b); return true;
    case M::MIN: out = std::fmin(a, b); return true;
    case M::MOD: out = std::fmod(a, b); return true;
    case M::POW: out = std::pow(a, b); return true;
    case M::SQRT: out = std::sqrt(a); return true;
    case M::RSQRT: out = T(1) / std::sqrt(a); return true;
    case M::RECIPROCAL: out = T(1) / a; return true;
    case M::EXP: out = std::exp(a); return true;
    case M::LOG: out = std::log(a); return true;
    case M::NEG: out = -a; return true;
    case M::ABS: out = std::fabs(a); return true;
    case M::CEIL: out = std::ceil(a); return true;
    case M::FLOOR: out = std::floor(a); return true;
    case M::SIN: out = std::sin(a); return true;
    case M::COS: out = std::cos(a); return true;
    case M::TAN: out = std::tan(a); return true;
    case M::ERF: out = std::erf(a); return true;
    case M::IDENTITY: out = a; return true;
    case M::LOGICAL_NOT: out = a == T(0) ? T(1) : T(0); return true;
    case M::LOGICAL_AND: out = (a != T(0) && b != T(0)) ? T(1) : T(0); return true;
    case M::LOGICAL_OR: out = (a != T(0) || b != T(0)) ? T(1) : T(0); return true;
    case M::CMP_EQ: out = a == b ? T(1) : T(0); return true;
    case M::CMP_NEQ: out = a != b ? T(1) : T(0); return true;
    case M::CMP_GT: out = a > b ? T(1) : T(0); return true;
    case M::CMP_GE: out = a >= b ? T(1) : T(0); return true;
    case M::CMP_LT: out = a < b ? T(1) : T(0); return true;
    case M::CMP_LE: out = a <= b ? T(1) : T(0); return true;
    case M::BINARY_SELECT: out = c != T(0) ? a : b; return true;
    case M::RELU_FWD:
      out = a >= p.relu_lower ? std::fmin(a, p.relu_upper) : p.relu_lower + p.relu_slope * (a - p.relu_lower);
      return true;
    case M::TANH_FWD: out = std::tanh(a); return true;
    case M::SIGMOID_FWD: out = sigmoid(a); return true;
    case M::ELU_FWD: out = a > T(0) ? a : p.elu_alpha * (std::exp(a) - T(1)); return true;
    case M::GELU_FWD: out = T(0.5) * a * (T(1) + std::erf(a * inv_sqrt2)); return true;
    case M::GELU_APPROX_TANH_FWD: out = T(0.5) * a * (T(1) + std::tanh(gelu_tanh_inner(a))); return true;
    case M::SOFTPLUS_FWD: out = std::log1p(std::exp(p.softplus_beta * a)) / p.softplus_beta; return true;
    case M::SWISH_FWD: out = a * sigmoid(p.swish_beta * a); return true;
    // Backward: a = dy, b = x.
    case M::RELU_BWD: {
      const T g = b > p.relu_lower ? (b < p.relu_upper ? T(1) : T(0)) : p.relu_slope;
      out = a * g;
      return true;
    }
    case M::TANH_BWD: {
      const T t = std::tanh(b);
      out = a * (T(1) - t * t);
      return true;
    }
    case M::SIGMOID_BWD: {
      const T s = sigmoid(b);
      out = a * s * (T(1) - s);
      return true;
    }
    case M::ELU_BWD: out = a * (b > T(0) ? T(1) : p.elu_alpha * std::exp(b)); return true;
    case M::GELU_BWD:
      out = a * (T(0.5) * (T(1) + std::erf(b * inv_sqrt2)) + b * inv_sqrt_2pi * std::exp(T(-0.5) * b * b));
      return true;
    case M::GELU_APPROX_TANH_BWD: {
      const T k = T(0.7978845608028654);
      const T t = std::tanh(gelu_tanh_inner(b));
      const T dinner = k * (T(1) + T(3) * T(0.044715) * b * b);
      out = a * (T(0.5) * (T(1) + t) + T(0.5) * b * (T(1) - t * t) * dinner);
      return true;
    }
    case M::SOFTPLUS_BWD: out = a * sigmoid(p.softplus_beta * b); return true;
    case M::SWISH_BWD: {
      const T s = sigmoid(p.swish_beta * b);
      out = a * (s + p.swish_beta * b * s * (T(1) - s));
      return true;
    }
    case M::GEN_INDEX:
    case M::NOT_SET: return false;
  }
  return false;
}

}  // namespace frost::detail
