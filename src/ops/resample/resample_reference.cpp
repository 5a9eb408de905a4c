// CPU references of RESAMPLE and RESAMPLE_BACKWARD: direct loops over output elements and their
// window positions, both through PoolWindows::walk, so the backward sends each gradient to the
// element the forward read.
#include <cmath>
#include <limits>

#include "engines/reference/ref_exec.h"
#include "ops/resample/resample_node.h"
#include "ops/resample/resample_pooling.h"

namespace frost::detail {

using RM = ResampleMode_t;
using PM = PaddingMode_t;

namespace {

// The forward's choice for max pooling: the first maximum in window order, where a NaN beats
// every number. Returns its window position and value.
template <class T>
std::pair<int64_t, T> first_maximum(const PoolWindows& w, PM padding, const T* plane, int64_t o) {
  T best = -std::numeric_limits<T>::infinity();
  int64_t best_at = -1;
  w.walk(o, [&](int64_t position, bool, int64_t element) {
    const T v = element >= 0 ? plane[element] : padding == PM::ZERO_PAD ? T(0) : -std::numeric_limits<T>::infinity();
    if (best_at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) best = v, best_at = position;
  });
  return {best_at, best};
}

}  // namespace

error_t ResampleNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const TensorPtr x = in(graph::ResampleInput::X), y = out(graph::ResampleOutput::Y);
    const TensorPtr index = out(graph::ResampleOutput::INDEX);
    const Array<T> xa = ex.load<T>(x);
    const PoolingSpec spec = pooling_spec(attr);
    const PoolWindows w(spec, xa.dim, y->get_dim());
    const int64_t planes = xa.dim[0] * xa.dim[1];
    Array<T> ya(y->get_dim()), ia(y->get_dim());
    for (int64_t p = 0; p < planes; ++p) {
      const T* plane = &xa[p * w.in_plane()];
      for (int64_t o = 0; o < w.out_plane(); ++o) {
        T& out = ya[p * w.out_plane() + o];
        if (spec.mode == RM::MAXPOOL) {
          const auto [at, best] = first_maximum(w, spec.padding, plane, o);
          out = best;
          ia[p * w.out_plane() + o] = static_cast<T>(at);
          continue;
        }
        T sum = 0;
        int64_t count = 0;
        w.walk(o, [&](int64_t, bool inside, int64_t element) {
          if (!inside && spec.mode == RM::AVGPOOL_EXCLUDE_PADDING) return;
          sum += element >= 0 ? plane[element] : T(0);
          ++count;
        });
        out = sum / static_cast<T>(count);
      }
    }
    ex.store(y, ya);
    if (index) ex.store(index, ia);
    return {};
  });
}

error_t ResampleBackwardNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const TensorPtr dy_t = in(graph::ResampleBackwardInput::DY), x_t = in(graph::ResampleBackwardInput::X);
    const TensorPtr index_t = in(graph::ResampleBackwardInput::INDEX), dx_t = out(graph::ResampleBackwardOutput::DX);
    const PoolingSpec spec = pooling_spec(attr);
    const PoolWindows w(spec, dx_t->get_dim(), dy_t->get_dim());
    const Array<T> dy = ex.load<T>(dy_t);
    const int64_t planes = dy.dim[0] * dy.dim[1], volume = w.volume();
    // Max pooling's window positions: the forward's INDEX when bound (checked before anything is
    // written), else the first maximum of X's window.
    std::vector<int64_t> argmax;
    if (spec.mode == RM::MAXPOOL) {
      argmax.resize(static_cast<size_t>(dy.volume()));
      if (index_t) {
        const Array<double> index = ex.load<double>(index_t);
        for (int64_t n = 0; n < index.size(); ++n) {
          if (!(index[n] >= 0 && index[n] < static_cast<double>(volume)))
            return attr_error(*this, "INDEX",
                              std::to_string(static_cast<int64_t>(index[n])) + " at element " + std::to_string(n),
                              "must be a window position in [0, " + std::to_string(volume) + ")");
          argmax[static_cast<size_t>(n)] = static_cast<int64_t>(index[n]);
        }
      } else {
        const Array<T> x = ex.load<T>(x_t);
        for (int64_t p = 0; p < planes; ++p)
          for (int64_t o = 0; o < w.out_plane(); ++o)
            argmax[static_cast<size_t>(p * w.out_plane() + o)] =
                first_maximum(w, spec.padding, &x[p * w.in_plane()], o).first;
      }
    }
    Array<T> dx(dx_t->get_dim());
    for (int64_t p = 0; p < planes; ++p) {
      T* plane = &dx[p * w.in_plane()];
      for (int64_t o = 0; o < w.out_plane(); ++o) {
        const int64_t n = p * w.out_plane() + o;
        const T g = dy[n];
        if (spec.mode == RM::MAXPOOL) {
          w.walk(o, [&](int64_t position, bool, int64_t element) {
            if (position == argmax[static_cast<size_t>(n)] && element >= 0) plane[element] += g;
          });
          continue;
        }
        int64_t count = volume;
        if (spec.mode == RM::AVGPOOL_EXCLUDE_PADDING) {
          count = 0;
          w.walk(o, [&](int64_t, bool inside, int64_t) { count += inside; });
        }
        const T share = g / static_cast<T>(count);
        w.walk(o, [&](int64_t, bool inside, int64_t element) {
          if (element >= 0 && (inside || spec.mode == RM::AVGPOOL_INCLUDE_PADDING)) plane[element] += share;
        });
      }
    }
    ex.store(dx_t, dx);
    return {};
  });
}

}  // namespace frost::detail
