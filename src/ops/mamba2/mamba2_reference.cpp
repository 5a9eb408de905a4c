// CPU reference of Mamba-2's scan: per sequence and head, the token-by-token recurrence of frost/ops/mamba2.h.
#include <algorithm>
#include <cmath>

#include "ops/common/packed_sequences.h"
#include "ops/mamba2/mamba2_node.h"

namespace frost::detail {
namespace {

// log(1 + exp(x)), and x itself above 20 (mamba_ssm's threshold).
template <class T>
T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}

template <class T>
error_t run_mamba2(const Mamba2Node& node, RefExec& ex) {
  const auto& xd = node.in(MambaIn::X)->get_dim();
  const auto& bd = node.in(MambaIn::B)->get_dim();
  const int64_t batch = xd[0], len = xd[1], heads = xd[2], head_dim = xd[3], groups = bd[2], state_dim = bd[3];
  const TensorPtr init_t = node.in(MambaIn::INITIAL_STATE);
  std::vector<Sequence> seqs;
  FROST_CHECK(load_sequences(node, ex, node.in(MambaIn::CU_SEQLENS), nullptr, init_t, batch, len, seqs));

  const Array<T> x = ex.load<T>(node.in(MambaIn::X)), dt = ex.load<T>(node.in(MambaIn::DT));
  const Array<T> a = ex.load<T>(node.in(MambaIn::A)), b = ex.load<T>(node.in(MambaIn::B));
  const Array<T> c = ex.load<T>(node.in(MambaIn::C));
  auto optional = [&](MambaIn port) { return node.in(port) ? ex.load<T>(node.in(port)) : Array<T>(); };
  const Array<T> d = optional(MambaIn::D), z = optional(MambaIn::Z), dt_bias = optional(MambaIn::DT_BIAS);
  const bool d_per_channel = d.dim.size() == 2;
  const int64_t pn = head_dim * state_dim;
  const std::vector<int64_t> state_dims{static_cast<int64_t>(seqs.size()), heads, head_dim, state_dim};
  const Array<T> init = init_t ? ex.load<T>(init_t) : Array<T>(state_dims);
  Array<T> y(xd), final_state(state_dims);
  const auto& at = node.attr;

  for (const Sequence& s : seqs)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / (heads / groups);
      std::vector<T> state(&init[(s.state_row * heads + h) * pn], &init[(s.state_row * heads + h) * pn] + pn);
      for (int64_t t = s.first; t < s.first + s.len; ++t) {
        T step = dt[t * heads + h] + (dt_bias.size() ? dt_bias[h] : T(0));
        if (at.dt_softplus) step = softplus(step);
        if (at.dt_min) step = std::max(step, static_cast<T>(*at.dt_min));
        if (at.dt_max) step = std::min(step, static_cast<T>(*at.dt_max));
        const T decay = std::exp(step * a[h]);
        const T* bt = &b[(t * groups + g) * state_dim];
        const T* ct = &c[(t * groups + g) * state_dim];
        const int64_t xy_at = (t * heads + h) * head_dim;
        for (int64_t p = 0; p < head_dim; ++p) {
          const T input = step * x[xy_at + p];
          T out = 0;
          for (int64_t n = 0; n < state_dim; ++n) {
            T& e = state[static_cast<size_t>(p * state_dim + n)];
            e = decay * e + input * bt[n];
            out += e * ct[n];
          }
          if (d.size()) out += (d_per_channel ? d[h * head_dim + p] : d[h]) * x[xy_at + p];
          if (z.size()) {
            const T gate = z[xy_at + p];
            out *= gate / (T(1) + std::exp(-gate));
          }
          y[xy_at + p] = out;
        }
      }
      std::copy(state.begin(), state.end(), &final_state[(s.state_row * heads + h) * pn]);
    }
  ex.store(node.out(MambaOut::Y), y);
  if (const TensorPtr t = node.out(MambaOut::FINAL_STATE)) ex.store(t, final_state);
  return {};
}

}  // namespace

error_t Mamba2Node::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t { return run_mamba2<decltype(zero)>(*this, ex); });
}

}  // namespace frost::detail
