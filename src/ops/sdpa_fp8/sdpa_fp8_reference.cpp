#include <cmath>
#include <limits>

#include "common/dtype_convert.h"
#include "ops/sdpa_fp8/attention_mask.h"
#include "ops/sdpa_fp8/sdpa_fp8_node.h"

namespace frost::detail {

using graph::SdpaFp8Input;
using graph::SdpaFp8Output;

error_t SdpaFp8Node::run_reference(RefExec& ex) const {
  const auto& qd = in(SdpaFp8Input::Q)->get_dim();
  const int64_t batch = qd[0], h_q = qd[1], s_q = qd[2], d_qk = qd[3];
  const int64_t h_k = in(SdpaFp8Input::K)->get_dim()[1], s_kv = in(SdpaFp8Input::K)->get_dim()[2];
  const int64_t h_v = in(SdpaFp8Input::V)->get_dim()[1], d_v = in(SdpaFp8Input::V)->get_dim()[3];
  std::vector<int64_t> len_q, len_kv;
  const TensorPtr seq_q = attr.padding_mask ? in(SdpaFp8Input::SEQ_LEN_Q) : nullptr;
  const TensorPtr seq_kv = attr.padding_mask ? in(SdpaFp8Input::SEQ_LEN_KV) : nullptr;
  FROST_CHECK(load_sequence_lengths(*this, ex, seq_q, "SEQ_LEN_Q", batch, s_q, len_q));
  FROST_CHECK(load_sequence_lengths(*this, ex, seq_kv, "SEQ_LEN_KV", batch, s_kv, len_kv));
  const AttentionMask mask{attr.diagonal_alignment, attr.left_bound, attr.right_bound};
  // P is requantized to the type it meets in P V.
  const DataType_t p_type = in(SdpaFp8Input::V)->get_data_type();

  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    auto scalar = [&](SdpaFp8Input port) { return ex.load<T>(in(port))[0]; };
    const Array<T> q = ex.load<T>(in(SdpaFp8Input::Q));
    const Array<T> k = ex.load<T>(in(SdpaFp8Input::K));
    const Array<T> v = ex.load<T>(in(SdpaFp8Input::V));
    T attn_scale = attr.attn_scale_value ? static_cast<T>(*attr.attn_scale_value) : T(1);
    if (in(SdpaFp8Input::ATTN_SCALE)) attn_scale = scalar(SdpaFp8Input::ATTN_SCALE);
    const T logit_scale = attn_scale * scalar(SdpaFp8Input::DESCALE_Q) * scalar(SdpaFp8Input::DESCALE_K);
    const T scale_s = scalar(SdpaFp8Input::SCALE_S), scale_o = scalar(SdpaFp8Input::SCALE_O);
    const T pv_descale = scalar(SdpaFp8Input::DESCALE_S) * scalar(SdpaFp8Input::DESCALE_V);
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();

    Array<T> o({batch, h_q, s_q, d_v});
    Array<T> stats({batch, h_q, s_q, 1}, kNegInf);
    T amax_s = 0, amax_o = 0;
    std::vector<T> p(static_cast<size_t>(s_kv));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < h_q; ++h) {
        const T* k_head = &k[(b * h_k + h / (h_q / h_k)) * s_kv * d_qk];
        const T* v_head = &v[(b * h_v + h / (h_q / h_v)) * s_kv * d_v];
        for (int64_t i = 0; i < len_q[static_cast<size_t>(b)]; ++i) {
          const int64_t row = (b * h_q + h) * s_q + i;
          const auto [first, last] =
              mask.visible_keys(i, len_q[static_cast<size_t>(b)], len_kv[static_cast<size_t>(b)]);
          if (first >= last) continue;  // nothing visible: O stays 0, Stats -inf
          const T* q_row = &q[row * d_qk];
          T row_max = kNegInf;
          for (int64_t j = first; j < last; ++j) {
            T dot = 0;
            for (int64_t d = 0; d < d_qk; ++d) dot += q_row[d] * k_head[j * d_qk + d];
            p[static_cast<size_t>(j)] = logit_scale * dot;
            row_max = std::max(row_max, p[static_cast<size_t>(j)]);
          }
          T denom = 0;
          for (int64_t j = first; j < last; ++j)
            denom += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - row_max));
          stats[row] = row_max + std::log(denom);
          T* o_row = &o[row * d_v];
          for (int64_t j = first; j < last; ++j) {
            const T prob = p[static_cast<size_t>(j)] / denom;
            amax_s = std::max(amax_s, prob);
            const T prob_q = static_cast<T>(round_to(p_type, static_cast<double>(prob * scale_s)));
            for (int64_t d = 0; d < d_v; ++d) o_row[d] += prob_q * v_head[j * d_v + d];
          }
          for (int64_t d = 0; d < d_v; ++d) {
            o_row[d] *= pv_descale;
            amax_o = std::max(amax_o, std::fabs(o_row[d]));
            o_row[d] *= scale_o;
          }
        }
      }
    ex.store(out(SdpaFp8Output::O), o);
    if (const TensorPtr st = out(SdpaFp8Output::STATS)) ex.store(st, stats);
    ex.store(out(SdpaFp8Output::AMAX_S), Array<T>({1, 1, 1, 1}, amax_s));
    ex.store(out(SdpaFp8Output::AMAX_O), Array<T>({1, 1, 1, 1}, amax_o));
    return {};
  });
}

}  // namespace frost::detail
