// The masking and sequence-layout setters that SDPA_attributes and SDPA_backward_attributes share
// (the backward takes every forward mask so that it sees the forward's probabilities), bound once.
#pragma once

#include "op_family.h"

namespace frost::python {

template <class A>
AttributesClass<A>& bind_attention_masking(AttributesClass<A>& c) {
  using graph::TensorPtr;
  return c.setter("set_alibi_mask", &A::set_alibi_mask)
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
          nb::arg("probability"), nb::arg("seed").none(), nb::arg("offset").none(), nb::rv_policy::reference);
}

}  // namespace frost::python
