#include "cli_common.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <sstream>

#ifdef FROST_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "common/dtype_convert.h"
#include "engines/reference/ref_exec.h"
#include "graph/graph_state.h"
#include "graph/shape_util.h"

namespace frost::cli {
namespace {

int64_t buffer_bytes(const graph::Tensor_attributes& t) {
  const int64_t span = detail::element_span(t.get_dim(), t.get_stride());
  return (span * element_bits(t.get_data_type()) + 7) / 8;
}

#ifdef FROST_WITH_CUDA
error_t cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return {error_code_t::CUDA_API_FAILED, std::string(what) + ": " + cudaGetErrorString(e)};
}
#endif

}  // namespace

Handle best_handle() {
  Handle h;
  create_handle(h);
  return h;
}

error_t build_on_best_device(graph::Graph& g, Handle& handle) {
  handle = best_handle();
  error_t e = g.build(handle, {HeurMode_t::A});
  if (e.is_good() || !handle.device().is_cuda() || e.get_code() != error_code_t::GRAPH_NOT_SUPPORTED) return e;
  std::printf("no engine serves the whole graph on %s; running on the host:\n", handle.device().to_string().c_str());
  for (const auto& d : g.get_decline_reasons()) std::printf("  declined on %s: %s\n", handle.device().to_string().c_str(), d.c_str());
  handle = Handle(Device::cpu());
  return g.build(handle, {HeurMode_t::A});
}

