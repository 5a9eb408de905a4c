// SDPA_backward_attributes and Graph.sdpa_backward.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_sdpa_backward(nb::module_& m, GraphClass& g) {
  using A = SDPA_backward_attributes;
  AttributesClass<A>(m, "SDPA_backward_attributes")
      .setter<float>("set_attn_scale", &A::set_attn_scale)
      .setter<TensorPtr>("set_attn_scale", &A::set_attn_scale)
      .tensor_setter("set_bias", &A::set_bias)
      .tensor_setter("set_dbias", &A::set_dbias)
      .setter("set_alibi_mask", &A::set_alibi_mask)
      .setter("set_padding_mask", &A::set_padding_mask)
      .tensor_setter("set_seq_len_q", &A::set_seq_len_q)
      .tensor_setter("set_seq_len_kv", &A::set_seq_len_kv)
      .tensor_setter("set_sink_token", &A::set_sink_token)
      .tensor_setter("set_dsink_token", &A::set_dsink_token)
      .setter("set_stats_use_log2", &A::set_stats_use_log2)
      .setter("set_deterministic_algorithm", &A::set_deterministic_algorithm)
      .setter("set_diagonal_alignment", &A::set_diagonal_alignment)
      .setter("set_diagonal_band_left_bound", &A::set_diagonal_band_left_bound)
      .setter("set_diagonal_band_right_bound", &A::set_diagonal_band_right_bound)
      .setter("set_causal_mask", &A::set_causal_mask)
      .setter("set_causal_mask_bottom_right", &A::set_causal_mask_bottom_right)
      .setter("set_sliding_window_length", &A::set_sliding_window_length)
      .setter("set_implementation", &A::set_implementation)
      .tensor_setter("set_cu_seq_len_q", &A::set_cu_seq_len_q)
      .tensor_setter("set_cu_seq_len_kv", &A::set_cu_seq_len_kv)
      .setter("set_max_total_seq_len_q", &A::set_max_total_seq_len_q)
      .setter("set_max_total_seq_len_kv", &A::set_max_total_seq_len_kv)
      .tensor_setter("set_block_mask", &A::set_block_mask)
      .def(
          "set_block_mask_tile_size",
          [](A& a, int64_t q, int64_t kv) -> A& { return a.set_block_mask_tile_size(q, kv); }, nb::arg("tile_q"),
          nb::arg("tile_kv"), nb::rv_policy::reference)
      .def(
          "set_dropout",
          [](A& a, float probability, TensorPtr seed, TensorPtr offset) -> A& {
            return a.set_dropout(probability, std::move(seed), std::move(offset));
          },
          nb::arg("probability"), nb::arg("seed").none(), nb::arg("offset").none(), nb::rv_policy::reference)
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
