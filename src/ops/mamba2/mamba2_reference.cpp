// CPU reference of Mamba-2's scan (frost/ops/mamba2.h): per sequence and head, the token-by-token recurrence; the
// backward runs it forward keeping every state, then back through it (reverse mode), in T.
#include <algorithm>
#include <cmath>

#include "ops/common/packed_sequences.h"
#include "ops/mamba2/mamba2_node.h"

namespace frost::detail {
namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// log(1 + exp(x)), and x itself above 20 (mamba_ssm's threshold).
template <class T>
T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}

// The operands of one launch, loaded once; optional inputs are empty arrays.
template <class T>
struct Operands {
  Array<T> x, dt, a, b, c, d, z, dt_bias, init;
  int64_t heads = 0, head_dim = 0, groups = 0, state_dim = 0;
  bool d_per_channel = false;

  int64_t group_of(int64_t h) const { return h / (heads / groups); }
};

template <class Attr>
struct StepRule {
  const Attr& attr;
  // The step of token t, head h, and whether the clamp let its gradient through.
  template <class T>
  T step(const Operands<T>& o, int64_t t, int64_t h, T& d_raw) const {
    const T raw = o.dt[t * o.heads + h] + (o.dt_bias.size() ? o.dt_bias[h] : T(0));
    T v = attr.dt_softplus ? softplus(raw) : raw;
    d_raw = attr.dt_softplus ? (raw > T(20) ? T(1) : sigmoid(raw)) : T(1);  // d v / d raw
    if ((attr.dt_min && v < static_cast<T>(*attr.dt_min)) || (attr.dt_max && v > static_cast<T>(*attr.dt_max)))
      d_raw = T(0);
    if (attr.dt_min) v = std::max(v, static_cast<T>(*attr.dt_min));
    if (attr.dt_max) v = std::min(v, static_cast<T>(*attr.dt_max));
    return v;
  }
};

template <class T, class Attr>
Operands<T> load_operands(const Mamba2Node<Attr>& node, const RefExec& ex, int64_t sequences) {
  Operands<T> o;
  const auto& xd = node.in(MambaIn::X)->get_dim();
  const auto& bd = node.in(MambaIn::B)->get_dim();
  o.heads = xd[2], o.head_dim = xd[3], o.groups = bd[2], o.state_dim = bd[3];
  o.x = ex.load<T>(node.in(MambaIn::X)), o.dt = ex.load<T>(node.in(MambaIn::DT));
  o.a = ex.load<T>(node.in(MambaIn::A)), o.b = ex.load<T>(node.in(MambaIn::B)), o.c = ex.load<T>(node.in(MambaIn::C));
  auto optional = [&](MambaIn port) { return node.in(port) ? ex.load<T>(node.in(port)) : Array<T>(); };
  o.d = optional(MambaIn::D), o.z = optional(MambaIn::Z), o.dt_bias = optional(MambaIn::DT_BIAS);
  o.d_per_channel = o.d.dim.size() == 2;
  o.init = node.in(MambaIn::INITIAL_STATE) ? ex.load<T>(node.in(MambaIn::INITIAL_STATE))
                                           : Array<T>({sequences, o.heads, o.head_dim, o.state_dim});
  return o;
}

