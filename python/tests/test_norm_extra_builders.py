"""Batch, instance, adaptive-layer and group norm builders and the split batchnorm pieces against numpy."""

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph
from references import replay, run

TRAINING = frost.norm_forward_phase.TRAINING
EPS = 1e-5


def channel_stats(x, axes):
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return mean, var, 1 / np.sqrt(var + EPS)


def norm_backward(dy, x, scale, mean, inv, axes, param_axes):
    """The LayerNorm-style gradient over `axes`; dScale and dBias summed over `param_axes`."""
    xhat = (x - mean) * inv
    g = dy * scale
    dx = inv * (g - g.mean(axis=axes, keepdims=True) - xhat * (g * xhat).mean(axis=axes, keepdims=True))
    return dx, (dy * xhat).sum(axis=param_axes, keepdims=True), dy.sum(axis=param_axes, keepdims=True)


def test_batchnorm_training_inference_and_backward(rng):
    x = rng.standard_normal((3, 5, 4, 3)).astype(np.float32)
    scale, bias, run_mean = (rng.standard_normal((1, 5, 1, 1)).astype(np.float32) for _ in range(3))
    run_var = rng.uniform(0.5, 2, (1, 5, 1, 1)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    g = float_graph()
    X, S, B, RM, RV, DY = (g.tensor_like(a) for a in (x, scale, bias, run_mean, run_var, dy))
    Y, MEAN, INV, NEXT_MEAN, NEXT_VAR = g.batchnorm(
        input=X, scale=S, bias=B, in_running_mean=RM, in_running_var=RV, epsilon=EPS, momentum=0.1
    )
    Y_INF = g.batchnorm_inference(input=X, mean=MEAN, inv_variance=INV, scale=S, bias=B)
    DX, DS, DB = g.batchnorm_backward(grad=DY, input=X, scale=S, mean=MEAN, inv_variance=INV)
    outputs = [Y, MEAN, INV, NEXT_MEAN, NEXT_VAR, Y_INF, DX, DS, DB]
    for t in outputs:
        t.set_output(True)
    pack = {X: x, S: scale, B: bias, RM: run_mean, RV: run_var, DY: dy}
    got = run(g, pack, outputs)

    x64 = x.astype(np.float64)
    axes = (0, 2, 3)
    mean, var, inv = channel_stats(x64, axes)
    m = x.size // 5
    want = [
        (x64 - mean) * inv * scale + bias,
        mean,
        inv,
        0.9 * run_mean + 0.1 * mean,
        0.9 * run_var + 0.1 * var * m / (m - 1),
        (x64 - mean) * inv * scale + bias,
        *norm_backward(dy, x64, scale, mean, inv, axes, axes),
    ]
    assert MEAN.get_dim() == [1, 5, 1, 1] and MEAN.get_data_type() == FLOAT
    for have, expected in zip(got, want):
        np.testing.assert_allclose(have, expected, rtol=1e-4, atol=1e-5)


def test_batchnorm_without_running_stats_and_errors():
    g = float_graph()
    X = g.tensor(name="x", dim=[2, 3, 5])
    S = g.tensor(name="s", dim=[1, 3, 1])
    outs = g.batchnorm(input=X, scale=S, bias=S, epsilon=EPS)
    assert outs[3] is None and outs[4] is None
    with pytest.raises(frost.InvalidValueError, match="peer_stats"):
        g.batchnorm(input=X, scale=S, bias=S, epsilon=EPS, peer_stats=[S])
    h = float_graph()
    X = h.tensor(name="x", dim=[2, 3, 5])
    S = h.tensor(name="s", dim=[1, 3, 1])
    h.batchnorm(input=X, scale=S, bias=S, name="bn_no_eps")[0].set_output(True)
    with pytest.raises(frost.AttributeNotSetError, match="EPSILON"):
        h.validate()


def test_instancenorm_and_backward(rng):
    x = rng.standard_normal((2, 3, 7)).astype(np.float64)
    scale, bias = (rng.standard_normal((1, 3, 1)) for _ in range(2))
    dy = rng.standard_normal(x.shape)
    g = float_graph()
    X, S, B, DY = (g.tensor_like(a.astype(np.float32)) for a in (x, scale, bias, dy))
    Y, MEAN, INV = g.instancenorm(norm_forward_phase=TRAINING, input=X, scale=S, bias=B, epsilon=EPS)
    DX, DS, DB = g.instancenorm_backward(grad=DY, input=X, scale=S, mean=MEAN, inv_variance=INV)
    outputs = [Y, MEAN, INV, DX, DS, DB]
    for t in outputs:
        t.set_output(True)
    pack = {X: x.astype(np.float32), S: scale.astype(np.float32), B: bias.astype(np.float32), DY: dy.astype(np.float32)}
    got = run(g, pack, outputs)
    x32 = x.astype(np.float32).astype(np.float64)
    mean, _, inv = channel_stats(x32, (2,))
    want = [(x32 - mean) * inv * scale + bias, mean, inv]
    want += norm_backward(dy, x32, scale, mean, inv, (2,), (0, 2))
    assert MEAN.get_dim() == [2, 3, 1]
    for have, expected in zip(got, want):
        np.testing.assert_allclose(have, expected, rtol=1e-4, atol=1e-4)


def test_adalayernorm_and_backward(rng):
    x = rng.standard_normal((2, 5, 6)).astype(np.float32)
    scale, bias = (rng.standard_normal((2, 1, 6)).astype(np.float32) for _ in range(2))
    dy = rng.standard_normal(x.shape).astype(np.float32)
    g = float_graph()
    X, S, B, DY = (g.tensor_like(a) for a in (x, scale, bias, dy))
    Y, MEAN, INV = g.adalayernorm(norm_forward_phase=TRAINING, input=X, scale=S, bias=B, epsilon=EPS)
    DX, DS, DB = g.adalayernorm_backward(grad=DY, input=X, scale=S, mean=MEAN, inv_variance=INV)
    outputs = [Y, MEAN, INV, DX, DS, DB]
    for t in outputs:
        t.set_output(True)
    got = run(g, {X: x, S: scale, B: bias, DY: dy}, outputs)
    x64 = x.astype(np.float64)
    mean, _, inv = channel_stats(x64, (2,))
    want = [(x64 - mean) * inv * scale + bias, mean, inv]
    want += norm_backward(dy, x64, scale, mean, inv, (2,), (1,))
    assert MEAN.get_dim() == [2, 5, 1] and DS.get_dim() == [2, 1, 6]
    for have, expected in zip(got, want):
        np.testing.assert_allclose(have, expected, rtol=1e-4, atol=1e-4)


def test_groupnorm_and_backward(rng):
    x = rng.standard_normal((2, 6, 5)).astype(np.float32)
    scale, bias = (rng.standard_normal((1, 6, 1)).astype(np.float32) for _ in range(2))
    dy = rng.standard_normal(x.shape).astype(np.float32)
    g = float_graph()
    X, S, B, DY = (g.tensor_like(a) for a in (x, scale, bias, dy))
    Y, MEAN, INV = g.groupnorm(norm_forward_phase=TRAINING, input=X, scale=S, bias=B, epsilon=EPS, group_count=3)
    DX, DS, DB = g.groupnorm_backward(grad=DY, input=X, scale=S, mean=MEAN, inv_variance=INV)
    outputs = [Y, MEAN, INV, DX, DS, DB]
    for t in outputs:
        t.set_output(True)
    got = run(g, {X: x, S: scale, B: bias, DY: dy}, outputs)
    grouped = x.astype(np.float64).reshape(2, 3, 10)
    mean, _, inv = channel_stats(grouped, (2,))
    xhat = ((grouped - mean) * inv).reshape(x.shape)
    assert MEAN.get_dim() == [2, 3, 1]
    np.testing.assert_allclose(got[0], xhat * scale + bias, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[2], inv, rtol=1e-4)
    gs = (dy * scale).reshape(2, 3, 10)
    xh = xhat.reshape(2, 3, 10)
    want_dx = inv * (gs - gs.mean(axis=2, keepdims=True) - xh * (gs * xh).mean(axis=2, keepdims=True))
    np.testing.assert_allclose(got[3], want_dx.reshape(x.shape), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[4], (dy * xhat).sum(axis=(0, 2), keepdims=True), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[5], dy.sum(axis=(0, 2), keepdims=True), rtol=1e-4, atol=1e-4)


def test_genstats_bn_finalize_dbn_weight(rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    scale, bias, run_mean = (rng.standard_normal((1, 4, 1)).astype(np.float32) for _ in range(3))
    run_var = rng.uniform(0.5, 2, (1, 4, 1)).astype(np.float32)
    g = float_graph()
    X, DY, S, B, RM, RV = (g.tensor_like(a) for a in (x, dy, scale, bias, run_mean, run_var))
    SUM, SQ = g.genstats(input=X)
    count = 15
    EQ_S, EQ_B, MEAN, INV, NM, NV = g.bn_finalize(
        sum=SUM,
        sq_sum=SQ,
        scale=S,
        bias=B,
        epsilon=EPS,
        accum_count=count,
        in_running_mean=RM,
        in_running_var=RV,
        momentum=0.25,
    )
    DS, DB, EQ_DY, EQ_X, EQ_BIAS = g.dbn_weight(grad=DY, input=X, mean=MEAN, inv_variance=INV, scale=S)
    outputs = [SUM, SQ, EQ_S, EQ_B, MEAN, INV, NM, NV, DS, DB, EQ_DY, EQ_X, EQ_BIAS]
    for t in outputs:
        t.set_output(True)
    pack = {X: x, DY: dy, S: scale, B: bias, RM: run_mean, RV: run_var}
    got = run(g, pack, outputs)

    x64 = x.astype(np.float64)
    axes = (0, 2)
    s, sq = x64.sum(axis=axes, keepdims=True), (x64 * x64).sum(axis=axes, keepdims=True)
    mean = s / count
    var = sq / count - mean**2
    inv = 1 / np.sqrt(var + EPS)
    eq_scale = scale * inv
    xhat = (x64 - mean) * inv
    dscale, dbias = (dy * xhat).sum(axis=axes, keepdims=True), dy.sum(axis=axes, keepdims=True)
    want = [
        s,
        sq,
        eq_scale,
        bias - mean * eq_scale,
        mean,
        inv,
        0.75 * run_mean + 0.25 * mean,
        0.75 * run_var + 0.25 * var * count / (count - 1),
        dscale,
        dbias,
        eq_scale,
        -scale * inv**2 * dscale / count,
        scale * inv * (inv * mean * dscale - dbias) / count,
    ]
    for have, expected in zip(got, want):
        np.testing.assert_allclose(have, expected, rtol=1e-4, atol=1e-5)
    # dX from the coefficients equals the batchnorm gradient.
    dx = got[10] * dy + got[11] * x64 + got[12]
    g_ = dy * scale
    want_dx = inv * (g_ - g_.mean(axis=axes, keepdims=True) - xhat * (g_ * xhat).mean(axis=axes, keepdims=True))
    np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-4)
    for have, again in zip(got, replay(g, pack, outputs)):
        assert have.tobytes() == again.tobytes()


def test_bn_finalize_shape_error():
    g = float_graph()
    wrong = g.tensor(name="sum", dim=[2, 4, 1])  # per-channel tensors are [1, C, 1]
    per_channel = g.tensor(name="pc", dim=[1, 4, 1])
    outs = g.bn_finalize(wrong, per_channel, per_channel, per_channel, EPS, 10, name="fin")
    outs[0].set_output(True)
    with pytest.raises(frost.ShapeDeductionError, match="fin"):
        g.validate()
