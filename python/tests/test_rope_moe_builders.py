"""rope / rope_backward and moe_grouped_matmul (+ backward) against numpy formulas."""

import numpy as np
import pytest

import frost
from conftest import float_graph
from references import replay, run

MOE = frost.moe_grouped_matmul_mode


def rotate(x, cos, sin, rotary_dim, interleaved, inverse=False):
    """Turns each channel pair of the first rotary_dim channels by its angle (the opposite way if inverse)."""
    y = x.copy()
    half = rotary_dim // 2
    a = np.arange(half) * 2 if interleaved else np.arange(half)
    b = a + 1 if interleaved else a + half
    sin = -sin if inverse else sin
    y[..., a] = x[..., a] * cos - x[..., b] * sin
    y[..., b] = x[..., b] * cos + x[..., a] * sin
    return y


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_forward_backward(interleaved, rng):
    x = rng.standard_normal((2, 3, 5, 8)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    theta = rng.uniform(-3, 3, (5, 3))
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    g = float_graph()
    X, DY, COS, SIN = (g.tensor_like(a) for a in (x, dy, cos, sin))
    Y = g.rope(input=X, cos=COS, sin=SIN, interleaved=interleaved, rotary_dim=6, name="rope")
    DX = g.rope_backward(dY=DY, cos=COS, sin=SIN, interleaved=interleaved, rotary_dim=6)
    UNDO = g.rope_backward(dY=Y, cos=COS, sin=SIN, interleaved=interleaved, rotary_dim=6)
    outputs = [Y, DX, UNDO]
    for t in outputs:
        t.set_output(True)
    pack = {X: x, DY: dy, COS: cos, SIN: sin}
    y, dx, undo = run(g, pack, outputs)
    c, s = cos.astype(np.float64), sin.astype(np.float64)
    np.testing.assert_allclose(y, rotate(x.astype(np.float64), c, s, 6, interleaved), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        dx, rotate(dy.astype(np.float64), c, s, 6, interleaved, inverse=True), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(undo, x, rtol=1e-5, atol=1e-5)  # the inverse rotation undoes the forward
    np.testing.assert_array_equal(y[..., 6:], x[..., 6:])  # channels past rotary_dim are copied
    for have, again in zip((y, dx, undo), replay(g, pack, outputs)):
        assert have.tobytes() == again.tobytes()


def test_rope_bad_rotary_dim_is_typed():
    g = float_graph()
    X = g.tensor(name="x", dim=[1, 1, 4, 8])
    T = g.tensor(name="t", dim=[4, 4])
    g.rope(X, T, T, rotary_dim=7, name="odd_rope").set_output(True)
    with pytest.raises(frost.FrostError, match="odd_rope"):
        g.validate()


def expert_of_rows(offsets, rows):
    """The expert of each routed row (-1 before the first expert's range)."""
    return np.searchsorted(np.asarray(offsets), np.arange(rows), side="right") - 1


def test_moe_none_gather_scatter(rng):
    e, k, n = 3, 5, 4
    weight = rng.standard_normal((e, k, n)).astype(np.float32)
    offsets = np.array([1, 3, 3], np.int32).reshape(e, 1, 1)  # row 0 belongs to no expert; expert 1 is empty
    rows, tokens, top_k = 8, 4, 2
    grouped = rng.standard_normal((1, rows, k)).astype(np.float32)
    unrouted = rng.standard_normal((1, tokens, k)).astype(np.float32)
    token_index = rng.permutation(np.repeat(np.arange(tokens), top_k)).astype(np.int32).reshape(1, rows, 1)
    token_ks = np.zeros_like(token_index)
    for slot in range(tokens):  # each (token, choice) slot exactly once
        token_ks[0, token_index[0, :, 0] == slot, 0] = np.arange(top_k)
    g = float_graph()
    W, OFF, GROUPED, UNROUTED, INDEX, KS = (
        g.tensor_like(a) for a in (weight, offsets, grouped, unrouted, token_index, token_ks)
    )
    Y_NONE = g.moe_grouped_matmul(token=GROUPED, weight=W, first_token_offset=OFF, mode=MOE.NONE)
    Y_GATHER = g.moe_grouped_matmul(UNROUTED, W, OFF, token_index=INDEX, mode=MOE.GATHER)
    Y_SCATTER = g.moe_grouped_matmul(GROUPED, W, OFF, INDEX, KS, MOE.SCATTER, top_k=top_k, name="scatter")
    outputs = [Y_NONE, Y_GATHER, Y_SCATTER]
    for t in outputs:
        t.set_output(True)
    y_none, y_gather, y_scatter = run(
        g, {W: weight, OFF: offsets, GROUPED: grouped, UNROUTED: unrouted, INDEX: token_index, KS: token_ks}, outputs
    )
    expert = expert_of_rows(offsets.reshape(-1), rows)
    want_none = np.zeros((1, rows, n))
    want_gather = np.zeros((1, rows, n))
    want_scatter = np.zeros((1, rows, n))
    for r in range(rows):
        if expert[r] < 0:
            continue
        w64 = weight[expert[r]].astype(np.float64)
        want_none[0, r] = grouped[0, r] @ w64
        want_gather[0, r] = unrouted[0, token_index[0, r, 0]] @ w64
        want_scatter[0, token_index[0, r, 0] * top_k + token_ks[0, r, 0]] = grouped[0, r] @ w64
    for have, want in ((y_none, want_none), (y_gather, want_gather), (y_scatter, want_scatter)):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


def test_moe_backward_gather(rng):
    e, k, n, rows, tokens = 2, 3, 4, 6, 5
    weight = rng.standard_normal((e, k, n)).astype(np.float32)
    offsets = np.array([0, 4], np.int64).reshape(e, 1, 1)
    token = rng.standard_normal((1, tokens, k)).astype(np.float32)
    index = np.array([0, 2, 2, 4, 1, 2], np.int32).reshape(1, rows, 1)  # token 3 is routed nowhere
    dout = rng.standard_normal((1, rows, n)).astype(np.float32)
    g = float_graph()
    W, OFF, T, I, DOUT = (g.tensor_like(a) for a in (weight, offsets, token, index, dout))
    DTOKEN, DWEIGHT = g.moe_grouped_matmul_backward(
        doutput=DOUT, token=T, weight=W, first_token_offset=OFF, token_index=I, mode=MOE.GATHER
    )
    for t in (DTOKEN, DWEIGHT):
        t.set_output(True)
    pack = {W: weight, OFF: offsets, T: token, I: index, DOUT: dout}
    dtoken, dweight = run(g, pack, [DTOKEN, DWEIGHT])
    assert DTOKEN.get_dim() == [1, tokens, k] and DWEIGHT.get_dim() == [e, k, n]
    expert = expert_of_rows(offsets.reshape(-1), rows)
    want_dtoken = np.zeros((1, tokens, k))
    want_dweight = np.zeros((e, k, n))
    for r in range(rows):
        s = index[0, r, 0]
        want_dtoken[0, s] += dout[0, r].astype(np.float64) @ weight[expert[r]].T
        want_dweight[expert[r]] += np.outer(token[0, s], dout[0, r])
    np.testing.assert_allclose(dtoken, want_dtoken, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dweight, want_dweight, rtol=1e-5, atol=1e-5)
    assert not dtoken[0, 3].any()
    for have, again in zip((dtoken, dweight), replay(g, pack, [DTOKEN, DWEIGHT])):
        assert have.tobytes() == again.tobytes()


def test_moe_errors():
    g = float_graph()
    T = g.tensor(name="t", dim=[1, 4, 3])
    W = g.tensor(name="w", dim=[2, 3, 5])
    OFF = g.tensor(name="off", dim=[2, 1, 1], data_type=frost.data_type.INT32)
    with pytest.raises(frost.InvalidValueError, match="top_k_scores"):
        g.moe_grouped_matmul(T, W, OFF, top_k_scores=T)
    g.moe_grouped_matmul(T, W, OFF, mode=MOE.GATHER, name="no_index").set_output(True)
    with pytest.raises(frost.FrostError, match="no_index"):
        g.validate()
