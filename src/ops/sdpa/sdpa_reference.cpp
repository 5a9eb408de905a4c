#include <cmath>
#include <limits>

#include "engines/reference/ref_exec.h"
#include "ops/sdpa/attention_forward_core.h"
#include "ops/sdpa/sdpa_masks.h"
#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa/sdpa_operands.h"

namespace frost::detail {

using graph::SdpaInput;
using graph::SdpaOutput;

namespace {

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

    AttentionForwardOperands<T> op;
    op.ext = {batch, h_q, h_k, h_v, s_q, s_kv, d_qk, d_v};
    op.q = &q, op.k = &k, op.v = &v;
    if (attr.attn_scale_value) op.scale = static_cast<T>(*attr.attn_scale_value);
    if (const TensorPtr t = in(SdpaInput::ATTN_SCALE)) op.scale = ex.load<T>(t)[0];
    op.mask = {attr.diagonal_alignment, attr.left_bound, attr.right_bound};
    op.len_q = len_q, op.len_kv = len_kv;
    const TensorPtr bias_t = in(SdpaInput::BIAS), sink_t = in(SdpaInput::SINK_TOKEN);
    const Array<T> bias = bias_t ? ex.load<T>(bias_t) : Array<T>();
    const Array<T> sink = sink_t ? ex.load<T>(sink_t) : Array<T>();
    const std::vector<double> slopes = attr.alibi_mask ? alibi_slopes(h_q) : std::vector<double>();
    if (bias_t) op.bias = &bias;
    if (sink_t) op.sink = &sink;
    if (attr.alibi_mask) op.alibi_slopes = &slopes;
    op.block = load_block_mask(ex, in(SdpaInput::BLOCK_MASK), attr.block_mask_tile_q, attr.block_mask_tile_kv);
    op.dropout = load_dropout<T>(ex, attr.dropout_probability, in(SdpaInput::DROPOUT_SEED),
                                 in(SdpaInput::DROPOUT_OFFSET), in(SdpaInput::DROPOUT_MASK),
                                 in(SdpaInput::DROPOUT_SCALE), h_q, s_q, s_kv);
    const AttentionForwardResult<T> r = attention_forward(op, [](T e, T denom) { return e / denom; });

    // Padding rows (i >= len_q) keep the prepared O = 0 and Stats = -inf, or stay unwritten when packed.
    const T stats_factor = attr.stats_use_log2 ? static_cast<T>(1.0 / std::log(2.0)) : T(1);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < h_q; ++h)
        for (int64_t i = 0; i < len_q[static_cast<size_t>(b)]; ++i) {
          const int64_t row = (b * h_q + h) * s_q + i;
          for (int64_t d = 0; d < d_v; ++d) o.set(b, h, i, d, static_cast<double>(r.o[row * d_v + d]));
          if (stats_t) stats.set(b, h, i, 0, static_cast<double>(r.stats[row] * stats_factor));
        }
    store_output(ex, o_t, o);
    if (stats_t) store_output(ex, stats_t, stats);
    return {};
  });
}

}  // namespace frost::detail
