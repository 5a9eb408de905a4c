// How the attention references (sdpa and sdpa_backward) reach element (b, h, s, d) of each operand:
// dense [b, h, s, d] copies, ragged or packed buffers read through per-batch row starts, and paged
// K/V caches read through page tables; and the per-batch lengths that say which rows exist.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "engines/reference/ref_exec.h"
#include "graph/node.h"

namespace frost::detail {

// Element offsets of one operand's rows inside the array that holds its values.
struct RowAddressing {
  std::vector<int64_t> batch_base;  // offset of (b, 0, 0, 0); unused when paged
  int64_t stride_h = 0, stride_s = 0, stride_d = 0;
  // Paged caches: row s of batch b is row s % page_size of page table[b * pages_per_seq + s / page_size].
  std::vector<int64_t> page_table;
  int64_t pages_per_seq = 0, page_size = 0, page_stride = 0;

  int64_t at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    if (!page_table.empty()) {
      const int64_t page = page_table[static_cast<size_t>(b * pages_per_seq + s / page_size)];
      return page * page_stride + h * stride_h + (s % page_size) * stride_s + d * stride_d;
    }
    return batch_base[static_cast<size_t>(b)] + h * stride_h + s * stride_s + d * stride_d;
  }
};

template <class T>
struct Operand {
  Array<T> values;
  RowAddressing addr;
  T at(int64_t b, int64_t h, int64_t s, int64_t d) const { return values[addr.at(b, h, s, d)]; }
};

// A dense, row-major [b, h, s, d] array as an operand.
template <class T>
Operand<T> dense_operand(Array<T> values) {
  Operand<T> op;
  const auto& dim = values.dim;
  op.addr.stride_d = 1, op.addr.stride_s = dim[3], op.addr.stride_h = dim[2] * dim[3];
  for (int64_t b = 0; b < dim[0]; ++b) op.addr.batch_base.push_back(b * dim[1] * op.addr.stride_h);
  op.values = std::move(values);
  return op;
}

// The logical extents of an attention problem; K and V may have fewer heads than Q (GQA/MQA).
struct AttentionExtents {
  int64_t batch = 0, h_q = 0, h_k = 0, h_v = 0, s_q = 0, s_kv = 0, d_qk = 0, d_v = 0;
};
inline AttentionExtents attention_extents(const std::vector<int64_t>& q, const std::vector<int64_t>& k,
                                          const std::vector<int64_t>& v) {
  return {q[0], q[1], k[1], v[1], q[2], k[2], q[3], v[3]};
}

// Where each batch's rows start in a packed buffer: its ragged offsets (element units) or, for a
// tensor without them, cu_seq_len[b] tokens of stride[2] elements. Empty when the tensor is dense.
struct PackedStarts {
  std::vector<int64_t> starts;
  std::optional<int64_t> max_total_tokens;  // max_total_seq_len of the tensor's side
};

// Per-batch integer values of an index tensor (lengths, offsets, page tables), read exactly.
std::vector<int64_t> load_indices(const RefExec& ex, const TensorPtr& t);
// A one-element INT32/INT64 tensor (or pass-by-value scalar) as its 64 bits.
uint64_t load_u64_scalar(const RefExec& ex, const TensorPtr& t);

// Per-batch valid lengths of one side (Q, or K/V): its SEQ_LEN values, the differences of its
// CU_SEQ_LEN values, or the full extent when neither is given; plus the token index of each batch's
// first row that cumulative lengths imply (empty without them). Values are checked (a length in
// [0, extent], cumulative counts non-negative and non-decreasing) before anything is written, so a
// bad one leaves the caller's buffers untouched.
struct SideLengths {
  std::vector<int64_t> lengths;
  std::vector<int64_t> cu_starts;
};
error_t load_side(const Node& node, const RefExec& ex, const TensorPtr& seq, const TensorPtr& cu, const char* seq_port,
                  const char* cu_port, int64_t batch, int64_t extent, SideLengths& out);

// Row starts of a tensor of one side: its ragged offsets, else (on a side with cumulative lengths)
// cu_starts[b] tokens of stride[2] elements, else none (dense). Virtual tensors are always dense.
PackedStarts packed_starts(const RefExec& ex, const TensorPtr& t, const SideLengths& side,
                           std::optional<int64_t> max_total);

// Loads an input: dense when `packed.starts` is empty, else only the rows below `lengths`.
// Errors (negative starts, reads past max_total) name the node and port and leave nothing written.
template <class T>
error_t load_operand(const Node& node, const RefExec& ex, const TensorPtr& t, const char* port,
                     const PackedStarts& packed, const std::vector<int64_t>& lengths, Operand<T>& out);

// An output array that is written row by row, then stored; packed outputs keep every element
// outside the written rows as the caller left it.
struct OutputRows {
  Operand<double> data;
  bool packed = false;
  void set(int64_t b, int64_t h, int64_t s, int64_t d, double v) { data.values[data.addr.at(b, h, s, d)] = v; }
};

error_t prepare_output(const Node& node, const RefExec& ex, const TensorPtr& t, const char* port,
                       const PackedStarts& packed, const std::vector<int64_t>& lengths, double fill, OutputRows& out);
void store_output(RefExec& ex, const TensorPtr& t, const OutputRows& rows);

}  // namespace frost::detail
