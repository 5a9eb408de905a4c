"""Convolution builders: conv_fprop, conv_dgrad, conv_wgrad (1-D to 3-D, grouped, any layout by strides).

Tensors are declared [N, C, spatial...] in dims; NHWC is a stride choice. The weight is
[K, C / groups, filter spatial...]. Per spatial axis, out = (in + pre + post - dilation * (f - 1) - 1) // stride + 1
and output position o reads input position o * stride - pre_padding + tap * dilation (zero outside).
Unset padding, stride and dilation mean 0, 1 and 1 on every spatial axis. `padding` sets both sides;
pre_padding / post_padding set them apart.
"""

from .. import _frost
from ._common import int_list, set_padding

ENUMS = ("convolution_mode",)


class Builders:
    def _conv_attributes(
        self, attrs, what, padding, stride, dilation, convolution_mode, compute_data_type, name, pre, post
    ):
        attrs = self._attributes(attrs, name, compute_data_type)
        set_padding(attrs, what, padding, pre, post)
        if stride is not None:
            attrs.set_stride(int_list(stride, f"{what}: stride"))
        if dilation is not None:
            attrs.set_dilation(int_list(dilation, f"{what}: dilation"))
        if convolution_mode is not None:
            attrs.set_convolution_mode(convolution_mode)
        return attrs

    def conv_fprop(
        self,
        image,
        weight,
        padding=None,
        stride=None,
        dilation=None,
        convolution_mode=None,
        compute_data_type=None,
        name="",
        pre_padding=None,
        post_padding=None,
    ):
        """Y[n, k, o...] = sum over c in k's group and taps t of image[n, c, o * stride - pre + t * dilation]
        * weight[k, c', t] (CROSS_CORRELATION, the default; CONVOLUTION flips the filter). Returns Y, whose
        dims are inferred."""
        attrs = self._conv_attributes(
            _frost.Conv_fprop_attributes(),
            "conv_fprop()",
            padding,
            stride,
            dilation,
            convolution_mode,
            compute_data_type,
            name,
            pre_padding,
            post_padding,
        )
        return self._graph.conv_fprop(image, weight, attrs)

    def conv_dgrad(
        self,
        loss,
        filter,
        padding=None,
        stride=None,
        dilation=None,
        convolution_mode=None,
        compute_data_type=None,
        name="",
        pre_padding=None,
        post_padding=None,
    ):
        """dX: the adjoint of conv_fprop in the image, applied to loss (dY) with filter (W). Returns dX; set its
        dims (dX.set_dim) to the image's before validate, since a stride above 1 leaves them ambiguous."""
        attrs = self._conv_attributes(
            _frost.Conv_dgrad_attributes(),
            "conv_dgrad()",
            padding,
            stride,
            dilation,
            convolution_mode,
            compute_data_type,
            name,
            pre_padding,
            post_padding,
        )
        return self._graph.conv_dgrad(loss, filter, attrs)

    def conv_wgrad(
        self,
        image,
        loss,
        padding=None,
        stride=None,
        dilation=None,
        convolution_mode=None,
        compute_data_type=None,
        name="",
        pre_padding=None,
        post_padding=None,
    ):
        """dW[k, c', t] = sum over n and o of loss[n, k, o...] * image[n, c, o * stride - pre + t * dilation].
        Returns dW; set its dims (dW.set_dim) to the weight's before validate."""
        attrs = self._conv_attributes(
            _frost.Conv_wgrad_attributes(),
            "conv_wgrad()",
            padding,
            stride,
            dilation,
            convolution_mode,
            compute_data_type,
            name,
            pre_padding,
            post_padding,
        )
        return self._graph.conv_wgrad(loss, image, attrs)
