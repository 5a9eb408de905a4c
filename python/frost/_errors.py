"""Typed exceptions for frost's error codes.

Every failure of the C++ library arrives as a ``FrostError`` subclass that carries the
``frost.error_code`` in ``.code``. ``GraphNotSupportedError`` (alias ``cudnnGraphNotSupportedError``)
means that no engine accepts the graph: a decline, not a bug, so callers can fall back.
"""

from . import _frost

error_code = _frost.error_code


class FrostError(RuntimeError):
    """Base of frost's exceptions; ``code`` is the frost.error_code of the failure."""

    code = error_code.INVALID_VALUE

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class GraphNotSupportedError(FrostError):
    """No engine supports this graph on this device (the message lists each engine's reason)."""

    code = error_code.GRAPH_NOT_SUPPORTED


cudnnGraphNotSupportedError = GraphNotSupportedError


class AttributeNotSetError(FrostError, ValueError):
    code = error_code.ATTRIBUTE_NOT_SET


class ShapeDeductionError(FrostError, ValueError):
    code = error_code.SHAPE_DEDUCTION_FAILED


class InvalidTensorNameError(FrostError, ValueError):
    code = error_code.INVALID_TENSOR_NAME


class InvalidVariantPackError(FrostError, ValueError):
    """A variant-pack buffer is missing or does not match its tensor declaration."""

    code = error_code.INVALID_VARIANT_PACK


class InvalidValueError(FrostError, ValueError):
    code = error_code.INVALID_VALUE


class PlanCreationError(FrostError):
    code = error_code.GRAPH_EXECUTION_PLAN_CREATION_FAILED


class ExecutionError(FrostError):
    code = error_code.GRAPH_EXECUTION_FAILED


class HeuristicQueryError(FrostError):
    code = error_code.HEURISTIC_QUERY_FAILED


class UnsupportedGraphFormatError(FrostError, ValueError):
    """Serialized text or bytes frost cannot read (malformed, wrong version, dangling references)."""

    code = error_code.UNSUPPORTED_GRAPH_FORMAT


class CudaError(FrostError):
    code = error_code.CUDA_API_FAILED


class BackendError(FrostError):
    code = error_code.CUDNN_BACKEND_API_FAILED


class InvalidCudaDeviceError(FrostError):
    code = error_code.INVALID_CUDA_DEVICE


class HandleError(FrostError):
    code = error_code.HANDLE_ERROR


class CompilationError(FrostError):
    code = error_code.NVRTC_COMPILATION_FAILED


_BY_CODE = {
    cls.code: cls
    for cls in (
        GraphNotSupportedError,
        AttributeNotSetError,
        ShapeDeductionError,
        InvalidTensorNameError,
        InvalidVariantPackError,
        InvalidValueError,
        PlanCreationError,
        ExecutionError,
        HeuristicQueryError,
        UnsupportedGraphFormatError,
        CudaError,
        BackendError,
        InvalidCudaDeviceError,
        HandleError,
        CompilationError,
    )
}


def error_class(code):
    """The exception class raised for an error code."""
    return _BY_CODE.get(code, FrostError)


def make_error(code, message):
    """An exception instance for a failed call (used by the extension's error translator)."""
    return error_class(code)(message, code)
