// Pointwise_attributes and Graph.pointwise (one, two or three operands).
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_pointwise(nb::module_& m, GraphClass& g) {
  using A = Pointwise_attributes;
  AttributesClass<A>(m, "Pointwise_attributes")
      .setter("set_mode", &A::set_mode)
      .setter("set_axis", &A::set_axis)
      .setter("set_relu_lower_clip", &A::set_relu_lower_clip)
      .setter("set_relu_upper_clip", &A::set_relu_upper_clip)
      .setter("set_relu_lower_clip_slope", &A::set_relu_lower_clip_slope)
      .setter("set_swish_beta", &A::set_swish_beta)
      .setter("set_elu_alpha", &A::set_elu_alpha)
      .setter("set_softplus_beta", &A::set_softplus_beta)
      .def("get_mode", &A::get_mode);

  g.def("pointwise", [](Graph& gr, TensorPtr a, A attr) { return gr.pointwise(a, attr); })
      .def("pointwise", [](Graph& gr, TensorPtr a, TensorPtr b, A attr) { return gr.pointwise(a, b, attr); })
      .def("pointwise",
           [](Graph& gr, TensorPtr a, TensorPtr b, TensorPtr c, A attr) { return gr.pointwise(a, b, c, attr); });
}

}  // namespace

FROST_PY_OP_FAMILY(bind_pointwise);

}  // namespace frost::python
