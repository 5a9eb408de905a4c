// Mixture-of-experts grouped matmul: the moe_grouped_matmul_mode enum, the attributes and the builders.
// token_index and token_ks may be None in the modes that do not read them.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

template <class Cls>
void moe_attributes_class(nb::module_& m, const char* py_name) {
  AttributesClass<Cls>(m, py_name).setter("set_mode", &Cls::set_mode).setter("set_top_k", &Cls::set_top_k);
}

void bind_moe(nb::module_& m, GraphClass& g) {
  nb::enum_<MoeGroupedMatmulMode_t>(m, "moe_grouped_matmul_mode")
      .value("NONE", MoeGroupedMatmulMode_t::NONE)
      .value("GATHER", MoeGroupedMatmulMode_t::GATHER)
      .value("SCATTER", MoeGroupedMatmulMode_t::SCATTER);

  moe_attributes_class<Moe_grouped_matmul_attributes>(m, "Moe_grouped_matmul_attributes");
  moe_attributes_class<Moe_grouped_matmul_backward_attributes>(m, "Moe_grouped_matmul_backward_attributes");

  g.def("moe_grouped_matmul", &Graph::moe_grouped_matmul, nb::arg("token"), nb::arg("weight").none(),
        nb::arg("first_token_offset").none(), nb::arg("token_index").none(), nb::arg("token_ks").none(),
        nb::arg("attributes"))
      .def("moe_grouped_matmul_backward", &Graph::moe_grouped_matmul_backward, nb::arg("doutput"), nb::arg("token"),
           nb::arg("weight").none(), nb::arg("first_token_offset").none(), nb::arg("token_index").none(),
           nb::arg("token_ks").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_moe);

}  // namespace frost::python
