// Shared helpers for C++ tests: host buffers in any data type, random fills, sentinels, and
// building + running a graph on the CPU reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/dtype_convert.h"
#include "engines/reference/ref_exec.h"
#include "frost/frost.h"

namespace frost::test {

namespace fe = frost;
using graph::TensorPtr;

// A host buffer holding one declared tensor (strided span) in its data type.
struct HostTensor {
  TensorPtr t;
  std::vector<uint8_t> bytes;

  explicit HostTensor(const TensorPtr& tensor) : t(tensor) {
    int64_t span = 1;
    for (size_t i = 0; i < t->get_dim().size(); ++i) span += (t->get_dim()[i] - 1) * t->get_stride()[i];
    const int64_t bits = element_bits(t->get_data_type());
    bytes.assign(static_cast<size_t>((span * bits + 7) / 8 + 8), 0);
  }
  void* data() { return bytes.data(); }
  // Element at a row-major logical index.
  int64_t offset(int64_t n) const {
    int64_t off = 0;
    const auto& d = t->get_dim();
    const auto& s = t->get_stride();
    for (size_t k = d.size(); k-- > 0;) {
      off += (n % d[k]) * s[k];
      n /= d[k];
    }
    return off;
  }
  int64_t volume() const { return t->get_volume(); }
  double get(int64_t n) const { return detail::read_element(bytes.data(), t->get_data_type(), offset(n)); }
  void set(int64_t n, double v) { detail::write_element(bytes.data(), t->get_data_type(), offset(n), v); }
  void fill_random(std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t n = 0; n < volume(); ++n) set(n, u(rng));
  }
  // Every element set to NaN (or the type's largest value where it has no NaN).
  void poison() {
    for (int64_t n = 0; n < volume(); ++n) set(n, detail::is_floating(t->get_data_type()) ? NAN : 123456789.0);
  }
  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(volume()));
    for (int64_t n = 0; n < volume(); ++n) v[static_cast<size_t>(n)] = get(n);
    return v;
  }
};

// Max absolute error and relative L2 error of `got` against `want`; NaN anywhere fails.
struct ErrorStats {
  double max_abs = 0, rel_l2 = 0;
  bool has_nan = false;
};
inline ErrorStats compare(const std::vector<double>& got, const std::vector<double>& want) {
  ErrorStats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) s.has_nan = true;
    if (std::isnan(got[i]) || std::isnan(want[i])) continue;
    if (std::isinf(want[i]) && got[i] == want[i]) continue;
    const double d = got[i] - want[i];
    s.max_abs = std::max(s.max_abs, std::fabs(d));
    num += d * d;
    den += want[i] * want[i];
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

#define EXPECT_CLOSE(got, want, tol)                                                  \
  do {                                                                                \
    auto s_ = ::frost::test::compare((got), (want));                                 \
    EXPECT_FALSE(s_.has_nan) << "NaN mismatch";                                        \
    EXPECT_LE(s_.max_abs, (tol)) << "max abs error " << s_.max_abs << " rel l2 " << s_.rel_l2; \
  } while (0)

// Declares a non-virtual input tensor.
inline TensorPtr input(graph::Graph& g, const std::string& name, std::vector<int64_t> dims,
                       DataType_t dt = DataType_t::FLOAT, std::vector<int64_t> strides = {}) {
  graph::Tensor_attributes a;
  a.set_name(name).set_dim(std::move(dims)).set_data_type(dt);
  if (!strides.empty()) a.set_stride(std::move(strides));
  return g.tensor(a);
}

// A case list where every case also runs in the reference's fp64 mode: add(label, tweak) appends the
// case that `tweak` makes from a default one, then its twin with fp64 set and "_fp64" after the label.
template <class Case>
struct Fp64Twins {
  std::vector<Case> cases;
  void add(std::string label, const std::function<void(Case&)>& tweak) {
    Case c;
    c.label = std::move(label);
    tweak(c);
    cases.push_back(c);
    c.label += "_fp64";
    c.fp64 = true;
    cases.push_back(std::move(c));
  }
};

inline Handle cpu_handle() { return Handle(Device::cpu()); }

// Builds the graph on the CPU and runs it with the given buffers.
inline error_t build_and_run(graph::Graph& g, std::vector<HostTensor*> buffers) {
  Handle h = cpu_handle();
  FROST_CHECK(g.build(h, {HeurMode_t::A}));
  std::unordered_map<int64_t, void*> pack;
  for (auto* b : buffers) pack[b->t->get_uid()] = b->data();
  int64_t ws = 0;
  FROST_CHECK(g.get_workspace_size(ws));
  std::vector<uint8_t> workspace(static_cast<size_t>(ws) + 1);
  return g.execute(h, pack, workspace.data());
}

// n values drawn uniformly from [lo, hi).
inline std::vector<double> uniform_values(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& e : v) e = u(rng);
  return v;
}

// Central differences of `loss` against each element of `values`, which it reads: each element is moved by
// +-step in place and put back.
inline std::vector<double> central_differences(std::vector<double>& values, double step,
                                               const std::function<double()>& loss) {
  std::vector<double> grad(values.size());
  for (size_t i = 0; i < grad.size(); ++i) {
    const double keep = values[i];
    values[i] = keep + step;
    const double up = loss();
    values[i] = keep - step;
    const double down = loss();
    values[i] = keep;
    grad[i] = (up - down) / (2 * step);
  }
  return grad;
}

// Inputs with their values: each value is stored in its tensor's data type, and the vector gets back what the
// type kept.
using ValuedInputs = std::vector<std::pair<TensorPtr, std::vector<double>*>>;

// Runs g on the CPU with host buffers for `inputs`, for integer inputs (a null tensor is skipped) and for
// `outputs`, poisoned first; `results` gets the outputs' values in order.
inline error_t run_on_host(graph::Graph& g, ValuedInputs& inputs,
                           const std::vector<std::pair<TensorPtr, const std::vector<int64_t>*>>& integers,
                           const std::vector<TensorPtr>& outputs, std::vector<std::vector<double>>& results) {
  std::vector<std::unique_ptr<HostTensor>> bufs;
  for (auto& [t, values] : inputs) {
    bufs.push_back(std::make_unique<HostTensor>(t));
    for (int64_t n = 0; n < bufs.back()->volume(); ++n) bufs.back()->set(n, (*values)[static_cast<size_t>(n)]);
    *values = bufs.back()->values();
  }
  for (const auto& [t, values] : integers) {
    if (!t) continue;
    bufs.push_back(std::make_unique<HostTensor>(t));
    for (size_t n = 0; n < values->size(); ++n)
      bufs.back()->set(static_cast<int64_t>(n), static_cast<double>((*values)[n]));
  }
  const size_t first_output = bufs.size();
  for (const auto& t : outputs) {
    bufs.push_back(std::make_unique<HostTensor>(t));
    bufs.back()->poison();
  }
  std::vector<HostTensor*> pack;
  for (auto& b : bufs) pack.push_back(b.get());
  const error_t e = build_and_run(g, pack);
  results.clear();
  for (size_t i = first_output; i < bufs.size(); ++i) results.push_back(bufs[i]->values());
  return e;
}

}  // namespace frost::test
