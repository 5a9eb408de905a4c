#include "ops/sdpa/sdpa_common_checks.h"

#include <algorithm>
#include <cstdio>

namespace frost::detail {

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
    return attr_error(n, "attn_scale", float_string(*attn_scale_value), "set either a float or a tensor ATTN_SCALE, not both");
  const auto& d = scale->get_dim();
  const bool all_ones = std::all_of(d.begin(), d.end(), [](int64_t e) { return e == 1; });
  if (!all_ones || (d.size() != 1 && d.size() != 4))
    return attr_error(n, "ATTN_SCALE", describe(scale), "must be a scalar of dims [1] or [1, 1, 1, 1]");
  if (scale->get_data_type() != DataType_t::FLOAT) return attr_error(n, "ATTN_SCALE", describe(scale), "must be FLOAT");
  return {};
}

error_t check_attn_bias(const Node& n, const TensorPtr& bias, int64_t b, int64_t h, int64_t s_q, int64_t s_kv) {
  if (!bias) return {};
  const auto& d = bias->get_dim();
  if (d.size() != 4 || (d[0] != 1 && d[0] != b) || (d[1] != 1 && d[1] != h) || d[2] != s_q || d[3] != s_kv)
    return attr_error(n, "BIAS", describe(bias),
                      "dims must be [" + std::to_string(b) + " or 1, " + std::to_string(h) + " or 1, " +
                          std::to_string(s_q) + ", " + std::to_string(s_kv) + "]");
  if (!is_attention_type(bias->get_data_type()))
    return attr_error(n, "BIAS", describe(bias), "must be FLOAT, HALF, BFLOAT16 or DOUBLE");
  return {};
}

}  // namespace frost::detail
