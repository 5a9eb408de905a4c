#include "ops/sdpa/sdpa_common_checks.h"

#include <algorithm>
#include <cstdio>

namespace frost::detail {

namespace {

bool is_one_element(const TensorPtr& t) {
  const auto& d = t->get_dim();
  return std::all_of(d.begin(), d.end(), [](int64_t e) { return e == 1; }) && (d.size() == 1 || d.size() == 4);
}

bool is_integer_index(DataType_t dt) { return dt == DataType_t::INT32 || dt == DataType_t::INT64; }

std::string b_and_h(int64_t b, int64_t h) { return std::to_string(b) + " or 1, " + std::to_string(h) + " or 1"; }

}  // namespace

bool is_attention_type(DataType_t dt) {
  return dt == DataType_t::FLOAT || dt == DataType_t::HALF || dt == DataType_t::BFLOAT16 || dt == DataType_t::DOUBLE;
}

std::string float_string(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

error_t check_attn_scale(const Node& n, const TensorPtr& scale, const std::optional<float>& attn_scale_value) {
  if (!scale) return {};
  if (attn_scale_value)
    return attr_error(n, "attn_scale", float_string(*attn_scale_value),
                      "set either a float or a tensor ATTN_SCALE, not both");
  if (!is_one_element(scale))
    return attr_error(n, "ATTN_SCALE", describe(scale), "must be a scalar of dims [1] or [1, 1, 1, 1]");
  if (scale->get_data_type() != DataType_t::FLOAT) return attr_error(n, "ATTN_SCALE", describe(scale), "must be FLOAT");
  return {};
}

error_t check_attn_bias(const Node& n, const TensorPtr& bias, int64_t b, int64_t h, int64_t s_q, int64_t s_kv) {
  if (!bias) return {};
  const auto& d = bias->get_dim();
  if (d.size() != 4 || (d[0] != 1 && d[0] != b) || (d[1] != 1 && d[1] != h) || d[2] != s_q || d[3] != s_kv)
    return attr_error(
        n, "BIAS", describe(bias),
        "dims must be [" + b_and_h(b, h) + ", " + std::to_string(s_q) + ", " + std::to_string(s_kv) + "]");
  if (!is_attention_type(bias->get_data_type()))
    return attr_error(n, "BIAS", describe(bias), "must be FLOAT, HALF, BFLOAT16 or DOUBLE");
  return {};
}

error_t check_attn_lengths(const Node& n, bool padding_mask, int64_t b, const AttentionSideLengths& q,
                           const AttentionSideLengths& kv) {
  for (const AttentionSideLengths* side : {&q, &kv}) {
    const auto& [port, t, cu_port, cu] = *side;
    if (t && cu)
      return attr_error(n, cu_port, describe(cu), std::string("set either ") + port + " or " + cu_port + ", not both");
    if (padding_mask && !t && !cu)
      return attr_error(n, port, "null", "padding_mask needs both SEQ_LEN_Q and SEQ_LEN_KV (or CU_SEQ_LEN_Q/KV)",
                        error_code_t::ATTRIBUTE_NOT_SET);
    if (cu) {
      if (!padding_mask)
        return attr_error(n, cu_port, describe(cu), "cumulative lengths are read only with padding_mask on");
      const auto& d = cu->get_dim();
      const bool one_d = d == std::vector<int64_t>{b + 1}, four_d = d == std::vector<int64_t>{b + 1, 1, 1, 1};
      if ((!one_d && !four_d) || cu->get_data_type() != DataType_t::INT32)
        return attr_error(n, cu_port, describe(cu),
                          "must be INT32 [" + std::to_string(b + 1) + "] or [" + std::to_string(b + 1) + ", 1, 1, 1]");
    }
    if (!t) continue;
    if (!padding_mask) return attr_error(n, port, describe(t), "sequence lengths are read only with padding_mask on");
    if (t->get_dim() != std::vector<int64_t>{b, 1, 1, 1} || t->get_data_type() != DataType_t::INT32)
      return attr_error(n, port, describe(t), "must be INT32 [" + std::to_string(b) + ", 1, 1, 1]");
  }
  return {};
}

error_t check_attn_ragged_offset(const Node& n, const char* port, const TensorPtr& t, int64_t b, bool padding_mask) {
  const TensorPtr ro = t ? t->get_ragged_offset() : nullptr;
  if (!ro) return {};
  const std::string where = std::string(port) + ".ragged_offset";
  if (ro->get_dim() != std::vector<int64_t>{b + 1, 1, 1, 1} || !is_integer_index(ro->get_data_type()))
    return attr_error(n, where, describe(ro), "must be INT32 or INT64 [" + std::to_string(b + 1) + ", 1, 1, 1]");
  if (!padding_mask)
    return attr_error(n, where, describe(ro), "ragged layouts need padding_mask with per-batch lengths");
  if (t->get_is_virtual()) return attr_error(n, where, describe(ro), "a virtual tensor has no buffer to offset into");
  return {};
}

error_t check_attn_max_totals(const Node& n, const std::optional<int64_t>& q, const std::optional<int64_t>& kv) {
  const std::pair<const char*, std::optional<int64_t>> totals[2] = {{"max_total_seq_len_q", q},
                                                                    {"max_total_seq_len_kv", kv}};
  for (const auto& [name, v] : totals)
    if (v && *v < 1) return attr_error(n, name, std::to_string(*v), "must be positive");
  return {};
}

error_t check_attn_block_mask(const Node& n, const TensorPtr& mask, int64_t tile_q, int64_t tile_kv, int64_t b,
                              int64_t h, int64_t s_q, int64_t s_kv) {
  if (tile_q < 1 || tile_kv < 1)
    return attr_error(n, "block_mask_tile_size", std::to_string(tile_q) + "x" + std::to_string(tile_kv),
                      "tile sizes must be positive");
  if (!mask) return {};
  const int64_t tiles_q = (s_q + tile_q - 1) / tile_q, tiles_kv = (s_kv + tile_kv - 1) / tile_kv;
  const auto& d = mask->get_dim();
  if (d.size() != 4 || (d[0] != 1 && d[0] != b) || (d[1] != 1 && d[1] != h) || d[2] != tiles_q || d[3] != tiles_kv)
    return attr_error(n, "BLOCK_MASK", describe(mask),
                      "dims must be [" + b_and_h(b, h) + ", " + std::to_string(tiles_q) + ", " +
                          std::to_string(tiles_kv) + "] (tiles of " + std::to_string(tile_q) + "x" +
                          std::to_string(tile_kv) + ")");
  if (mask->get_data_type() != DataType_t::UINT8 && mask->get_data_type() != DataType_t::BOOLEAN)
    return attr_error(n, "BLOCK_MASK", describe(mask), "must be UINT8 or BOOLEAN");
  return {};
}

error_t check_attn_dropout(const Node& n, const AttentionDropout& d, int64_t b, int64_t h, int64_t s_q, int64_t s_kv) {
  if (d.probability) {
    const float p = *d.probability;
    if (!(p >= 0.0f && p < 1.0f)) return attr_error(n, "dropout_probability", float_string(p), "must be in [0, 1)");
    if (d.mask) return attr_error(n, "DROPOUT_MASK", describe(d.mask), "set either a probability or a mask, not both");
    const std::pair<const char*, TensorPtr> rng[2] = {{"DROPOUT_SEED", d.seed}, {"DROPOUT_OFFSET", d.offset}};
    for (const auto& [port, t] : rng) {
      if (!t) return attr_error(n, port, "null", "dropout needs a seed and an offset", error_code_t::ATTRIBUTE_NOT_SET);
      if (!is_one_element(t) || !is_integer_index(t->get_data_type()))
        return attr_error(n, port, describe(t), "must be an INT64 or INT32 scalar of dims [1] or [1, 1, 1, 1]");
    }
  } else if (d.seed || d.offset) {
    return attr_error(n, d.seed ? "DROPOUT_SEED" : "DROPOUT_OFFSET", describe(d.seed ? d.seed : d.offset),
                      "is bound but dropout_probability is not set");
  }
  if (!d.mask && !d.scale && !d.scale_inv) return {};
  if (!d.mask || !d.scale)
    return attr_error(n, d.mask ? "DROPOUT_SCALE" : "DROPOUT_MASK", "null",
                      "a dropout mask needs both the mask and its scale", error_code_t::ATTRIBUTE_NOT_SET);
  const auto& md = d.mask->get_dim();
  if (md.size() != 4 || (md[0] != 1 && md[0] != b) || (md[1] != 1 && md[1] != h) || md[2] != s_q || md[3] != s_kv)
    return attr_error(
        n, "DROPOUT_MASK", describe(d.mask),
        "dims must be [" + b_and_h(b, h) + ", " + std::to_string(s_q) + ", " + std::to_string(s_kv) + "]");
  const std::pair<const char*, TensorPtr> scales[2] = {{"DROPOUT_SCALE", d.scale}, {"DROPOUT_SCALE_INV", d.scale_inv}};
  for (const auto& [port, t] : scales)
    if (t && (!is_one_element(t) || t->get_data_type() != DataType_t::FLOAT))
      return attr_error(n, port, describe(t), "must be a FLOAT scalar of dims [1] or [1, 1, 1, 1]");
  return {};
}

}  // namespace frost::detail