template <class T>
void run_forward(const Mamba2ForwardNode& node, RefExec& ex, const Operands<T>& o, const std::vector<Sequence>& seqs) {
  const StepRule<graph::Mamba2_attributes> rule{node.attr};
  const int64_t heads = o.heads, head_dim = o.head_dim, state_dim = o.state_dim, pn = head_dim * state_dim;
  Array<T> y(o.x.dim), final_state(o.init.dim);
  for (const Sequence& s : seqs)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = o.group_of(h), at = (s.state_row * heads + h) * pn;
      std::vector<T> state(&o.init[at], &o.init[at] + pn);
      for (int64_t t = s.first; t < s.first + s.len; ++t) {
        T unused;
        const T step = rule.step(o, t, h, unused), decay = std::exp(step * o.a[h]);
        const T* bt = &o.b[(t * o.groups + g) * state_dim];
        const T* ct = &o.c[(t * o.groups + g) * state_dim];
        const int64_t xy = (t * heads + h) * head_dim;
        for (int64_t p = 0; p < head_dim; ++p) {
          const T input = step * o.x[xy + p];
          T out = 0;
          for (int64_t n = 0; n < state_dim; ++n) {
            T& e = state[static_cast<size_t>(p * state_dim + n)];
            e = decay * e + input * bt[n];
            out += e * ct[n];
          }
          if (o.d.size()) out += (o.d_per_channel ? o.d[h * head_dim + p] : o.d[h]) * o.x[xy + p];
          if (o.z.size()) out *= o.z[xy + p] * sigmoid(o.z[xy + p]);
          y[xy + p] = out;
        }
      }
      std::copy(state.begin(), state.end(), &final_state[at]);
    }
  ex.store(node.out(MambaOut::Y), y);
  if (const TensorPtr t = node.out(MambaOut::FINAL_STATE)) ex.store(t, final_state);
}

