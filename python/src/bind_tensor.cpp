// frost.tensor: a tensor declaration (Tensor_attributes) shared between Python and the graph.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <sstream>

#include "bindings.h"

namespace frost::python {

using graph::Tensor_attributes;
using graph::TensorPtr;

namespace {

std::string list_string(const std::vector<int64_t>& v) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << ']';
  return s.str();
}

std::string tensor_repr(const Tensor_attributes& t) {
  std::ostringstream s;
  s << "frost.tensor(name='" << t.get_name() << "', uid=" << (t.has_uid() ? std::to_string(t.get_uid()) : "unset")
    << ", dim=" << list_string(t.get_dim()) << ", stride=" << list_string(t.get_stride())
    << ", data_type=" << to_string(t.get_data_type());
  if (t.get_is_virtual()) s << ", virtual";
  if (t.get_pass_by_value()) s << ", value=" << *t.get_pass_by_value();
  s << ')';
  return s.str();
}

}  // namespace

void bind_tensor(nb::module_& m) {
  // Setters return the tensor itself so that calls chain as in cuDNN Frontend:
  //   graph.relu(input=x).set_output(True).set_data_type(frost.data_type.HALF)
  constexpr auto self = nb::rv_policy::reference;
  nb::class_<Tensor_attributes>(m, "tensor", "A tensor declaration: dims, strides, data type; never its memory.")
      .def(nb::init<>())
      .def("set_name", [](Tensor_attributes& t, std::string v) -> Tensor_attributes& { return t.set_name(std::move(v)); }, self)
      .def("set_dim", [](Tensor_attributes& t, std::vector<int64_t> v) -> Tensor_attributes& { return t.set_dim(std::move(v)); }, self)
      .def("set_stride", [](Tensor_attributes& t, std::vector<int64_t> v) -> Tensor_attributes& { return t.set_stride(std::move(v)); }, self)
      .def("set_data_type", [](Tensor_attributes& t, DataType_t v) -> Tensor_attributes& { return t.set_data_type(v); }, self)
      .def("set_uid", [](Tensor_attributes& t, int64_t v) -> Tensor_attributes& { return t.set_uid(v); }, self)
      .def("clear_uid", [](Tensor_attributes& t) -> Tensor_attributes& { return t.clear_uid(); }, self)
      .def("set_is_virtual", [](Tensor_attributes& t, bool v) -> Tensor_attributes& { return t.set_is_virtual(v); }, self)
      .def("set_output", [](Tensor_attributes& t, bool v) -> Tensor_attributes& { return t.set_output(v); }, self)
      .def("set_is_pass_by_value", [](Tensor_attributes& t, bool v) -> Tensor_attributes& { return t.set_is_pass_by_value(v); }, self)
      .def("set_pass_by_value", [](Tensor_attributes& t, double v) -> Tensor_attributes& { return t.set_pass_by_value(v); }, self)
      .def("set_reordering_type", [](Tensor_attributes& t, TensorReordering_t v) -> Tensor_attributes& { return t.set_reordering_type(v); }, self)
      .def("set_ragged_offset", [](Tensor_attributes& t, TensorPtr v) -> Tensor_attributes& { return t.set_ragged_offset(std::move(v)); }, self)
      .def("set_alignment", [](Tensor_attributes& t, int64_t v) -> Tensor_attributes& { return t.set_alignment(v); }, self)
      .def("get_name", &Tensor_attributes::get_name)
      .def("get_dim", &Tensor_attributes::get_dim)
      .def("get_stride", &Tensor_attributes::get_stride)
      .def("get_data_type", &Tensor_attributes::get_data_type)
      .def("get_uid", &Tensor_attributes::get_uid)
      .def("has_uid", &Tensor_attributes::has_uid)
      .def("get_is_virtual", &Tensor_attributes::get_is_virtual)
      .def("get_is_output", [](const Tensor_attributes& t) { return !t.get_is_virtual(); })
      .def("get_is_pass_by_value", &Tensor_attributes::get_is_pass_by_value)
      .def("get_pass_by_value", &Tensor_attributes::get_pass_by_value)
      .def("get_reordering_type", &Tensor_attributes::get_reordering_type)
      .def("get_ragged_offset", &Tensor_attributes::get_ragged_offset)
      .def("get_alignment", &Tensor_attributes::get_alignment)
      .def("get_volume", &Tensor_attributes::get_volume)
      .def("__repr__", &tensor_repr);
}

}  // namespace frost::python
