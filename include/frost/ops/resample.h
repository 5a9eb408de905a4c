// Resample: average and max pooling over the spatial axes of X [N, C, H, W] or [N, C, D, H, W]
// (layout by strides, as for every frost tensor). JSON tag RESAMPLE; ports X, Y, INDEX.
//
// Y[n, c, o...] reduces the window of X at spatial origin o * stride - pre_padding. Output extents:
// floor((in + pre_padding + post_padding - window) / stride) + 1 per spatial axis.
// Window positions outside X take the padding value of padding_mode: ZERO_PAD 0, NEG_INF_PAD -inf,
// EDGE_VAL_PAD the nearest element of X. AVGPOOL_INCLUDE_PADDING divides the window sum by the
// window volume; AVGPOOL_EXCLUDE_PADDING sums and counts only positions inside X (padding ignored).
// MAXPOOL takes the largest value (NaN wins); in training (set_is_inference(false)) it also writes
// INDEX: the row-major position inside the window of the first maximum (INT32 unless set).
// An unset padding mode means ZERO_PAD for average pooling and NEG_INF_PAD for max pooling.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "frost/ops/attributes_base.h"

namespace frost {

enum class ResampleMode_t { NOT_SET, AVGPOOL_EXCLUDE_PADDING, AVGPOOL_INCLUDE_PADDING, BILINEAR, NEAREST, MAXPOOL };
enum class PaddingMode_t { NOT_SET, EDGE_VAL_PAD, NEG_INF_PAD, ZERO_PAD };

std::string_view to_string(ResampleMode_t);
std::string_view to_string(PaddingMode_t);
template <>
std::optional<ResampleMode_t> from_string<ResampleMode_t>(std::string_view);
template <>
std::optional<PaddingMode_t> from_string<PaddingMode_t>(std::string_view);

}  // namespace frost

namespace frost::graph {

enum class ResampleInput { X };
enum class ResampleOutput { Y, INDEX };

// window, stride, pre_padding and post_padding hold one value per spatial axis (2 or 3). Stride
// defaults to the window, paddings to 0. BILINEAR and NEAREST are named for cuDNN parity but not
// served yet (validation says so).
class Resample_attributes : public Attributes<Resample_attributes, ResampleInput, ResampleOutput> {
 public:
  ResampleMode_t resampling_mode = ResampleMode_t::NOT_SET;
  PaddingMode_t padding_mode = PaddingMode_t::NOT_SET;
  std::vector<int64_t> window, stride, pre_padding, post_padding;
  bool is_inference = true;

  Resample_attributes& set_resampling_mode(ResampleMode_t v) { resampling_mode = v; return *this; }
  Resample_attributes& set_padding_mode(PaddingMode_t v) { padding_mode = v; return *this; }
  Resample_attributes& set_window(std::vector<int64_t> v) { window = std::move(v); return *this; }
  Resample_attributes& set_stride(std::vector<int64_t> v) { stride = std::move(v); return *this; }
  Resample_attributes& set_pre_padding(std::vector<int64_t> v) { pre_padding = std::move(v); return *this; }
  Resample_attributes& set_post_padding(std::vector<int64_t> v) { post_padding = std::move(v); return *this; }
  Resample_attributes& set_is_inference(bool v) { is_inference = v; return *this; }
};

}  // namespace frost::graph
