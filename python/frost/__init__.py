"""frost: an open graph library in the shape of cuDNN Frontend.

import frost as cudnn
graph = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, compute_data_type=cudnn.data_type.FLOAT)
X = graph.tensor_like(x)
Y = graph.relu(input=graph.add(a=X, b=1.0))
Y.set_output(True)
graph.build([cudnn.heur_mode.A])
graph.execute({X: x, Y: y}, None)
"""

from . import _frost
from ._errors import (
    AttributeNotSetError,
    BackendError,
    CompilationError,
    CudaError,
    ExecutionError,
    FrostError,
    GraphNotSupportedError,
    HandleError,
    HeuristicQueryError,
    InvalidCudaDeviceError,
    InvalidTensorNameError,
    InvalidValueError,
    InvalidVariantPackError,
    PlanCreationError,
    ShapeDeductionError,
    UnsupportedGraphFormatError,
    cudnnGraphNotSupportedError,
    error_code,
)
from ._frost import (
    Handle,
    behavior_note,
    build_plan_policy,
    create_handle,
    data_type,
    diagonal_alignment,
    get_stream,
    heur_mode,
    knob_type,
    norm_forward_phase,
    numerical_note,
    pointwise_mode,
    reduction_mode,
    set_stream,
    tensor,
    tensor_reordering,
)
from ._builders import ENUMS as _FAMILY_ENUMS
from ._pygraph import pygraph

# The enums of the op families (convolution_mode, resample_mode, ...), as frost.<name>.
globals().update({_name: getattr(_frost, _name) for _name in _FAMILY_ENUMS})

__version__ = _frost.version_string()


def backend_version():
    """The cuDNN graph-API feature level (cuDNN's numbering, e.g. 91900) whose surface frost's graphs match.
    frost does not need cuDNN; this number says which cuDNN-era graph features the API mirrors."""
    return _frost.backend_version()


def backend_version_string():
    return _frost.backend_version_string()


def destroy_handle(handle):
    """Kept for cuDNN Frontend compatibility: a frost handle owns nothing that needs freeing."""
    del handle


__all__ = [
    "AttributeNotSetError",
    "BackendError",
    "CompilationError",
    "CudaError",
    "ExecutionError",
    "FrostError",
    "GraphNotSupportedError",
    "Handle",
    "HandleError",
    "HeuristicQueryError",
    "InvalidCudaDeviceError",
    "InvalidTensorNameError",
    "InvalidValueError",
    "InvalidVariantPackError",
    "PlanCreationError",
    "ShapeDeductionError",
    "UnsupportedGraphFormatError",
    "backend_version",
    "backend_version_string",
    "behavior_note",
    "build_plan_policy",
    "create_handle",
    "cudnnGraphNotSupportedError",
    "data_type",
    "destroy_handle",
    "diagonal_alignment",
    "error_code",
    "get_stream",
    "heur_mode",
    "knob_type",
    "norm_forward_phase",
    "numerical_note",
    "pointwise_mode",
    "pygraph",
    "reduction_mode",
    "set_stream",
    "tensor",
    "tensor_reordering",
    *_FAMILY_ENUMS,
]
