#include "ops/common/packed_sequences.h"

#include <set>
#include <string>

namespace frost::detail {

error_t load_sequences(const Node& n, const RefExec& ex, const TensorPtr& cu, const TensorPtr& indices,
                       const TensorPtr& init, int64_t batch, int64_t len, std::vector<Sequence>& out) {
  out.clear();
  if (cu) {
    const Array<double> offsets = ex.load<double>(cu);
    const int64_t count = offsets.size() - 1;
    if (offsets[0] != 0 || offsets[count] != static_cast<double>(len)) {
      std::string value = "[";  // built in steps: GCC 12 misreports -Wrestrict on one chained concatenation
      value += std::to_string(static_cast<int64_t>(offsets[0]));
      value += ", ..., ";
      value += std::to_string(static_cast<int64_t>(offsets[count]));
      value += "]";
      return attr_error(n, "CU_SEQLENS", value, "must start at 0 and end at T = " + std::to_string(len));
    }
    for (int64_t s = 0; s < count; ++s) {
      if (offsets[s + 1] < offsets[s])
        return attr_error(n, "CU_SEQLENS",
                          std::to_string(static_cast<int64_t>(offsets[s + 1])) + " at " + std::to_string(s + 1),
                          "offsets must not decrease");
      const auto first = static_cast<int64_t>(offsets[s]);
      out.push_back({first, static_cast<int64_t>(offsets[s + 1]) - first, s});
    }
  } else {
    for (int64_t b = 0; b < batch; ++b) out.push_back({b * len, len, b});
  }
  if (!indices) return {};
  const Array<double> rows = ex.load<double>(indices);
  const int64_t pool = init->get_dim()[0];
  std::set<int64_t> seen;
  for (size_t s = 0; s < out.size(); ++s) {
    const auto row = static_cast<int64_t>(rows[static_cast<int64_t>(s)]);
    if (row < 0 || row >= pool || !seen.insert(row).second)
      return attr_error(n, "STATE_INDICES", std::to_string(row) + " at " + std::to_string(s),
                        "rows must be distinct and in [0, " + std::to_string(pool) + ")");
    out[s].state_row = row;
  }
  return {};
}

}  // namespace frost::detail
