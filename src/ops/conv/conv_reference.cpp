// CPU references of the three convolution ops: one loop nest over every product of forward
// convolution (conv_geometry.h), which each op accumulates into its own output. dgrad and wgrad are
// thereby the exact adjoints of fprop.
#include "engines/reference/ref_exec.h"
#include "ops/conv/conv_geometry.h"
#include "ops/conv/conv_node.h"

namespace frost::detail {

using graph::ConvDgradInput;
using graph::ConvFpropInput;
using graph::ConvWgradInput;

error_t ConvFpropNode::run_reference(RefExec& ex) const {
  const TensorPtr x = in(ConvFpropInput::X), w = in(ConvFpropInput::W), y = out(graph::ConvFpropOutput::Y);
  const ConvGeometry g = geometry_of(attr, x->get_dim(), w->get_dim());
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const Array<T> xv = ex.load<T>(x), wv = ex.load<T>(w);
    Array<T> yv(y->get_dim());
    for_each_product(g, [&](int64_t xi, int64_t wi, int64_t yi) { yv[yi] += xv[xi] * wv[wi]; });
    ex.store(y, yv);
    return {};
  });
}

error_t ConvDgradNode::run_reference(RefExec& ex) const {
  const TensorPtr dy = in(ConvDgradInput::DY), w = in(ConvDgradInput::W), dx = out(graph::ConvDgradOutput::DX);
  const ConvGeometry g = geometry_of(attr, dx->get_dim(), w->get_dim());
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const Array<T> dyv = ex.load<T>(dy), wv = ex.load<T>(w);
    Array<T> dxv(dx->get_dim());
    for_each_product(g, [&](int64_t xi, int64_t wi, int64_t yi) { dxv[xi] += dyv[yi] * wv[wi]; });
    ex.store(dx, dxv);
    return {};
  });
}

error_t ConvWgradNode::run_reference(RefExec& ex) const {
  const TensorPtr dy = in(ConvWgradInput::DY), x = in(ConvWgradInput::X), dw = out(graph::ConvWgradOutput::DW);
  const ConvGeometry g = geometry_of(attr, x->get_dim(), dw->get_dim());
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const Array<T> dyv = ex.load<T>(dy), xv = ex.load<T>(x);
    Array<T> dwv(dw->get_dim());
    for_each_product(g, [&](int64_t xi, int64_t wi, int64_t yi) { dwv[wi] += xv[xi] * dyv[yi]; });
    ex.store(dw, dwv);
    return {};
  });
}

}  // namespace frost::detail
