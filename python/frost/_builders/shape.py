"""Matmul and the data-movement builders: reduction, reshape, transpose, slice, concatenate."""

from .. import _frost
from .._errors import InvalidValueError
from ._common import int_list, set_tensors


def _ranges(slices, dims):
    """Python slice objects or (start, end) pairs -> half-open (start, end) pairs, one per dim."""
    out = []
    for axis, s in enumerate(slices):
        if isinstance(s, slice):
            if s.step not in (None, 1):
                raise InvalidValueError(f"slice(): axis {axis} has step {s.step}; only step 1 is supported")
            if axis >= len(dims) and (s.start is None or s.stop is None or s.start < 0 or s.stop < 0):
                raise InvalidValueError(f"slice(): axis {axis}: open or negative bounds need the input's dims set")
            start, stop, _ = s.indices(dims[axis]) if axis < len(dims) else (s.start, s.stop, 1)
            out.append((start, stop))
        else:
            start, stop = s
            out.append((int(start), int(stop)))
    return out


class Builders:
    def matmul(
        self, A, B, compute_data_type=None, padding=None, m_override=None, n_override=None, k_override=None, name=""
    ):
        """C[..., m, n] = sum_k A[..., m, k] B[..., k, n]; batch dims broadcast over extent 1.
        Accumulates in FP32. Returns C."""
        attrs = self._attributes(_frost.Matmul_attributes(), name, compute_data_type)
        if padding is not None:
            attrs.set_padding(float(padding))
        set_tensors(
            attrs, (("set_m_override", m_override), ("set_n_override", n_override), ("set_k_override", k_override))
        )
        return self._graph.matmul(A, B, attrs)

    def reduction(self, input, mode, compute_data_type=None, is_deterministic=False, name=""):
        """Y has input's rank; every axis where Y's extent is 1 and input's is not is reduced with
        mode (frost.reduction_mode). Set Y's dims (Y.set_dim) to choose the reduced axes."""
        attrs = self._attributes(_frost.Reduction_attributes(), name, compute_data_type)
        attrs.set_mode(mode).set_is_deterministic(bool(is_deterministic))
        return self._graph.reduction(input, attrs)

    def reshape(self, input, dim=None, stride=None, compute_data_type=None, name=""):
        """Same elements in the same row-major order under new dims (given here or set on the output)."""
        attrs = self._attributes(_frost.Reshape_attributes(), name, compute_data_type)
        if dim is not None:
            attrs.set_dim(int_list(dim, "reshape(): dim"))
        if stride is not None:
            attrs.set_stride(int_list(stride, "reshape(): stride"))
        return self._graph.reshape(input, attrs)

    def transpose(self, input, permutation, compute_data_type=None, name=""):
        """Y.dim[i] = input.dim[permutation[i]], Y[j] = input[i] with i[permutation[k]] = j[k]."""
        attrs = self._attributes(_frost.Transpose_attributes(), name, compute_data_type)
        attrs.set_permutation(int_list(permutation, "transpose(): permutation"))
        return self._graph.transpose(input, attrs)

    def slice(self, input, slices, compute_data_type=None, name=""):
        """Y = input[start_0:end_0, start_1:end_1, ...]; slices are Python slice objects (step 1)
        or (start, end) pairs, one per dim."""
        attrs = self._attributes(_frost.Slice_attributes(), name, compute_data_type)
        attrs.set_slices(_ranges(slices, list(input.get_dim())))
        return self._graph.slice(input, attrs)

    def concatenate(self, inputs, axis, in_place_index=None, compute_data_type=None, name=""):
        """Y = inputs joined along axis."""
        attrs = self._attributes(_frost.Concatenate_attributes(), name, compute_data_type)
        attrs.set_axis(int(axis))
        if in_place_index is not None:
            attrs.set_in_place_index(int(in_place_index))
        return self._graph.concatenate(list(inputs), attrs)
