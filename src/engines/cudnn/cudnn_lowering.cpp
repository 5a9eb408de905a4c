#include "engines/cudnn/cudnn_lowering.h"

#include <algorithm>

#include "common/dtype_convert.h"
#include "ops/conv/conv_node.h"
#include "ops/matmul/matmul_node.h"
#include "ops/norm/norm_node.h"
#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa_backward/sdpa_backward_node.h"

namespace frost::detail {
namespace A = cudnn_abi::attr;
namespace D = cudnn_abi::desc;
namespace T = cudnn_abi::type;

namespace {

std::vector<int64_t> row_major(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * std::max<int64_t>(dims[k], 1);
  return s;
}

bool is_scalar(const graph::Tensor_attributes& t) { return t.get_is_pass_by_value(); }

template <class N>
bool is_a(const Node& n) {
  return dynamic_cast<const N*>(&n) != nullptr;
}

}  // namespace

Lowering::Lowering(const CudnnLibrary& lib, const GraphState& g, Lowered& out) : lib_(lib), g_(g), out_(out) {
  for (const auto& node : g.nodes)
    for (auto& p : const_cast<Node&>(*node).ports())  // read only: ports() is non-const for its slots
      if (*p.slot) {
        next_uid_ = std::max(next_uid_, (*p.slot)->get_uid() + 1);
        if (const auto& r = (*p.slot)->get_ragged_offset()) next_uid_ = std::max(next_uid_, r->get_uid() + 1);
      }
}

error_t Lowering::unsupported(const Node& n, const std::string& why) const {
  return {error_code_t::GRAPH_NOT_SUPPORTED, "node '" + n.name() + "' (" + std::string(n.tag()) + "): " + why};
}

// The backend wants every operand of a pointwise or matmul operation at one rank (matmul at least 3,
// a pass-by-value scalar too) and normalization tensors at rank 4 or more; frost broadcasts by
// right-aligned dims. So tensors get extent-1 dims: in front for pointwise, matmul and reduction
// graphs (what right alignment means), behind for normalizations (their statistics [N, 1, ...]
// keep their meaning). Convolution and attention tensors have fixed ranks; only scalars are padded
// there.
//
// Graphs of pointwise and reduction operations alone run on the backend's runtime-fusion engines,
// which take rank-4+ tensors laid out channels-last ([N, C, H, W] dims with C contiguous): on the
// H200 they computed wrong values for rank-2 tensors and offered no engine for row-major rank-4
// ones. Elementwise results do not depend on how axes are named, so those graphs present every
// tensor with its last axis moved to position 1: row-major [A, B, C, D] becomes the packed
// channels-last [A, D, B, C] over the same memory.
void Lowering::plan_ranks() {
  bool fixed = false, norm = false, mm = false;
  size_t rank = 0;
  std::vector<TensorPtr> all;
  for (const auto& node : g_.nodes) {
    fixed = fixed || is_a<ConvFpropNode>(*node) || is_a<ConvDgradNode>(*node) || is_a<ConvWgradNode>(*node) ||
            is_a<SdpaNode>(*node) || is_a<SdpaBackwardNode>(*node);
    norm = norm || is_a<RmsnormNode>(*node) || is_a<LayernormNode>(*node) || is_a<RmsnormBackwardNode>(*node) ||
           is_a<LayernormBackwardNode>(*node);
    mm = mm || is_a<MatmulNode>(*node);
    // ports() is non-const only because it hands out slots; nothing is written through them here.
    for (auto& p : const_cast<Node&>(*node).ports())
      if (*p.slot) {
        all.push_back(*p.slot);
        if (!is_scalar(**p.slot)) rank = std::max(rank, (*p.slot)->get_dim().size());
      }
  }
  channels_last_ = !fixed && !norm && !mm;
  trailing_pad_ = norm;
  size_t target = rank;
  if (norm) target = std::max<size_t>(rank, 4);
  if (mm) target = std::max<size_t>(rank, 3);
  if (channels_last_) target = std::max<size_t>(rank, 4);
  scalar_rank_ = std::max<size_t>(target, 1);
  for (const auto& t : all) {
    auto dims = t->get_dim();
    auto strides = t->get_stride();
    const size_t want = is_scalar(*t) || !fixed ? scalar_rank_ : dims.size();
    if (dims.size() >= want && !channels_last_) continue;
    const size_t pad = want > dims.size() ? want - dims.size() : 0;
    if (norm && !is_scalar(*t)) {
      dims.insert(dims.end(), pad, 1);
      strides.insert(strides.end(), pad, 1);
    } else {
      const int64_t outer = dims.empty() ? 1 : dims[0] * strides[0];
      dims.insert(dims.begin(), pad, 1);
      strides.insert(strides.begin(), pad, outer);
    }
    if (channels_last_ && dims.size() >= 3) {
      std::rotate(dims.begin() + 1, dims.end() - 1, dims.end());
      std::rotate(strides.begin() + 1, strides.end() - 1, strides.end());
    }
    shaped_[t->get_uid()] = {std::move(dims), std::move(strides)};
  }
}

int64_t Lowering::descriptor_axis(const TensorPtr& t, int64_t axis) const {
  const auto it = shaped_.find(t->get_uid());
  if (it == shaped_.end() || trailing_pad_) return axis;
  const auto r = static_cast<int64_t>(it->second.first.size());
  const int64_t padded = axis + r - static_cast<int64_t>(t->get_dim().size());
  if (!channels_last_) return padded;
  return padded == r - 1 ? 1 : (padded == 0 ? 0 : padded + 1);
}

error_t Lowering::make_tensor(const TensorPtr& t, std::vector<int64_t> dims, std::vector<int64_t> strides,
                              BTensor& out) {
  const std::string what = "tensor '" + t->get_name() + "' (uid " + std::to_string(t->get_uid()) + ")";
  int32_t dt = 0;
  if (!backend_dtype(t->get_data_type(), dt))
    return {error_code_t::GRAPH_NOT_SUPPORTED, what + ": data type " + std::string(to_string(t->get_data_type()))};
  if (dims.size() > 8)
    return {error_code_t::GRAPH_NOT_SUPPORTED, what + ": rank " + std::to_string(dims.size()) + " > 8"};
  DescBuilder b(lib_, D::TENSOR, what);
  b.enumeration(A::TENSOR_DATA_TYPE, T::DATA_TYPE, dt)
      .i64s(A::TENSOR_DIMENSIONS, dims)
      .i64s(A::TENSOR_STRIDES, strides)
      .i64(A::TENSOR_UNIQUE_ID, t->get_uid())
      .i64(A::TENSOR_BYTE_ALIGNMENT, t->get_alignment())
      .boolean(A::TENSOR_IS_VIRTUAL, t->get_is_virtual())
      .boolean(A::TENSOR_IS_BY_VALUE, t->get_is_pass_by_value());
  if (t->get_reordering_type() != TensorReordering_t::NONE)
    b.enumeration(A::TENSOR_REORDERING_MODE, T::TENSOR_REORDERING_MODE, static_cast<int32_t>(t->get_reordering_type()));
  if (const auto& r = t->get_ragged_offset()) {
    BTensor rt;
    FROST_CHECK(tensor(r, rt));
    b.desc(A::TENSOR_RAGGED_OFFSET_DESC, rt.desc);
  }
  out = {nullptr, t->get_uid(), std::move(dims), std::move(strides), t->get_data_type()};
  FROST_CHECK(b.finalize(out.desc));
  keep(out.desc);
  Binding bind{t->get_uid(), Binding::Source::CALLER, 0};
  if (t->get_is_pass_by_value()) {
    std::array<uint8_t, 8> bytes{};
    write_element(bytes.data(), t->get_data_type(), 0, t->get_pass_by_value().value_or(0.0));
    bind = {t->get_uid(), Binding::Source::BY_VALUE, static_cast<int64_t>(out_.by_value.size())};
    out_.by_value.push_back(bytes);
  }
  if (!t->get_is_virtual()) out_.bindings.push_back(bind);
  by_uid_[t->get_uid()] = out;
  return {};
}

error_t Lowering::tensor(const TensorPtr& t, BTensor& out) {
  if (auto it = by_uid_.find(t->get_uid()); it != by_uid_.end()) {
    out = it->second;
    return {};
  }
  if (auto it = shaped_.find(t->get_uid()); it != shaped_.end())
    return make_tensor(t, it->second.first, it->second.second, out);
  // Ragged offset tensors are not node ports, so validate leaves their strides to the reader.
  return make_tensor(t, t->get_dim(), t->get_stride().empty() ? row_major(t->get_dim()) : t->get_stride(), out);
}

error_t Lowering::tensor_view(const TensorPtr& t, std::vector<int64_t> dims, std::vector<int64_t> strides,
                              BTensor& out) {
  if (auto it = by_uid_.find(t->get_uid()); it != by_uid_.end()) {
    if (it->second.dims != dims || it->second.strides != strides)
      return {error_code_t::GRAPH_NOT_SUPPORTED, "tensor '" + t->get_name() + "' is needed in two arrangements " +
                                                     dims_string(it->second.dims) + " and " + dims_string(dims) +
                                                     "; the backend takes one per uid"};
    out = it->second;
    return {};
  }
  return make_tensor(t, std::move(dims), std::move(strides), out);
}

error_t Lowering::virtual_tensor(std::vector<int64_t> dims, DataType_t dt, BTensor& out, std::vector<int64_t> strides,
                                 const TensorPtr& ragged) {
  graph::Tensor_attributes a;
  const int64_t uid = next_uid_++;
  a.set_name("cudnn_intermediate_" + std::to_string(uid)).set_uid(uid).set_data_type(dt).set_is_virtual(true);
  if (ragged) a.set_ragged_offset(ragged);
  if (strides.empty()) strides = row_major(dims);
  return make_tensor(std::make_shared<graph::Tensor_attributes>(a), std::move(dims), std::move(strides), out);
}

error_t Lowering::scalar(double value, DataType_t dt, BTensor& out) {
  graph::Tensor_attributes a;
  const int64_t uid = next_uid_++;
  a.set_name("cudnn_scalar_" + std::to_string(uid)).set_uid(uid).set_data_type(dt).set_pass_by_value(value);
  return make_tensor(std::make_shared<graph::Tensor_attributes>(a), std::vector<int64_t>(scalar_rank_, 1),
                     std::vector<int64_t>(scalar_rank_, 1), out);
}

error_t Lowering::workspace_tensor(std::vector<int64_t> dims, std::vector<int64_t> strides, DataType_t dt, int64_t span,
                                   const TensorPtr& ragged, BTensor& out) {
  graph::Tensor_attributes a;
  const int64_t uid = next_uid_++;
  a.set_name("cudnn_workspace_" + std::to_string(uid)).set_uid(uid).set_data_type(dt);
  if (ragged) a.set_ragged_offset(ragged);
  FROST_CHECK(make_tensor(std::make_shared<graph::Tensor_attributes>(a), std::move(dims), std::move(strides), out));
  // make_tensor recorded it as the caller's; it lives in frost's part of the workspace instead.
  out_.bindings.back() = {out.uid, Binding::Source::WORKSPACE, out_.frost_workspace};
  out_.frost_workspace += (span * element_size(dt) + 255) / 256 * 256;
  return {};
}

error_t Lowering::pointwise(const std::string& what, int32_t mode, const BTensor& x, const BTensor* b, const BTensor* t,
                            const BTensor& y, const graph::Pointwise_attributes* attrs, int64_t axis,
                            DataType_t compute) {
  int32_t prec = 0;
  if (!backend_dtype(compute, prec)) return {error_code_t::GRAPH_NOT_SUPPORTED, what + ": compute type NOT_SET"};
  DescBuilder pd(lib_, D::POINTWISE, what);
  pd.enumeration(A::POINTWISE_MODE, T::POINTWISE_MODE, mode).enumeration(A::POINTWISE_MATH_PREC, T::DATA_TYPE, prec);
  if (attrs) {
    if (attrs->relu_lower_clip) pd.f64(A::POINTWISE_RELU_LOWER_CLIP, *attrs->relu_lower_clip);
    if (attrs->relu_upper_clip) pd.f64(A::POINTWISE_RELU_UPPER_CLIP, *attrs->relu_upper_clip);
    if (attrs->relu_lower_clip_slope) pd.f64(A::POINTWISE_RELU_LOWER_CLIP_SLOPE, *attrs->relu_lower_clip_slope);
    if (attrs->swish_beta) pd.f64(A::POINTWISE_SWISH_BETA, *attrs->swish_beta);
    if (attrs->elu_alpha) pd.f64(A::POINTWISE_ELU_ALPHA, *attrs->elu_alpha);
    if (attrs->softplus_beta) pd.f64(A::POINTWISE_SOFTPLUS_BETA, *attrs->softplus_beta);
  }
  if (axis >= 0) pd.i64(A::POINTWISE_AXIS, axis);
  DescPtr pdesc;
  FROST_CHECK(pd.finalize(pdesc));
  keep(pdesc);
  DescBuilder op(lib_, D::OPERATION_POINTWISE, what);
  op.desc(A::OPERATION_POINTWISE_PW_DESCRIPTOR, pdesc);
  // Backward activations read (dy, x) and write dx; every other mode reads x (, b (, t)) and writes y.
  if (mode >= cudnn_abi::pw::RELU_BWD && mode <= cudnn_abi::pw::GELU_APPROX_TANH_BWD) {
    op.desc(A::OPERATION_POINTWISE_DYDESC, x.desc).desc(A::OPERATION_POINTWISE_XDESC, b->desc);
    op.desc(A::OPERATION_POINTWISE_DXDESC, y.desc);
  } else {
    op.desc(A::OPERATION_POINTWISE_XDESC, x.desc);
    if (b) op.desc(A::OPERATION_POINTWISE_BDESC, b->desc);
    if (t) op.desc(A::OPERATION_POINTWISE_TDESC, t->desc);
    op.desc(A::OPERATION_POINTWISE_YDESC, y.desc);
  }
  DescPtr d;
  FROST_CHECK(op.finalize(d));
  add_op(d);
  return {};
}

error_t Lowering::pw(const std::string& what, int32_t mode, const BTensor& x, const BTensor* b,
                     std::vector<int64_t> dims, DataType_t dt, BTensor& y, int64_t axis, DataType_t compute) {
  FROST_CHECK(virtual_tensor(std::move(dims), dt, y));
  return pointwise(what, mode, x, b, nullptr, y, nullptr, axis, compute);
}

error_t Lowering::matmul(const std::string& what, const BTensor& a, const BTensor& b, const BTensor& c,
                         const BTensor* m_override, const BTensor* n_override, const BTensor* k_override,
                         double padding) {
  DescBuilder md(lib_, D::MATMUL, what);
  int32_t prec = cudnn_abi::dtype::FLOAT;
  md.enumeration(A::MATMUL_COMP_TYPE, T::DATA_TYPE, prec);
  if (m_override || n_override || k_override) md.f64(A::MATMUL_PADDING_VALUE, padding);
  DescPtr mdesc;
  FROST_CHECK(md.finalize(mdesc));
  keep(mdesc);
  DescBuilder op(lib_, D::OPERATION_MATMUL, what);
  op.desc(A::OPERATION_MATMUL_ADESC, a.desc)
      .desc(A::OPERATION_MATMUL_BDESC, b.desc)
      .desc(A::OPERATION_MATMUL_CDESC, c.desc);
  op.desc(A::OPERATION_MATMUL_DESC, mdesc);
  if (m_override) op.desc(A::OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, m_override->desc);
  if (n_override) op.desc(A::OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, n_override->desc);
  if (k_override) op.desc(A::OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, k_override->desc);
  DescPtr d;
  FROST_CHECK(op.finalize(d));
  add_op(d);
  return {};
}

error_t Lowering::reduction(const std::string& what, int32_t mode, const BTensor& x, const BTensor& y,
                            bool deterministic) {
  DescBuilder rd(lib_, D::REDUCTION, what);
  rd.enumeration(A::REDUCTION_OPERATOR, T::REDUCTION_OPERATOR_TYPE, mode)
      .enumeration(A::REDUCTION_COMP_TYPE, T::DATA_TYPE, cudnn_abi::dtype::FLOAT);
  if (deterministic) rd.boolean(A::REDUCTION_IS_DETERMINISTIC, true);
  DescPtr rdesc;
  FROST_CHECK(rd.finalize(rdesc));
  keep(rdesc);
  DescBuilder op(lib_, D::OPERATION_REDUCTION, what);
  op.desc(A::OPERATION_REDUCTION_XDESC, x.desc).desc(A::OPERATION_REDUCTION_YDESC, y.desc);
  op.desc(A::OPERATION_REDUCTION_DESC, rdesc);
  DescPtr d;
  FROST_CHECK(op.finalize(d));
  add_op(d);
  return {};
}

error_t Lowering::reshape(const std::string& what, const BTensor& x, const BTensor& y) {
  DescBuilder op(lib_, D::OPERATION_RESHAPE, what);
  op.desc(A::OPERATION_RESHAPE_XDESC, x.desc).desc(A::OPERATION_RESHAPE_YDESC, y.desc);
  DescPtr d;
  FROST_CHECK(op.finalize(d));
  add_op(d);
  return {};
}

error_t Lowering::paged_cache_load(const std::string& what, const BTensor& container, const BTensor& seq_len,
                                   const BTensor& page_table, const BTensor& y) {
  DescBuilder op(lib_, D::OPERATION_PAGED_CACHE_LOAD, what);
  op.desc(A::OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, container.desc)
      .desc(A::OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, seq_len.desc)
      .desc(A::OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, page_table.desc)
      .desc(A::OPERATION_PAGED_CACHE_LOAD_YDESC, y.desc);
  DescPtr d;
  FROST_CHECK(op.finalize(d));
  add_op(d);
  return {};
}

error_t Lowering::run() {
  plan_ranks();
  for (const auto& node : g_.nodes) {
    bool handled = false;
    FROST_CHECK(lower_basic_node(*this, *node, handled));
    if (!handled) FROST_CHECK(lower_sdpa_node(*this, *node, handled));
    if (!handled) return unsupported(*node, "the cudnn engine does not lower " + std::string(node->tag()) + " nodes");
  }
  return {};
}

error_t lower_graph(const CudnnLibrary& lib, const GraphState& g, cudnn_abi::HandlePtr handle, Lowered& out) {
  Lowering l(lib, g, out);
  FROST_CHECK(l.run());
  DescBuilder og(lib, D::OPERATIONGRAPH, "the operation graph");
  // cuDNN 9.8 and later finalize operation graphs without a handle (the tests do so on the host).
  if (handle) og.handle(A::OPERATIONGRAPH_HANDLE, handle);
  og.descs(A::OPERATIONGRAPH_OPS, out.ops);
  return og.finalize(out.op_graph);
}

}  // namespace frost::detail
