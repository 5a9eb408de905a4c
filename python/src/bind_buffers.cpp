// Reads the DLPack (or buffer-protocol) description of any array object without copying it:
// the frost package checks it against the tensor declaration before execute touches memory.
#include <nanobind/ndarray.h>

#include "bindings.h"

namespace frost::python {

void bind_buffers(nb::module_& m) {
  m.def(
      "buffer_info",
      [](nb::handle obj) -> nb::object {
        nb::ndarray<nb::ro> a;
        if (!nb::try_cast(obj, a, /*convert=*/false)) return nb::none();
        nb::list shape, strides;
        for (size_t i = 0; i < a.ndim(); ++i) {
          shape.append(a.shape(i));
          strides.append(a.stride(i));
        }
        const auto dt = a.dtype();
        return nb::make_tuple(reinterpret_cast<uintptr_t>(a.data()), nb::tuple(shape), nb::tuple(strides),
                              static_cast<int>(dt.code), static_cast<int>(dt.bits), static_cast<int>(dt.lanes),
                              a.device_type(), a.device_id());
      },
      nb::arg("obj"),
      "(data_ptr, shape, strides in elements, dlpack type code, bits, lanes, device_type, device_id) of an "
      "object with __dlpack__ or the buffer protocol; None for anything else.");
}

}  // namespace frost::python
