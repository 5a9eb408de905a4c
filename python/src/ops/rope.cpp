// Rotary position embedding: Rope_attributes, Rope_backward_attributes and their builders.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

template <class Cls>
void rope_attributes_class(nb::module_& m, const char* py_name) {
  AttributesClass<Cls>(m, py_name)
      .setter("set_interleaved", &Cls::set_interleaved)
      .setter("set_rotary_dim", &Cls::set_rotary_dim);
}

void bind_rope(nb::module_& m, GraphClass& g) {
  rope_attributes_class<Rope_attributes>(m, "Rope_attributes");
  rope_attributes_class<Rope_backward_attributes>(m, "Rope_backward_attributes");

  g.def("rope", &Graph::rope, nb::arg("x"), nb::arg("cos").none(), nb::arg("sin").none(), nb::arg("attributes"))
      .def("rope_backward", &Graph::rope_backward, nb::arg("dy"), nb::arg("cos").none(), nb::arg("sin").none(),
           nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_rope);

}  // namespace frost::python
