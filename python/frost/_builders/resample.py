"""resample and resample_backward: average and max pooling over the spatial axes of [N, C, H, W] or
[N, C, D, H, W] (any layout), and its gradient."""

from .. import _frost
from ._common import int_list, set_padding, set_tensors

ENUMS = ("resample_mode", "padding_mode")


def set_pooling(attrs, what, resampling_mode, window, stride, padding, pre_padding, post_padding, padding_mode):
    """The pooling attributes the forward and the backward share."""
    attrs.set_resampling_mode(resampling_mode)
    attrs.set_window(int_list(window, f"{what}: window"))
    if stride is not None:
        attrs.set_stride(int_list(stride, f"{what}: stride"))
    set_padding(attrs, what, padding, pre_padding, post_padding)
    if padding_mode is not None:
        attrs.set_padding_mode(padding_mode)


class Builders:
    def resample(
        self,
        input,
        resampling_mode,
        window,
        stride=None,
        padding=None,
        pre_padding=None,
        post_padding=None,
        padding_mode=None,
        is_inference=True,
        compute_data_type=None,
        name="",
    ):
        """Y[n, c, o...] reduces the window of input whose origin is o * stride - pre_padding; per spatial axis
        out = (in + pre + post - window) // stride + 1. resampling_mode (frost.resample_mode): MAXPOOL,
        AVGPOOL_INCLUDE_PADDING (divides by the window volume) or AVGPOOL_EXCLUDE_PADDING (counts only
        positions inside the input). padding_mode (frost.padding_mode) fills positions outside the input:
        ZERO_PAD (the average-pooling default), NEG_INF_PAD (the max-pooling default) or EDGE_VAL_PAD.
        stride defaults to the window. Returns (Y, Index); Index (the row-major position inside the window of
        the first maximum, INT32) exists only for MAXPOOL with is_inference=False, else it is None."""
        attrs = self._attributes(_frost.Resample_attributes(), name, compute_data_type)
        attrs.set_is_inference(bool(is_inference))
        set_pooling(
            attrs, "resample()", resampling_mode, window, stride, padding, pre_padding, post_padding, padding_mode
        )
        return self._graph.resample(input, attrs)

    def resample_backward(
        self,
        dy,
        resampling_mode,
        window,
        x=None,
        index=None,
        stride=None,
        padding=None,
        pre_padding=None,
        post_padding=None,
        padding_mode=None,
        compute_data_type=None,
        name="",
    ):
        """Gradient of resample: dX (shaped as the forward's input) from dY, with the forward's pooling
        attributes. Average pooling spreads each dY over its window (divided as the forward divides); max
        pooling sends it to the window's first maximum, read from the forward's index (INT32) when given,
        else found again in x. dX's dims are x's when x is given; otherwise the caller sets them.
        cuDNN Frontend has no Python builder for this; the keywords follow the forward's."""
        attrs = self._attributes(_frost.Resample_backward_attributes(), name, compute_data_type)
        set_pooling(
            attrs,
            "resample_backward()",
            resampling_mode,
            window,
            stride,
            padding,
            pre_padding,
            post_padding,
            padding_mode,
        )
        set_tensors(attrs, (("set_x", x), ("set_index", index)))
        return self._graph.resample_backward(dy, attrs)
