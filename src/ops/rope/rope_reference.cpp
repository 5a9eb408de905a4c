// CPU reference of ROPE and ROPE_BACKWARD: rotate each channel pair by its table entry.
#include "engines/reference/ref_exec.h"
#include "ops/rope/rope_node.h"

namespace frost::detail {

namespace {

// direction +1 rotates (forward), -1 applies the transposed rotation (backward).
template <class NodeT>
error_t run_rope(const NodeT& n, RefExec& ex, RopeIn in_port, RopeOut out_port, int direction) {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const Array<T> xa = ex.load<T>(n.in(in_port));
    const Array<T> ca = ex.load<T>(n.in(RopeIn::COS)), sa = ex.load<T>(n.in(RopeIn::SIN));
    const int64_t s = xa.dim[2], d = xa.dim[3];
    const int64_t r = n.attr.rotary_dim.value_or(d), half = r / 2;
    Array<T> ya = xa;  // channels past the rotary dim are copied
    for (int64_t row = 0; row < xa.size() / d; ++row) {
      const int64_t pos = row % s, base = row * d;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = base + (n.attr.interleaved ? 2 * i : i);
        const int64_t b = base + (n.attr.interleaved ? 2 * i + 1 : i + half);
        const T c = ca[pos * half + i], sn = static_cast<T>(direction) * sa[pos * half + i];
        ya[a] = xa[a] * c - xa[b] * sn;
        ya[b] = xa[b] * c + xa[a] * sn;
      }
    }
    ex.store(n.out(out_port), ya);
    return {};
  });
}

}  // namespace

error_t RopeNode::run_reference(RefExec& ex) const { return run_rope(*this, ex, RopeIn::X, RopeOut::Y, 1); }
error_t RopeBackwardNode::run_reference(RefExec& ex) const { return run_rope(*this, ex, RopeIn::DY, RopeOut::DX, -1); }

}  // namespace frost::detail
