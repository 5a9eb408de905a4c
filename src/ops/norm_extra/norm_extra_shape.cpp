#include "ops/norm_extra/norm_extra_shape.h"

#include "common/dtype_convert.h"

namespace frost::detail {

std::vector<int64_t> channel_dims(const std::vector<int64_t>& x_dims) {
  std::vector<int64_t> d(x_dims.size(), 1);
  if (d.size() >= 2) d[1] = x_dims[1];
  return d;
}

error_t check_nc_input(const Node& n, const TensorPtr& x) {
  if (!is_floating(x->get_data_type()))
    return attr_error(n, "X.data_type", to_string(x->get_data_type()), "normalization takes floating-point data");
  if (x->get_dim().size() < 2)
    return attr_error(n, "X.dim", dims_string(x->get_dim()), "X needs at least the axes N and C ([N, C, ...])",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  return {};
}

error_t check_dims(const Node& n, std::string_view port, const TensorPtr& t, const std::vector<int64_t>& want) {
  if (t->get_dim() == want) return {};
  return attr_error(n, std::string(port) + ".dim", dims_string(t->get_dim()), "expected " + dims_string(want),
                    error_code_t::SHAPE_DEDUCTION_FAILED);
}

error_t check_one_element(const Node& n, std::string_view port, const TensorPtr& t) {
  if (t->get_volume() == 1) return {};
  return attr_error(n, std::string(port) + ".dim", dims_string(t->get_dim()), "must hold exactly one element");
}

error_t check_running_stats_complete(const Node& n, const std::vector<std::pair<const char*, TensorPtr>>& ports,
                                     bool& present) {
  present = false;
  const char* set_port = nullptr;
  for (const auto& [port, t] : ports)
    if (t) {
      present = true;
      set_port = port;
    }
  if (!present) return {};
  for (const auto& [port, t] : ports)
    if (!t)
      return attr_error(n, port, "null",
                        std::string("running statistics need every one of their ports (") + set_port + " is set)",
                        error_code_t::ATTRIBUTE_NOT_SET);
  return {};
}

}  // namespace frost::detail
