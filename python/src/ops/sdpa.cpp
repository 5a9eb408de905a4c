// SDPA_attributes and Graph.sdpa; frost.pygraph.sdpa maps cuDNN Frontend's keywords onto the setters.
#include "attention_masking.h"
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_sdpa(nb::module_& m, GraphClass& g) {
  using Impl = AttentionImplementation_t;
  nb::enum_<Impl>(m, "attention_implementation")
      .value("AUTO", Impl::AUTO)
      .value("COMPOSITE", Impl::COMPOSITE)
      .value("UNIFIED", Impl::UNIFIED);

  using A = SDPA_attributes;
  AttributesClass<A> attributes(m, "SDPA_attributes");
  bind_attention_masking(attributes)
      .setter("set_generate_stats", &A::set_generate_stats)
      .setter("set_is_inference", &A::set_is_inference)
      .setter<float>("set_attn_scale", &A::set_attn_scale)
      .setter<TensorPtr>("set_attn_scale", &A::set_attn_scale)
      .tensor_setter("set_bias", &A::set_bias)
      .tensor_setter("set_paged_attention_k_table", &A::set_paged_attention_k_table)
      .tensor_setter("set_paged_attention_v_table", &A::set_paged_attention_v_table)
      .setter("set_paged_attention_max_seq_len_kv", &A::set_paged_attention_max_seq_len_kv)
      .def(
          "set_dropout",
          [](A& a, TensorPtr mask, TensorPtr scale) -> A& { return a.set_dropout(std::move(mask), std::move(scale)); },
          nb::arg("mask").none(), nb::arg("scale").none(), nb::rv_policy::reference);

  g.def("sdpa", &Graph::sdpa, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_sdpa);

}  // namespace frost::python
