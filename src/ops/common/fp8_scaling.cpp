#include "ops/common/fp8_scaling.h"

#include "graph/shape_util.h"

namespace frost::detail {

bool is_fp8(DataType_t t) { return t == DataType_t::FP8_E4M3 || t == DataType_t::FP8_E5M2; }

error_t check_scale_scalar(const Node& node, const char* port, const TensorPtr& t, bool required) {
  if (!t) {
    if (!required) return {};
    return attr_error(node, port, "null", "this scale is required", error_code_t::ATTRIBUTE_NOT_SET);
  }
  const auto& d = t->get_dim();
  const bool all_ones = std::all_of(d.begin(), d.end(), [](int64_t e) { return e == 1; });
  if (!all_ones || (d.size() != 1 && d.size() != 4))
    return attr_error(node, port, describe(t), "must be a scalar of dims [1, 1, 1, 1] (or [1])");
  if (t->get_data_type() != DataType_t::FLOAT) return attr_error(node, port, describe(t), "must be FLOAT");
  return {};
}

error_t infer_amax_output(const Node& node, const char* port, const TensorPtr& t) {
  const std::vector<int64_t> dims{1, 1, 1, 1};
  if (t->get_dim().empty()) t->set_dim(dims);
  if (t->get_stride().empty()) t->set_stride(packed_strides(dims));
  if (t->get_data_type() == DataType_t::NOT_SET) t->set_data_type(DataType_t::FLOAT);
  if (t->get_dim() != dims || t->get_data_type() != DataType_t::FLOAT)
    return attr_error(node, port, describe(t), "an amax is FLOAT [1, 1, 1, 1]", error_code_t::SHAPE_DEDUCTION_FAILED);
  return {};
}

}  // namespace frost::detail
