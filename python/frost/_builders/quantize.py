"""Block-scaled quantization: block_scale_quantize and block_scale_dequantize.

Blocks are block_size consecutive elements along `axis` (default: the last); the scale tensor has the
input's dims with that axis divided by block_size. The scale's data type picks the format: FP8_E8M0
scales are MX (MXFP8: block 32, FP8 values; MXFP4: block 32, FP4_E2M1 values), FP8_E4M3 scales with
block 16 and FP4_E2M1 values are NVFP4 (with an optional FLOAT global scale). Unset output types:
values FP8_E4M3 for block 32 and FP4_E2M1 for block 16, scales E8M0 (E4M3 for block-16 FP4),
dequantized output FLOAT.
"""

import numbers

from .. import _frost
from .._errors import InvalidValueError
from ._common import int_list, reject_unsupported


def _block(block_size, axis, input, what):
    """(block size, axis) from an int, or from cuDNN Frontend's per-dim list (one entry other than 1, the list
    aligned with the input's last dims; a blocked last entry means the last axis)."""
    if isinstance(block_size, numbers.Integral) and not isinstance(block_size, bool):
        return int(block_size), axis
    sizes = int_list(block_size, f"{what}: block_size")
    blocked = [i for i, b in enumerate(sizes) if b != 1]
    if len(blocked) != 1:
        raise InvalidValueError(f"{what}: block_size {sizes} must have exactly one entry other than 1")
    if blocked[0] == len(sizes) - 1:
        list_axis = -1
    else:
        rank = len(input.get_dim())
        if len(sizes) > rank:
            raise InvalidValueError(
                f"{what}: block_size {sizes} blocks an axis other than the last: the input's dims must be known "
                f"and have at least {len(sizes)} axes (they are {list(input.get_dim())})"
            )
        list_axis = rank - len(sizes) + blocked[0]
    if axis is not None and axis != list_axis and not (list_axis == -1 and axis == len(input.get_dim()) - 1):
        raise InvalidValueError(f"{what}: axis {axis} disagrees with block_size {sizes}")
    return sizes[blocked[0]], (axis if axis is not None else list_axis)


class Builders:
    def block_scale_quantize(
        self, input, block_size, axis=None, transpose=False, global_scale=None, compute_data_type=None, name=""
    ):
        """Per block: amax = max |x|; scale = 2^(floor(log2(amax)) - emax) for E8M0 scales, or
        e4m3(amax / (6 * global_scale)) for NVFP4; y = saturate(round_to_nearest_even(x / (scale * global_scale))).
        Returns (Y, Scale). transpose (cuDNN's column-wise layout) is rejected by validation."""
        size, axis = _block(block_size, axis, input, "block_scale_quantize()")
        attrs = self._attributes(_frost.Block_scale_quantize_attributes(), name, compute_data_type)
        attrs.set_block_size(size).set_transpose(bool(transpose))
        if axis is not None:
            attrs.set_axis(int(axis))
        if global_scale is not None:
            attrs.set_global_scale(self._operand(global_scale, "block_scale_quantize(): global_scale"))
        return self._graph.block_scale_quantize(input, attrs)

    def block_scale_dequantize(
        self,
        input,
        descale,
        block_size,
        is_negative_scale=False,
        compute_data_type=None,
        name="",
        axis=None,
        global_scale=None,
    ):
        """y = x * scale * global_scale, the scale of each element's block. block_size is an int (with axis=)
        or cuDNN Frontend's per-dim list such as [1, 32]. Returns Y."""
        reject_unsupported("block_scale_dequantize()", is_negative_scale=is_negative_scale)
        size, axis = _block(block_size, axis, input, "block_scale_dequantize()")
        attrs = self._attributes(_frost.Block_scale_dequantize_attributes(), name, compute_data_type)
        attrs.set_block_size(size)
        if axis is not None:
            attrs.set_axis(int(axis))
        if global_scale is not None:
            attrs.set_global_scale(self._operand(global_scale, "block_scale_dequantize(): global_scale"))
        return self._graph.block_scale_dequantize(input, descale, attrs)
