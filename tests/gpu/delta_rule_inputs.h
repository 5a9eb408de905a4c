// Inputs of the GDN and KDA GPU tests (forward and backward), on the scale these ops see in models.
#pragma once
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gpu_util.h"

namespace frost::test {

struct DeltaRuleInputs {
  bool l2norm = true;                // the kernel normalizes q and k
  int64_t kd = 128;                  // key channels
  double g_lo = -0.2, g_hi = 0.0;    // log decay drawn from [g_lo, g_hi]
  std::vector<int64_t> cu, indices;  // cu_seqlens and state_indices values (empty: none)
};

// Unit-norm keys and queries when the kernel does not normalize them (uniform entries with a unit row norm on
// average), sigmoid-range beta, non-positive log decay (per head, or per key channel), the case's cu_seqlens and
// state_indices, uniform values otherwise; each tensor uploaded.
inline void fill_delta_rule_inputs(const DeltaRuleInputs& s, std::vector<std::unique_ptr<DeviceTensor>>& in,
                                   std::mt19937_64& rng) {
  for (auto& x : in) {
    const std::string& n = x->host.t->get_name();
    HostTensor& h = x->host;
    if (n == "q" || n == "k") {
      const double r = s.l2norm ? 1.0 : std::sqrt(3.0 / static_cast<double>(s.kd));
      h.fill_random(rng, -r, r);
    } else if (n == "g") {
      h.fill_random(rng, s.g_lo, s.g_hi);
    } else if (n == "beta") {
      h.fill_random(rng, 0.05, 0.95);
    } else if (n == "init") {
      h.fill_random(rng, -0.5, 0.5);
    } else if (n == "dht") {
      h.fill_random(rng, -0.1, 0.1);
    } else if (n == "cu") {
      for (size_t i = 0; i < s.cu.size(); ++i) h.set(static_cast<int64_t>(i), static_cast<double>(s.cu[i]));
    } else if (n == "idx") {
      for (size_t i = 0; i < s.indices.size(); ++i) h.set(static_cast<int64_t>(i), static_cast<double>(s.indices[i]));
    } else {
      h.fill_random(rng, -1.0, 1.0);
    }
    x->upload();
  }
}

}  // namespace frost::test
