// Turns FrostException into the typed Python exceptions of frost._errors.
#include "bindings.h"

namespace frost::python {

void bind_errors(nb::module_&) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const FrostException& e) {
      // frost._errors owns the class hierarchy; asking it keeps the mapping in one place.
      nb::object err = nb::module_::import_("frost._errors").attr("make_error")(e.code(), e.what());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
    }
  });
}

}  // namespace frost::python
