// Linear attention with the (gated) delta rule: GDN and KDA, forward and backward.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

// scale, use_qk_l2norm_in_kernel, initial_state, cu_seqlens and state_indices, common to the four ops.
template <class Cls>
AttributesClass<Cls> delta_rule_class(nb::module_& m, const char* py_name) {
  AttributesClass<Cls> c(m, py_name);
  c.setter("set_scale", &Cls::set_scale)
      .setter("set_use_qk_l2norm_in_kernel", &Cls::set_use_qk_l2norm_in_kernel)
      .tensor_setter("set_initial_state", &Cls::set_initial_state)
      .tensor_setter("set_cu_seqlens", &Cls::set_cu_seqlens)
      .tensor_setter("set_state_indices", &Cls::set_state_indices);
  return c;
}

void bind_linear_attention(nb::module_& m, GraphClass& g) {
  delta_rule_class<Gdn_attributes>(m, "Gdn_attributes")
      .setter("set_output_final_state", &Gdn_attributes::set_output_final_state);
  delta_rule_class<Kda_attributes>(m, "Kda_attributes")
      .setter("set_output_final_state", &Kda_attributes::set_output_final_state);
  delta_rule_class<Gdn_backward_attributes>(m, "Gdn_backward_attributes")
      .tensor_setter("set_d_final_state", &Gdn_backward_attributes::set_d_final_state);
  delta_rule_class<Kda_backward_attributes>(m, "Kda_backward_attributes")
      .tensor_setter("set_d_final_state", &Kda_backward_attributes::set_d_final_state);

  g.def("gdn", &Graph::gdn, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("g").none(), nb::arg("beta").none(),
        nb::arg("attributes"))
      .def("kda", &Graph::kda, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("g").none(), nb::arg("beta").none(),
           nb::arg("attributes"))
      .def("gdn_backward", &Graph::gdn_backward, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("g").none(),
           nb::arg("beta").none(), nb::arg("d_o"), nb::arg("attributes"))
      .def("kda_backward", &Graph::kda_backward, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("g").none(),
           nb::arg("beta").none(), nb::arg("d_o"), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_linear_attention);

}  // namespace frost::python
