// Mamba-2's selective state-space scan (MAMBA2), forward.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_mamba2(nb::module_& m, GraphClass& g) {
  AttributesClass<Mamba2_attributes>(m, "Mamba2_attributes")
      .setter("set_dt_softplus", &Mamba2_attributes::set_dt_softplus)
      .def(
          "set_dt_limit",
          [](Mamba2_attributes& a, float lo, float hi) -> Mamba2_attributes& { return a.set_dt_limit(lo, hi); },
          nb::arg("lo"), nb::arg("hi"), nb::rv_policy::reference)
      .setter("set_output_final_state", &Mamba2_attributes::set_output_final_state)
      .tensor_setter("set_d", &Mamba2_attributes::set_d)
      .tensor_setter("set_z", &Mamba2_attributes::set_z)
      .tensor_setter("set_dt_bias", &Mamba2_attributes::set_dt_bias)
      .tensor_setter("set_initial_state", &Mamba2_attributes::set_initial_state)
      .tensor_setter("set_cu_seqlens", &Mamba2_attributes::set_cu_seqlens);
  g.def("mamba2", &Graph::mamba2, nb::arg("x"), nb::arg("dt").none(), nb::arg("a").none(), nb::arg("b").none(),
        nb::arg("c").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_mamba2);

}  // namespace frost::python
