// SDPA_fp8_attributes and Graph.sdpa_fp8 (FP8 Q, K, V with per-tensor descales and scales).
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_sdpa_fp8(nb::module_& m, GraphClass& g) {
  using A = SDPA_fp8_attributes;
  AttributesClass<A>(m, "SDPA_fp8_attributes")
      .setter("set_generate_stats", &A::set_generate_stats)
      .setter("set_is_inference", &A::set_is_inference)
      .setter<float>("set_attn_scale", &A::set_attn_scale)
      .setter<TensorPtr>("set_attn_scale", &A::set_attn_scale)
      .setter("set_padding_mask", &A::set_padding_mask)
      .tensor_setter("set_seq_len_q", &A::set_seq_len_q)
      .tensor_setter("set_seq_len_kv", &A::set_seq_len_kv)
      .setter("set_diagonal_alignment", &A::set_diagonal_alignment)
      .setter("set_diagonal_band_left_bound", &A::set_diagonal_band_left_bound)
      .setter("set_diagonal_band_right_bound", &A::set_diagonal_band_right_bound)
      .setter("set_causal_mask", &A::set_causal_mask)
      .setter("set_causal_mask_bottom_right", &A::set_causal_mask_bottom_right)
      .setter("set_sliding_window_length", &A::set_sliding_window_length);

  // Graph::sdpa_fp8 is overloaded: this is the per-tensor form (nine tensors); sdpa_mxfp8.cpp adds the
  // six-tensor MXFP8 form under the same name.
  using T = TensorPtr;
  g.def("sdpa_fp8", nb::overload_cast<T, T, T, T, T, T, T, T, T, A>(&Graph::sdpa_fp8), nb::arg("q"), nb::arg("k"),
        nb::arg("v"), nb::arg("descale_q").none(), nb::arg("descale_k").none(), nb::arg("descale_v").none(),
        nb::arg("descale_s").none(), nb::arg("scale_s").none(), nb::arg("scale_o").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_sdpa_fp8);

}  // namespace frost::python
