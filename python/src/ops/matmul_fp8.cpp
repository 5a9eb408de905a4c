// Matmul_fp8_attributes and Graph.matmul_fp8 (a matmul on per-tensor scaled operands, with the amax of C).
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_matmul_fp8(nb::module_& m, GraphClass& g) {
  using A = Matmul_fp8_attributes;
  AttributesClass<A>(m, "Matmul_fp8_attributes")
      .setter("set_padding", &A::set_padding)
      .def("get_padding", &A::get_padding)
      .tensor_setter("set_m_override", &A::set_m_override)
      .tensor_setter("set_n_override", &A::set_n_override)
      .tensor_setter("set_k_override", &A::set_k_override);

  g.def("matmul_fp8", &Graph::matmul_fp8, nb::arg("a"), nb::arg("b"), nb::arg("descale_a").none(),
        nb::arg("descale_b").none(), nb::arg("scale_c").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_matmul_fp8);

}  // namespace frost::python
