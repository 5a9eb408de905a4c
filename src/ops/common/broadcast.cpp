#include "ops/common/broadcast.h"

#include <algorithm>

namespace frost::detail {

std::optional<std::vector<int64_t>> broadcast_dims(const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    const size_t pad = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[pad + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o != 1) return std::nullopt;
      o = s[i];
    }
  }
  return out;
}

std::vector<int64_t> broadcast_map(const std::vector<int64_t>& out_dims, const std::vector<int64_t>& in_dims) {
  const size_t r = out_dims.size();
  const size_t pad = r - in_dims.size();
  // Stride of each output axis within the input (0 where the input broadcasts).
  std::vector<int64_t> in_stride(r, 0);
  int64_t acc = 1;
  for (size_t k = in_dims.size(); k-- > 0;) {
    in_stride[pad + k] = in_dims[k] == 1 ? 0 : acc;
    acc *= in_dims[k];
  }
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  std::vector<int64_t> map(static_cast<size_t>(total));
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t n = 0; n < total; ++n) {
    map[static_cast<size_t>(n)] = off;
    for (size_t k = r; k-- > 0;) {
      if (++idx[k] < out_dims[k]) {
        off += in_stride[k];
        break;
      }
      off -= (out_dims[k] - 1) * in_stride[k];
      idx[k] = 0;
    }
  }
  return map;
}

}  // namespace frost::detail