std::string read_file(const std::string& path, bool& ok) {
  std::ifstream f(path, std::ios::binary);
  ok = static_cast<bool>(f);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

double tolerance_for(DataType_t dt) {
  switch (dt) {
    case DataType_t::DOUBLE: return 1e-10;
    case DataType_t::FLOAT: return 2e-4;
    case DataType_t::HALF: return 1e-2;
    case DataType_t::BFLOAT16: return 4e-2;
    case DataType_t::FP8_E4M3: case DataType_t::FP8_E5M2: return 0.15;
    default: return 0.0;  // integers must match exactly
  }
}

Buffers::~Buffers() {
#ifdef FROST_WITH_CUDA
  for (auto& b : buffers_)
    if (b.device) cudaFree(b.device);
  if (handle_.device().is_cuda() && workspace_) cudaFree(workspace_);
#endif
}

bool Buffers::is_output(const Buffer& b) const {
  return std::count(output_uids_.begin(), output_uids_.end(), b.tensor->get_uid()) > 0;
}

error_t Buffers::allocate(const graph::Graph& g, uint64_t seed, bool tiled) {
  constexpr int64_t kBlock = int64_t{1} << 20;
  std::mt19937_64 rng(seed);
  const auto& st = g.state();
  std::vector<graph::TensorPtr> seen;
  for (const auto& node : st.nodes)
    for (const auto& p : const_cast<detail::Node&>(*node).ports()) {
      const auto& t = *p.slot;
      if (!t || t->get_is_virtual() || t->get_is_pass_by_value()) continue;
      if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
      seen.push_back(t);
      if (p.is_output) output_uids_.push_back(t->get_uid());
      Buffer b;
      b.tensor = t;
      b.bytes = buffer_bytes(*t);
      b.host.assign(static_cast<size_t>(b.bytes), 0);
      const DataType_t dt = t->get_data_type();
      const int64_t span = detail::element_span(t->get_dim(), t->get_stride());
      const int64_t written = tiled ? std::min(span, kBlock) : span;
      if (!p.is_output) {
        // Floats in [-1, 1]; integers (lengths, indices) in [1, 8].
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        std::uniform_int_distribution<int> ui(1, 8);
        for (int64_t i = 0; i < written; ++i)
          detail::write_element(b.host.data(), dt, i, detail::is_floating(dt) ? u(rng) : ui(rng));
      } else {
        for (int64_t i = 0; i < written; ++i)
          detail::write_element(b.host.data(), dt, i, detail::is_floating(dt) ? NAN : -7);
      }
      if (written < span) {  // whole elements: kBlock elements of any type fill whole bytes
        const auto block = static_cast<size_t>((written * element_bits(dt) + 7) / 8);
        for (size_t at = block; at < b.host.size(); at += block)
          std::copy_n(b.host.begin(), std::min(block, b.host.size() - at),
                      b.host.begin() + static_cast<std::ptrdiff_t>(at));
      }
#ifdef FROST_WITH_CUDA
      if (handle_.device().is_cuda()) {
        FROST_CHECK(cuda_check(cudaMalloc(&b.device, static_cast<size_t>(std::max<int64_t>(b.bytes, 1))), "cudaMalloc"));
        FROST_CHECK(cuda_check(cudaMemcpy(b.device, b.host.data(), static_cast<size_t>(b.bytes), cudaMemcpyHostToDevice), "cudaMemcpy"));
      }
#endif
      buffers_.push_back(std::move(b));
    }
  return {};
}

error_t Buffers::allocate_workspace(int64_t bytes) {
#ifdef FROST_WITH_CUDA
  if (handle_.device().is_cuda()) {
    if (bytes > 0) return cuda_check(cudaMalloc(&workspace_, static_cast<size_t>(bytes)), "cudaMalloc(workspace)");
    return {};
  }
#endif
  host_workspace_.assign(static_cast<size_t>(bytes) + 1, 0);
  workspace_ = host_workspace_.data();
  return {};
}

std::unordered_map<int64_t, void*> Buffers::variant_pack() const {
  std::unordered_map<int64_t, void*> p;
  for (const auto& b : buffers_) p[b.tensor->get_uid()] = b.device ? b.device : const_cast<uint8_t*>(b.host.data());
  return p;
}

std::unordered_map<int64_t, void*> Buffers::host_pack() {
  std::unordered_map<int64_t, void*> p;
  for (auto& b : buffers_) p[b.tensor->get_uid()] = b.host.data();
  return p;
}

error_t Buffers::download_outputs() {
#ifdef FROST_WITH_CUDA
  for (auto& b : buffers_)
    if (b.device && is_output(b))
      FROST_CHECK(cuda_check(cudaMemcpy(b.host.data(), b.device, static_cast<size_t>(b.bytes), cudaMemcpyDeviceToHost), "cudaMemcpy"));
#endif
  return {};
}

error_t check_against_reference(const graph::Graph& g, Buffers& bufs, std::vector<OutputError>& out) {
  // The reference writes its outputs into fresh host copies; inputs are shared read-only.
  std::vector<std::vector<uint8_t>> ref_outputs;
  auto pack = bufs.host_pack();
  for (auto& b : bufs.all())
    if (bufs.is_output(b)) {
      ref_outputs.push_back(b.host);
      pack[b.tensor->get_uid()] = ref_outputs.back().data();
    }
  FROST_CHECK(detail::reference_execute(g.state(), pack, detail::Precision::F64));
  size_t k = 0;
  for (auto& b : bufs.all()) {
    if (!bufs.is_output(b)) continue;
    const auto& ref = ref_outputs[k++];
    const auto& t = *b.tensor;
    OutputError e{t.get_name(), t.get_data_type()};
    double num = 0, den = 0;
    const int64_t vol = t.get_volume();
    std::vector<int64_t> idx(t.get_dim().size(), 0);
    for (int64_t n = 0; n < vol; ++n) {
      int64_t off = 0, rem = n;
      for (size_t a = t.get_dim().size(); a-- > 0;) {
        off += (rem % t.get_dim()[a]) * t.get_stride()[a];
        rem /= t.get_dim()[a];
      }
      const double got = detail::read_element(b.host.data(), t.get_data_type(), off);
      const double want = detail::read_element(ref.data(), t.get_data_type(), off);
      if (std::isnan(got) != std::isnan(want)) e.has_nan = true;
      if (std::isnan(got) || std::isnan(want) || (std::isinf(want) && got == want)) continue;
      const double d = got - want;
      e.max_abs = std::max(e.max_abs, std::fabs(d));
      num += d * d;
      den += want * want;
    }
    e.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    e.ok = !e.has_nan && e.rel_l2 <= tolerance_for(t.get_data_type()) + 1e-12;
    out.push_back(e);
  }
  return {};
}

}  // namespace frost::cli
