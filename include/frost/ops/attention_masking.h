// The attributes that SDPA_attributes and SDPA_backward_attributes share: the scale, bias, masks,
// sinks, variable lengths, block mask and dropout of the forward (frost/ops/sdpa.h). The backward
// takes every one of them so that it sees the forward's own probabilities. Input is the op's input
// port enum; both ops name these ports alike.
#pragma once

#include <optional>
#include <string_view>

#include "frost/ops/attributes_base.h"

namespace frost::graph {

enum class AttentionImplementation_t { AUTO, COMPOSITE, UNIFIED };
// "AUTO", "COMPOSITE", "UNIFIED" (JSON names); from_string<AttentionImplementation_t> parses them.
std::string_view to_string(AttentionImplementation_t);

template <class Derived, class Input, class Output>
class AttentionMaskingAttributes : public Attributes<Derived, Input, Output> {
 public:
  std::optional<float> attn_scale_value;
  bool alibi_mask = false;
  bool padding_mask = false;
  bool stats_use_log2 = false;
  DiagonalAlignment_t diagonal_alignment = DiagonalAlignment_t::TOP_LEFT;
  // Key j is visible from query i when  i' - left_bound < j <= i' + right_bound  where i' is i
  // shifted by the diagonal alignment (i' = i + s_kv - s_q for BOTTOM_RIGHT, with the per-batch
  // seq_len_kv and seq_len_q in place of s_kv and s_q under the padding mask). An absent bound is
  // unbounded; bounds are non-negative.
  std::optional<int64_t> left_bound;
  std::optional<int64_t> right_bound;
  AttentionImplementation_t implementation = AttentionImplementation_t::AUTO;
  std::optional<int64_t> max_total_seq_len_q, max_total_seq_len_kv;
  std::optional<float> dropout_probability;  // with DROPOUT_SEED and DROPOUT_OFFSET
  int64_t block_mask_tile_q = 128, block_mask_tile_kv = 128;

  Derived& set_attn_scale(float v) { attn_scale_value = v; return this->self(); }
  Derived& set_attn_scale(TensorPtr t) { return port(Input::ATTN_SCALE, std::move(t)); }
  Derived& set_bias(TensorPtr t) { return port(Input::BIAS, std::move(t)); }
  Derived& set_alibi_mask(bool v) { alibi_mask = v; return this->self(); }
  Derived& set_padding_mask(bool v) { padding_mask = v; return this->self(); }
  Derived& set_seq_len_q(TensorPtr t) { return port(Input::SEQ_LEN_Q, std::move(t)); }
  Derived& set_seq_len_kv(TensorPtr t) { return port(Input::SEQ_LEN_KV, std::move(t)); }
  Derived& set_sink_token(TensorPtr t) { return port(Input::SINK_TOKEN, std::move(t)); }
  Derived& set_stats_use_log2(bool v) { stats_use_log2 = v; return this->self(); }
  Derived& set_diagonal_alignment(DiagonalAlignment_t v) { diagonal_alignment = v; return this->self(); }
  Derived& set_diagonal_band_left_bound(int64_t v) { left_bound = v; return this->self(); }
  Derived& set_diagonal_band_right_bound(int64_t v) { right_bound = v; return this->self(); }
  Derived& set_causal_mask(bool v) { return causal(v, DiagonalAlignment_t::TOP_LEFT); }
  Derived& set_causal_mask_bottom_right(bool v) { return causal(v, DiagonalAlignment_t::BOTTOM_RIGHT); }
  // A window of w keys ending at the (aligned) diagonal: causal with left bound w.
  Derived& set_sliding_window_length(int64_t w) {
    left_bound = w;
    right_bound = 0;
    return this->self();
  }
  Derived& set_implementation(AttentionImplementation_t v) { implementation = v; return this->self(); }
  Derived& set_cu_seq_len_q(TensorPtr t) { return port(Input::CU_SEQ_LEN_Q, std::move(t)); }
  Derived& set_cu_seq_len_kv(TensorPtr t) { return port(Input::CU_SEQ_LEN_KV, std::move(t)); }
  Derived& set_max_total_seq_len_q(int64_t v) { max_total_seq_len_q = v; return this->self(); }
  Derived& set_max_total_seq_len_kv(int64_t v) { max_total_seq_len_kv = v; return this->self(); }
  Derived& set_block_mask(TensorPtr t) { return port(Input::BLOCK_MASK, std::move(t)); }
  Derived& set_block_mask_tile_size(int64_t q, int64_t kv) {
    block_mask_tile_q = q;
    block_mask_tile_kv = kv;
    return this->self();
  }
  // Philox dropout; each op adds its own mask form.
  Derived& set_dropout(float probability, TensorPtr seed, TensorPtr offset) {
    dropout_probability = probability;
    port(Input::DROPOUT_SEED, std::move(seed));
    return port(Input::DROPOUT_OFFSET, std::move(offset));
  }

 protected:
  Derived& port(Input p, TensorPtr t) {
    this->inputs[p] = std::move(t);
    return this->self();
  }

 private:
  Derived& causal(bool on, DiagonalAlignment_t alignment) {
    if (on) {
      diagonal_alignment = alignment;
      right_bound = 0;
    } else {
      right_bound.reset();
    }
    return this->self();
  }
};

}  // namespace frost::graph
