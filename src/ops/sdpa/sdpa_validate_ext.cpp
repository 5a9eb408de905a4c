// Validation of sdpa's variable-length, paged, block-mask and dropout inputs (see frost/ops/sdpa.h).
#include <algorithm>
#include <cstdio>

#include "ops/sdpa/sdpa_node.h"

namespace frost::detail {

using graph::SdpaInput;
using graph::SdpaOutput;

namespace {

bool is_one_element(const TensorPtr& t) {
  const auto& d = t->get_dim();
  for (int64_t e : d)
    if (e != 1) return false;
  return d.size() == 1 || d.size() == 4;
}

bool is_integer_index(DataType_t dt) { return dt == DataType_t::INT32 || dt == DataType_t::INT64; }

std::string b_and_h(int64_t b, int64_t h) { return std::to_string(b) + " or 1, " + std::to_string(h) + " or 1"; }

}  // namespace

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

// Ragged offsets of Q, K and V, cumulative lengths' companions, and the page tables.
error_t SdpaNode::validate_layout_inputs() const {
  const int64_t b = in(SdpaInput::Q)->get_dim()[0];
  const TensorPtr k_table = in(SdpaInput::PAGE_TABLE_K), v_table = in(SdpaInput::PAGE_TABLE_V);
  const bool paged = k_table || v_table;
  const std::pair<const char*, SdpaInput> operands[3] = {{"Q", SdpaInput::Q}, {"K", SdpaInput::K}, {"V", SdpaInput::V}};
  for (const auto& [port, e] : operands) {
    const TensorPtr t = in(e);
    const TensorPtr ro = t->get_ragged_offset();
    if (!ro) continue;
    const std::string where = std::string(port) + ".ragged_offset";
    if (paged && e != SdpaInput::Q)
      return attr_error(*this, where, describe(ro), "paged K and V are addressed by their page tables, not offsets");
    if (ro->get_dim() != std::vector<int64_t>{b + 1, 1, 1, 1} || !is_integer_index(ro->get_data_type()))
      return attr_error(*this, where, describe(ro), "must be INT32 or INT64 [" + std::to_string(b + 1) + ", 1, 1, 1]");
    if (!attr.padding_mask)
      return attr_error(*this, where, describe(ro), "ragged layouts need padding_mask with per-batch lengths");
    if (t->get_is_virtual())
      return attr_error(*this, where, describe(ro), "a virtual tensor has no buffer to offset into");
  }
  const std::pair<const char*, std::optional<int64_t>> totals[2] = {
      {"max_total_seq_len_q", attr.max_total_seq_len_q}, {"max_total_seq_len_kv", attr.max_total_seq_len_kv}};
  for (const auto& [name, v] : totals)
    if (v && *v < 1) return attr_error(*this, name, std::to_string(*v), "must be positive");

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
  if (attr.block_mask_tile_q < 1 || attr.block_mask_tile_kv < 1)
    return attr_error(*this, "block_mask_tile_size",
                      std::to_string(attr.block_mask_tile_q) + "x" + std::to_string(attr.block_mask_tile_kv),
                      "tile sizes must be positive");
  if (const TensorPtr mask = in(SdpaInput::BLOCK_MASK)) {
    const int64_t tiles_q = (s_q + attr.block_mask_tile_q - 1) / attr.block_mask_tile_q;
    const int64_t tiles_kv = (s_kv + attr.block_mask_tile_kv - 1) / attr.block_mask_tile_kv;
    const auto& d = mask->get_dim();
    if (d.size() != 4 || (d[0] != 1 && d[0] != b) || (d[1] != 1 && d[1] != h) || d[2] != tiles_q || d[3] != tiles_kv)
      return attr_error(*this, "BLOCK_MASK", describe(mask),
                        "dims must be [" + b_and_h(b, h) + ", " + std::to_string(tiles_q) + ", " +
                            std::to_string(tiles_kv) + "] (tiles of " + std::to_string(attr.block_mask_tile_q) + "x" +
                            std::to_string(attr.block_mask_tile_kv) + ")");
    if (mask->get_data_type() != DataType_t::UINT8 && mask->get_data_type() != DataType_t::BOOLEAN)
      return attr_error(*this, "BLOCK_MASK", describe(mask), "must be UINT8 or BOOLEAN");
  }
  const TensorPtr seed = in(SdpaInput::DROPOUT_SEED), offset = in(SdpaInput::DROPOUT_OFFSET);
  const TensorPtr mask = in(SdpaInput::DROPOUT_MASK), scale = in(SdpaInput::DROPOUT_SCALE);
  if (attr.dropout_probability) {
    const float p = *attr.dropout_probability;
    char value[32];
    std::snprintf(value, sizeof value, "%g", static_cast<double>(p));
    if (!(p >= 0.0f && p < 1.0f)) return attr_error(*this, "dropout_probability", value, "must be in [0, 1)");
    if (mask) return attr_error(*this, "DROPOUT_MASK", describe(mask), "set either a probability or a mask, not both");
    const std::pair<const char*, TensorPtr> rng[2] = {{"DROPOUT_SEED", seed}, {"DROPOUT_OFFSET", offset}};
    for (const auto& [port, t] : rng) {
      if (!t)
        return attr_error(*this, port, "null", "dropout needs a seed and an offset", error_code_t::ATTRIBUTE_NOT_SET);
      if (!is_one_element(t) || !is_integer_index(t->get_data_type()))
        return attr_error(*this, port, describe(t), "must be an INT64 or INT32 scalar of dims [1] or [1, 1, 1, 1]");
    }
  } else if (seed || offset) {
    return attr_error(*this, seed ? "DROPOUT_SEED" : "DROPOUT_OFFSET", describe(seed ? seed : offset),
                      "is bound but dropout_probability is not set");
  }
  if (mask || scale) {
    if (!mask || !scale)
      return attr_error(*this, mask ? "DROPOUT_SCALE" : "DROPOUT_MASK", "null",
                        "a dropout mask needs both the mask and its scale", error_code_t::ATTRIBUTE_NOT_SET);
    const auto& d = mask->get_dim();
    if (d.size() != 4 || (d[0] != 1 && d[0] != b) || (d[1] != 1 && d[1] != h) || d[2] != s_q || d[3] != s_kv)
      return attr_error(
          *this, "DROPOUT_MASK", describe(mask),
          "dims must be [" + b_and_h(b, h) + ", " + std::to_string(s_q) + ", " + std::to_string(s_kv) + "]");
    if (!is_one_element(scale) || scale->get_data_type() != DataType_t::FLOAT)
      return attr_error(*this, "DROPOUT_SCALE", describe(scale), "must be a FLOAT scalar of dims [1] or [1, 1, 1, 1]");
  }
  return {};
}

// Ragged offsets of the outputs: O and Stats may be packed like the inputs (Stats token- or
// head-major, as its strides say).
error_t SdpaNode::validate_output_layout() const {
  const int64_t b = in(SdpaInput::Q)->get_dim()[0];
  const std::pair<const char*, TensorPtr> outputs[2] = {{"O", out(SdpaOutput::O)}, {"STATS", out(SdpaOutput::STATS)}};
  for (const auto& [port, t] : outputs) {
    if (!t || !t->get_ragged_offset()) continue;
    const TensorPtr ro = t->get_ragged_offset();
    const std::string where = std::string(port) + ".ragged_offset";
    if (ro->get_dim() != std::vector<int64_t>{b + 1, 1, 1, 1} || !is_integer_index(ro->get_data_type()))
      return attr_error(*this, where, describe(ro), "must be INT32 or INT64 [" + std::to_string(b + 1) + ", 1, 1, 1]");
    if (!attr.padding_mask)
      return attr_error(*this, where, describe(ro), "ragged layouts need padding_mask with per-batch lengths");
    if (t->get_is_virtual())
      return attr_error(*this, where, describe(ro), "a virtual tensor has no buffer to offset into");
  }
  return {};
}

}  // namespace frost::detail
