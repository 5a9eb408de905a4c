"""frost.ops: functional calls on numpy arrays, with their graph cache."""

import numpy as np
import pytest

import frost
import frost.ops


def test_sdpa_matches_numpy_and_caches(rng):
    frost.ops.clear_cache()
    q = rng.standard_normal((1, 2, 9, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 13, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 13, 8)).astype(np.float32)
    o, stats = frost.ops.sdpa(q, k, v, is_causal=True, causal_bottom_right=True, return_stats=True)
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k) / np.sqrt(8)
    visible = np.arange(13)[None, :] <= np.arange(9)[:, None] + 4
    s = np.where(visible, s, -np.inf)
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)) + s.max(-1, keepdims=True)
    np.testing.assert_allclose(o, np.einsum("bhij,bhjd->bhid", np.exp(s - lse), v), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats, lse, rtol=1e-5, atol=1e-5)
    assert frost.ops.cache_info() == 1
    frost.ops.sdpa(q + 1, k, v, is_causal=True, causal_bottom_right=True, return_stats=True)
    assert frost.ops.cache_info() == 1  # same shapes and attributes: the graph is reused
    frost.ops.sdpa(q, k, v)
    assert frost.ops.cache_info() == 2
    assert frost.ops.cache_stats()[:3] == (1, 2, 2)  # hits, misses, size


def test_norm_training_and_backward_match_numpy(rng):
    x = rng.standard_normal((17, 24))
    w = rng.standard_normal((1, 24))
    dy = rng.standard_normal((17, 24))
    y, inv = frost.ops.rms_norm_training(x, w, eps=1e-5)
    want_inv = 1 / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(inv, want_inv, rtol=1e-12)
    np.testing.assert_allclose(y, x * want_inv * w, rtol=1e-12)
    dx, dw, db = frost.ops.rms_norm_backward(dy, x, w, inv)
    assert db is None
    # d/dx of x * r(x) * w with r = (mean(x^2) + eps)^-1/2: dx = r*w*dy - x * r^3 * mean(dy*w*x).
    want_dx = want_inv * w * dy - x * want_inv**3 * (dy * w * x).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dw, (dy * x * want_inv).sum(axis=0, keepdims=True), rtol=1e-10)
    b = rng.standard_normal((1, 24))
    y, mean, inv_var = frost.ops.layer_norm_training(x, w, b, eps=1e-5)
    np.testing.assert_allclose(mean, x.mean(axis=1, keepdims=True), rtol=1e-12)
    dx, dw, db = frost.ops.layer_norm_backward(dy, x, w, mean, inv_var)
    np.testing.assert_allclose(db, dy.sum(axis=0, keepdims=True), rtol=1e-10)
    xhat = (x - mean) * inv_var
    np.testing.assert_allclose(dw, (dy * xhat).sum(axis=0, keepdims=True), rtol=1e-10)


def test_norms_and_matmul(rng):
    x = rng.standard_normal((7, 33)).astype(np.float32)
    w = rng.standard_normal((1, 33)).astype(np.float32)
    b = rng.standard_normal((1, 33)).astype(np.float32)
    xd = x.astype(np.float64)
    y = frost.ops.rms_norm(x, w, eps=1e-6)
    np.testing.assert_allclose(y, xd / np.sqrt((xd * xd).mean(1, keepdims=True) + 1e-6) * w, rtol=1e-5, atol=1e-5)
    y = frost.ops.layer_norm(x, w, b)
    want = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    a = rng.standard_normal((2, 5, 6)).astype(np.float32)
    m = rng.standard_normal((2, 6, 3)).astype(np.float32)
    out = np.full((2, 5, 3), np.nan, np.float32)
    assert frost.ops.matmul(a, m, out=out) is out
    np.testing.assert_allclose(out, a @ m, rtol=1e-5, atol=1e-5)


def test_errors():
    with pytest.raises(TypeError):
        frost.ops.rms_norm([1.0, 2.0], None)
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(frost.InvalidVariantPackError):
        frost.ops.rms_norm(x, np.ones((1, 3), np.float32), out=np.zeros((2, 3), np.float64))


def test_sdpa_backward_matches_numpy(rng):
    q = rng.standard_normal((1, 2, 5, 8))
    k = rng.standard_normal((1, 1, 7, 8))
    v = rng.standard_normal((1, 1, 7, 8))
    do = rng.standard_normal((1, 2, 5, 8))
    o, stats = frost.ops.sdpa(q, k, v, is_causal=True, return_stats=True)
    dq, dk, dv = frost.ops.sdpa_backward(q, k, v, o, do, stats, is_causal=True)
    scale = 8**-0.5
    s = np.einsum("bhid,bhjd->bhij", q, np.repeat(k, 2, axis=1)) * scale
    s = np.where(np.tril(np.ones((5, 7), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    vv = np.repeat(v, 2, axis=1)
    dp = np.einsum("bhid,bhjd->bhij", do, vv)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    np.testing.assert_allclose(dq, np.einsum("bhij,bhjd->bhid", ds, np.repeat(k, 2, axis=1)) * scale, atol=1e-6)
    np.testing.assert_allclose(dk, (np.einsum("bhij,bhid->bhjd", ds, q) * scale).sum(1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(dv, np.einsum("bhij,bhid->bhjd", p, do).sum(1, keepdims=True), atol=1e-6)
