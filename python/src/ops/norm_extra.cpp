// Batch, instance, adaptive-layer and group normalization, and the split batchnorm pieces (genstats,
// bn_finalize, dbn_weight): attributes and builders.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

// set_saved_mean_and_inv_variance(mean, inv_variance) of the backward norms.
template <class Cls>
void backward_norm_class(nb::module_& m, const char* py_name) {
  AttributesClass<Cls>(m, py_name)
      .def(
          "set_saved_mean_and_inv_variance",
          [](Cls& a, TensorPtr mean, TensorPtr inv_variance) -> Cls& {
            return a.set_saved_mean_and_inv_variance(std::move(mean), std::move(inv_variance));
          },
          nb::arg("mean").none(), nb::arg("inv_variance").none(), nb::rv_policy::reference);
}

// set_previous_running_stats(mean, variance, momentum) of batchnorm and bn_finalize.
template <class Cls>
AttributesClass<Cls> running_stats_class(nb::module_& m, const char* py_name) {
  AttributesClass<Cls> c(m, py_name);
  c.def(
      "set_previous_running_stats",
      [](Cls& a, TensorPtr mean, TensorPtr variance, TensorPtr momentum) -> Cls& {
        return a.set_previous_running_stats(std::move(mean), std::move(variance), std::move(momentum));
      },
      nb::arg("mean").none(), nb::arg("variance").none(), nb::arg("momentum").none(), nb::rv_policy::reference);
  return c;
}

// The forward norms with a phase and an epsilon: instance, adaptive layer and group norm.
template <class Cls>
AttributesClass<Cls> phased_norm_class(nb::module_& m, const char* py_name) {
  AttributesClass<Cls> c(m, py_name);
  c.setter("set_forward_phase", &Cls::set_forward_phase).tensor_setter("set_epsilon", &Cls::set_epsilon);
  return c;
}

void bind_norm_extra(nb::module_& m, GraphClass& g) {
  running_stats_class<Batchnorm_attributes>(m, "Batchnorm_attributes")
      .tensor_setter("set_epsilon", &Batchnorm_attributes::set_epsilon);
  AttributesClass<Batchnorm_inference_attributes>(m, "Batchnorm_inference_attributes");
  backward_norm_class<Batchnorm_backward_attributes>(m, "Batchnorm_backward_attributes");
  phased_norm_class<Instancenorm_attributes>(m, "Instancenorm_attributes");
  backward_norm_class<Instancenorm_backward_attributes>(m, "Instancenorm_backward_attributes");
  phased_norm_class<AdaLayernorm_attributes>(m, "AdaLayernorm_attributes");
  backward_norm_class<AdaLayernorm_backward_attributes>(m, "AdaLayernorm_backward_attributes");
  phased_norm_class<Groupnorm_attributes>(m, "Groupnorm_attributes")
      .setter("set_group_count", &Groupnorm_attributes::set_group_count);
  backward_norm_class<Groupnorm_backward_attributes>(m, "Groupnorm_backward_attributes");
  AttributesClass<Genstats_attributes>(m, "Genstats_attributes");
  running_stats_class<BN_finalize_attributes>(m, "BN_finalize_attributes");
  AttributesClass<DBN_weight_attributes>(m, "DBN_weight_attributes");

  // Operands other than X and dY may be None so that validation, not the binding, names a missing one.
  g.def("batchnorm", &Graph::batchnorm, nb::arg("x"), nb::arg("scale").none(), nb::arg("bias").none(),
        nb::arg("attributes"))
      .def("batchnorm_inference", &Graph::batchnorm_inference, nb::arg("x"), nb::arg("mean").none(),
           nb::arg("inv_variance").none(), nb::arg("scale").none(), nb::arg("bias").none(), nb::arg("attributes"))
      .def("batchnorm_backward", &Graph::batchnorm_backward, nb::arg("dy"), nb::arg("x"), nb::arg("scale").none(),
           nb::arg("attributes"))
      .def("instancenorm", &Graph::instancenorm, nb::arg("x"), nb::arg("scale").none(), nb::arg("bias").none(),
           nb::arg("attributes"))
      .def("instancenorm_backward", &Graph::instancenorm_backward, nb::arg("dy"), nb::arg("x"), nb::arg("scale").none(),
           nb::arg("attributes"))
      .def("adalayernorm", &Graph::adalayernorm, nb::arg("x"), nb::arg("scale").none(), nb::arg("bias").none(),
           nb::arg("attributes"))
      .def("adalayernorm_backward", &Graph::adalayernorm_backward, nb::arg("dy"), nb::arg("x"), nb::arg("scale").none(),
           nb::arg("attributes"))
      .def("groupnorm", &Graph::groupnorm, nb::arg("x"), nb::arg("scale").none(), nb::arg("bias").none(),
           nb::arg("attributes"))
      .def("groupnorm_backward", &Graph::groupnorm_backward, nb::arg("dy"), nb::arg("x"), nb::arg("scale").none(),
           nb::arg("attributes"))
      .def("genstats", &Graph::genstats, nb::arg("x"), nb::arg("attributes"))
      .def("bn_finalize", &Graph::bn_finalize, nb::arg("sum"), nb::arg("sq_sum"), nb::arg("scale").none(),
           nb::arg("bias").none(), nb::arg("epsilon").none(), nb::arg("accum_count").none(), nb::arg("attributes"))
      .def("dbn_weight", &Graph::dbn_weight, nb::arg("dy"), nb::arg("x"), nb::arg("mean").none(),
           nb::arg("inv_variance").none(), nb::arg("scale").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_norm_extra);

}  // namespace frost::python
