#include "ops/matmul/matmul_node.h"

#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "ops/common/broadcast.h"
#include "ops/common/builder_util.h"

namespace frost::detail {

using graph::MatmulInput;
using graph::MatmulOutput;

namespace {

bool is_operand_type(DataType_t t) {
  switch (t) {
    case DataType_t::FLOAT:
    case DataType_t::DOUBLE:
    case DataType_t::HALF:
    case DataType_t::BFLOAT16:
    case DataType_t::FP8_E4M3:
    case DataType_t::FP8_E5M2:
      return true;
    default:
      return false;
  }
}

std::vector<int64_t> batch_dims_of(const std::vector<int64_t>& dims) { return {dims.begin(), dims.end() - 2}; }

// An override holds one integer per batch of C: dims [batch..., 1, 1], each batch extent equal to C's
// or 1 (one value shared along that dim).
error_t check_override(const Node& node, const char* port, const TensorPtr& t, const std::vector<int64_t>& c_dims) {
  if (!t) return {};
  const DataType_t dt = t->get_data_type();
  if (dt != DataType_t::INT32 && dt != DataType_t::INT64)
    return attr_error(node, std::string(port) + ".data_type", to_string(dt), "an override must be INT32 or INT64");
  const auto& d = t->get_dim();
  bool ok = d.size() == c_dims.size() && d[d.size() - 1] == 1 && d[d.size() - 2] == 1;
  for (size_t i = 0; ok && i + 2 < d.size(); ++i) ok = d[i] == c_dims[i] || d[i] == 1;
  if (!ok) {
    std::vector<int64_t> want(c_dims.begin(), c_dims.end() - 2);
    want.push_back(1);
    want.push_back(1);
    return attr_error(node, std::string(port) + ".dim", dims_string(d),
                      "must be " + dims_string(want) + " (one value per batch of C; a batch extent may be 1)",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  return {};
}

}  // namespace

error_t matmul_shape(const Node& node, const MatmulTensors& t, std::vector<int64_t>& c_dims) {
  for (const auto& [port, x] : {std::pair{"A", t.a}, std::pair{"B", t.b}}) {
    if (!x) return attr_error(node, port, "null", "matmul needs both operands", error_code_t::ATTRIBUTE_NOT_SET);
    if (x->get_dim().size() < 2)
      return attr_error(node, std::string(port) + ".dim", dims_string(x->get_dim()),
                        "an operand needs rank >= 2 ([..., rows, cols])", error_code_t::SHAPE_DEDUCTION_FAILED);
    if (!is_operand_type(x->get_data_type()))
      return attr_error(node, std::string(port) + ".data_type", to_string(x->get_data_type()),
                        "operands must be FLOAT, DOUBLE, HALF, BFLOAT16, FP8_E4M3 or FP8_E5M2");
  }
  const auto& ad = t.a->get_dim();
  const auto& bd = t.b->get_dim();
  const int64_t m = ad[ad.size() - 2], k = ad[ad.size() - 1];
  const int64_t kb = bd[bd.size() - 2], n = bd[bd.size() - 1];
  if (k != kb)
    return attr_error(
        node, "B.dim", dims_string(bd),
        "K disagrees: A " + dims_string(ad) + " has K = " + std::to_string(k) + ", B has K = " + std::to_string(kb),
        error_code_t::SHAPE_DEDUCTION_FAILED);
  auto batch = broadcast_dims({batch_dims_of(ad), batch_dims_of(bd)});
  if (!batch)
    return attr_error(node, "batch dims", dims_string(ad) + " and " + dims_string(bd),
                      "the batch dims of A and B do not broadcast (extents must match or be 1)",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  c_dims = *batch;
  c_dims.push_back(m);
  c_dims.push_back(n);
  FROST_CHECK(check_override(node, "M_OVERRIDE", t.m_override, c_dims));
  FROST_CHECK(check_override(node, "N_OVERRIDE", t.n_override, c_dims));
  return check_override(node, "K_OVERRIDE", t.k_override, c_dims);
}

MatmulTensors MatmulNode::operands() const {
  return {in(MatmulInput::A), in(MatmulInput::B), in(MatmulInput::M_OVERRIDE), in(MatmulInput::N_OVERRIDE),
          in(MatmulInput::K_OVERRIDE)};
}

error_t MatmulNode::infer_and_validate(const GraphContext&) {
  FROST_CHECK(require_ports(*this, {"C"}));
  std::vector<int64_t> c_dims;
  FROST_CHECK(matmul_shape(*this, operands(), c_dims));
  auto& c = *out(MatmulOutput::C);
  if (c.get_dim().empty()) {
    c.set_dim(c_dims);
  } else if (c.get_dim() != c_dims) {
    return attr_error(*this, "C.dim", dims_string(c.get_dim()), "A and B give " + dims_string(c_dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  return {};
}

void MatmulNode::attributes_to_json(json& j) const { j["padding_value"] = attr.padding_value; }

error_t MatmulNode::attributes_from_json(const json& j) { return read_double(j, "padding_value", attr.padding_value); }

namespace {
const OpRegistrar kRegister(std::string(MatmulNode::kTag), [] { return std::make_unique<MatmulNode>(); });
}  // namespace

}  // namespace frost::detail

namespace frost::graph {

TensorPtr Graph::matmul(TensorPtr a, TensorPtr b, Matmul_attributes attr) {
  auto& g = state();
  detail::default_name(g, attr, detail::MatmulNode::kTag);
  detail::require_inputs(g, attr.name, detail::MatmulNode::kTag, {{"A", &a}, {"B", &b}});
  attr.inputs[MatmulInput::A] = std::move(a);
  attr.inputs[MatmulInput::B] = std::move(b);
  auto c = detail::make_output(g, attr.name, "C");
  attr.outputs[MatmulOutput::C] = c;
  detail::add_node(g, std::make_unique<detail::MatmulNode>(std::move(attr)));
  return c;
}

}  // namespace frost::graph
