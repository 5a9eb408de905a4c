// CPU reference of RNG: one Philox 4x32-10 block per four output elements.
#include <cmath>

#include "engines/reference/ref_exec.h"
#include "ops/common/philox.h"
#include "ops/rng/rng_node.h"

namespace frost::detail {

namespace {

// Seed and offset are read as doubles (exact below 2^53, which validation and this check enforce).
error_t read_counter_word(const RngNode& n, RefExec& ex, const TensorPtr& t, const char* port, uint64_t& out) {
  const double v = ex.load<double>(t)[0];
  if (!(v >= 0.0 && v < 0x1p53) || v != std::floor(v))
    return attr_error(n, port, std::to_string(v), "must be an integer in [0, 2^53)",
                      error_code_t::GRAPH_EXECUTION_FAILED);
  out = static_cast<uint64_t>(v);
  return {};
}

}  // namespace

error_t RngNode::run_reference(RefExec& ex) const {
  uint64_t seed = 0, offset = 0;
  FROST_CHECK(read_counter_word(*this, ex, in(graph::RngInput::SEED), "SEED", seed));
  FROST_CHECK(read_counter_word(*this, ex, in(graph::RngInput::OFFSET), "OFFSET", offset));
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const TensorPtr y = out(graph::RngOutput::Y);
    Array<T> ya(y->get_dim());
    const PhiloxKey key{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    const double p = *attr.bernoulli_probability;
    PhiloxCounter words{};
    for (int64_t n = 0; n < ya.size(); ++n) {
      if (n % 4 == 0) {
        const auto block = static_cast<uint64_t>(n / 4);
        words = philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                           static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                                          key);
      }
      // word * 2^-32 is exact in double; the comparison decides the draw.
      ya[n] = std::ldexp(static_cast<double>(words[static_cast<size_t>(n % 4)]), -32) < p ? T(1) : T(0);
    }
    ex.store(y, ya);
    return {};
  });
}

}  // namespace frost::detail
