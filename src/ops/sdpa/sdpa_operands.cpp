#include "ops/sdpa/sdpa_operands.h"

#include <algorithm>

namespace frost::detail {

namespace {

// A copy of `t`'s declaration that reads or writes `count` consecutive elements from the start of
// its buffer, so the reference can address a packed buffer itself.
TensorPtr flat_view(const TensorPtr& t, int64_t count, DataType_t dt) {
  auto view = std::make_shared<graph::Tensor_attributes>(*t);
  view->set_dim({count}).set_stride({1}).set_data_type(dt);
  view->set_ragged_offset(nullptr);
  return view;
}

RowAddressing dense_addressing(const std::vector<int64_t>& dim) {
  RowAddressing a;
  a.stride_d = 1;
  a.stride_s = dim[3];
  a.stride_h = dim[2] * dim[3];
  for (int64_t b = 0; b < dim[0]; ++b) a.batch_base.push_back(b * dim[1] * a.stride_h);
  return a;
}

// Addressing of a packed tensor and the number of elements from its buffer start that cover every
// row below `lengths`; checked against the max_total bound when one is set.
error_t packed_addressing(const Node& node, const TensorPtr& t, const char* port, const PackedStarts& packed,
                          const std::vector<int64_t>& lengths, RowAddressing& a, int64_t& span) {
  const auto& dim = t->get_dim();
  const auto& stride = t->get_stride();
  a.batch_base = packed.starts;
  a.stride_h = stride[1], a.stride_s = stride[2], a.stride_d = stride[3];
  span = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    if (packed.starts[b] < 0)
      return attr_error(node, std::string(port) + " row start",
                        std::to_string(packed.starts[b]) + " at batch " + std::to_string(b), "must be non-negative");
    if (lengths[b] == 0) continue;
    const int64_t last =
        packed.starts[b] + (dim[1] - 1) * stride[1] + (lengths[b] - 1) * stride[2] + (dim[3] - 1) * stride[3];
    span = std::max(span, last + 1);
  }
  if (packed.max_total_tokens) {
    const int64_t capacity = *packed.max_total_tokens * dim[1] * dim[3];
    if (span > capacity)
      return attr_error(node, std::string(port) + " rows", "end at element " + std::to_string(span),
                        "pass the buffer of max_total_seq_len = " + std::to_string(*packed.max_total_tokens) +
                            " tokens (" + std::to_string(capacity) + " elements)");
  }
  return {};
}

}  // namespace

std::vector<int64_t> load_indices(const RefExec& ex, const TensorPtr& t) {
  TensorPtr view = t;
  if (t->get_stride().size() != t->get_dim().size()) {
    // Offsets tensors are not ports, so validation may not have given them strides: packed.
    view = std::make_shared<graph::Tensor_attributes>(*t);
    std::vector<int64_t> s(t->get_dim().size(), 1);
    for (size_t i = s.size(); i-- > 1;) s[i - 1] = s[i] * t->get_dim()[i];
    view->set_stride(s);
  }
  const Array<double> a = ex.load<double>(view);
  std::vector<int64_t> v(a.v.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(a.v[i]);
  return v;
}

uint64_t load_u64_scalar(const RefExec& ex, const TensorPtr& t) {
  if (t->get_is_pass_by_value()) return static_cast<uint64_t>(static_cast<int64_t>(t->get_pass_by_value().value_or(0)));
  if (t->get_data_type() == DataType_t::INT32 || t->get_is_virtual())
    return static_cast<uint64_t>(static_cast<int64_t>(ex.load<double>(t)[0]));
  // INT64 read as its two 32-bit halves (little-endian): a double would round values past 2^53.
  const Array<double> halves = ex.load<double>(flat_view(t, 2, DataType_t::INT32));
  const auto word = [&](int i) {
    return static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(halves[i])));
  };
  return word(0) | (word(1) << 32);
}

