// Matmul_attributes and Graph.matmul.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_matmul(nb::module_& m, GraphClass& g) {
  using A = Matmul_attributes;
  AttributesClass<A>(m, "Matmul_attributes")
      .setter("set_padding", &A::set_padding)
      .tensor_setter("set_m_override", &A::set_m_override)
      .tensor_setter("set_n_override", &A::set_n_override)
      .tensor_setter("set_k_override", &A::set_k_override);

  g.def("matmul", &Graph::matmul, nb::arg("a"), nb::arg("b"), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_matmul);

}  // namespace frost::python
