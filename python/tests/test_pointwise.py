"""Every pointwise builder of frost.pygraph against a numpy formula, on the CPU reference engine."""

import math

import numpy as np
import pytest

import frost
from conftest import float_graph, poisoned

erf = np.vectorize(math.erf)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gelu_tanh_inner(x):
    return math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)


# builder: (keyword operands, numpy formula, attribute keywords)
UNARY = {
    "sqrt": (np.sqrt, {}),
    "rsqrt": (lambda x: 1 / np.sqrt(x), {}),
    "reciprocal": (lambda x: 1 / x, {}),
    "exp": (np.exp, {}),
    "log": (np.log, {}),
    "neg": (np.negative, {}),
    "abs": (np.abs, {}),
    "ceil": (np.ceil, {}),
    "floor": (np.floor, {}),
    "sin": (np.sin, {}),
    "cos": (np.cos, {}),
    "tan": (np.tan, {}),
    "erf": (erf, {}),
    "identity": (lambda x: x, {}),
    "logical_not": (lambda x: (x == 0).astype(np.float64), {}),
    "relu": (lambda x: np.maximum(x, 0), {}),
    "tanh": (np.tanh, {}),
    "sigmoid": (sigmoid, {}),
    "elu": (lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1)), {"alpha": 0.7}),
    "gelu": (lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))), {}),
    "gelu_approx_tanh": (lambda x: 0.5 * x * (1 + np.tanh(gelu_tanh_inner(x))), {}),
    "softplus": (lambda x: np.log1p(np.exp(1.5 * x)) / 1.5, {"beta": 1.5}),
    "swish": (lambda x: x * sigmoid(0.8 * x), {"swish_beta": 0.8}),
}

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.fmax,
    "min": np.fmin,
    "mod": np.fmod,
    "pow": np.power,
    "add_square": lambda a, b: a + b * b,
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float64),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(np.float64),
}

COMPARE = {
    "cmp_eq": np.equal,
    "cmp_neq": np.not_equal,
    "cmp_gt": np.greater,
    "cmp_ge": np.greater_equal,
    "cmp_lt": np.less,
    "cmp_le": np.less_equal,
}

BACKWARD = {
    "relu_backward": (lambda dy, x: dy * (x > 0), {}),
    "tanh_backward": (lambda dy, x: dy * (1 - np.tanh(x) ** 2), {}),
    "sigmoid_backward": (lambda dy, x: dy * sigmoid(x) * (1 - sigmoid(x)), {}),
    "elu_backward": (lambda dy, x: dy * np.where(x > 0, 1, 0.7 * np.exp(x)), {"alpha": 0.7}),
    "gelu_backward": (
        lambda dy, x: dy * (0.5 * (1 + erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)),
        {},
    ),
    "gelu_approx_tanh_backward": (
        lambda dy, x: dy
        * (
            0.5 * (1 + np.tanh(gelu_tanh_inner(x)))
            + 0.5 * x * (1 - np.tanh(gelu_tanh_inner(x)) ** 2) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x)
        ),
        {},
    ),
    "softplus_backward": (lambda dy, x: dy * sigmoid(1.5 * x), {"beta": 1.5}),
    "swish_backward": (
        lambda dy, x: dy * (sigmoid(0.8 * x) + 0.8 * x * sigmoid(0.8 * x) * (1 - sigmoid(0.8 * x))),
        {"swish_beta": 0.8},
    ),
}

SHAPE = (3, 17)


def run(builder_call, inputs):
    """Builds a one-op graph from builder_call(graph, *tensors), runs it on inputs, returns the output."""
    g = float_graph()
    tensors = [g.tensor_like(x, name=f"in{i}") for i, x in enumerate(inputs)]
    Y = builder_call(g, *tensors)
    Y.set_output(True)
    g.build()
    y = poisoned(Y.get_dim())
    g.execute({**dict(zip(tensors, inputs)), Y: y}, None)
    return y


