// Rng: the rng_distribution enum, Rng_attributes and the builder.
#include "op_family.h"

namespace frost::python {

namespace {

using namespace graph;

void bind_rng(nb::module_& m, GraphClass& g) {
  nb::enum_<RngDistribution_t>(m, "rng_distribution")
      .value("NOT_SET", RngDistribution_t::NOT_SET)
      .value("BERNOULLI", RngDistribution_t::BERNOULLI)
      .value("UNIFORM", RngDistribution_t::UNIFORM)
      .value("NORMAL", RngDistribution_t::NORMAL);

  using A = Rng_attributes;
  AttributesClass<A>(m, "Rng_attributes")
      .setter("set_distribution", &A::set_distribution)
      .setter("set_bernoulli_probability", &A::set_bernoulli_probability)
      .setter("set_dim", &A::set_dim)
      .setter("set_stride", &A::set_stride);

  g.def("rng", &Graph::rng, nb::arg("seed").none(), nb::arg("offset").none(), nb::arg("attributes"));
}

}  // namespace

FROST_PY_OP_FAMILY(bind_rng);

}  // namespace frost::python
