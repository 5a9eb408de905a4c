// Resample (pooling): the resample_mode and padding_mode enums, the forward and backward attributes and builders.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_resample(nb::module_& m, GraphClass& g) {
  nb::enum_<ResampleMode_t>(m, "resample_mode")
      .value("NOT_SET", ResampleMode_t::NOT_SET)
      .value("AVGPOOL_EXCLUDE_PADDING", ResampleMode_t::AVGPOOL_EXCLUDE_PADDING)
      .value("AVGPOOL_INCLUDE_PADDING", ResampleMode_t::AVGPOOL_INCLUDE_PADDING)
      .value("BILINEAR", ResampleMode_t::BILINEAR)
      .value("NEAREST", ResampleMode_t::NEAREST)
      .value("MAXPOOL", ResampleMode_t::MAXPOOL);
  nb::enum_<PaddingMode_t>(m, "padding_mode")
      .value("NOT_SET", PaddingMode_t::NOT_SET)
      .value("EDGE_VAL_PAD", PaddingMode_t::EDGE_VAL_PAD)
      .value("NEG_INF_PAD", PaddingMode_t::NEG_INF_PAD)
      .value("ZERO_PAD", PaddingMode_t::ZERO_PAD);

  using A = Resample_attributes;
  AttributesClass<A>(m, "Resample_attributes")
      .setter("set_resampling_mode", &A::set_resampling_mode)
      .setter("set_padding_mode", &A::set_padding_mode)
      .setter("set_window", &A::set_window)
      .setter("set_stride", &A::set_stride)
      .setter("set_pre_padding", &A::set_pre_padding)
      .setter("set_post_padding", &A::set_post_padding)
      .setter("set_is_inference", &A::set_is_inference);

  using B = Resample_backward_attributes;
  AttributesClass<B>(m, "Resample_backward_attributes")
      .setter("set_resampling_mode", &B::set_resampling_mode)
      .setter("set_padding_mode", &B::set_padding_mode)
      .setter("set_window", &B::set_window)
      .setter("set_stride", &B::set_stride)
      .setter("set_pre_padding", &B::set_pre_padding)
      .setter("set_post_padding", &B::set_post_padding)
      .tensor_setter("set_x", &B::set_x)
      .tensor_setter("set_index", &B::set_index);

  g.def("resample", &Graph::resample, nb::arg("x"), nb::arg("attributes"));
  g.def("resample_backward", &Graph::resample_backward, nb::arg("dy"), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_resample);

}  // namespace frost::python
