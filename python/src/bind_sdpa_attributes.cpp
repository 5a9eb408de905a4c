// SDPA_attributes and SDPA_backward_attributes with their C++ setter names; frost.pygraph.sdpa and
// sdpa_backward map cuDNN Frontend's keywords onto them.
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include "bindings.h"

namespace frost::python {

using namespace graph;

#define FROST_SETTER(name, Arg) \
  .def(#name, [](SDPA_attributes& a, Arg v) -> SDPA_attributes& { return a.name(std::move(v)); }, nb::rv_policy::reference)
#define FROST_BWD_SETTER(name, Arg)                                                                       \
  .def(                                                                                                   \
      #name, [](SDPA_backward_attributes& a, Arg v) -> SDPA_backward_attributes& { return a.name(std::move(v)); }, \
      nb::rv_policy::reference)

void bind_sdpa_attributes(nb::module_& m) {
  nb::class_<SDPA_attributes>(m, "SDPA_attributes")
      .def(nb::init<>())
      FROST_SETTER(set_name, std::string) FROST_SETTER(set_compute_data_type, DataType_t)
      FROST_SETTER(set_generate_stats, bool) FROST_SETTER(set_is_inference, bool)
      FROST_SETTER(set_attn_scale, float) FROST_SETTER(set_attn_scale, TensorPtr)
      FROST_SETTER(set_bias, TensorPtr) FROST_SETTER(set_alibi_mask, bool) FROST_SETTER(set_padding_mask, bool)
      FROST_SETTER(set_seq_len_q, TensorPtr) FROST_SETTER(set_seq_len_kv, TensorPtr)
      FROST_SETTER(set_sink_token, TensorPtr) FROST_SETTER(set_stats_use_log2, bool)
      FROST_SETTER(set_diagonal_alignment, DiagonalAlignment_t)
      FROST_SETTER(set_diagonal_band_left_bound, int64_t) FROST_SETTER(set_diagonal_band_right_bound, int64_t)
      FROST_SETTER(set_causal_mask, bool) FROST_SETTER(set_causal_mask_bottom_right, bool)
      FROST_SETTER(set_sliding_window_length, int64_t) FROST_SETTER(set_implementation, AttentionImplementation_t)
      .def("get_name", &SDPA_attributes::get_name);

  nb::class_<SDPA_backward_attributes>(m, "SDPA_backward_attributes")
      .def(nb::init<>())
      FROST_BWD_SETTER(set_name, std::string) FROST_BWD_SETTER(set_compute_data_type, DataType_t)
      FROST_BWD_SETTER(set_attn_scale, float) FROST_BWD_SETTER(set_attn_scale, TensorPtr)
      FROST_BWD_SETTER(set_bias, TensorPtr) FROST_BWD_SETTER(set_dbias, TensorPtr)
      FROST_BWD_SETTER(set_alibi_mask, bool) FROST_BWD_SETTER(set_padding_mask, bool)
      FROST_BWD_SETTER(set_seq_len_q, TensorPtr) FROST_BWD_SETTER(set_seq_len_kv, TensorPtr)
      FROST_BWD_SETTER(set_sink_token, TensorPtr) FROST_BWD_SETTER(set_dsink_token, TensorPtr)
      FROST_BWD_SETTER(set_stats_use_log2, bool) FROST_BWD_SETTER(set_deterministic_algorithm, bool)
      FROST_BWD_SETTER(set_diagonal_alignment, DiagonalAlignment_t)
      FROST_BWD_SETTER(set_diagonal_band_left_bound, int64_t) FROST_BWD_SETTER(set_diagonal_band_right_bound, int64_t)
      FROST_BWD_SETTER(set_causal_mask, bool) FROST_BWD_SETTER(set_causal_mask_bottom_right, bool)
      FROST_BWD_SETTER(set_sliding_window_length, int64_t)
      FROST_BWD_SETTER(set_implementation, AttentionImplementation_t);
}

#undef FROST_BWD_SETTER
#undef FROST_SETTER

}  // namespace frost::python
