// The CPU reference executor: runs a validated graph node by node on host memory. Each op's
// run_reference() loads its inputs as dense row-major arrays, computes in T (float, or double in
// the fp64 mode), and stores its outputs as their declared data types.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "graph/graph_state.h"

namespace frost::detail {

enum class Precision { F32, F64 };

// A dense row-major array.
template <class T>
struct Array {
  std::vector<int64_t> dim;
  std::vector<T> v;

  Array() = default;
  explicit Array(std::vector<int64_t> d, T fill = T(0)) : dim(std::move(d)) { v.assign(static_cast<size_t>(volume()), fill); }
  int64_t volume() const {
    int64_t n = 1;
    for (int64_t d : dim) n *= d;
    return n;
  }
  int64_t size() const { return static_cast<int64_t>(v.size()); }
  T& operator[](int64_t i) { return v[static_cast<size_t>(i)]; }
  const T& operator[](int64_t i) const { return v[static_cast<size_t>(i)]; }
};

class RefExec {
 public:
  RefExec(const GraphState& g, const VariantPack& pack, Precision p) : graph_(g), pack_(pack), precision_(p) {}

  Precision precision() const { return precision_; }
  // Dense copy of a tensor's elements (pass-by-value scalars broadcast to the declared dims).
  template <class T>
  Array<T> load(const TensorPtr& t) const;
  // Writes every element of `a` (dims must match the declaration).
  template <class T>
  void store(const TensorPtr& t, const Array<T>& a);

  error_t run();

 private:
  const GraphState& graph_;
  const VariantPack& pack_;
  Precision precision_;
  // Virtual tensors live here; in the F32 mode values are rounded to the declared type.
  std::unordered_map<const graph::Tensor_attributes*, std::vector<double>> virtuals_;
};

// Calls f(T{}) with T = float or double per the executor's precision.
template <class F>
error_t with_precision(const RefExec& ex, F&& f) {
  if (ex.precision() == Precision::F64) return f(double{});
  return f(float{});
}

// Runs the whole graph on the host in the given precision; used by the reference engine and by
// tests and tools as the fp64 oracle.
error_t reference_execute(const GraphState& g, const VariantPack& pack, Precision p);

}  // namespace frost::detail
