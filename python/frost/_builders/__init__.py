"""The op builders of frost.pygraph, one module per op family (as include/frost/ops/*.h and
python/src/ops/*.cpp are laid out). Each module defines a ``Builders`` mixin whose methods take cuDNN
Frontend's Python keywords, and may list in ``ENUMS`` the frost enums its keywords use (exported as
frost.<name>). Adding a family is one module and one entry in FAMILIES.

Tensors are frost.tensor declarations; where a scalar is expected (epsilon, attn_scale, a scale) a Python
number becomes a pass-by-value scalar. Outputs are virtual until ``set_output(True)``; outputs an option
does not produce come back as None.
"""

from . import (
    attention,
    conv,
    linear_attention,
    mamba2,
    matmul_fp8,
    moe,
    norm,
    norm_extra,
    quantize,
    resample,
    rng,
    rope,
    sdpa_fp8,
    sdpa_fp8_backward,
    sdpa_mxfp8,
    shape,
    swiglu_mlp,
)

FAMILIES = (
    shape,
    matmul_fp8,
    norm,
    norm_extra,
    attention,
    sdpa_fp8,
    sdpa_fp8_backward,
    sdpa_mxfp8,
    conv,
    resample,
    rng,
    quantize,
    rope,
    moe,
    swiglu_mlp,
    linear_attention,
    mamba2,
)


class OpBuilders(*(family.Builders for family in FAMILIES)):
    """Mixin of frost.pygraph: every op builder but the pointwise ones (frost._pointwise)."""


ENUMS = tuple(name for family in FAMILIES for name in getattr(family, "ENUMS", ()))
