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
//
// resample_backward: the gradient dX of the same pooling for a given dY (JSON tag RESAMPLE_BACKWARD;
// ports DY, X, INDEX, DX). cuDNN's backend has a resample backward operation; cuDNN Frontend's graph
// API offers no builder for it, so the name is frost's. Each window position w of output o passes
// dY[o] times its weight in Y[o] to the element of X it read (the nearest element under
// EDGE_VAL_PAD; ZERO_PAD and NEG_INF_PAD positions hold constants and pass nothing):
//   AVGPOOL_INCLUDE_PADDING: weight 1 / window volume at every position;
//   AVGPOOL_EXCLUDE_PADDING: weight 1 / (positions inside X) at the positions inside X;
//   MAXPOOL: weight 1 at the forward's INDEX (when bound), else at the first maximum of X's window
//   found as the forward finds it (X bound).
// dX takes X's dims (or its own declared dims when X is not bound) and X's stride order.
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

enum class ResampleBackwardInput { DY, X, INDEX };
enum class ResampleBackwardOutput { DX };

// The forward's pooling parameters (same meaning and defaults) plus the optional X and INDEX.
class Resample_backward_attributes
    : public Attributes<Resample_backward_attributes, ResampleBackwardInput, ResampleBackwardOutput> {
 public:
  ResampleMode_t resampling_mode = ResampleMode_t::NOT_SET;
  PaddingMode_t padding_mode = PaddingMode_t::NOT_SET;
  std::vector<int64_t> window, stride, pre_padding, post_padding;

  Resample_backward_attributes& set_resampling_mode(ResampleMode_t v) { resampling_mode = v; return *this; }
  Resample_backward_attributes& set_padding_mode(PaddingMode_t v) { padding_mode = v; return *this; }
  Resample_backward_attributes& set_window(std::vector<int64_t> v) { window = std::move(v); return *this; }
  Resample_backward_attributes& set_stride(std::vector<int64_t> v) { stride = std::move(v); return *this; }
  Resample_backward_attributes& set_pre_padding(std::vector<int64_t> v) { pre_padding = std::move(v); return *this; }
  Resample_backward_attributes& set_post_padding(std::vector<int64_t> v) { post_padding = std::move(v); return *this; }
  // The forward's input: gives dX its dims and layout, and max pooling its maxima when INDEX is absent.
  Resample_backward_attributes& set_x(TensorPtr t) { inputs[ResampleBackwardInput::X] = std::move(t); return *this; }
  // The forward's INDEX output (MAXPOOL only).
  Resample_backward_attributes& set_index(TensorPtr t) {
    inputs[ResampleBackwardInput::INDEX] = std::move(t);
    return *this;
  }
};

}  // namespace frost::graph
