#include <algorithm>
#include <array>

#include "engines/reference/ref_exec.h"
#include "graph/json_util.h"
#include "ops/moe/moe_node.h"

namespace frost::detail {

using graph::MoeGroupedMatmulMode_t;

namespace {

constexpr std::array<std::pair<MoeGroupedMatmulMode_t, const char*>, 3> kModes{{
    {MoeGroupedMatmulMode_t::NONE, "NONE"},
    {MoeGroupedMatmulMode_t::GATHER, "GATHER"},
    {MoeGroupedMatmulMode_t::SCATTER, "SCATTER"},
}};

bool is_value_type(DataType_t t) {
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

bool is_index_type(DataType_t t) { return t == DataType_t::INT32 || t == DataType_t::INT64; }

error_t check_values(const Node& node, const char* port, const TensorPtr& t) {
  if (!t) return attr_error(node, port, "null", "this port is required", error_code_t::ATTRIBUTE_NOT_SET);
  if (t->get_dim().size() != 3)
    return attr_error(node, std::string(port) + ".dim", dims_string(t->get_dim()), "must have rank 3",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (!is_value_type(t->get_data_type()))
    return attr_error(node, std::string(port) + ".data_type", to_string(t->get_data_type()),
                      "must be FLOAT, DOUBLE, HALF, BFLOAT16, FP8_E4M3 or FP8_E5M2");
  return {};
}

// An index tensor: present exactly when the mode reads it, INT32/INT64 of the given dims.
error_t check_index(const Node& node, const char* port, const TensorPtr& t, bool read, const char* modes,
                    const std::vector<int64_t>& dims) {
  if (!read) {
    if (t) return attr_error(node, port, describe(t), std::string("is read only in ") + modes + " mode");
    return {};
  }
  if (!t) return attr_error(node, port, "null", std::string(modes) + " mode needs it", error_code_t::ATTRIBUTE_NOT_SET);
  if (t->get_dim() != dims)
    return attr_error(node, std::string(port) + ".dim", dims_string(t->get_dim()), "must be " + dims_string(dims),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (!is_index_type(t->get_data_type()))
    return attr_error(node, std::string(port) + ".data_type", to_string(t->get_data_type()), "must be INT32 or INT64");
  return {};
}

}  // namespace

const char* moe_mode_name(MoeGroupedMatmulMode_t mode) {
  for (const auto& [e, n] : kModes)
    if (e == mode) return n;
  return "NONE";
}

error_t read_moe_mode(const json& j, MoeGroupedMatmulMode_t& mode) {
  std::string name = moe_mode_name(mode);
  FROST_CHECK(read_string(j, "mode", name));
  const auto found = std::find_if(kModes.begin(), kModes.end(), [&](const auto& e) { return name == e.second; });
  if (found == kModes.end()) return json_format_error("mode", "unknown value '" + name + "'");
  mode = found->first;
  return {};
}

error_t validate_moe_operands(const Node& node, const MoeOperands& ops, MoeExtents& ext) {
  FROST_CHECK(check_values(node, "TOKEN", ops.token));
  FROST_CHECK(check_values(node, "WEIGHT", ops.weight));
  const auto& td = ops.token->get_dim();
  const auto& wd = ops.weight->get_dim();
  if (td[0] != 1)
    return attr_error(node, "TOKEN.dim", dims_string(td), "must be [1, rows, K]", error_code_t::SHAPE_DEDUCTION_FAILED);
  if (wd[1] != td[2])
    return attr_error(node, "WEIGHT.dim", dims_string(wd), "K must equal TOKEN's " + std::to_string(td[2]),
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  ext.token_rows = td[1];
  ext.experts = wd[0];
  ext.k = wd[1];
  ext.n = wd[2];
  const bool gather = ops.mode == MoeGroupedMatmulMode_t::GATHER;
  const bool scatter = ops.mode == MoeGroupedMatmulMode_t::SCATTER;
  // GATHER routes rows of a token list it indexes into; the routed-row count comes from the index.
  ext.rows =
      gather && ops.token_index && !ops.token_index->get_dim().empty() ? ops.token_index->get_dim()[1] : ext.token_rows;
  const std::vector<int64_t> offsets_dims{ext.experts, 1, 1};
  if (!ops.first_token_offset)
    return attr_error(node, "FIRST_TOKEN_OFFSET", "null", "this port is required", error_code_t::ATTRIBUTE_NOT_SET);
  FROST_CHECK(check_index(node, "FIRST_TOKEN_OFFSET", ops.first_token_offset, true, "every", offsets_dims));
  FROST_CHECK(
      check_index(node, "TOKEN_INDEX", ops.token_index, gather || scatter, "GATHER and SCATTER", {1, ext.rows, 1}));
  FROST_CHECK(check_index(node, "TOKEN_KS", ops.token_ks, scatter, "SCATTER", {1, ext.rows, 1}));
  if (scatter && (ops.top_k < 1 || ext.rows % ops.top_k != 0))
    return attr_error(node, "top_k", std::to_string(ops.top_k),
                      "must be positive and divide the " + std::to_string(ext.rows) + " routed rows");
  return {};
}

error_t load_moe_routing(const Node& node, const RefExec& ex, const MoeOperands& ops, const MoeExtents& ext,
                         MoeRouting& routing) {
  const int64_t rows = ext.rows;
  routing.expert.assign(static_cast<size_t>(rows), -1);
  routing.in_row.resize(static_cast<size_t>(rows));
  routing.out_row.resize(static_cast<size_t>(rows));
  // Doubles hold every INT32 exactly and INT64 offsets up to 2^53, far past any extent frost accepts.
  const Array<double> offsets = ex.load<double>(ops.first_token_offset);
  double previous = 0;
  for (int64_t e = 0; e < ext.experts; ++e) {
    const double v = offsets[e];
    if (!(v >= previous && v <= static_cast<double>(rows)))
      return attr_error(node, "FIRST_TOKEN_OFFSET",
                        std::to_string(static_cast<int64_t>(v)) + " at expert " + std::to_string(e),
                        "offsets must be non-decreasing and in [0, " + std::to_string(rows) + "]");
    previous = v;
  }
  for (int64_t e = 0; e < ext.experts; ++e) {
    const int64_t end = e + 1 < ext.experts ? static_cast<int64_t>(offsets[e + 1]) : rows;
    for (int64_t r = static_cast<int64_t>(offsets[e]); r < end; ++r) routing.expert[static_cast<size_t>(r)] = e;
  }
  const Array<double> index = ops.token_index ? ex.load<double>(ops.token_index) : Array<double>();
  const Array<double> ks = ops.token_ks ? ex.load<double>(ops.token_ks) : Array<double>();
  const bool scatter = ops.mode == graph::MoeGroupedMatmulMode_t::SCATTER;
  const int64_t index_limit = scatter ? rows / ops.top_k : ext.token_rows;
  std::vector<bool> slot_taken(static_cast<size_t>(rows), false);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t in_row = r, out_row = r;
    if (ops.token_index) {
      const double i = index[r];
      if (!(i >= 0 && i < static_cast<double>(index_limit)))
        return attr_error(node, "TOKEN_INDEX", std::to_string(static_cast<int64_t>(i)) + " at row " + std::to_string(r),
                          "must be in [0, " + std::to_string(index_limit) + ")");
      (scatter ? out_row : in_row) = static_cast<int64_t>(i);
    }
    if (scatter) {
      const double choice = ks[r];
      if (!(choice >= 0 && choice < ops.top_k))
        return attr_error(node, "TOKEN_KS",
                          std::to_string(static_cast<int64_t>(choice)) + " at row " + std::to_string(r),
                          "must be in [0, top_k = " + std::to_string(ops.top_k) + ")");
      out_row = out_row * ops.top_k + static_cast<int64_t>(choice);
      if (slot_taken[static_cast<size_t>(out_row)])
        return attr_error(node, "TOKEN_INDEX", "slot " + std::to_string(out_row) + " again at row " + std::to_string(r),
                          "two routed rows scatter to one output slot");
      slot_taken[static_cast<size_t>(out_row)] = true;
    }
    routing.in_row[static_cast<size_t>(r)] = in_row;
    routing.out_row[static_cast<size_t>(r)] = out_row;
  }
  return {};
}

}  // namespace frost::detail
