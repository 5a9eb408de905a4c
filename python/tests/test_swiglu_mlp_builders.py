"""swiglu_mlp against a numpy formula, with separate and interleaved gate/up weights, and its errors."""

import numpy as np
import pytest

import frost
from conftest import float_graph
from references import run


def swiglu_mlp(x, w_gate, w_up, w_down):
    g = x.astype(np.float64) @ w_gate
    return (g / (1 + np.exp(-g)) * (x.astype(np.float64) @ w_up)) @ w_down


def interleave(w_gate, w_up):
    """[H, 2F] with gate and up columns in alternating blocks of 8."""
    h, f = w_gate.shape
    return np.stack([w_gate.reshape(h, f // 8, 8), w_up.reshape(h, f // 8, 8)], axis=2).reshape(h, 2 * f)


@pytest.mark.parametrize("interleaved", [False, True])
def test_swiglu_mlp_matches_numpy(interleaved, rng):
    t, h, f = 5, 12, 16
    x = rng.standard_normal((t, h)).astype(np.float32)
    w_gate, w_up = (rng.standard_normal((h, f)).astype(np.float32) / 4 for _ in range(2))
    w_down = rng.standard_normal((f, h)).astype(np.float32) / 4
    g = float_graph()
    X, WD = g.tensor_like(x), g.tensor_like(w_down)
    if interleaved:
        both = interleave(w_gate, w_up)
        WGU = g.tensor_like(both)
        Y = g.swiglu_mlp(input=X, w_gate_up=WGU, w_down=WD, name="mlp")
        pack = {X: x, WGU: both, WD: w_down}
    else:
        WG, WU = g.tensor_like(w_gate), g.tensor_like(w_up)
        Y = g.swiglu_mlp(X, WG, WU, WD, name="mlp")
        pack = {X: x, WG: w_gate, WU: w_up, WD: w_down}
    Y.set_output(True)
    (y,) = run(g, pack, [Y])
    np.testing.assert_allclose(y, swiglu_mlp(x, w_gate, w_up, w_down), rtol=1e-5, atol=1e-5)


def test_swiglu_mlp_errors():
    g = float_graph()
    X = g.tensor(name="x", dim=[4, 8])
    W = g.tensor(name="w", dim=[8, 16])
    with pytest.raises(ValueError, match="w_gate_up"):
        g.swiglu_mlp(X, w_gate=W, w_gate_up=W, w_down=W)
    g.swiglu_mlp(X, W, W, g.tensor(name="wd", dim=[16, 9]), name="bad_down").set_output(True)
    with pytest.raises(frost.FrostError, match="W_DOWN.dim"):
        g.validate()
