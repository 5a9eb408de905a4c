"""resample: average and max pooling over the spatial axes of [N, C, H, W] or [N, C, D, H, W] (any layout)."""

from .. import _frost
from ._common import int_list, set_padding

ENUMS = ("resample_mode", "padding_mode")


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
        attrs.set_resampling_mode(resampling_mode).set_is_inference(bool(is_inference))
        attrs.set_window(int_list(window, "resample(): window"))
        if stride is not None:
            attrs.set_stride(int_list(stride, "resample(): stride"))
        set_padding(attrs, "resample()", padding, pre_padding, post_padding)
        if padding_mode is not None:
            attrs.set_padding_mode(padding_mode)
        return self._graph.resample(input, attrs)
