// Attribute classes of the pointwise, matmul, data-movement and normalization ops, with the
// C++ setter names. The frost package fills them from cuDNN Frontend's keyword arguments.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace frost::python {

using namespace graph;

// Binds a setter that returns the attributes object itself, so calls chain.
#define FROST_SETTER(Cls, name, Arg) \
  .def(#name, [](Cls& a, Arg v) -> Cls& { return a.name(std::move(v)); }, nb::rv_policy::reference)

// name and compute_data_type, common to every attributes class.
template <class Cls>
nb::class_<Cls> attributes_class(nb::module_& m, const char* py_name) {
  nb::class_<Cls> c(m, py_name);
  c.def(nb::init<>())
      FROST_SETTER(Cls, set_name, std::string) FROST_SETTER(Cls, set_compute_data_type, DataType_t)
      .def("get_name", &Cls::get_name);
  return c;
}

void bind_op_attributes(nb::module_& m) {
  attributes_class<Pointwise_attributes>(m, "Pointwise_attributes")
      FROST_SETTER(Pointwise_attributes, set_mode, PointwiseMode_t) FROST_SETTER(Pointwise_attributes, set_axis, int64_t)
      FROST_SETTER(Pointwise_attributes, set_relu_lower_clip, float)
      FROST_SETTER(Pointwise_attributes, set_relu_upper_clip, float)
      FROST_SETTER(Pointwise_attributes, set_relu_lower_clip_slope, float)
      FROST_SETTER(Pointwise_attributes, set_swish_beta, float) FROST_SETTER(Pointwise_attributes, set_elu_alpha, float)
      FROST_SETTER(Pointwise_attributes, set_softplus_beta, float)
      .def("get_mode", &Pointwise_attributes::get_mode);

  attributes_class<Matmul_attributes>(m, "Matmul_attributes")
      FROST_SETTER(Matmul_attributes, set_padding, double) FROST_SETTER(Matmul_attributes, set_m_override, TensorPtr)
      FROST_SETTER(Matmul_attributes, set_n_override, TensorPtr)
      FROST_SETTER(Matmul_attributes, set_k_override, TensorPtr);

  attributes_class<Reduction_attributes>(m, "Reduction_attributes")
      FROST_SETTER(Reduction_attributes, set_mode, ReductionMode_t)
      FROST_SETTER(Reduction_attributes, set_is_deterministic, bool)
      .def("get_mode", &Reduction_attributes::get_mode);

  attributes_class<Reshape_attributes>(m, "Reshape_attributes")
      FROST_SETTER(Reshape_attributes, set_dim, std::vector<int64_t>)
      FROST_SETTER(Reshape_attributes, set_stride, std::vector<int64_t>);

  attributes_class<Transpose_attributes>(m, "Transpose_attributes")
      FROST_SETTER(Transpose_attributes, set_permutation, std::vector<int64_t>);

  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  attributes_class<Slice_attributes>(m, "Slice_attributes") FROST_SETTER(Slice_attributes, set_slices, Ranges);

  attributes_class<Concatenate_attributes>(m, "Concatenate_attributes")
      FROST_SETTER(Concatenate_attributes, set_axis, int64_t)
      FROST_SETTER(Concatenate_attributes, set_in_place_index, int64_t);

  attributes_class<Rmsnorm_attributes>(m, "Rmsnorm_attributes")
      FROST_SETTER(Rmsnorm_attributes, set_forward_phase, NormFwdPhase_t)
      FROST_SETTER(Rmsnorm_attributes, set_epsilon, TensorPtr) FROST_SETTER(Rmsnorm_attributes, set_bias, TensorPtr);

  attributes_class<Layernorm_attributes>(m, "Layernorm_attributes")
      FROST_SETTER(Layernorm_attributes, set_forward_phase, NormFwdPhase_t)
      FROST_SETTER(Layernorm_attributes, set_epsilon, TensorPtr);

  attributes_class<Rmsnorm_backward_attributes>(m, "Rmsnorm_backward_attributes")
      FROST_SETTER(Rmsnorm_backward_attributes, has_dbias_output, bool);

  attributes_class<Layernorm_backward_attributes>(m, "Layernorm_backward_attributes")
      .def(
          "set_saved_mean_and_inv_variance",
          [](Layernorm_backward_attributes& a, TensorPtr mean, TensorPtr inv_variance) -> Layernorm_backward_attributes& {
            return a.set_saved_mean_and_inv_variance(std::move(mean), std::move(inv_variance));
          },
          nb::rv_policy::reference)
      FROST_SETTER(Layernorm_backward_attributes, set_epsilon, TensorPtr);
}

#undef FROST_SETTER

}  // namespace frost::python
