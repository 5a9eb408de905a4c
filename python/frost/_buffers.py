"""Checks of caller buffers against tensor declarations, done before execute touches any memory.

The declaration is the contract. A buffer (anything with ``__dlpack__`` or the buffer protocol)
passes when its element type fits the declared type (same type, or a same-width integer array
for types such as bf16 and fp8) and either
  - its shape equals the declared dims and its strides equal the declared strides (axes of extent 1
    excepted), or
  - it is one dense run of memory holding exactly the elements the declared layout spans (a
    permuted or flattened view of the same storage); a 1-D run may be longer.
A raw int is taken as a device pointer and trusted.
"""

import math

from . import _dtypes, _frost
from ._errors import InvalidVariantPackError

# DLPack device types (DLDeviceType).
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13


def describe(t):
    return f"tensor '{t.get_name()}' (uid {t.get_uid()})"


def _is_dense(shape, strides):
    expected = 1
    for extent, stride in sorted(((e, s) for e, s in zip(shape, strides) if e != 1), key=lambda es: es[1]):
        if stride != expected:
            return False
        expected *= extent
    return True


def _span(dims, strides):
    """Elements from the first to the last one the layout addresses, inclusive."""
    return 1 + sum((d - 1) * s for d, s in zip(dims, strides))


def _device_ok(handle, device_type, device_id):
    if handle.is_cuda:
        return device_type == DL_CUDA_MANAGED or (device_type == DL_CUDA and device_id == handle.device_ordinal)
    return device_type in (DL_CPU, DL_CUDA_HOST, DL_CUDA_MANAGED)


def _device_name(device_type, device_id):
    names = {
        DL_CPU: "cpu",
        DL_CUDA: f"cuda:{device_id}",
        DL_CUDA_HOST: "cuda pinned host",
        DL_CUDA_MANAGED: "cuda managed",
    }
    return names.get(device_type, f"dlpack device {device_type}:{device_id}")


def info(obj):
    """(ptr, shape, strides, code, bits, lanes, device_type, device_id) of an array, or None."""
    if obj is None or isinstance(obj, (int, float, str, bytes)):
        return None
    return _frost.buffer_info(obj)


