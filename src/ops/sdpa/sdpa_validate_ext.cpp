// Validation of sdpa's variable-length, paged, block-mask and dropout inputs (see frost/ops/sdpa.h).
#include <algorithm>

#include "ops/sdpa/sdpa_common_checks.h"
#include "ops/sdpa/sdpa_node.h"

namespace frost::detail {

using graph::SdpaInput;
using graph::SdpaOutput;

int64_t sdpa_logical_s_kv(const graph::SDPA_attributes& attr) {
  auto find = [&](SdpaInput e) {
    auto it = attr.inputs.find(e);
    return it == attr.inputs.end() ? nullptr : it->second;
  };
  const TensorPtr k = find(SdpaInput::K), v = find(SdpaInput::V);
  const TensorPtr k_table = find(SdpaInput::PAGE_TABLE_K), v_table = find(SdpaInput::PAGE_TABLE_V);
  if (!k_table || !v_table) return k->get_dim()[2];
  if (attr.paged_attention_max_seq_len_kv) return *attr.paged_attention_max_seq_len_kv;
  return std::min(k_table->get_dim()[2] * k->get_dim()[2], v_table->get_dim()[2] * v->get_dim()[2]);
}

// Ragged offsets of Q, K and V, the max_total bounds, and the page tables.
error_t SdpaNode::validate_layout_inputs() const {
  const int64_t b = in(SdpaInput::Q)->get_dim()[0];
  const TensorPtr k_table = in(SdpaInput::PAGE_TABLE_K), v_table = in(SdpaInput::PAGE_TABLE_V);
  const bool paged = k_table || v_table;
  const std::pair<const char*, SdpaInput> operands[3] = {{"Q", SdpaInput::Q}, {"K", SdpaInput::K}, {"V", SdpaInput::V}};
  for (const auto& [port, e] : operands) {
    const TensorPtr t = in(e);
    if (paged && e != SdpaInput::Q && t->get_ragged_offset())
      return attr_error(*this, std::string(port) + ".ragged_offset", describe(t->get_ragged_offset()),
                        "paged K and V are addressed by their page tables, not offsets");
    FROST_CHECK(check_attn_ragged_offset(*this, port, t, b, attr.padding_mask));
  }
  FROST_CHECK(check_attn_max_totals(*this, attr.max_total_seq_len_q, attr.max_total_seq_len_kv));

  if (!paged) {
    if (attr.paged_attention_max_seq_len_kv)
      return attr_error(*this, "paged_attention_max_seq_len_kv", std::to_string(*attr.paged_attention_max_seq_len_kv),
                        "is set without PAGE_TABLE_K and PAGE_TABLE_V");
    return {};
  }
  if (!k_table || !v_table)
    return attr_error(*this, k_table ? "PAGE_TABLE_V" : "PAGE_TABLE_K", "null",
                      "paged attention needs both page tables", error_code_t::ATTRIBUTE_NOT_SET);
  if (!attr.padding_mask || !in(SdpaInput::SEQ_LEN_KV))
    return attr_error(*this, "SEQ_LEN_KV", in(SdpaInput::SEQ_LEN_KV) ? describe(in(SdpaInput::SEQ_LEN_KV)) : "null",
                      "paged attention needs padding_mask with SEQ_LEN_KV", error_code_t::ATTRIBUTE_NOT_SET);
  const std::pair<const char*, TensorPtr> tables[2] = {{"PAGE_TABLE_K", k_table}, {"PAGE_TABLE_V", v_table}};
  for (const auto& [port, t] : tables) {
    const auto& d = t->get_dim();
    if (d.size() != 4 || d[0] != b || d[1] != 1 || d[3] != 1 || t->get_data_type() != DataType_t::INT32)
      return attr_error(*this, port, describe(t), "must be INT32 [" + std::to_string(b) + ", 1, pages_per_seq, 1]");
  }
  const int64_t capacity = std::min(k_table->get_dim()[2] * in(SdpaInput::K)->get_dim()[2],
                                    v_table->get_dim()[2] * in(SdpaInput::V)->get_dim()[2]);
  if (attr.paged_attention_max_seq_len_kv &&
      (*attr.paged_attention_max_seq_len_kv < 1 || *attr.paged_attention_max_seq_len_kv > capacity))
    return attr_error(*this, "paged_attention_max_seq_len_kv", std::to_string(*attr.paged_attention_max_seq_len_kv),
                      "must be in [1, " + std::to_string(capacity) + "], the keys the page tables can hold");
  return {};
}

// Block mask and dropout.
error_t SdpaNode::validate_mask_inputs() const {
  const auto& q = in(SdpaInput::Q)->get_dim();
  const int64_t b = q[0], h = q[1], s_q = q[2], s_kv = sdpa_logical_s_kv(attr);
  FROST_CHECK(check_attn_block_mask(*this, in(SdpaInput::BLOCK_MASK), attr.block_mask_tile_q, attr.block_mask_tile_kv,
                                    b, h, s_q, s_kv));
  AttentionDropout dropout;
  dropout.probability = attr.dropout_probability;
  dropout.seed = in(SdpaInput::DROPOUT_SEED), dropout.offset = in(SdpaInput::DROPOUT_OFFSET);
  dropout.mask = in(SdpaInput::DROPOUT_MASK), dropout.scale = in(SdpaInput::DROPOUT_SCALE);
  return check_attn_dropout(*this, dropout, b, h, s_q, s_kv);
}

// Ragged offsets of the outputs: O and Stats may be packed like the inputs (Stats token- or
// head-major, as its strides say).
error_t SdpaNode::validate_output_layout() const {
  const int64_t b = in(SdpaInput::Q)->get_dim()[0];
  FROST_CHECK(check_attn_ragged_offset(*this, "O", out(SdpaOutput::O), b, attr.padding_mask));
  return check_attn_ragged_offset(*this, "STATS", out(SdpaOutput::STATS), b, attr.padding_mask);
}

}  // namespace frost::detail
