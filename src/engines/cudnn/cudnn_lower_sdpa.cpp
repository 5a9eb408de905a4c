// Attention forward and backward as the composite of backend operations that cuDNN's fused
// attention engines match (the same pattern cuDNN Frontend expands its SDPA nodes into):
//
//   forward:  S = Q K^T (row/col counts overridden by seq_len_q/kv) -> * scale -> + bias -> padding
//             mask -> diagonal-band masks -> softmax (max, sub, exp, sum, div; Stats = max + log sum)
//             -> O = P V
//   backward: D = rowsum(dO * O); S recomputed as above minus Stats, P = exp(S); dV = P^T dO;
//             dS = P * (dO V^T - D) (* scale); dK = dS^T Q; dQ = dS K (through an FP32 accumulator)
//
// Masks are a GEN_INDEX / CMP / BINARY_SELECT chain that sets masked logits to -inf. The backend
// wants K (and V in the backward) in the transposed arrangement [b, h, d, s]: those tensor
// descriptors are views of the caller's buffers. Paged K/V caches go through a paged cache load.
#include <cmath>
#include <limits>

#include "engines/cudnn/cudnn_lowering.h"
#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa_backward/sdpa_backward_node.h"

namespace frost::detail {
namespace {
namespace P = cudnn_abi::pw;
constexpr DataType_t F32 = DataType_t::FLOAT;
constexpr DataType_t I32 = DataType_t::INT32;
constexpr DataType_t BOOL = DataType_t::BOOLEAN;

// K [b, h, s, d] as K^T [b, h, d, s] over the same memory.
std::pair<std::vector<int64_t>, std::vector<int64_t>> transposed(const TensorPtr& t) {
  auto d = t->get_dim();
  auto s = t->get_stride();
  std::swap(d[2], d[3]);
  std::swap(s[2], s[3]);
  return {d, s};
}

// The attention-shaped pieces shared by forward and backward.
struct Attn {
  Lowering& l;
  std::string what;
  int64_t b = 0, h_q = 0, s_q = 0, s_kv = 0;
  DataType_t io = DataType_t::BFLOAT16;
  bool has_seq_q = false, has_seq_kv = false;
  BTensor seq_q, seq_kv, scale;
  bool has_scale = false;

  std::vector<int64_t> score_dims() const { return {b, h_q, s_q, s_kv}; }
  std::vector<int64_t> row_dims() const { return {b, h_q, s_q, 1}; }

  error_t neg_inf(BTensor& out) { return l.scalar(-std::numeric_limits<double>::infinity(), F32, out); }

  error_t padding_mask(BTensor& s) {
    BTensor row, col, rm, cm, m, inf, out;
    FROST_CHECK(l.pw(what, P::GEN_INDEX, s, nullptr, score_dims(), I32, row, 2, I32));
    FROST_CHECK(l.pw(what, P::GEN_INDEX, s, nullptr, score_dims(), I32, col, 3, I32));
    FROST_CHECK(l.pw(what, P::CMP_LT, row, &seq_q, score_dims(), BOOL, rm, -1, BOOL));
    FROST_CHECK(l.pw(what, P::CMP_LT, col, &seq_kv, score_dims(), BOOL, cm, -1, BOOL));
    FROST_CHECK(l.pw(what, P::LOGICAL_AND, rm, &cm, score_dims(), BOOL, m, -1, BOOL));
    FROST_CHECK(neg_inf(inf));
    FROST_CHECK(l.virtual_tensor(score_dims(), F32, out));
    FROST_CHECK(l.pointwise(what, P::BINARY_SELECT, s, &inf, &m, out));
    s = out;
    return {};
  }

