#include "ops/norm/norm_shape.h"

#include "common/dtype_convert.h"
#include "graph/shape_util.h"

namespace frost::detail {

std::vector<int64_t> default_stats_dims(const std::vector<int64_t>& x_dims) {
  std::vector<int64_t> d(x_dims.size(), 1);
  if (!d.empty()) d[0] = x_dims[0];
  return d;
}

error_t require_input(const Node& n, std::string_view port, const TensorPtr& t) {
  if (t) return {};
  return attr_error(n, port, "null", "this port is required", error_code_t::ATTRIBUTE_NOT_SET);
}

error_t require_floating(const Node& n, std::string_view port, const TensorPtr& t) {
  if (is_floating(t->get_data_type())) return {};
  return attr_error(n, std::string(port) + ".data_type", to_string(t->get_data_type()),
                    "normalization takes floating-point data");
}

error_t check_broadcasts_to_x(const Node& n, std::string_view port, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& x_dims) {
  bool ok = dims.size() == x_dims.size();
  for (size_t k = 0; ok && k < dims.size(); ++k) ok = dims[k] == x_dims[k] || dims[k] == 1;
  if (ok) return {};
  return attr_error(n, std::string(port) + ".dim", dims_string(dims),
                    "must have the rank of X " + dims_string(x_dims) + " and, per axis, X's extent or 1",
                    error_code_t::SHAPE_DEDUCTION_FAILED);
}

error_t check_epsilon(const Node& n, const TensorPtr& epsilon) {
  if (epsilon->get_volume() == 1) return {};
  return attr_error(n, "EPSILON.dim", dims_string(epsilon->get_dim()), "epsilon must hold exactly one element");
}

error_t resolve_stats_dims(const Node& n, const std::vector<int64_t>& x_dims,
                           const std::vector<std::pair<const char*, TensorPtr>>& stats, std::vector<int64_t>& dims) {
  const char* chosen_by = nullptr;
  dims.clear();
  for (const auto& [port, t] : stats) {
    if (!t || t->get_dim().empty()) continue;
    FROST_CHECK(check_broadcasts_to_x(n, port, t->get_dim(), x_dims));
    if (!chosen_by) {
      chosen_by = port;
      dims = t->get_dim();
    } else if (t->get_dim() != dims) {
      return attr_error(n, std::string(port) + ".dim", dims_string(t->get_dim()),
                        std::string("the statistics disagree: ") + chosen_by + " has " + dims_string(dims),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
    }
  }
  if (!chosen_by) dims = default_stats_dims(x_dims);
  return {};
}

error_t infer_output(const Node& n, std::string_view port, graph::Tensor_attributes& t,
                     const std::vector<int64_t>& dims, const std::vector<int64_t>& like_strides, DataType_t data_type) {
  if (t.get_dim().empty()) {
    t.set_dim(dims);
  } else if (t.get_dim() != dims) {
    return attr_error(n, std::string(port) + ".dim", dims_string(t.get_dim()), "expected " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  if (t.get_stride().empty()) t.set_stride(strides_like(dims, like_strides));
  if (t.get_data_type() == DataType_t::NOT_SET && data_type != DataType_t::NOT_SET) t.set_data_type(data_type);
  return {};
}

}  // namespace frost::detail
