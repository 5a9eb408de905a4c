// Handles (where a graph runs and on which stream), version queries and the device facts that
// `python -m frost.env` prints.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>

#include "bindings.h"
#include "runtime/device.h"

namespace frost::python {

namespace {

// "cpu", "cuda" (device 0) or "cuda:N".
Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      const int ordinal = std::stoi(s.substr(5), &used);
      if (used == s.size() - 5) return Device::cuda(ordinal);
    } catch (const std::exception&) {
    }
  }
  throw FrostException(error_code_t::INVALID_VALUE, "device '" + s + "' is not one of 'cpu', 'cuda', 'cuda:N'");
}

nb::dict device_facts(int ordinal) {
  detail::DeviceFacts f;
  nb::dict d;
  if (!detail::query_device(ordinal, f)) return d;
  d["name"] = f.name;
  d["sm"] = f.sm_major * 10 + f.sm_minor;
  d["sm_count"] = f.sm_count;
  d["shared_memory_per_block_optin"] = f.shared_memory_per_block_optin;
  d["l2_bytes"] = f.l2_bytes;
  return d;
}

}  // namespace

void bind_handle(nb::module_& m) {
  nb::class_<Handle>(m, "Handle", "Where a graph executes (host or a CUDA device) and on which CUDA stream.")
      .def_prop_ro("device", [](const Handle& h) { return h.device().to_string(); })
      .def_prop_ro("is_cuda", [](const Handle& h) { return h.device().is_cuda(); })
      .def_prop_ro("device_ordinal", [](const Handle& h) { return h.device().ordinal; })
      .def("__repr__", [](const Handle& h) { return "frost.Handle(device='" + h.device().to_string() + "')"; });

  m.def(
      "create_handle",
      [](std::optional<std::string> device) {
        Handle h;
        check(device ? create_handle(h, parse_device(*device)) : create_handle(h));
        return h;
      },
      nb::arg("device") = nb::none(),
      "A handle on CUDA device 0 when one is usable, else on the host; device='cpu' | 'cuda' | 'cuda:N' picks one.");
  m.def("set_stream", [](Handle& h, uintptr_t stream) { h.set_stream(reinterpret_cast<void*>(stream)); },
        nb::arg("handle"), nb::arg("stream"), "Sets the CUDA stream (a raw cudaStream_t as an int) work is queued on.");
  m.def("get_stream", [](const Handle& h) { return reinterpret_cast<uintptr_t>(h.stream()); }, nb::arg("handle"));

  m.def("version_string", &version_string);
  m.def("backend_version", &backend_version,
        "The cuDNN graph-API feature level (cuDNN's numbering) that frost's graph surface matches.");
  m.def("backend_version_string", &backend_version_string);
  m.def("cuda_device_count", &cuda_device_count, "CUDA devices usable by this build (0 in a CPU-only build).");
  m.def("cuda_driver_version", &detail::cuda_driver_version);
  m.def("cuda_runtime_version", &detail::cuda_runtime_version);
  m.def("device_facts", &device_facts, nb::arg("ordinal"), "Name, SM version and sizes of a CUDA device ({} if none).");
}

}  // namespace frost::python
