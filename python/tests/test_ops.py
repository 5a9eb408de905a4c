"""Matmul, reduction, data movement, normalization and attention builders against numpy formulas."""

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph, poisoned


def execute(g, pack, outputs):
    """Builds g, runs it with poisoned output buffers, returns the outputs as numpy arrays."""
    g.build()
    buffers = {t: poisoned(t.get_dim()) for t in outputs}
    g.execute({**pack, **buffers}, None)
    return [buffers[t] for t in outputs]


def test_matmul_batched_broadcast(rng):
    a = rng.standard_normal((2, 17, 11)).astype(np.float32)
    b = rng.standard_normal((1, 11, 5)).astype(np.float32)
    g = float_graph()
    A, B = g.tensor_like(a, name="A"), g.tensor_like(b, name="B")
    C = g.matmul(A=A, B=B, compute_data_type=FLOAT, name="mm")
    C.set_output(True)
    (c,) = execute(g, {A: a, B: b}, [C])
    assert C.get_dim() == [2, 17, 5]
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_matmul_transposed_operand_layout(rng):
    a = rng.standard_normal((1, 7, 9)).astype(np.float32)
    bt = rng.standard_normal((1, 4, 9)).astype(np.float32)  # B stored as [n, k]
    g = float_graph()
    A = g.tensor_like(a)
    B = g.tensor(name="B", dim=[1, 9, 4], stride=[36, 1, 9])
    C = g.matmul(A=A, B=B)
    C.set_output(True)
    (c,) = execute(g, {A: a, B: bt}, [C])
    np.testing.assert_allclose(c, a @ bt.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def test_matmul_bias_relu_chain(rng):
    a = rng.standard_normal((1, 16, 32)).astype(np.float32)
    b = rng.standard_normal((1, 32, 8)).astype(np.float32)
    bias = rng.standard_normal((1, 1, 8)).astype(np.float32)
    g = float_graph()
    A, B, BIAS = g.tensor_like(a), g.tensor_like(b), g.tensor_like(bias)
    Y = g.relu(input=g.bias(input=g.matmul(A=A, B=B), bias=BIAS))
    Y.set_output(True)
    (y,) = execute(g, {A: a, B: b, BIAS: bias}, [Y])
    np.testing.assert_allclose(y, np.maximum(a @ b + bias, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "mode, formula",
    [
        (frost.reduction_mode.ADD, lambda x: x.sum(axis=1, keepdims=True)),
        (frost.reduction_mode.MAX, lambda x: x.max(axis=1, keepdims=True)),
        (frost.reduction_mode.MIN, lambda x: x.min(axis=1, keepdims=True)),
        (frost.reduction_mode.AMAX, lambda x: np.abs(x).max(axis=1, keepdims=True)),
        (frost.reduction_mode.AVG, lambda x: x.mean(axis=1, keepdims=True)),
        (frost.reduction_mode.NORM2, lambda x: np.sqrt((x * x).sum(axis=1, keepdims=True))),
    ],
)
def test_reduction(mode, formula, rng):
    x = rng.standard_normal((3, 17, 2)).astype(np.float32)
    g = float_graph()
    X = g.tensor_like(x)
    Y = g.reduction(input=X, mode=mode)
    Y.set_output(True).set_dim([3, 1, 2])
    (y,) = execute(g, {X: x}, [Y])
    np.testing.assert_allclose(y, formula(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_reshape_transpose_slice_concatenate(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    z = rng.standard_normal((2, 5, 4)).astype(np.float32)
    g = float_graph()
    X, Z = g.tensor_like(x, name="X"), g.tensor_like(z, name="Z")
    R = g.reshape(input=X, dim=[6, 4])
    T = g.transpose(input=X, permutation=[2, 0, 1])
    S = g.slice(input=X, slices=[slice(0, 1), slice(1, None), (0, 3)])
    C = g.concatenate(inputs=[X, Z], axis=1)
    outputs = [R, T, S, C]
    for t in outputs:
        t.set_output(True)
    g.validate()
    for t in (T, S, C):  # row-major buffers for the comparison below
        t.set_stride(list(np.cumprod([1] + t.get_dim()[::-1])[:-1][::-1]))
    r, t, s, c = execute(g, {X: x, Z: z}, outputs)
    np.testing.assert_array_equal(r, x.reshape(6, 4))
    np.testing.assert_array_equal(t, x.transpose(2, 0, 1))
    np.testing.assert_array_equal(s, x[0:1, 1:, 0:3])
    np.testing.assert_array_equal(c, np.concatenate([x, z], axis=1))


def test_reshape_dims_set_on_output(rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    g = float_graph()
    X = g.tensor_like(x)
    Y = g.reshape(input=X)
    Y.set_output(True).set_dim([2, 12])
    (y,) = execute(g, {X: x}, [Y])
    np.testing.assert_array_equal(y, x.reshape(2, 12))


def rms_reference(x, scale, bias, eps):
    axes = tuple(range(1, x.ndim))
    inv = 1 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    y = x * inv * scale + (0 if bias is None else bias)
    return y, inv


def layer_reference(x, scale, bias, eps):
    axes = tuple(range(1, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    return (x - mean) * inv * scale + bias, mean, inv


@pytest.mark.parametrize("phase", ["INFERENCE", "TRAINING"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_rmsnorm(phase, with_bias, rng):
    x = rng.standard_normal((5, 17)).astype(np.float32)
    scale = rng.standard_normal((1, 17)).astype(np.float32)
    bias = rng.standard_normal((1, 17)).astype(np.float32)
    g = float_graph()
    X, SCALE = g.tensor_like(x), g.tensor_like(scale)
    BIAS = g.tensor_like(bias) if with_bias else None
    Y, INV = g.rmsnorm(
        norm_forward_phase=frost.norm_forward_phase[phase], input=X, scale=SCALE, bias=BIAS, epsilon=1e-5
    )
    Y.set_output(True)
    outputs = [Y]
    if phase == "TRAINING":
        INV.set_output(True)
        outputs.append(INV)
    else:
        assert INV is None
    pack = {X: x, SCALE: scale, **({BIAS: bias} if with_bias else {})}
    got = execute(g, pack, outputs)
    want_y, want_inv = rms_reference(x.astype(np.float64), scale, bias if with_bias else None, 1e-5)
    np.testing.assert_allclose(got[0], want_y, rtol=1e-5, atol=1e-5)
    if phase == "TRAINING":
        assert INV.get_dim() == [5, 1] and INV.get_data_type() == FLOAT
        np.testing.assert_allclose(got[1], want_inv, rtol=1e-5)


@pytest.mark.parametrize("phase", ["INFERENCE", "TRAINING"])
def test_layernorm(phase, rng):
    x = rng.standard_normal((3, 4, 11)).astype(np.float32)
    scale = rng.standard_normal((1, 4, 11)).astype(np.float32)
    bias = rng.standard_normal((1, 4, 11)).astype(np.float32)
    g = float_graph()
    X, SCALE, BIAS = g.tensor_like(x), g.tensor_like(scale), g.tensor_like(bias)
    Y, MEAN, INV = g.layernorm(
        norm_forward_phase=frost.norm_forward_phase[phase], input=X, scale=SCALE, bias=BIAS, epsilon=1e-5
    )
    outputs = [t for t in (Y, MEAN, INV) if t is not None]
    for t in outputs:
        t.set_output(True)
    got = execute(g, {X: x, SCALE: scale, BIAS: bias}, outputs)
    want = layer_reference(x.astype(np.float64), scale, bias, 1e-5)
    for have, expected in zip(got, want):
        np.testing.assert_allclose(have, expected, rtol=1e-5, atol=1e-5)
    assert len(outputs) == (3 if phase == "TRAINING" else 1)


def test_rmsnorm_backward_matches_finite_differences(rng):
    x = rng.standard_normal((4, 9)).astype(np.float64)
    scale = rng.standard_normal((1, 9)).astype(np.float64)
    dy = rng.standard_normal((4, 9)).astype(np.float64)
    eps = 1e-5
    _, inv = rms_reference(x, scale, None, eps)
    g = frost.pygraph(
        io_data_type=frost.data_type.DOUBLE,
        intermediate_data_type=frost.data_type.DOUBLE,
        compute_data_type=frost.data_type.DOUBLE,
        handle=frost.create_handle("cpu"),
    )
    DY, X, SCALE = g.tensor_like(dy), g.tensor_like(x), g.tensor_like(scale)
    INV = g.tensor_like(inv.astype(np.float32), name="inv_rms")
    DX, DSCALE, DBIAS = g.rmsnorm_backward(grad=DY, input=X, scale=SCALE, inv_rms=INV, has_dbias=True)
    for t in (DX, DSCALE, DBIAS):
        t.set_output(True)
    g.validate()
    DSCALE.set_data_type(frost.data_type.DOUBLE)
    DBIAS.set_data_type(frost.data_type.DOUBLE)
    g.build()
    dx, dscale, dbias = (np.full(t.get_dim(), np.nan) for t in (DX, DSCALE, DBIAS))
    g.execute({DY: dy, X: x, SCALE: scale, INV: inv.astype(np.float32), DX: dx, DSCALE: dscale, DBIAS: dbias}, None)

    def loss(x_, scale_):
        return (rms_reference(x_, scale_, None, eps)[0] * dy).sum()

    h = 1e-6
    num_dx = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        num_dx[idx] = (loss(x + e, scale) - loss(x - e, scale)) / (2 * h)
    np.testing.assert_allclose(dx, num_dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dscale, (dy * x * inv).sum(axis=0, keepdims=True), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dbias, dy.sum(axis=0, keepdims=True), rtol=1e-6)


def test_layernorm_backward(rng):
    x = rng.standard_normal((4, 9))
    scale = rng.standard_normal((1, 9))
    bias = rng.standard_normal((1, 9))
    dy = rng.standard_normal((4, 9))
    eps = 1e-5
    _, mean, inv = layer_reference(x, scale, bias, eps)
    g = frost.pygraph(
        io_data_type=frost.data_type.DOUBLE,
        intermediate_data_type=frost.data_type.DOUBLE,
        compute_data_type=frost.data_type.DOUBLE,
        handle=frost.create_handle("cpu"),
    )
    DY, X, SCALE = g.tensor_like(dy), g.tensor_like(x), g.tensor_like(scale)
    MEAN, INV = g.tensor_like(mean.astype(np.float32)), g.tensor_like(inv.astype(np.float32))
    DX, DSCALE, DBIAS = g.layernorm_backward(grad=DY, input=X, scale=SCALE, mean=MEAN, inv_variance=INV)
    for t in (DX, DSCALE, DBIAS):
        t.set_output(True).set_data_type(frost.data_type.DOUBLE)
    g.build()
    dx, dscale, dbias = (np.full(t.get_dim(), np.nan) for t in (DX, DSCALE, DBIAS))
    pack = {DY: dy, X: x, SCALE: scale, MEAN: mean.astype(np.float32), INV: inv.astype(np.float32)}
    g.execute({**pack, DX: dx, DSCALE: dscale, DBIAS: dbias}, None)
    xhat = (x - mean) * inv
    g_ = dy * scale
    want_dx = inv * (g_ - g_.mean(axis=1, keepdims=True) - xhat * (g_ * xhat).mean(axis=1, keepdims=True))
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dscale, (dy * xhat).sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dbias, dy.sum(axis=0, keepdims=True), rtol=1e-6)


def sdpa_reference(q, k, v, scale, left=None, right=None, bottom_right=False, bias=None):
    """O and natural-log LSE with masked rows giving O = 0, LSE = -inf."""
    b, h, s_q, _ = q.shape
    s_kv = k.shape[2]
    k = np.repeat(k, h // k.shape[1], axis=1)
    v = np.repeat(v, h // v.shape[1], axis=1)
    s = scale * np.einsum("bhid,bhjd->bhij", q, k)
    if bias is not None:
        s = s + bias
    i = np.arange(s_q)[:, None] + (s_kv - s_q if bottom_right else 0)
    j = np.arange(s_kv)[None, :]
    visible = np.ones((s_q, s_kv), bool)
    if right is not None:
        visible &= j <= i + right
    if left is not None:
        visible &= j > i - left
    s = np.where(visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    safe_m = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - safe_m)
    denom = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", p / np.where(denom > 0, denom, 1), v)
    lse = np.where(denom > 0, safe_m + np.log(np.where(denom > 0, denom, 1)), -np.inf)
    return o, lse


def sdpa_graph(q, k, v, **kwargs):
    g = float_graph()
    Q, K, V = g.tensor_like(q, name="q"), g.tensor_like(k, name="k"), g.tensor_like(v, name="v")
    O, STATS = g.sdpa(q=Q, k=K, v=V, name="attn", **kwargs)
    O.set_output(True)
    outputs = [O]
    if STATS is not None:
        STATS.set_output(True).set_data_type(FLOAT)
        outputs.append(STATS)
    return execute(g, {Q: q, K: k, V: v}, outputs)


@pytest.mark.parametrize("s_q, s_kv", [(17, 17), (5, 23), (1, 9)])
def test_sdpa_causal_with_stats(s_q, s_kv, rng):
    q = rng.standard_normal((2, 4, s_q, 16)).astype(np.float32)
    k = rng.standard_normal((2, 2, s_kv, 16)).astype(np.float32)  # GQA: 2 kv heads for 4 q heads
    v = rng.standard_normal((2, 2, s_kv, 8)).astype(np.float32)
    scale = 16**-0.5
    o, stats = sdpa_graph(q, k, v, attn_scale=scale, generate_stats=True, use_causal_mask=True)
    want_o, want_lse = sdpa_reference(q.astype(np.float64), k, v, scale, right=0)
    np.testing.assert_allclose(o, want_o, rtol=1e-5, atol=1e-5)
    assert stats.shape == (2, 4, s_q, 1)
    np.testing.assert_allclose(stats, want_lse, rtol=1e-5, atol=1e-5)


def test_sdpa_bottom_right_window_and_log2_stats(rng):
    q = rng.standard_normal((1, 2, 7, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 19, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 19, 8)).astype(np.float32)
    o, stats = sdpa_graph(
        q,
        k,
        v,
        attn_scale=0.3,
        is_inference=False,
        diagonal_alignment=frost.diagonal_alignment.BOTTOM_RIGHT,
        diagonal_band_left_bound=4,
        diagonal_band_right_bound=0,
        stats_use_log2=True,
    )
    want_o, want_lse = sdpa_reference(q.astype(np.float64), k, v, 0.3, left=4, right=0, bottom_right=True)
    np.testing.assert_allclose(o, want_o, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats, want_lse / np.log(2), rtol=1e-5, atol=1e-5)


def test_sdpa_sliding_window_and_bias_without_stats(rng):
    q = rng.standard_normal((1, 1, 11, 4)).astype(np.float32)
    k = rng.standard_normal((1, 1, 11, 4)).astype(np.float32)
    v = rng.standard_normal((1, 1, 11, 4)).astype(np.float32)
    bias = rng.standard_normal((1, 1, 11, 11)).astype(np.float32)
    g = float_graph()
    Q, K, V, BIAS = (g.tensor_like(a) for a in (q, k, v, bias))
    O, STATS = g.sdpa(q=Q, k=K, v=V, attn_scale=0.5, bias=BIAS, use_causal_mask=True, sliding_window_length=3)
    assert STATS is None
    O.set_output(True)
    (o,) = execute(g, {Q: q, K: k, V: v, BIAS: bias}, [O])
    want_o, _ = sdpa_reference(q.astype(np.float64), k, v, 0.5, left=3, right=0, bias=bias)
    np.testing.assert_allclose(o, want_o, rtol=1e-5, atol=1e-5)


def test_sdpa_padding_mask(rng):
    q = rng.standard_normal((2, 1, 6, 4)).astype(np.float32)
    k = rng.standard_normal((2, 1, 9, 4)).astype(np.float32)
    v = rng.standard_normal((2, 1, 9, 4)).astype(np.float32)
    lens_q = np.array([6, 3], np.int32).reshape(2, 1, 1, 1)
    lens_kv = np.array([9, 5], np.int32).reshape(2, 1, 1, 1)
    g = float_graph()
    Q, K, V = (g.tensor_like(a) for a in (q, k, v))
    SQ, SKV = g.tensor_like(lens_q), g.tensor_like(lens_kv)
    O, _ = g.sdpa(q=Q, k=K, v=V, use_padding_mask=True, seq_len_q=SQ, seq_len_kv=SKV)
    O.set_output(True)
    (o,) = execute(g, {Q: q, K: k, V: v, SQ: lens_q, SKV: lens_kv}, [O])
    for b in range(2):
        lq, lkv = int(lens_q[b, 0, 0, 0]), int(lens_kv[b, 0, 0, 0])
        want, _ = sdpa_reference(
            q[b : b + 1, :, :lq].astype(np.float64), k[b : b + 1, :, :lkv], v[b : b + 1, :, :lkv], 1.0
        )
        np.testing.assert_allclose(o[b : b + 1, :, :lq], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(o[b, :, lq:], 0)


def test_sdpa_malformed_dropout_raises(rng):
    g = float_graph()
    Q = g.tensor(name="q", dim=[1, 1, 4, 4])
    with pytest.raises(frost.InvalidValueError, match="dropout"):
        g.sdpa(q=Q, k=Q, v=Q, dropout=0.1)


def test_norm_validation_error_is_typed(rng):
    g = float_graph()
    X = g.tensor(name="X", dim=[4, 8])
    SCALE = g.tensor(name="scale", dim=[1, 7])
    Y, _ = g.rmsnorm(norm_forward_phase=frost.norm_forward_phase.INFERENCE, input=X, scale=SCALE, epsilon=1e-5)
    Y.set_output(True)
    with pytest.raises(frost.FrostError) as e:
        g.validate()
    assert "SCALE" in str(e.value) or "scale" in str(e.value)
