"""Data-type conversions between frost.data_type, DLPack type codes, numpy and torch dtypes."""

from . import _frost

data_type = _frost.data_type

# DLPack type codes (dlpack.h, DLDataTypeCode), including DLPack 1.1's 8- and 4-bit floats.
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_BOOL = 0, 1, 2, 4, 6
DL_FLOAT8_E4M3FN, DL_FLOAT8_E5M2, DL_FLOAT8_E8M0FNU, DL_FLOAT4_E2M1FN = 10, 12, 14, 17

_FROM_DLPACK = {
    (DL_FLOAT, 32): data_type.FLOAT,
    (DL_FLOAT, 64): data_type.DOUBLE,
    (DL_FLOAT, 16): data_type.HALF,
    (DL_BFLOAT, 16): data_type.BFLOAT16,
    (DL_INT, 8): data_type.INT8,
    (DL_INT, 32): data_type.INT32,
    (DL_INT, 64): data_type.INT64,
    (DL_UINT, 8): data_type.UINT8,
    (DL_BOOL, 8): data_type.BOOLEAN,
    (DL_FLOAT8_E4M3FN, 8): data_type.FP8_E4M3,
    (DL_FLOAT8_E5M2, 8): data_type.FP8_E5M2,
    (DL_FLOAT8_E8M0FNU, 8): data_type.FP8_E8M0,
    (DL_FLOAT4_E2M1FN, 4): data_type.FP4_E2M1,
}

# Types that many array libraries cannot hold natively: a same-width integer array may carry them.
_STORED_AS_INTEGERS = {
    data_type.BFLOAT16,
    data_type.FP8_E4M3,
    data_type.FP8_E5M2,
    data_type.FP8_E8M0,
    data_type.FAST_FLOAT_FOR_FP8,
    data_type.FP4_E2M1,
    data_type.INT4,
    data_type.BOOLEAN,
}

_BY_NAME = {
    "float32": data_type.FLOAT,
    "float": data_type.FLOAT,
    "float64": data_type.DOUBLE,
    "double": data_type.DOUBLE,
    "float16": data_type.HALF,
    "half": data_type.HALF,
    "bfloat16": data_type.BFLOAT16,
    "int8": data_type.INT8,
    "int32": data_type.INT32,
    "int64": data_type.INT64,
    "uint8": data_type.UINT8,
    "bool": data_type.BOOLEAN,
    "float8_e4m3fn": data_type.FP8_E4M3,
    "float8_e5m2": data_type.FP8_E5M2,
    "float8_e8m0fnu": data_type.FP8_E8M0,
    "float4_e2m1fn_x2": data_type.FP4_E2M1,
}


def from_dlpack(code, bits, lanes=1):
    """The frost data type of a DLPack (code, bits), or None when frost has none."""
    if lanes != 1:
        return None
    return _FROM_DLPACK.get((code, bits))


def dlpack_name(code, bits, lanes=1):
    """A readable name of a DLPack type, e.g. 'float32', 'bfloat16', 'uint8'."""
    names = {DL_INT: "int", DL_UINT: "uint", DL_FLOAT: "float", DL_BFLOAT: "bfloat", DL_BOOL: "bool"}
    base = names.get(code, f"dlpack-code{code}-") + str(bits)
    return base if lanes == 1 else f"{base}x{lanes}"


def to_data_type(value):
    """Accepts a frost.data_type, a numpy or torch dtype (or type), or a name such as 'float16'."""
    if value is None:
        return data_type.NOT_SET
    if isinstance(value, data_type):
        return value
    if isinstance(value, str):
        if value in data_type.__members__:
            return data_type[value]
        key = value.lower()
    elif str(value).startswith("torch."):
        key = str(value)[len("torch.") :]
    else:
        try:
            import numpy

            key = numpy.dtype(value).name
        except (ImportError, TypeError):
            key = getattr(value, "__name__", str(value))
    if key in _BY_NAME:
        return _BY_NAME[key]
    raise TypeError(f"cannot map {value!r} to a frost.data_type")


def buffer_matches(declared, code, bits, lanes):
    """Whether an array of DLPack type (code, bits) may hold tensors of the declared type: the same
    type, or a same-width integer array standing in for a type without a common array dtype
    (bf16 as uint16/int16, fp8 as uint8, fp4 packed two per uint8)."""
    if lanes != 1:
        return False
    if from_dlpack(code, bits) == declared:
        return True
    if declared not in _STORED_AS_INTEGERS or code not in (DL_INT, DL_UINT, DL_BOOL):
        return False
    width = _frost.element_bits(declared)
    return bits == width or (width < 8 and bits == 8)


_torch_maps = None


def torch_maps():
    """({frost.data_type: torch.dtype}, {torch.dtype: frost.data_type}) for the types both have; built on first
    use, and only once torch is imported (frost never imports torch itself)."""
    global _torch_maps
    if _torch_maps is None:
        import sys

        torch = sys.modules.get("torch")
        if torch is None:
            return {}, {}
        to_torch, from_torch = {}, {}
        for name, frost_type in _BY_NAME.items():
            torch_type = getattr(torch, name, None)
            if isinstance(torch_type, torch.dtype) and frost_type not in to_torch:
                to_torch[frost_type] = torch_type
                from_torch[torch_type] = frost_type
        _torch_maps = (to_torch, from_torch)
    return _torch_maps
