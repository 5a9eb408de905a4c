// The data-movement ops (reduction, reshape, transpose, slice, concatenate): attributes and builders.
#include <nanobind/stl/pair.h>

#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_shape_ops(nb::module_& m, GraphClass& g) {
  AttributesClass<Reduction_attributes>(m, "Reduction_attributes")
      .setter("set_mode", &Reduction_attributes::set_mode)
      .setter("set_is_deterministic", &Reduction_attributes::set_is_deterministic)
      .def("get_mode", &Reduction_attributes::get_mode);
  AttributesClass<Reshape_attributes>(m, "Reshape_attributes")
      .setter("set_dim", &Reshape_attributes::set_dim)
      .setter("set_stride", &Reshape_attributes::set_stride);
  AttributesClass<Transpose_attributes>(m, "Transpose_attributes")
      .setter("set_permutation", &Transpose_attributes::set_permutation);
  AttributesClass<Slice_attributes>(m, "Slice_attributes").setter("set_slices", &Slice_attributes::set_slices);
  AttributesClass<Concatenate_attributes>(m, "Concatenate_attributes")
      .setter("set_axis", &Concatenate_attributes::set_axis)
      .setter("set_in_place_index", &Concatenate_attributes::set_in_place_index);

  g.def("reduction", &Graph::reduction, nb::arg("x"), nb::arg("attributes"))
      .def("reshape", &Graph::reshape, nb::arg("x"), nb::arg("attributes"))
      .def("transpose", &Graph::transpose, nb::arg("x"), nb::arg("attributes"))
      .def("slice", &Graph::slice, nb::arg("x"), nb::arg("attributes"))
      .def("concatenate", &Graph::concatenate, nb::arg("xs"), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_shape_ops);

}  // namespace frost::python