def positive(rng, shape=SHAPE):
    return rng.uniform(0.5, 2.0, shape).astype(np.float32)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, rng):
    formula, attrs = UNARY[name]
    x = positive(rng) if name in ("sqrt", "rsqrt", "log") else rng.uniform(-2, 2, SHAPE).astype(np.float32)
    if name == "logical_not":
        x[0, :5] = 0
    y = run(lambda g, X: getattr(g, name)(input=X, **attrs), [x])
    np.testing.assert_allclose(y, formula(x.astype(np.float64)), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_broadcasting(name, rng):
    a = positive(rng)
    b = positive(rng, (1, SHAPE[1]))
    if name.startswith("logical"):
        a[0, :4] = 0
        b[0, 2:6] = 0
    y = run(lambda g, A, B: getattr(g, name)(a=A, b=B), [a, b])
    np.testing.assert_allclose(y, BINARY[name](a.astype(np.float64), b.astype(np.float64)), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", sorted(COMPARE))
def test_compare(name, rng):
    a = rng.integers(-2, 3, SHAPE).astype(np.float32)
    b = rng.integers(-2, 3, SHAPE).astype(np.float32)
    y = run(lambda g, A, B: getattr(g, name)(input=A, comparison=B), [a, b])
    np.testing.assert_array_equal(y, COMPARE[name](a, b).astype(np.float32))


@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_backward(name, rng):
    formula, attrs = BACKWARD[name]
    dy = rng.standard_normal(SHAPE).astype(np.float32)
    x = rng.uniform(-2, 2, SHAPE).astype(np.float32)
    y = run(lambda g, DY, X: getattr(g, name)(loss=DY, input=X, **attrs), [dy, x])
    np.testing.assert_allclose(y, formula(dy.astype(np.float64), x.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_relu_clips_and_slope(rng):
    x = rng.uniform(-3, 3, SHAPE).astype(np.float32)
    y = run(lambda g, X: g.relu(input=X, negative_slope=0.1, lower_clip=-0.5, upper_clip=1.5), [x])
    want = np.where(x >= -0.5, np.minimum(x, 1.5), -0.5 + 0.1 * (x + 0.5))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_binary_select(rng):
    a, b = rng.standard_normal((2, *SHAPE)).astype(np.float32)
    mask = (rng.uniform(size=SHAPE) > 0.5).astype(np.float32)
    y = run(lambda g, A, B, M: g.binary_select(input0=A, input1=B, mask=M), [a, b, mask])
    np.testing.assert_array_equal(y, np.where(mask != 0, a, b))


def test_gen_index(rng):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    y = run(lambda g, X: g.gen_index(input=X, axis=1), [x])
    np.testing.assert_array_equal(y, np.broadcast_to(np.arange(SHAPE[1], dtype=np.float32), SHAPE))


def test_generic_pointwise_and_aliases(rng):
    a, b = rng.standard_normal((2, *SHAPE)).astype(np.float32)
    y = run(lambda g, A, B: g.pointwise(mode=frost.pointwise_mode.SUB, input0=A, input1=B), [a, b])
    np.testing.assert_allclose(y, a - b, rtol=1e-6)
    y = run(lambda g, A, B: g.add(input0=A, input1=B), [a, b])
    np.testing.assert_allclose(y, a + b, rtol=1e-6)
    y = run(lambda g, A, B: g.bias(input=A, bias=B), [a, b])
    np.testing.assert_allclose(y, a + b, rtol=1e-6)
    y = run(lambda g, A, B: g.scale(input=A, scale=B), [a, b])
    np.testing.assert_allclose(y, a * b, rtol=1e-6)
    y = run(lambda g, A: g.pointwise(frost.pointwise_mode.RELU_FWD, A, negative_slope=0.5), [a])
    np.testing.assert_allclose(y, np.where(a >= 0, a, 0.5 * a), rtol=1e-6)
    y = run(lambda g, A, B: g.sub(A, B), [a, b])  # positional operands
    np.testing.assert_allclose(y, a - b, rtol=1e-6)


def test_python_scalars_become_pass_by_value(rng):
    a = rng.standard_normal(SHAPE).astype(np.float32)
    y = run(lambda g, A: g.div(a=g.add(a=A, b=3), b=2.0), [a])
    np.testing.assert_allclose(y, (a + 3) / 2, rtol=1e-6)


def test_builder_argument_errors():
    g = float_graph()
    X = g.tensor(name="X", dim=[2, 2])
    with pytest.raises(TypeError, match="missing operand"):
        g.add(a=X)
    with pytest.raises(TypeError, match="unexpected keyword"):
        g.add(a=X, b=X, c=X)
    with pytest.raises(TypeError, match="both 'a' and its alias 'input0'"):
        g.add(a=X, input0=X, b=X)
    with pytest.raises(TypeError, match="expected a frost.tensor or a number"):
        g.add(a=X, b="two")
    with pytest.raises(TypeError, match="unknown attribute"):
        g.pointwise(frost.pointwise_mode.ADD, X, X, slope=1.0)


def test_every_mode_has_a_builder():
    from frost._pointwise import BUILDERS

    modes = {m for m, *_ in BUILDERS.values()}
    missing = [m for m in frost.pointwise_mode if m not in modes and m != frost.pointwise_mode.NOT_SET]
    assert not missing
    assert frost.pygraph.relu.__doc__.startswith("Pointwise RELU_FWD")
