// Gated MLP forward with SwiGLU: Swiglu_mlp_attributes and the two builders (separate gate and up weights,
// or one W_GATE_UP with gate and up columns interleaved in blocks of 8).
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_swiglu_mlp(nb::module_& m, GraphClass& g) {
  AttributesClass<Swiglu_mlp_attributes>(m, "Swiglu_mlp_attributes");

  using Separate = TensorPtr (Graph::*)(TensorPtr, TensorPtr, TensorPtr, TensorPtr, Swiglu_mlp_attributes);
  using Interleaved = TensorPtr (Graph::*)(TensorPtr, TensorPtr, TensorPtr, Swiglu_mlp_attributes);
  g.def("swiglu_mlp", static_cast<Separate>(&Graph::swiglu_mlp), nb::arg("x"), nb::arg("w_gate").none(),
        nb::arg("w_up").none(), nb::arg("w_down").none(), nb::arg("attributes"))
      .def("swiglu_mlp", static_cast<Interleaved>(&Graph::swiglu_mlp), nb::arg("x"), nb::arg("w_gate_up").none(),
           nb::arg("w_down").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_swiglu_mlp);

}  // namespace frost::python