  // Key j stays visible from query i while  i' - left < j <= i' + right,  i' = i (+ s_kv - s_q bottom-right).
  error_t band_masks(BTensor& s, DiagonalAlignment_t align, std::optional<int64_t> left, std::optional<int64_t> right) {
    const bool br = align == DiagonalAlignment_t::BOTTOM_RIGHT;
    BTensor sq_t = seq_q, skv_t = seq_kv;
    if (br && !has_seq_q) FROST_CHECK(l.scalar(static_cast<double>(s_q), I32, sq_t));
    if (br && !has_seq_kv) FROST_CHECK(l.scalar(static_cast<double>(s_kv), I32, skv_t));
    if (right) {
      BTensor row, col, cmp, inf, out;
      FROST_CHECK(l.pw(what, P::GEN_INDEX, s, nullptr, score_dims(), I32, row, 2));
      FROST_CHECK(l.pw(what, P::GEN_INDEX, s, nullptr, score_dims(), I32, col, 3));
      if (br) {
        BTensor a, c;
        FROST_CHECK(l.pw(what, P::ADD, row, &skv_t, score_dims(), I32, a, 3, I32));
        FROST_CHECK(l.pw(what, P::SUB, a, &sq_t, score_dims(), I32, c, 3, I32));
        row = c;
      }
      if (*right != 0) {
        BTensor shift, a;
        FROST_CHECK(l.scalar(static_cast<double>(*right), I32, shift));
        FROST_CHECK(l.pw(what, P::ADD, row, &shift, score_dims(), I32, a, 3, I32));
        row = a;
      }
      FROST_CHECK(l.pw(what, P::CMP_GE, row, &col, score_dims(), BOOL, cmp, -1, BOOL));
      FROST_CHECK(neg_inf(inf));
      FROST_CHECK(l.virtual_tensor(score_dims(), F32, out));
      FROST_CHECK(l.pointwise(what, P::BINARY_SELECT, s, &inf, &cmp, out));
      s = out;
    }
    if (left) {
      BTensor row, col, bound, cmp, inf, out, a;
      FROST_CHECK(l.pw(what, P::GEN_INDEX, s, nullptr, score_dims(), I32, row, 2));
      FROST_CHECK(l.pw(what, P::GEN_INDEX, s, nullptr, score_dims(), I32, col, 3));
      if (!br) {
        FROST_CHECK(l.scalar(static_cast<double>(*left), F32, bound));
        FROST_CHECK(l.pw(what, P::ADD, col, &bound, score_dims(), F32, a, 3, F32));
      } else if (!has_seq_q && !has_seq_kv) {
        FROST_CHECK(l.scalar(static_cast<double>(*left - s_kv + s_q), F32, bound));
        FROST_CHECK(l.pw(what, P::ADD, col, &bound, score_dims(), F32, a, 3, F32));
      } else {
        BTensor c1, c2;
        FROST_CHECK(l.scalar(static_cast<double>(*left), I32, bound));
        FROST_CHECK(l.pw(what, P::ADD, col, &bound, score_dims(), I32, c1, 3, I32));
        FROST_CHECK(l.pw(what, P::SUB, c1, &skv_t, score_dims(), I32, c2, 3, I32));
        FROST_CHECK(l.pw(what, P::ADD, c2, &sq_t, score_dims(), I32, a, 3, I32));
      }
      FROST_CHECK(l.pw(what, P::CMP_GT, a, &row, score_dims(), BOOL, cmp, -1, BOOL));
      FROST_CHECK(neg_inf(inf));
      FROST_CHECK(l.virtual_tensor(score_dims(), F32, out));
      FROST_CHECK(l.pointwise(what, P::BINARY_SELECT, s, &inf, &cmp, out));
      s = out;
    }
    return {};
  }

