// Block-scaled quantization: Block_scale_{quantize,dequantize}_attributes and their builders. The scale's
// data type picks the format (E8M0 scales: MX; E4M3 scales with block 16: NVFP4), so there is no mode enum.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_quantize(nb::module_& m, GraphClass& g) {
  using Q = Block_scale_quantize_attributes;
  AttributesClass<Q>(m, "Block_scale_quantize_attributes")
      .setter("set_block_size", &Q::set_block_size)
      .setter("set_axis", &Q::set_axis)
      .setter("set_transpose", &Q::set_transpose)
      .tensor_setter("set_global_scale", &Q::set_global_scale);
  using D = Block_scale_dequantize_attributes;
  AttributesClass<D>(m, "Block_scale_dequantize_attributes")
      .setter("set_block_size", &D::set_block_size)
      .setter("set_axis", &D::set_axis)
      .tensor_setter("set_global_scale", &D::set_global_scale);

  g.def("block_scale_quantize", &Graph::block_scale_quantize, nb::arg("x"), nb::arg("attributes"))
      .def("block_scale_dequantize", &Graph::block_scale_dequantize, nb::arg("x"), nb::arg("scale").none(),
           nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_quantize);

}  // namespace frost::python
