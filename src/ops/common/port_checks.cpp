#include "ops/common/port_checks.h"

#include "graph/shape_util.h"

namespace frost::detail {

bool is_value_type(DataType_t dt) {
  return dt == DataType_t::FLOAT || dt == DataType_t::HALF || dt == DataType_t::BFLOAT16 || dt == DataType_t::DOUBLE;
}

bool is_state_type(DataType_t dt) { return dt == DataType_t::FLOAT || dt == DataType_t::DOUBLE; }

error_t expect_dims(const Node& n, const char* port, const TensorPtr& t, const std::vector<int64_t>& want,
                    std::string_view because) {
  if (t->get_dim() == want) return {};
  return attr_error(n, std::string(port) + ".dim", dims_string(t->get_dim()),
                    "expected " + dims_string(want) + " " + std::string(because), error_code_t::SHAPE_DEDUCTION_FAILED);
}

error_t expect_type(const Node& n, const char* port, const TensorPtr& t, bool ok, std::string_view allowed) {
  if (ok) return {};
  return attr_error(n, std::string(port) + ".data_type", std::string(to_string(t->get_data_type())),
                    "must be " + std::string(allowed));
}

error_t reject_bound(Node& n, std::initializer_list<const char*> ports, std::string_view why) {
  for (const char* port : ports)
    if (const TensorPtr t = n.port(port)) return attr_error(n, port, describe(t), why);
  return {};
}

error_t infer_output(const Node& n, const GraphContext& ctx, const char* port, const TensorPtr& t,
                     const std::vector<int64_t>& dims, const TensorPtr& like, DataType_t fallback) {
  if (t->get_dim().empty()) t->set_dim(dims);
  if (t->get_dim() != dims)
    return attr_error(n, std::string(port) + ".dim", dims_string(t->get_dim()), "the inputs give " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (t->get_stride().empty()) t->set_stride(strides_like(dims, like->get_stride()));
  if (t->get_data_type() == DataType_t::NOT_SET) {
    const DataType_t context_type = t->get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
    if (fallback != DataType_t::NOT_SET)
      t->set_data_type(fallback);
    else if (context_type != DataType_t::NOT_SET)
      t->set_data_type(context_type);
    else
      t->set_data_type(like->get_data_type());
  }
  return {};
}

}  // namespace frost::detail
