// RMSNorm and LayerNorm, forward and backward: attributes and builders. Scale and bias of the forward
// ops may be None (a scale of 1, no bias).
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_norm(nb::module_& m, GraphClass& g) {
  AttributesClass<Rmsnorm_attributes>(m, "Rmsnorm_attributes")
      .setter("set_forward_phase", &Rmsnorm_attributes::set_forward_phase)
      .tensor_setter("set_epsilon", &Rmsnorm_attributes::set_epsilon)
      .tensor_setter("set_bias", &Rmsnorm_attributes::set_bias);
  AttributesClass<Layernorm_attributes>(m, "Layernorm_attributes")
      .setter("set_forward_phase", &Layernorm_attributes::set_forward_phase)
      .tensor_setter("set_epsilon", &Layernorm_attributes::set_epsilon);
  AttributesClass<Rmsnorm_backward_attributes>(m, "Rmsnorm_backward_attributes")
      .setter("has_dbias_output", &Rmsnorm_backward_attributes::has_dbias_output);
  using LnBwd = Layernorm_backward_attributes;
  AttributesClass<LnBwd>(m, "Layernorm_backward_attributes")
      .def(
          "set_saved_mean_and_inv_variance",
          [](LnBwd& a, TensorPtr mean, TensorPtr inv_variance) -> LnBwd& {
            return a.set_saved_mean_and_inv_variance(std::move(mean), std::move(inv_variance));
          },
          nb::arg("mean").none(), nb::arg("inv_variance").none(), nb::rv_policy::reference)
      .tensor_setter("set_epsilon", &LnBwd::set_epsilon);

  g.def("rmsnorm", &Graph::rmsnorm, nb::arg("x"), nb::arg("scale").none(), nb::arg("attributes"))
      .def("layernorm", &Graph::layernorm, nb::arg("x"), nb::arg("scale").none(), nb::arg("bias").none(),
           nb::arg("attributes"))
      .def("rmsnorm_backward", &Graph::rmsnorm_backward, nb::arg("dy"), nb::arg("x"), nb::arg("scale"),
           nb::arg("inv_rms").none(), nb::arg("attributes"))
      .def("layernorm_backward", &Graph::layernorm_backward, nb::arg("dy"), nb::arg("x"), nb::arg("scale"),
           nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_norm);

}  // namespace frost::python
