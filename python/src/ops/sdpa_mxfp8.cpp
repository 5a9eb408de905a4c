// Graph.sdpa_mxfp8 and Graph.sdpa_mxfp8_backward (FP8 operands with E8M0 block scales), and cuDNN Frontend's
// C++ spelling of the same ops: the six-tensor sdpa_fp8 and seventeen-tensor sdpa_fp8_backward overloads,
// added to the per-tensor builders of those names. The attributes classes are the FP8 attention's.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;
using T = TensorPtr;

template <class Fn>
void def_forward(GraphClass& g, const char* name, Fn fn) {
  g.def(name, fn, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("descale_q").none(), nb::arg("descale_k").none(),
        nb::arg("descale_v").none(), nb::arg("attributes"));
}

template <class Fn>
void def_backward(GraphClass& g, const char* name, Fn fn) {
  g.def(name, fn, nb::arg("q"), nb::arg("q_T"), nb::arg("k"), nb::arg("k_T"), nb::arg("v"), nb::arg("o_f16"),
        nb::arg("dO_f16"), nb::arg("dO"), nb::arg("dO_T"), nb::arg("stats"), nb::arg("descale_q").none(),
        nb::arg("descale_q_T").none(), nb::arg("descale_k").none(), nb::arg("descale_k_T").none(),
        nb::arg("descale_v").none(), nb::arg("descale_dO").none(), nb::arg("descale_dO_T").none(),
        nb::arg("attributes"));
}

void bind_sdpa_mxfp8(nb::module_&, GraphClass& g) {
  using F = SDPA_fp8_attributes;
  using B = SDPA_fp8_backward_attributes;
  def_forward(g, "sdpa_mxfp8", &Graph::sdpa_mxfp8);
  def_forward(g, "sdpa_fp8", nb::overload_cast<T, T, T, T, T, T, F>(&Graph::sdpa_fp8));
  def_backward(g, "sdpa_mxfp8_backward", &Graph::sdpa_mxfp8_backward);
  def_backward(g, "sdpa_fp8_backward",
               nb::overload_cast<T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, B>(&Graph::sdpa_fp8_backward));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_sdpa_mxfp8);

}  // namespace frost::python