def pointer(t, obj, handle):
    """The data pointer of buffer `obj` for declaration `t`, after checking it fits."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        if obj == 0:
            raise InvalidVariantPackError(f"{describe(t)}: the pointer is null")
        return obj
    described = info(obj)
    if described is None:
        raise InvalidVariantPackError(
            f"{describe(t)}: {type(obj).__name__} is not a buffer (pass an array with __dlpack__ or the buffer "
            "protocol, or an int pointer)"
        )
    ptr, shape, strides, code, bits, lanes, device_type, device_id = described
    dims, dstrides, dtype = list(t.get_dim()), list(t.get_stride()), t.get_data_type()
    if not _device_ok(handle, device_type, device_id):
        raise InvalidVariantPackError(
            f"{describe(t)}: the buffer is on {_device_name(device_type, device_id)}, the handle on {handle.device}"
        )
    if not _dtypes.buffer_matches(dtype, code, bits, lanes):
        raise InvalidVariantPackError(
            f"{describe(t)}: buffer dtype {_dtypes.dlpack_name(code, bits, lanes)} does not fit declared data type "
            f"{dtype.name} ({_frost.element_bits(dtype)} bits)"
        )
    if ptr == 0:
        raise InvalidVariantPackError(f"{describe(t)}: the buffer's data pointer is null")
    declared_bits = _frost.element_bits(dtype)
    if tuple(shape) == tuple(dims) and bits == declared_bits:
        for axis, (extent, have, want) in enumerate(zip(shape, strides, dstrides)):
            if extent != 1 and have != want:
                raise InvalidVariantPackError(
                    f"{describe(t)}: buffer strides {list(strides)} differ from declared strides {dstrides} "
                    f"(axis {axis}); pass a buffer with the declared layout"
                )
        return ptr
    span_bits = _span(dims, dstrides) * declared_bits
    have_bits = math.prod(shape) * bits
    one_dimensional = len(shape) <= 1
    if _is_dense(shape, strides) and (have_bits >= span_bits if one_dimensional else have_bits == span_bits):
        return ptr
    raise InvalidVariantPackError(
        f"{describe(t)}: buffer of shape {list(shape)} and strides {list(strides)} does not match declared dims "
        f"{dims} and strides {dstrides}; a buffer of another shape must be one dense run of exactly the "
        f"{math.ceil(span_bits / bits)} elements the declaration spans (a 1-D run may be longer)"
    )


def workspace_pointer(workspace, size, handle):
    """The workspace pointer (0 when None and no workspace is needed)."""
    if workspace is None:
        if size > 0:
            raise InvalidVariantPackError(f"the plan needs {size} bytes of workspace and workspace is None")
        return 0
    if isinstance(workspace, int) and not isinstance(workspace, bool):
        if workspace == 0 and size > 0:
            raise InvalidVariantPackError(f"the plan needs {size} bytes of workspace and the pointer is null")
        return workspace
    described = info(workspace)
    if described is None:
        raise InvalidVariantPackError(f"workspace: {type(workspace).__name__} is not a buffer")
    ptr, shape, strides, _code, bits, _lanes, device_type, device_id = described
    if not _device_ok(handle, device_type, device_id):
        raise InvalidVariantPackError(
            f"workspace: the buffer is on {_device_name(device_type, device_id)}, the handle on {handle.device}"
        )
    nbytes = math.prod(shape) * bits // 8
    if size > 0 and (not _is_dense(shape, strides) or nbytes < size):
        raise InvalidVariantPackError(f"workspace: needs one dense run of {size} bytes, the buffer holds {nbytes}")
    return ptr


def scalar_value(t, obj):
    """The number a host buffer (or Python number) holds, for a pass-by-value tensor."""
    if isinstance(obj, (int, float)):
        return float(obj)
    try:
        return float(obj.reshape(-1)[0]) if hasattr(obj, "reshape") else float(obj)
    except (TypeError, ValueError, IndexError) as e:
        raise InvalidVariantPackError(f"{describe(t)}: pass-by-value tensor needs a host scalar, got {obj!r}") from e


class Binder:
    """What pygraph.execute checks on every call, worked out once per built plan: for each tensor the plan
    binds (by frost.tensor and by uid), its uid, dims, strides and torch dtype.

    pointers() serves the common case without DLPack: every buffer a torch tensor with exactly the declared
    dims, strides and type, on the handle's device. Anything else returns None and the caller takes the
    fully checked path (pointer() above), which also words the errors. Nothing is cached per buffer: a
    tensor's storage can change between calls (resize_, set_), so each call reads data_ptr() afresh."""

    __slots__ = ("slots", "count", "workspace_size", "tensor_type")

    def __init__(self, graph, workspace_size):
        import sys

        torch = sys.modules.get("torch")
        self.tensor_type = torch.Tensor if torch is not None else None
        to_torch, _ = _dtypes.torch_maps()
        self.slots, self.count, self.workspace_size = {}, 0, workspace_size
        for t in graph.bound_tensors():
            if not t.has_uid() or t.get_is_pass_by_value():
                continue
            torch_type = to_torch.get(t.get_data_type())
            if torch_type is None:
                continue  # a pack that binds it falls back to the checked path
            slot = (t.get_uid(), tuple(t.get_dim()), tuple(t.get_stride()), torch_type)
            self.slots[t] = slot
            self.slots[slot[0]] = slot
            self.count += 1

    def pointers(self, pairs, device_index, workspace):
        """([uids], [pointers], workspace pointer) for (key, buffer) pairs, or None for the checked path."""
        tensor_type = self.tensor_type
        if tensor_type is None:
            return None
        get = self.slots.get
        uids, ptrs = [], []
        for key, buffer in pairs:
            slot = get(key)
            if slot is None or not isinstance(buffer, tensor_type):
                return None
            uid, dims, strides, torch_type = slot
            if (
                buffer.dtype != torch_type
                or buffer.get_device() != device_index
                or buffer.shape != dims
                or buffer.stride() != strides
            ):
                return None
            uids.append(uid)
            ptrs.append(buffer.data_ptr())
        if len(uids) != self.count or len(set(uids)) != self.count:
            return None
        if workspace is None:
            if self.workspace_size > 0:
                return None
            return uids, ptrs, 0
        if (
            not isinstance(workspace, tensor_type)
            or workspace.get_device() != device_index
            or not workspace.is_contiguous()
            or workspace.numel() * workspace.element_size() < self.workspace_size
        ):
            return None
        return uids, ptrs, workspace.data_ptr()
