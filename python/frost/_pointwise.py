"""Pointwise builders of frost.pygraph: one method per pointwise mode, with cuDNN Frontend's keywords.

Every builder returns the output tensor (virtual until ``set_output(True)``). Operands broadcast
numpy-style over extent-1 axes; a Python number given as an operand becomes a pass-by-value FLOAT
scalar. All builders also take ``compute_data_type=`` and ``name=``.
"""

import inspect

from . import _frost

pointwise_mode = _frost.pointwise_mode

# Operand keywords and the aliases each also accepts.
_UNARY = (("input", ("a", "input0", "x")),)
_BINARY = (("a", ("input0", "input")), ("b", ("input1",)))
_COMPARE = (("input", ("a", "input0")), ("comparison", ("b", "input1")))
_BACKWARD = (("loss", ("grad", "dy", "input0")), ("input", ("x", "input1")))
_SELECT = (("input0", ("a",)), ("input1", ("b",)), ("mask", ("input2", "c")))

# Attribute keywords -> Pointwise_attributes setters.
_ATTRIBUTE_SETTERS = {
    "negative_slope": "set_relu_lower_clip_slope",
    "lower_clip": "set_relu_lower_clip",
    "upper_clip": "set_relu_upper_clip",
    "alpha": "set_elu_alpha",
    "beta": "set_softplus_beta",
    "swish_beta": "set_swish_beta",
    "axis": "set_axis",
}
_RELU = ("negative_slope", "lower_clip", "upper_clip")

# builder name: (mode, operands, attribute keywords, formula)
BUILDERS = {
    "add": (pointwise_mode.ADD, _BINARY, (), "y = a + b"),
    "bias": (pointwise_mode.ADD, (("input", ("a",)), ("bias", ("b",))), (), "y = input + bias"),
    "sub": (pointwise_mode.SUB, _BINARY, (), "y = a - b"),
    "mul": (pointwise_mode.MUL, _BINARY, (), "y = a * b"),
    "scale": (pointwise_mode.MUL, (("input", ("a",)), ("scale", ("b",))), (), "y = input * scale"),
    "div": (pointwise_mode.DIV, _BINARY, (), "y = a / b"),
    "max": (pointwise_mode.MAX, _BINARY, (), "y = max(a, b)"),
    "min": (pointwise_mode.MIN, _BINARY, (), "y = min(a, b)"),
    "mod": (pointwise_mode.MOD, _BINARY, (), "y = fmod(a, b)"),
    "pow": (pointwise_mode.POW, _BINARY, (), "y = a ** b"),
    "add_square": (pointwise_mode.ADD_SQUARE, _BINARY, (), "y = a + b * b"),
    "logical_and": (pointwise_mode.LOGICAL_AND, _BINARY, (), "y = a != 0 and b != 0"),
    "logical_or": (pointwise_mode.LOGICAL_OR, _BINARY, (), "y = a != 0 or b != 0"),
    "cmp_eq": (pointwise_mode.CMP_EQ, _COMPARE, (), "y = input == comparison"),
    "cmp_neq": (pointwise_mode.CMP_NEQ, _COMPARE, (), "y = input != comparison"),
    "cmp_gt": (pointwise_mode.CMP_GT, _COMPARE, (), "y = input > comparison"),
    "cmp_ge": (pointwise_mode.CMP_GE, _COMPARE, (), "y = input >= comparison"),
    "cmp_lt": (pointwise_mode.CMP_LT, _COMPARE, (), "y = input < comparison"),
    "cmp_le": (pointwise_mode.CMP_LE, _COMPARE, (), "y = input <= comparison"),
    "sqrt": (pointwise_mode.SQRT, _UNARY, (), "y = sqrt(x)"),
    "rsqrt": (pointwise_mode.RSQRT, _UNARY, (), "y = 1 / sqrt(x)"),
    "reciprocal": (pointwise_mode.RECIPROCAL, _UNARY, (), "y = 1 / x"),
    "exp": (pointwise_mode.EXP, _UNARY, (), "y = exp(x)"),
    "log": (pointwise_mode.LOG, _UNARY, (), "y = log(x)"),
    "neg": (pointwise_mode.NEG, _UNARY, (), "y = -x"),
    "abs": (pointwise_mode.ABS, _UNARY, (), "y = |x|"),
    "ceil": (pointwise_mode.CEIL, _UNARY, (), "y = ceil(x)"),
    "floor": (pointwise_mode.FLOOR, _UNARY, (), "y = floor(x)"),
    "sin": (pointwise_mode.SIN, _UNARY, (), "y = sin(x)"),
    "cos": (pointwise_mode.COS, _UNARY, (), "y = cos(x)"),
    "tan": (pointwise_mode.TAN, _UNARY, (), "y = tan(x)"),
    "erf": (pointwise_mode.ERF, _UNARY, (), "y = erf(x)"),
    "identity": (pointwise_mode.IDENTITY, _UNARY, (), "y = x"),
    "logical_not": (pointwise_mode.LOGICAL_NOT, _UNARY, (), "y = x == 0"),
    "relu": (
        pointwise_mode.RELU_FWD,
        _UNARY,
        _RELU,
        "y = clamp(x, lower_clip, upper_clip), with slope negative_slope below lower_clip (default 0)",
    ),
    "tanh": (pointwise_mode.TANH_FWD, _UNARY, (), "y = tanh(x)"),
    "sigmoid": (pointwise_mode.SIGMOID_FWD, _UNARY, (), "y = 1 / (1 + exp(-x))"),
    "elu": (pointwise_mode.ELU_FWD, _UNARY, ("alpha",), "y = x if x > 0 else alpha * (exp(x) - 1)"),
    "gelu": (pointwise_mode.GELU_FWD, _UNARY, (), "y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))"),
    "gelu_approx_tanh": (
        pointwise_mode.GELU_APPROX_TANH_FWD,
        _UNARY,
        (),
        "y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))",
    ),
    "softplus": (pointwise_mode.SOFTPLUS_FWD, _UNARY, ("beta",), "y = log(1 + exp(beta x)) / beta"),
    "swish": (pointwise_mode.SWISH_FWD, _UNARY, ("swish_beta",), "y = x * sigmoid(swish_beta x)"),
    "gen_index": (pointwise_mode.GEN_INDEX, _UNARY, ("axis",), "y = index of each element of input along axis"),
    "relu_backward": (pointwise_mode.RELU_BWD, _BACKWARD, _RELU, "dx = loss * relu'(input)"),
    "tanh_backward": (pointwise_mode.TANH_BWD, _BACKWARD, (), "dx = loss * (1 - tanh(input)^2)"),
    "sigmoid_backward": (pointwise_mode.SIGMOID_BWD, _BACKWARD, (), "dx = loss * s (1 - s), s = sigmoid(input)"),
    "elu_backward": (pointwise_mode.ELU_BWD, _BACKWARD, ("alpha",), "dx = loss * elu'(input)"),
    "gelu_backward": (pointwise_mode.GELU_BWD, _BACKWARD, (), "dx = loss * gelu'(input)"),
    "gelu_approx_tanh_backward": (
        pointwise_mode.GELU_APPROX_TANH_BWD,
        _BACKWARD,
        (),
        "dx = loss * d/dx of the tanh-approximated gelu at input",
    ),
    "softplus_backward": (pointwise_mode.SOFTPLUS_BWD, _BACKWARD, ("beta",), "dx = loss * sigmoid(beta input)"),
    "swish_backward": (pointwise_mode.SWISH_BWD, _BACKWARD, ("swish_beta",), "dx = loss * swish'(input)"),
    "binary_select": (pointwise_mode.BINARY_SELECT, _SELECT, (), "y = input0 if mask != 0 else input1"),
}


