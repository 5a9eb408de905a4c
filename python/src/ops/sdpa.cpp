// SDPA_attributes and Graph.sdpa; frost.pygraph.sdpa maps cuDNN Frontend's keywords onto the setters.
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
  AttributesClass<A>(m, "SDPA_attributes")
      .setter("set_generate_stats", &A::set_generate_stats)
      .setter("set_is_inference", &A::set_is_inference)
      .setter<float>("set_attn_scale", &A::set_attn_scale)
      .setter<TensorPtr>("set_attn_scale", &A::set_attn_scale)
      .tensor_setter("set_bias", &A::set_bias)
      .setter("set_alibi_mask", &A::set_alibi_mask)
      .setter("set_padding_mask", &A::set_padding_mask)
      .tensor_setter("set_seq_len_q", &A::set_seq_len_q)
      .tensor_setter("set_seq_len_kv", &A::set_seq_len_kv)
      .tensor_setter("set_cu_seq_len_q", &A::set_cu_seq_len_q)
      .tensor_setter("set_cu_seq_len_kv", &A::set_cu_seq_len_kv)
      .setter("set_max_total_seq_len_q", &A::set_max_total_seq_len_q)
      .setter("set_max_total_seq_len_kv", &A::set_max_total_seq_len_kv)
      .tensor_setter("set_sink_token", &A::set_sink_token)
      .setter("set_stats_use_log2", &A::set_stats_use_log2)
      .setter("set_diagonal_alignment", &A::set_diagonal_alignment)
      .setter("set_diagonal_band_left_bound", &A::set_diagonal_band_left_bound)
      .setter("set_diagonal_band_right_bound", &A::set_diagonal_band_right_bound)
      .setter("set_causal_mask", &A::set_causal_mask)
      .setter("set_causal_mask_bottom_right", &A::set_causal_mask_bottom_right)
      .setter("set_sliding_window_length", &A::set_sliding_window_length)
      .setter("set_implementation", &A::set_implementation)
      .tensor_setter("set_paged_attention_k_table", &A::set_paged_attention_k_table)
      .tensor_setter("set_paged_attention_v_table", &A::set_paged_attention_v_table)
      .setter("set_paged_attention_max_seq_len_kv", &A::set_paged_attention_max_seq_len_kv)
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
          [](A& a, TensorPtr mask, TensorPtr scale) -> A& { return a.set_dropout(std::move(mask), std::move(scale)); },
          nb::arg("mask").none(), nb::arg("scale").none(), nb::rv_policy::reference);

  g.def("sdpa", &Graph::sdpa, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_sdpa);

}  // namespace frost::python
