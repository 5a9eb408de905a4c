// CPU references of the data-movement ops: each is one strided copy between dense row-major arrays.
// They do no arithmetic, so they move values as double in both precision modes: every storable type
// (integers up to 2^53 included) survives the copy exactly.
#include "engines/reference/ref_exec.h"
#include "graph/shape_util.h"
#include "ops/shape/shape_nodes.h"

namespace frost::detail {

namespace {

// Copies a dims-shaped block: element j (a multi-index) goes from src[sum j*src_strides] to
// dst[sum j*dst_strides], visiting j in row-major order.
template <class T>
void copy_block(const std::vector<int64_t>& dims, const T* src, const std::vector<int64_t>& src_strides, T* dst,
                const std::vector<int64_t>& dst_strides) {
  const size_t rank = dims.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  int64_t s = 0, d = 0;
  for (int64_t n = 0; n < total; ++n) {
    dst[d] = src[s];
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < dims[k]) {
        s += src_strides[k];
        d += dst_strides[k];
        break;
      }
      s -= (dims[k] - 1) * src_strides[k];
      d -= (dims[k] - 1) * dst_strides[k];
      idx[k] = 0;
    }
  }
}

}  // namespace

error_t ReshapeNode::run_reference(RefExec& ex) const {
  Array<double> v = ex.load<double>(in(graph::UnaryInput::X));
  // Row-major order is the contract: the same dense elements under Y's dims.
  v.dim = out(graph::UnaryOutput::Y)->get_dim();
  ex.store(out(graph::UnaryOutput::Y), v);
  return {};
}

error_t TransposeNode::run_reference(RefExec& ex) const {
  const Array<double> x = ex.load<double>(in(graph::UnaryInput::X));
  const TensorPtr y = out(graph::UnaryOutput::Y);
  Array<double> yv(y->get_dim());
  // Walking Y's index j, the X element has i[permutation[k]] = j[k].
  const std::vector<int64_t> x_strides = packed_strides(x.dim);
  std::vector<int64_t> src_strides(attr.permutation.size());
  for (size_t k = 0; k < src_strides.size(); ++k) src_strides[k] = x_strides[static_cast<size_t>(attr.permutation[k])];
  copy_block(yv.dim, x.v.data(), src_strides, yv.v.data(), packed_strides(yv.dim));
  ex.store(y, yv);
  return {};
}

error_t SliceNode::run_reference(RefExec& ex) const {
  const Array<double> x = ex.load<double>(in(graph::UnaryInput::X));
  const TensorPtr y = out(graph::UnaryOutput::Y);
  Array<double> yv(y->get_dim());
  const std::vector<int64_t> x_strides = packed_strides(x.dim);
  const auto r = ranges(x.dim);
  int64_t first = 0;
  for (size_t k = 0; k < r.size(); ++k) first += r[k].first * x_strides[k];
  copy_block(yv.dim, x.v.data() + first, x_strides, yv.v.data(), packed_strides(yv.dim));
  ex.store(y, yv);
  return {};
}

error_t ConcatenateNode::run_reference(RefExec& ex) const {
  const TensorPtr y = out(graph::UnaryOutput::Y);
  Array<double> yv(y->get_dim());
  const std::vector<int64_t> y_strides = packed_strides(yv.dim);
  const size_t axis = static_cast<size_t>(normalized_axis(static_cast<int64_t>(yv.dim.size())));
  int64_t at = 0;  // where the next input starts along axis
  for (const TensorPtr& t : xs_) {
    const Array<double> x = ex.load<double>(t);
    copy_block(x.dim, x.v.data(), packed_strides(x.dim), yv.v.data() + at * y_strides[axis], y_strides);
    at += x.dim[axis];
  }
  ex.store(y, yv);
  return {};
}

}  // namespace frost::detail