def _make_builder(py_name, mode, operands, attributes, formula):
    names = [name for name, _ in operands]
    alias_of = {alias: name for name, aliases in operands for alias in aliases}
    kw = inspect.Parameter.KEYWORD_ONLY
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for n in names]
        + [inspect.Parameter(a, kw, default=None) for a in attributes]
        + [
            inspect.Parameter("compute_data_type", kw, default=None),
            inspect.Parameter("name", kw, default=""),
        ]
    )

    def builder(self, *args, **kwargs):
        for alias, name in alias_of.items():
            if alias in kwargs and alias not in signature.parameters:
                if name in kwargs:
                    raise TypeError(f"{py_name}(): both '{name}' and its alias '{alias}' given")
                kwargs[name] = kwargs.pop(alias)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{py_name}(): {e}") from None
        values = bound.arguments
        missing = [n for n in names if values.get(n) is None]
        if missing:
            raise TypeError(f"{py_name}(): missing operand(s) {', '.join(repr(m) for m in missing)}")
        attrs = self._attributes(_frost.Pointwise_attributes(), values.get("name", ""), values.get("compute_data_type"))
        attrs.set_mode(mode)
        for a in attributes:
            if values.get(a) is not None:
                getattr(attrs, _ATTRIBUTE_SETTERS[a])(values[a])
        tensors = [self._operand(values[n], f"{py_name}(): operand '{n}'") for n in names]
        return self._graph.pointwise(*tensors, attrs)

    builder.__name__ = builder.__qualname__ = py_name
    builder.__signature__ = signature
    extra = f" Attributes: {', '.join(attributes)}." if attributes else ""
    builder.__doc__ = (
        f"Pointwise {mode.name}: {formula}. Operands: {', '.join(names)}.{extra} Returns the output tensor."
    )
    return builder


class PointwiseBuilders:
    """Mixin: the generic pointwise() and one builder per mode (add, mul, relu, ...)."""

    def pointwise(self, mode, input0=None, input1=None, input2=None, compute_data_type=None, name="", **attributes):
        """Pointwise op of any frost.pointwise_mode on one to three operands (IN_0, IN_1, IN_2).
        Backward modes take input0 = loss (dy) and input1 = the forward input. Attribute keywords:
        axis, negative_slope, lower_clip, upper_clip, alpha, beta, swish_beta."""
        attrs = self._attributes(_frost.Pointwise_attributes(), name, compute_data_type)
        attrs.set_mode(mode)
        for key, value in attributes.items():
            if key not in _ATTRIBUTE_SETTERS:
                raise TypeError(f"pointwise(): unknown attribute '{key}'")
            if value is not None:
                getattr(attrs, _ATTRIBUTE_SETTERS[key])(value)
        given = [x for x in (input0, input1, input2) if x is not None]
        if not given:
            raise TypeError("pointwise(): missing operand 'input0'")
        tensors = [self._operand(x, f"pointwise(): operand {i}") for i, x in enumerate(given)]
        return self._graph.pointwise(*tensors, attrs)


for _name, (_mode, _operands, _attributes, _formula) in BUILDERS.items():
    setattr(PointwiseBuilders, _name, _make_builder(_name, _mode, _operands, _attributes, _formula))
