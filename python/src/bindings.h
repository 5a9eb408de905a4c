// Shared pieces of the frost._frost extension: the error bridge and the binder entry points.
#pragma once

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>

#include "frost/frost.h"

namespace nb = nanobind;

namespace frost::python {

// A bad error_t on its way to Python, where frost._errors turns it into a typed exception
// (GraphNotSupportedError, InvalidValueError, ...) that carries the code.
class FrostException : public std::runtime_error {
 public:
  FrostException(error_code_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  error_code_t code() const { return code_; }

 private:
  error_code_t code_;
};

inline void check(const error_t& e) {
  if (e.is_bad()) throw FrostException(e.get_code(), e.get_message());
}

void bind_enums(nb::module_& m);
void bind_errors(nb::module_& m);
void bind_tensor(nb::module_& m);
void bind_handle(nb::module_& m);
void bind_graph(nb::module_& m);
void bind_buffers(nb::module_& m);

}  // namespace frost::python