template <class T>
void run_backward(const Mamba2BackwardNode& node, RefExec& ex, const Operands<T>& o,
                  const std::vector<Sequence>& seqs) {
  const StepRule<graph::Mamba2_backward_attributes> rule{node.attr};
  const int64_t heads = o.heads, head_dim = o.head_dim, state_dim = o.state_dim, pn = head_dim * state_dim;
  const Array<T> d_y = ex.load<T>(node.in(MambaIn::DY));
  const TensorPtr d_final_t = node.in(MambaIn::D_FINAL_STATE);
  const Array<T> d_final = d_final_t ? ex.load<T>(d_final_t) : Array<T>(o.init.dim);
  Array<T> dx(o.x.dim), ddt(o.dt.dim), da(o.a.dim), db(o.b.dim), dc(o.c.dim), dd(o.d.dim), dz(o.z.dim);
  Array<T> ddt_bias(o.dt_bias.dim), d_init(o.init.dim);
  for (const Sequence& s : seqs)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = o.group_of(h), at = (s.state_row * heads + h) * pn;
      // Forward, keeping the state after every token (states[0] is the initial one) and each step.
      std::vector<std::vector<T>> states{std::vector<T>(&o.init[at], &o.init[at] + pn)};
      std::vector<T> steps, d_raws;
      for (int64_t t = s.first; t < s.first + s.len; ++t) {
        T d_raw;
        const T step = rule.step(o, t, h, d_raw), decay = std::exp(step * o.a[h]);
        steps.push_back(step), d_raws.push_back(d_raw);
        std::vector<T> next = states.back();
        const T* bt = &o.b[(t * o.groups + g) * state_dim];
        for (int64_t p = 0; p < head_dim; ++p)
          for (int64_t n = 0; n < state_dim; ++n) {
            T& e = next[static_cast<size_t>(p * state_dim + n)];
            e = decay * e + step * o.x[(t * heads + h) * head_dim + p] * bt[n];
          }
        states.push_back(std::move(next));
      }
      // Back: grad holds dL/dH_t, from the final state's gradient down to the initial state's.
      std::vector<T> grad(&d_final[at], &d_final[at] + pn);
      for (int64_t i = s.len - 1; i >= 0; --i) {
        const int64_t t = s.first + i, xy = (t * heads + h) * head_dim;
        const T* bt = &o.b[(t * o.groups + g) * state_dim];
        const T* ct = &o.c[(t * o.groups + g) * state_dim];
        const std::vector<T>& now = states[static_cast<size_t>(i + 1)];
        const std::vector<T>& before = states[static_cast<size_t>(i)];
        const T step = steps[static_cast<size_t>(i)], decay = std::exp(step * o.a[h]);
        for (int64_t p = 0; p < head_dim; ++p) {
          // y = q * silu(z), q = H_t C_t + D x_t.
          T read = 0;
          for (int64_t n = 0; n < state_dim; ++n) read += now[static_cast<size_t>(p * state_dim + n)] * ct[n];
          const T skip = o.d.size() ? (o.d_per_channel ? o.d[h * head_dim + p] : o.d[h]) : T(0);
          const T q = read + skip * o.x[xy + p];
          T dq = d_y[xy + p];
          if (o.z.size()) {
            const T zv = o.z[xy + p], sg = sigmoid(zv);
            dz[xy + p] = dq * q * sg * (T(1) + zv * (T(1) - sg));
            dq *= zv * sg;
          }
          if (o.d.size()) {
            (o.d_per_channel ? dd[h * head_dim + p] : dd[h]) += dq * o.x[xy + p];
            dx[xy + p] += skip * dq;
          }
          for (int64_t n = 0; n < state_dim; ++n) {
            grad[static_cast<size_t>(p * state_dim + n)] += dq * ct[n];
            dc[(t * o.groups + g) * state_dim + n] += now[static_cast<size_t>(p * state_dim + n)] * dq;
          }
        }
        // H_t = decay H_{t-1} + step x_t B_t^T.
        T d_step = 0, d_decay = 0;
        for (int64_t p = 0; p < head_dim; ++p) {
          const T xp = o.x[xy + p];
          for (int64_t n = 0; n < state_dim; ++n) {
            const T gr = grad[static_cast<size_t>(p * state_dim + n)];
            dx[xy + p] += step * gr * bt[n];
            db[(t * o.groups + g) * state_dim + n] += step * gr * xp;
            d_step += gr * xp * bt[n];
            d_decay += gr * before[static_cast<size_t>(p * state_dim + n)];
          }
        }
        for (T& e : grad) e *= decay;
        // decay = exp(step A).
        d_step += d_decay * decay * o.a[h];
        da[h] += d_decay * decay * step;
        const T d_raw = d_step * d_raws[static_cast<size_t>(i)];
        ddt[t * heads + h] = d_raw;
        if (o.dt_bias.size()) ddt_bias[h] += d_raw;
      }
      std::copy(grad.begin(), grad.end(), &d_init[at]);
    }
  ex.store(node.out(MambaOut::DX), dx);
  ex.store(node.out(MambaOut::DDT), ddt);
  ex.store(node.out(MambaOut::DA), da);
  ex.store(node.out(MambaOut::DB), db);
  ex.store(node.out(MambaOut::DC), dc);
  const std::pair<MambaOut, const Array<T>*> optional[] = {
      {MambaOut::DD, &dd}, {MambaOut::DZ, &dz}, {MambaOut::DDT_BIAS, &ddt_bias}, {MambaOut::D_INITIAL_STATE, &d_init}};
  for (const auto& [port, values] : optional)
    if (const TensorPtr t = node.out(port)) ex.store(t, *values);
}

template <class T, class Attr>
error_t run_mamba2(const Mamba2Node<Attr>& node, RefExec& ex) {
  const auto& xd = node.in(MambaIn::X)->get_dim();
  std::vector<Sequence> seqs;
  FROST_CHECK(load_sequences(node, ex, node.in(MambaIn::CU_SEQLENS), nullptr, node.in(MambaIn::INITIAL_STATE), xd[0],
                             xd[1], seqs));
  const Operands<T> o = load_operands<T>(node, ex, static_cast<int64_t>(seqs.size()));
  if constexpr (Mamba2Node<Attr>::kBackward)
    run_backward(node, ex, o, seqs);
  else
    run_forward(node, ex, o, seqs);
  return {};
}

}  // namespace

template <class Attr>
error_t Mamba2Node<Attr>::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t { return run_mamba2<decltype(zero)>(*this, ex); });
}

template error_t Mamba2Node<graph::Mamba2_attributes>::run_reference(RefExec&) const;
template error_t Mamba2Node<graph::Mamba2_backward_attributes>::run_reference(RefExec&) const;

}  // namespace frost::detail
