// SDPA_fp8_backward_attributes and Graph.sdpa_fp8_backward (per-tensor FP8 scaling; the MXFP8 overload of
// the same name is bound in sdpa_mxfp8.cpp).
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_sdpa_fp8_backward(nb::module_& m, GraphClass& g) {
  using A = SDPA_fp8_backward_attributes;
  AttributesClass<A>(m, "SDPA_fp8_backward_attributes")
      .setter<float>("set_attn_scale", &A::set_attn_scale)
      .setter<TensorPtr>("set_attn_scale", &A::set_attn_scale)
      .setter("set_padding_mask", &A::set_padding_mask)
      .tensor_setter("set_seq_len_q", &A::set_seq_len_q)
      .tensor_setter("set_seq_len_kv", &A::set_seq_len_kv)
      .setter("set_deterministic_algorithm", &A::set_deterministic_algorithm)
      .setter("set_diagonal_alignment", &A::set_diagonal_alignment)
      .setter("set_diagonal_band_left_bound", &A::set_diagonal_band_left_bound)
      .setter("set_diagonal_band_right_bound", &A::set_diagonal_band_right_bound)
      .setter("set_causal_mask", &A::set_causal_mask)
      .setter("set_causal_mask_bottom_right", &A::set_causal_mask_bottom_right)
      .setter("set_sliding_window_length", &A::set_sliding_window_length);

  using T = TensorPtr;
  g.def("sdpa_fp8_backward",
        nb::overload_cast<T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, T, A>(&Graph::sdpa_fp8_backward),
        nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"), nb::arg("dO"), nb::arg("stats"),
        nb::arg("descale_q").none(), nb::arg("descale_k").none(), nb::arg("descale_v").none(),
        nb::arg("descale_o").none(), nb::arg("descale_dO").none(), nb::arg("descale_s").none(),
        nb::arg("descale_dP").none(), nb::arg("scale_s").none(), nb::arg("scale_dQ").none(),
        nb::arg("scale_dK").none(), nb::arg("scale_dV").none(), nb::arg("scale_dP").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_sdpa_fp8_backward);

}  // namespace frost::python