error_t load_side(const Node& node, const RefExec& ex, const TensorPtr& seq, const TensorPtr& cu, const char* seq_port,
                  const char* cu_port, int64_t batch, int64_t extent, SideLengths& out) {
  out.lengths.assign(static_cast<size_t>(batch), extent);
  out.cu_starts.clear();
  if (seq) {
    const std::vector<int64_t> v = load_indices(ex, seq);
    for (int64_t b = 0; b < batch; ++b) {
      if (v[b] < 0 || v[b] > extent)
        return attr_error(node, seq_port, std::to_string(v[b]) + " at batch " + std::to_string(b),
                          "must be in [0, " + std::to_string(extent) + "]");
      out.lengths[static_cast<size_t>(b)] = v[b];
    }
  }
  if (cu) {
    const std::vector<int64_t> v = load_indices(ex, cu);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = v[b + 1] - v[b];
      if (v[b] < 0 || len < 0 || len > extent)
        return attr_error(node, cu_port,
                          std::to_string(v[b]) + ", " + std::to_string(v[b + 1]) + " at batch " + std::to_string(b),
                          "must be non-negative and non-decreasing by at most " + std::to_string(extent));
      out.lengths[static_cast<size_t>(b)] = len;
    }
    out.cu_starts.assign(v.begin(), v.end() - 1);
  }
  return {};
}

PackedStarts packed_starts(const RefExec& ex, const TensorPtr& t, const SideLengths& side,
                           std::optional<int64_t> max_total) {
  PackedStarts p;
  p.max_total_tokens = max_total;
  if (t->get_is_virtual()) return p;  // no buffer layout: a dense intermediate
  if (const TensorPtr ro = t->get_ragged_offset()) {
    p.starts = load_indices(ex, ro);
    p.starts.pop_back();  // offset[b] is the start of batch b; the last entry only closes the buffer
  } else if (!side.cu_starts.empty()) {
    for (int64_t token : side.cu_starts) p.starts.push_back(token * t->get_stride()[2]);
  }
  return p;
}

template <class T>
error_t load_operand(const Node& node, const RefExec& ex, const TensorPtr& t, const char* port,
                     const PackedStarts& packed, const std::vector<int64_t>& lengths, Operand<T>& out) {
  if (packed.starts.empty()) {
    out.values = ex.load<T>(t);
    out.addr = dense_addressing(t->get_dim());
    return {};
  }
  int64_t span = 0;
  FROST_CHECK(packed_addressing(node, t, port, packed, lengths, out.addr, span));
  out.values = span > 0 ? ex.load<T>(flat_view(t, span, t->get_data_type())) : Array<T>(std::vector<int64_t>{0});
  return {};
}

template error_t load_operand<float>(const Node&, const RefExec&, const TensorPtr&, const char*, const PackedStarts&,
                                     const std::vector<int64_t>&, Operand<float>&);
template error_t load_operand<double>(const Node&, const RefExec&, const TensorPtr&, const char*, const PackedStarts&,
                                      const std::vector<int64_t>&, Operand<double>&);

error_t prepare_output(const Node& node, const RefExec& ex, const TensorPtr& t, const char* port,
                       const PackedStarts& packed, const std::vector<int64_t>& lengths, double fill, OutputRows& out) {
  out.packed = !packed.starts.empty();
  if (!out.packed) {
    out.data.values = Array<double>(t->get_dim(), fill);
    out.data.addr = dense_addressing(t->get_dim());
    return {};
  }
  // Read back what the rows do not cover, so storing the whole span rewrites it unchanged: doubles
  // hold every storable type exactly.
  return load_operand<double>(node, ex, t, port, packed, lengths, out.data);
}

void store_output(RefExec& ex, const TensorPtr& t, const OutputRows& rows) {
  if (!rows.packed) {
    ex.store(t, rows.data.values);
  } else if (rows.data.values.size() > 0 && !rows.data.addr.batch_base.empty()) {
    ex.store(flat_view(t, rows.data.values.size(), t->get_data_type()), rows.data.values);
  }
}

}  // namespace frost::detail
