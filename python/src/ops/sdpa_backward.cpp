// SDPA_backward_attributes and Graph.sdpa_backward.
#include "attention_masking.h"
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_sdpa_backward(nb::module_& m, GraphClass& g) {
  using A = SDPA_backward_attributes;
  AttributesClass<A> attributes(m, "SDPA_backward_attributes");
  bind_attention_masking(attributes)
      .setter<float>("set_attn_scale", &A::set_attn_scale)
      .setter<TensorPtr>("set_attn_scale", &A::set_attn_scale)
      .tensor_setter("set_bias", &A::set_bias)
      .tensor_setter("set_dbias", &A::set_dbias)
      .tensor_setter("set_dsink_token", &A::set_dsink_token)
      .setter("set_deterministic_algorithm", &A::set_deterministic_algorithm)
      .def(
          "set_dropout",
          [](A& a, TensorPtr mask, TensorPtr scale, TensorPtr scale_inv) -> A& {
            return a.set_dropout(std::move(mask), std::move(scale), std::move(scale_inv));
          },
          nb::arg("mask").none(), nb::arg("scale").none(), nb::arg("scale_inv").none() = nullptr,
          nb::rv_policy::reference);

  g.def("sdpa_backward", &Graph::sdpa_backward, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"), nb::arg("dO"),
        nb::arg("stats"), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_sdpa_backward);

}  // namespace frost::python