  // S = scale * Q K^T (+ bias), then the padding mask.
  error_t scores(const BTensor& q, const BTensor& kt, const TensorPtr& bias, bool padding, BTensor& s) {
    FROST_CHECK(l.virtual_tensor(score_dims(), F32, s));
    FROST_CHECK(l.matmul(what, q, kt, s, has_seq_q ? &seq_q : nullptr, has_seq_kv ? &seq_kv : nullptr, nullptr, 0.0));
    if (has_scale) {
      BTensor t;
      FROST_CHECK(l.pw(what, P::MUL, s, &scale, score_dims(), F32, t));
      s = t;
    }
    if (bias) {
      BTensor bt, t;
      FROST_CHECK(l.tensor(bias, bt));
      FROST_CHECK(l.pw(what, P::ADD, s, &bt, score_dims(), F32, t));
      s = t;
    }
    if (padding) FROST_CHECK(padding_mask(s));
    return {};
  }
};

template <class Attrs, class N>
error_t setup(Attn& a, const N& n, const Attrs& attr, const TensorPtr& q, const TensorPtr& seq_q,
              const TensorPtr& seq_kv, const TensorPtr& scale_tensor, int64_t s_kv) {
  const auto& qd = q->get_dim();
  a.b = qd[0];
  a.h_q = qd[1];
  a.s_q = qd[2];
  a.s_kv = s_kv;
  a.io = q->get_data_type();
  if (attr.padding_mask) {
    a.has_seq_q = seq_q != nullptr;
    a.has_seq_kv = seq_kv != nullptr;
    if (a.has_seq_q) FROST_CHECK(a.l.tensor(seq_q, a.seq_q));
    if (a.has_seq_kv) FROST_CHECK(a.l.tensor(seq_kv, a.seq_kv));
    if (!a.has_seq_q || !a.has_seq_kv)
      return a.l.unsupported(n, "padding_mask needs both SEQ_LEN_Q and SEQ_LEN_KV in the backend's attention");
  }
  if (scale_tensor) {
    FROST_CHECK(a.l.tensor(scale_tensor, a.scale));
    a.has_scale = true;
  } else if (attr.attn_scale_value) {
    FROST_CHECK(a.l.scalar(*attr.attn_scale_value, F32, a.scale));
    a.has_scale = true;
  }
  if (attr.implementation == graph::AttentionImplementation_t::UNIFIED)
    return a.l.unsupported(n, "implementation UNIFIED; the cudnn engine lowers attention as the composite graph");
  if (attr.alibi_mask) return a.l.unsupported(n, "alibi_mask (its slopes would have to be written to device memory)");
  if (attr.stats_use_log2) return a.l.unsupported(n, "stats_use_log2 (the backend's Stats are natural-log)");
  if (a.io != DataType_t::BFLOAT16 && a.io != DataType_t::HALF)
    return a.l.unsupported(n, "Q data type " + std::string(to_string(a.io)) + " (BFLOAT16 and HALF are lowered)");
  return {};
}

error_t lower_forward(Lowering& l, const SdpaNode& n) {
  using I = graph::SdpaInput;
  const auto& attr = n.attr;
  // A dropout mask lowered as two multiplications crashed the process inside cuDNN 9.19 on the H200
  // (SIGFPE while planning or running), so no dropout form is lowered.
  for (auto [port, name] : {std::pair{I::SINK_TOKEN, "sink_token"},
                            {I::CU_SEQ_LEN_Q, "cu_seq_len_q"},
                            {I::CU_SEQ_LEN_KV, "cu_seq_len_kv"},
                            {I::BLOCK_MASK, "block_mask"},
                            {I::DROPOUT_SEED, "dropout (probability, seed, offset): cuDNN's generator is not frost's"},
                            {I::DROPOUT_MASK, "dropout (mask, scale): crashed inside cuDNN 9.19 when tried"}})
    if (n.in(port)) return l.unsupported(n, name);
  const TensorPtr q = n.in(I::Q), k = n.in(I::K), v = n.in(I::V);
  const TensorPtr o = n.out(graph::SdpaOutput::O), stats = n.out(graph::SdpaOutput::STATS);
  const bool paged = n.in(I::PAGE_TABLE_K) != nullptr;
  const int64_t page = paged ? k->get_dim()[2] : 0;
  const int64_t s_kv = paged ? attr.paged_attention_max_seq_len_kv.value_or(n.in(I::PAGE_TABLE_K)->get_dim()[2] * page)
                             : k->get_dim()[2];
  Attn a{l, "attention node '" + n.name() + "'"};
  FROST_CHECK(setup(a, n, attr, q, n.in(I::SEQ_LEN_Q), n.in(I::SEQ_LEN_KV), n.in(I::ATTN_SCALE), s_kv));
  if (paged && !a.has_seq_kv) return l.unsupported(n, "paged K/V without SEQ_LEN_KV");

  BTensor qt, kt, vt, ot;
  FROST_CHECK(l.tensor(q, qt));
  const int64_t h_k = k->get_dim()[1], d_qk = k->get_dim()[3], h_v = v->get_dim()[1], d_v = v->get_dim()[3];
  if (paged) {
    BTensor pool, table;
    FROST_CHECK(l.tensor(k, pool));
    FROST_CHECK(l.tensor(n.in(I::PAGE_TABLE_K), table));
    FROST_CHECK(
        l.virtual_tensor({a.b, h_k, d_qk, s_kv}, k->get_data_type(), kt, {d_qk * s_kv * h_k, d_qk * s_kv, 1, d_qk}));
    FROST_CHECK(l.paged_cache_load(a.what, pool, a.seq_kv, table, kt));
  } else {
    auto [d, s] = transposed(k);
    FROST_CHECK(l.tensor_view(k, d, s, kt));
  }

  BTensor s;
  FROST_CHECK(a.scores(qt, kt, n.in(I::BIAS), attr.padding_mask, s));
  if (attr.left_bound || attr.right_bound)
    FROST_CHECK(a.band_masks(s, attr.diagonal_alignment, attr.left_bound, attr.right_bound));

  // Softmax; Stats = max + log(sum exp(S - max)).
  BTensor mx, sub, ex, sum, p;
  FROST_CHECK(l.virtual_tensor(a.row_dims(), F32, mx));
  FROST_CHECK(l.reduction(a.what, cudnn_abi::reduce::MAX, s, mx));
  FROST_CHECK(l.pw(a.what, P::SUB, s, &mx, a.score_dims(), F32, sub));
  FROST_CHECK(l.pw(a.what, P::EXP, sub, nullptr, a.score_dims(), F32, ex));
  FROST_CHECK(l.virtual_tensor(a.row_dims(), F32, sum));
  FROST_CHECK(l.reduction(a.what, cudnn_abi::reduce::ADD, ex, sum));
  if (stats) {
    BTensor lg, st;
    FROST_CHECK(l.pw(a.what, P::LOG, sum, nullptr, a.row_dims(), F32, lg));
    FROST_CHECK(l.tensor(stats, st));
    FROST_CHECK(l.pointwise(a.what, P::ADD, mx, &lg, nullptr, st));
  }
  // The operand of the second matmul is in the I/O type, as the backend's attention engines want.
  FROST_CHECK(l.pw(a.what, P::DIV, ex, &sum, a.score_dims(), a.io, p));

  if (paged) {
    BTensor pool, table;
    FROST_CHECK(l.tensor(v, pool));
    FROST_CHECK(l.tensor(n.in(I::PAGE_TABLE_V), table));
    FROST_CHECK(l.virtual_tensor({a.b, h_v, s_kv, d_v}, v->get_data_type(), vt));
    FROST_CHECK(l.paged_cache_load(a.what, pool, a.seq_kv, table, vt));
  } else {
    FROST_CHECK(l.tensor(v, vt));
  }
  FROST_CHECK(l.tensor(o, ot));
  return l.matmul(a.what, p, vt, ot, a.has_seq_q ? &a.seq_q : nullptr, nullptr, a.has_seq_kv ? &a.seq_kv : nullptr,
                  0.0);
}

error_t lower_backward(Lowering& l, const SdpaBackwardNode& n) {
  using I = graph::SdpaBackwardInput;
  using O = graph::SdpaBackwardOutput;
  const auto& attr = n.attr;
  if (n.in(I::SINK_TOKEN) || n.out(O::DSINK_TOKEN)) return l.unsupported(n, "sink_token");
  // The forward declines these, so no forward graph of this engine has them; a backward that names
  // them must match some other engine's forward exactly, which this lowering cannot promise.
  for (auto [port, name] : {std::pair{I::CU_SEQ_LEN_Q, "cu_seq_len_q"},
                            {I::CU_SEQ_LEN_KV, "cu_seq_len_kv"},
                            {I::BLOCK_MASK, "block_mask"},
                            {I::DROPOUT_SEED, "dropout (probability, seed, offset): cuDNN's generator is not frost's"},
                            {I::DROPOUT_MASK, "dropout (mask, scale)"}})
    if (n.in(port)) return l.unsupported(n, name);
  const TensorPtr q = n.in(I::Q), k = n.in(I::K), v = n.in(I::V), o = n.in(I::O), dO = n.in(I::DO);
  const TensorPtr stats = n.in(I::STATS), dq = n.out(O::DQ), dk = n.out(O::DK), dv = n.out(O::DV);
  Attn a{l, "attention backward node '" + n.name() + "'"};
  FROST_CHECK(setup(a, n, attr, q, n.in(I::SEQ_LEN_Q), n.in(I::SEQ_LEN_KV), n.in(I::ATTN_SCALE), k->get_dim()[2]));
  const int64_t b = a.b, h_q = a.h_q, s_q = a.s_q, s_kv = a.s_kv;
  const int64_t h_k = k->get_dim()[1], h_v = v->get_dim()[1], d_qk = q->get_dim()[3], d_v = v->get_dim()[3];

  BTensor qt, kt, vt, ot, dot_, st;
  FROST_CHECK(l.tensor(q, qt));
  auto [kd, ks] = transposed(k);
  FROST_CHECK(l.tensor_view(k, kd, ks, kt));
  auto [vd, vs] = transposed(v);
  FROST_CHECK(l.tensor_view(v, vd, vs, vt));
  FROST_CHECK(l.tensor(o, ot));
  FROST_CHECK(l.tensor(dO, dot_));
  FROST_CHECK(l.tensor(stats, st));

  // D = rowsum(dO * O), kept in the workspace in FP32 for the dS pass (dense [b, h, s_q, 1] also
  // when Stats is ragged: frost's backward carries no bound on the packed token count).
  BTensor prod, rows, one, dsum;
  FROST_CHECK(l.virtual_tensor({b, h_q, s_q, d_v}, F32, prod, {h_q * s_q * d_v, s_q * d_v, h_q * d_v, 1}));
  FROST_CHECK(l.pointwise(a.what, P::MUL, dot_, &ot, nullptr, prod));
  FROST_CHECK(l.virtual_tensor(a.row_dims(), F32, rows));
  FROST_CHECK(l.reduction(a.what, cudnn_abi::reduce::ADD, prod, rows));
  FROST_CHECK(l.scalar(1.0, F32, one));
  FROST_CHECK(l.workspace_tensor(a.row_dims(), {h_q * s_q, s_q, 1, 1}, F32, b * h_q * s_q, nullptr, dsum));
  FROST_CHECK(l.pointwise(a.what, P::MUL, rows, &one, nullptr, dsum));

  // P = exp(S - Stats), S as in the forward.
  BTensor s, p;
  FROST_CHECK(a.scores(qt, kt, n.in(I::BIAS), attr.padding_mask, s));
  {
    BTensor t;
    FROST_CHECK(l.pw(a.what, P::SUB, s, &st, a.score_dims(), F32, t));
    s = t;
  }
  if (attr.left_bound || attr.right_bound)
    FROST_CHECK(a.band_masks(s, attr.diagonal_alignment, attr.left_bound, attr.right_bound));
  FROST_CHECK(l.pw(a.what, P::EXP, s, nullptr, a.score_dims(), F32, p));

  // dV = P^T dO (summed over the query heads of a group under GQA).
  const std::vector<int64_t> t_strides{h_q * s_q * s_kv, s_q * s_kv, 1, s_kv};
  BTensor pt;
  FROST_CHECK(l.virtual_tensor({b, h_q, s_kv, s_q}, a.io, pt, t_strides));
  FROST_CHECK(l.reshape(a.what, p, pt));
  // Under GQA the per-query-head gradient is a virtual [b, h_q, s_kv, d] summed over each group.
  auto grad_into = [&](const BTensor& lhs, const BTensor& rhs, const TensorPtr& out, int64_t heads,
                       int64_t d) -> error_t {
    BTensor ot2;
    FROST_CHECK(l.tensor(out, ot2));
    if (heads == h_q)
      return l.matmul(a.what, lhs, rhs, ot2, a.has_seq_kv ? &a.seq_kv : nullptr, nullptr,
                      a.has_seq_q ? &a.seq_q : nullptr);
    BTensor full;
    FROST_CHECK(l.virtual_tensor({b, h_q, s_kv, d}, a.io, full));
    FROST_CHECK(l.matmul(a.what, lhs, rhs, full, a.has_seq_kv ? &a.seq_kv : nullptr, nullptr,
                         a.has_seq_q ? &a.seq_q : nullptr));
    return l.reduction(a.what, cudnn_abi::reduce::ADD, full, ot2);
  };
  FROST_CHECK(grad_into(pt, dot_, dv, h_v, d_v));

  // dS = P * (dO V^T - D) (* scale); dBias is dS before the scale.
  BTensor dp, t1, ds;
  FROST_CHECK(l.virtual_tensor(a.score_dims(), F32, dp));
  FROST_CHECK(
      l.matmul(a.what, dot_, vt, dp, a.has_seq_q ? &a.seq_q : nullptr, a.has_seq_kv ? &a.seq_kv : nullptr, nullptr));
  FROST_CHECK(l.pw(a.what, P::SUB, dp, &dsum, a.score_dims(), F32, t1));
  FROST_CHECK(l.pw(a.what, P::MUL, t1, &p, a.score_dims(), F32, ds));
  if (const TensorPtr dbias = n.out(O::DBIAS)) {
    BTensor dbt;
    FROST_CHECK(l.tensor(dbias, dbt));
    FROST_CHECK(l.reduction(a.what, cudnn_abi::reduce::ADD, ds, dbt));
  }
  if (a.has_scale) {
    BTensor t;
    FROST_CHECK(l.pw(a.what, P::MUL, ds, &a.scale, a.score_dims(), F32, t));
    ds = t;
  }

  // dK = dS^T Q.
  BTensor dst;
  FROST_CHECK(l.virtual_tensor({b, h_q, s_kv, s_q}, a.io, dst, t_strides));
  FROST_CHECK(l.reshape(a.what, ds, dst));
  FROST_CHECK(grad_into(dst, qt, dk, h_k, d_qk));

  // dQ = dS K, with K back in [b, h, s, d] through a reshape of K^T.
  BTensor kk;
  FROST_CHECK(l.virtual_tensor({b, h_k, s_kv, d_qk}, k->get_data_type(), kk, k->get_stride(), k->get_ragged_offset()));
  FROST_CHECK(l.reshape(a.what, kt, kk));
  BTensor dqt;
  FROST_CHECK(l.tensor(dq, dqt));
  const bool direct = n.out(O::DBIAS) != nullptr || attr.deterministic_algorithm;
  if (direct)
    return l.matmul(a.what, ds, kk, dqt, a.has_seq_q ? &a.seq_q : nullptr, nullptr, a.has_seq_kv ? &a.seq_kv : nullptr);
  BTensor acc;
  FROST_CHECK(l.workspace_tensor({b, h_q, s_q, d_qk}, {h_q * s_q * d_qk, s_q * d_qk, d_qk, 1}, F32,
                                 b * h_q * s_q * d_qk, nullptr, acc));
  FROST_CHECK(
      l.matmul(a.what, ds, kk, acc, a.has_seq_q ? &a.seq_q : nullptr, nullptr, a.has_seq_kv ? &a.seq_kv : nullptr));
  return l.pointwise(a.what, P::IDENTITY, acc, nullptr, nullptr, dqt);
}

}  // namespace

error_t lower_sdpa_node(Lowering& l, const Node& node, bool& handled) {
  handled = true;
  if (const auto* n = dynamic_cast<const SdpaNode*>(&node)) return lower_forward(l, *n);
  if (const auto* n = dynamic_cast<const SdpaBackwardNode*>(&node)) return lower_backward(l, *n);
  handled = false;
  return {};
}

}  // namespace frost::detail
