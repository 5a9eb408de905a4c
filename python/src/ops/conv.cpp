// Convolution: the convolution_mode enum, Conv_{fprop,dgrad,wgrad}_attributes and their builders.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

template <class Cls>
void conv_attributes_class(nb::module_& m, const char* py_name) {
  AttributesClass<Cls>(m, py_name)
      .setter("set_padding", &Cls::set_padding)
      .setter("set_pre_padding", &Cls::set_pre_padding)
      .setter("set_post_padding", &Cls::set_post_padding)
      .setter("set_stride", &Cls::set_stride)
      .setter("set_dilation", &Cls::set_dilation)
      .setter("set_convolution_mode", &Cls::set_convolution_mode)
      .def("get_pre_padding", &Cls::get_pre_padding)
      .def("get_post_padding", &Cls::get_post_padding)
      .def("get_stride", &Cls::get_stride)
      .def("get_dilation", &Cls::get_dilation)
      .def("get_convolution_mode", &Cls::get_convolution_mode);
}

void bind_conv(nb::module_& m, GraphClass& g) {
  nb::enum_<ConvolutionMode_t>(m, "convolution_mode")
      .value("NOT_SET", ConvolutionMode_t::NOT_SET)
      .value("CONVOLUTION", ConvolutionMode_t::CONVOLUTION)
      .value("CROSS_CORRELATION", ConvolutionMode_t::CROSS_CORRELATION);

  conv_attributes_class<Conv_fprop_attributes>(m, "Conv_fprop_attributes");
  conv_attributes_class<Conv_dgrad_attributes>(m, "Conv_dgrad_attributes");
  conv_attributes_class<Conv_wgrad_attributes>(m, "Conv_wgrad_attributes");

  // The C++ argument order: conv_dgrad(dy, w), conv_wgrad(dy, x).
  g.def("conv_fprop", &Graph::conv_fprop, nb::arg("image"), nb::arg("weight").none(), nb::arg("attributes"))
      .def("conv_dgrad", &Graph::conv_dgrad, nb::arg("dy"), nb::arg("weight").none(), nb::arg("attributes"))
      .def("conv_wgrad", &Graph::conv_wgrad, nb::arg("dy"), nb::arg("image").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_conv);

}  // namespace frost::python
