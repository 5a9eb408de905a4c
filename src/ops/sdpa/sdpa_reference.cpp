#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "engines/reference/ref_exec.h"
#include "ops/common/philox.h"
#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa/sdpa_operands.h"

namespace frost::detail {

using graph::SdpaInput;
using graph::SdpaOutput;

namespace {

// Per-batch valid lengths of one side (Q or KV): the padding mask's seq_len or cu_seq_len values, or
// the full extent without the mask; plus the packed row starts that cu_seq_len implies. Checked
// before any output is written, so a bad value leaves the caller's buffers untouched.
struct SideLengths {
  std::vector<int64_t> lengths;
  std::vector<int64_t> cu_starts;  // token index of each batch's first row; empty without cu_seq_len
};

error_t load_side(const SdpaNode& node, const RefExec& ex, const TensorPtr& seq, const TensorPtr& cu,
                  const char* seq_port, const char* cu_port, int64_t batch, int64_t extent, SideLengths& out) {
  out.lengths.assign(static_cast<size_t>(batch), extent);
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

// Row starts of a tensor: its ragged offsets, else its side's cu_seq_len tokens, else dense.
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

// Loads a paged K or V cache: the pool stays as declared; the page table picks its rows.
template <class T>
error_t load_paged(const SdpaNode& node, const RefExec& ex, const TensorPtr& pool, const TensorPtr& table,
                   const char* port, const std::vector<int64_t>& len_kv, Operand<T>& out) {
  const auto& dim = pool->get_dim();
  out.values = ex.load<T>(pool);
  out.addr.stride_d = 1, out.addr.stride_s = dim[3], out.addr.stride_h = dim[2] * dim[3];
  out.addr.page_stride = dim[1] * dim[2] * dim[3];
  out.addr.page_size = dim[2];
  out.addr.pages_per_seq = table->get_dim()[2];
  out.addr.page_table = load_indices(ex, table);
  for (size_t b = 0; b < len_kv.size(); ++b)
    for (int64_t p = 0; p * dim[2] < len_kv[b]; ++p) {
      const int64_t page =
          out.addr.page_table[b * static_cast<size_t>(out.addr.pages_per_seq) + static_cast<size_t>(p)];
      if (page < 0 || page >= dim[0])
        return attr_error(node, port,
                          std::to_string(page) + " at batch " + std::to_string(b) + ", page " + std::to_string(p),
                          "must name a page of the pool [0, " + std::to_string(dim[0]) + ")");
    }
  return {};
}

}  // namespace

error_t SdpaNode::run_reference(RefExec& ex) const {
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    const auto& qd = in(SdpaInput::Q)->get_dim();
    const int64_t batch = qd[0], h_q = qd[1], s_q = qd[2], d_qk = qd[3];
    const int64_t h_k = in(SdpaInput::K)->get_dim()[1], s_kv = sdpa_logical_s_kv(attr);
    const int64_t h_v = in(SdpaInput::V)->get_dim()[1], d_v = in(SdpaInput::V)->get_dim()[3];
    const bool padding = attr.padding_mask;
    SideLengths side_q, side_kv;
    FROST_CHECK(load_side(*this, ex, padding ? in(SdpaInput::SEQ_LEN_Q) : nullptr,
                          padding ? in(SdpaInput::CU_SEQ_LEN_Q) : nullptr, "SEQ_LEN_Q", "CU_SEQ_LEN_Q", batch, s_q,
                          side_q));
    FROST_CHECK(load_side(*this, ex, padding ? in(SdpaInput::SEQ_LEN_KV) : nullptr,
                          padding ? in(SdpaInput::CU_SEQ_LEN_KV) : nullptr, "SEQ_LEN_KV", "CU_SEQ_LEN_KV", batch, s_kv,
                          side_kv));
    const std::vector<int64_t>& len_q = side_q.lengths;
    const std::vector<int64_t>& len_kv = side_kv.lengths;

    Operand<T> q, k, v;
    const TensorPtr q_t = in(SdpaInput::Q), k_t = in(SdpaInput::K), v_t = in(SdpaInput::V);
    FROST_CHECK(load_operand(*this, ex, q_t, "Q", packed_starts(ex, q_t, side_q, attr.max_total_seq_len_q), len_q, q));
    if (const TensorPtr k_table = in(SdpaInput::PAGE_TABLE_K)) {
      FROST_CHECK(load_paged(*this, ex, k_t, k_table, "PAGE_TABLE_K", len_kv, k));
      FROST_CHECK(load_paged(*this, ex, v_t, in(SdpaInput::PAGE_TABLE_V), "PAGE_TABLE_V", len_kv, v));
    } else {
      FROST_CHECK(
          load_operand(*this, ex, k_t, "K", packed_starts(ex, k_t, side_kv, attr.max_total_seq_len_kv), len_kv, k));
      FROST_CHECK(
          load_operand(*this, ex, v_t, "V", packed_starts(ex, v_t, side_kv, attr.max_total_seq_len_kv), len_kv, v));
    }
    const TensorPtr o_t = out(SdpaOutput::O), stats_t = out(SdpaOutput::STATS);
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    OutputRows o, stats;
    FROST_CHECK(
        prepare_output(*this, ex, o_t, "O", packed_starts(ex, o_t, side_q, attr.max_total_seq_len_q), len_q, 0.0, o));
    if (stats_t)
      FROST_CHECK(prepare_output(*this, ex, stats_t, "STATS",
                                 packed_starts(ex, stats_t, side_q, attr.max_total_seq_len_q), len_q, kNegInf, stats));

    T scale = T(1);
    if (attr.attn_scale_value) scale = static_cast<T>(*attr.attn_scale_value);
    if (const TensorPtr t = in(SdpaInput::ATTN_SCALE)) scale = ex.load<T>(t)[0];
    const TensorPtr bias_t = in(SdpaInput::BIAS);
    const Array<T> bias = bias_t ? ex.load<T>(bias_t) : Array<T>();
    const int64_t bias_b = bias_t ? bias.dim[0] : 1, bias_h = bias_t ? bias.dim[1] : 1;
    const TensorPtr sink_t = in(SdpaInput::SINK_TOKEN);
    const Array<T> sink = sink_t ? ex.load<T>(sink_t) : Array<T>();
    const TensorPtr block_t = in(SdpaInput::BLOCK_MASK);
    const Array<double> block = block_t ? ex.load<double>(block_t) : Array<double>();
    const TensorPtr drop_mask_t = in(SdpaInput::DROPOUT_MASK);
    const Array<double> drop_mask = drop_mask_t ? ex.load<double>(drop_mask_t) : Array<double>();
    const T drop_scale = drop_mask_t ? ex.load<T>(in(SdpaInput::DROPOUT_SCALE))[0] : T(1);
    const bool philox = attr.dropout_probability.has_value();
    const double drop_p = philox ? static_cast<double>(*attr.dropout_probability) : 0.0;
    const T keep_scale = philox ? T(1) / (T(1) - static_cast<T>(*attr.dropout_probability)) : T(1);
    const uint64_t seed = philox ? load_u64_scalar(ex, in(SdpaInput::DROPOUT_SEED)) : 0;
    const uint64_t offset = philox ? load_u64_scalar(ex, in(SdpaInput::DROPOUT_OFFSET)) : 0;
    const std::vector<double> slopes = attr.alibi_mask ? alibi_slopes(h_q) : std::vector<double>();
    const bool bottom_right = attr.diagonal_alignment == DiagonalAlignment_t::BOTTOM_RIGHT;
    const T stats_factor = attr.stats_use_log2 ? static_cast<T>(1.0 / std::log(2.0)) : T(1);

    std::vector<T> logits(static_cast<size_t>(s_kv)), acc(static_cast<size_t>(d_v));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < h_q; ++h) {
        const int64_t kh = h / (h_q / h_k), vh = h / (h_q / h_v);
        const T* bias_head =
            bias_t ? &bias[((bias_b == 1 ? 0 : b) * bias_h + (bias_h == 1 ? 0 : h)) * s_q * s_kv] : nullptr;
        const int64_t rows = len_q[static_cast<size_t>(b)], keys = len_kv[static_cast<size_t>(b)];
        // Padding rows (i >= rows) keep the prepared O = 0 and Stats = -inf, or stay unwritten when packed.
        for (int64_t i = 0; i < rows; ++i) {
          // Visible keys form the range [first, last): the padding mask, then the diagonal band.
          const int64_t diag = i + (bottom_right ? keys - rows : 0);
          int64_t first = 0, last = keys;
          if (attr.left_bound) first = std::max(first, diag - *attr.left_bound + 1);
          if (attr.right_bound) last = std::min(last, diag + *attr.right_bound + 1);
          T row_max = sink_t ? sink[h] : kNegInf;
          for (int64_t j = first; j < last; ++j) {
            if (block_t) {
              const int64_t tile = ((block.dim[0] == 1 ? 0 : b) * block.dim[1] + (block.dim[1] == 1 ? 0 : h)) *
                                       block.dim[2] * block.dim[3] +
                                   (i / attr.block_mask_tile_q) * block.dim[3] + j / attr.block_mask_tile_kv;
              if (block[tile] == 0) {
                logits[static_cast<size_t>(j)] = kNegInf;
                continue;
              }
            }
            T dot = 0;
            for (int64_t d = 0; d < d_qk; ++d) dot += q.at(b, h, i, d) * k.at(b, kh, j, d);
            T s = scale * dot;
            if (bias_head) s += bias_head[i * s_kv + j];
            if (attr.alibi_mask) s += static_cast<T>(slopes[static_cast<size_t>(h)] * static_cast<double>(j - diag));
            logits[static_cast<size_t>(j)] = s;
            row_max = std::max(row_max, s);
          }
          std::fill(acc.begin(), acc.end(), T(0));
          // No visible key with a finite logit and no sink: the softmax is empty (O = 0, Stats = -inf).
          T denom = row_max == kNegInf ? T(0) : sink_t ? std::exp(sink[h] - row_max) : T(0);
          for (int64_t j = first; j < last && row_max != kNegInf; ++j) {
            const T p = std::exp(logits[static_cast<size_t>(j)] - row_max);
            denom += p;
            // Dropout removes probability mass from O only; the denominator (and Stats) keep it.
            T keep = T(1);
            if (philox) {
              const uint64_t n = static_cast<uint64_t>(((b * h_q + h) * s_q + i) * s_kv + j);
              keep = philox_uniform(seed, offset, n) >= drop_p ? keep_scale : T(0);
            } else if (drop_mask_t) {
              const int64_t m =
                  (((drop_mask.dim[0] == 1 ? 0 : b) * drop_mask.dim[1] + (drop_mask.dim[1] == 1 ? 0 : h)) * s_q + i) *
                      s_kv +
                  j;
              keep = drop_mask[m] != 0 ? drop_scale : T(0);
            }
            for (int64_t d = 0; d < d_v; ++d) acc[static_cast<size_t>(d)] += p * keep * v.at(b, vh, j, d);
          }
          for (int64_t d = 0; d < d_v; ++d)
            o.set(b, h, i, d, row_max == kNegInf ? 0.0 : static_cast<double>(acc[static_cast<size_t>(d)] / denom));
          if (stats_t)
            stats.set(b, h, i, 0,
                      row_max == kNegInf ? static_cast<double>(kNegInf)
                                         : static_cast<double>((row_max + std::log(denom)) * stats_factor));
        }
      }
    store_output(ex, o_t, o);
    if (stats_t) store_output(ex, stats_t, stats);
    return {};
  });
}

}  // namespace frost::detail
