// Rng: random generation with the Philox 4x32-10 counter-based generator. JSON tag RNG; ports
// SEED, OFFSET (inputs), Y (output).
//
// BERNOULLI: Y = 1 with probability bernoulli_probability, else 0 (a mask in Y's data type).
// Element n of Y (row-major over Y's dims) uses Philox block n / 4, word n % 4, with
// key = {seed low 32 bits, seed high 32 bits} and counter = {block low, block high, offset low,
// offset high}; Y = (word * 2^-32 < p). SEED and OFFSET are one-element integer tensors (device
// buffers or pass-by-value scalars) holding values in [0, 2^53). Y's dims come from set_dim on the
// attributes or on the output tensor. UNIFORM and NORMAL are named for cuDNN parity, not served yet.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "frost/ops/attributes_base.h"

namespace frost {

enum class RngDistribution_t { NOT_SET, BERNOULLI, UNIFORM, NORMAL };

std::string_view to_string(RngDistribution_t);
template <>
std::optional<RngDistribution_t> from_string<RngDistribution_t>(std::string_view);

}  // namespace frost

namespace frost::graph {

enum class RngInput { SEED, OFFSET };
enum class RngOutput { Y };

class Rng_attributes : public Attributes<Rng_attributes, RngInput, RngOutput> {
 public:
  RngDistribution_t distribution = RngDistribution_t::NOT_SET;
  std::optional<double> bernoulli_probability;
  std::vector<int64_t> dim, stride;

  Rng_attributes& set_distribution(RngDistribution_t v) { distribution = v; return *this; }
  Rng_attributes& set_bernoulli_probability(double p) { bernoulli_probability = p; return *this; }
  Rng_attributes& set_dim(std::vector<int64_t> v) { dim = std::move(v); return *this; }
  Rng_attributes& set_stride(std::vector<int64_t> v) { stride = std::move(v); return *this; }
};

}  // namespace frost::graph
