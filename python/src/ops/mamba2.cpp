// Mamba-2's selective state-space scan: MAMBA2 and MAMBA2_BACKWARD.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

// dt_softplus, dt_limit and the optional inputs, common to the forward and the backward.
template <class Cls>
AttributesClass<Cls> mamba2_class(nb::module_& m, const char* py_name) {
  AttributesClass<Cls> c(m, py_name);
  c.setter("set_dt_softplus", &Cls::set_dt_softplus)
      .def(
          "set_dt_limit", [](Cls& a, float lo, float hi) -> Cls& { return a.set_dt_limit(lo, hi); }, nb::arg("lo"),
          nb::arg("hi"), nb::rv_policy::reference)
      .tensor_setter("set_d", &Cls::set_d)
      .tensor_setter("set_z", &Cls::set_z)
      .tensor_setter("set_dt_bias", &Cls::set_dt_bias)
      .tensor_setter("set_initial_state", &Cls::set_initial_state)
      .tensor_setter("set_cu_seqlens", &Cls::set_cu_seqlens);
  return c;
}

void bind_mamba2(nb::module_& m, GraphClass& g) {
  mamba2_class<Mamba2_attributes>(m, "Mamba2_attributes")
      .setter("set_output_final_state", &Mamba2_attributes::set_output_final_state);
  mamba2_class<Mamba2_backward_attributes>(m, "Mamba2_backward_attributes")
      .tensor_setter("set_d_final_state", &Mamba2_backward_attributes::set_d_final_state);
  g.def("mamba2", &Graph::mamba2, nb::arg("x"), nb::arg("dt").none(), nb::arg("a").none(), nb::arg("b").none(),
        nb::arg("c").none(), nb::arg("attributes"))
      .def("mamba2_backward", &Graph::mamba2_backward, nb::arg("x"), nb::arg("dt").none(), nb::arg("a").none(),
           nb::arg("b").none(), nb::arg("c").none(), nb::arg("d_y").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_mamba2);

}  // namespace frost::python
