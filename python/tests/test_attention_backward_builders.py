"""sdpa_backward's dropout and block-mask keywords, and resample_backward, against numpy gradients."""

import numpy as np
import pytest

import frost
from conftest import float_graph
from references import attention, philox_uniform, run


def attention_backward(q, k, v, do, scale, visible, p_weights):
    """dQ, dK, dV of O = (softmax(scale Q K^T, masked) * p_weights) V, in float64."""
    s = np.where(visible, scale * np.einsum("bhid,bhjd->bhij", q, k), -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    dv = np.einsum("bhij,bhid->bhjd", p * p_weights, do)
    dp = np.einsum("bhid,bhjd->bhij", do, v) * p_weights
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    return scale * np.einsum("bhij,bhjd->bhid", ds, k), scale * np.einsum("bhij,bhid->bhjd", ds, q), dv


def test_sdpa_backward_with_philox_dropout_and_block_mask(rng):
    b, h, s_q, s_kv, d, scale, p_drop = 1, 2, 5, 7, 4, 0.4, 0.25
    q, k, v, do = (rng.standard_normal((b, h, s, d)) for s in (s_q, s_kv, s_kv, s_q))
    block = (rng.uniform(size=(1, 1, 3, 3)) > 0.4).astype(np.uint8)
    block[..., 0] = 1  # every query tile sees its first key tile, so no row is empty
    visible = block[0, 0][np.arange(s_q)[:, None] // 2, np.arange(s_kv)[None, :] // 3] != 0
    keep = (philox_uniform(9, 3, b * h * s_q * s_kv) >= p_drop).reshape(b, h, s_q, s_kv)

    g = float_graph()
    Q, K, V = (g.tensor_like(a.astype(np.float32)) for a in (q, k, v))
    BLOCK = g.tensor_like(block)
    O, STATS = g.sdpa(
        Q,
        K,
        V,
        attn_scale=scale,
        generate_stats=True,
        dropout=(p_drop, 9, 3),
        block_mask=BLOCK,
        block_mask_tile_size=(2, 3),
    )
    O.set_output(True), STATS.set_output(True)
    pack = {Q: q.astype(np.float32), K: k.astype(np.float32), V: v.astype(np.float32), BLOCK: block}
    o, stats = run(g, pack, [O, STATS])

    gb = float_graph()
    QB, KB, VB, OB, DOB, SB, BB = (
        gb.tensor_like(a) for a in (pack[Q], pack[K], pack[V], o, do.astype(np.float32), stats, block)
    )
    grads = gb.sdpa_backward(
        QB, KB, VB, OB, DOB, SB, attn_scale=scale, dropout=(p_drop, 9, 3), block_mask=BB, block_mask_tile_size=(2, 3)
    )
    for t in grads:
        t.set_output(True)
    dq, dk, dv = run(
        gb,
        {QB: pack[Q], KB: pack[K], VB: pack[V], OB: o, DOB: do.astype(np.float32), SB: stats, BB: block},
        list(grads),
    )

    want_o, _ = attention(q, k, v, scale, visible, keep / (1 - p_drop))
    np.testing.assert_allclose(o, want_o, rtol=1e-4, atol=1e-5)
    for have, want in zip((dq, dk, dv), attention_backward(q, k, v, do, scale, visible, keep / (1 - p_drop))):
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5)
    # Without the forward's dropout the gradients differ: the check above can fail.
    no_drop = attention_backward(q, k, v, do, scale, visible, np.ones_like(keep, dtype=np.float64))
    assert not np.allclose(dv, no_drop[2], rtol=1e-3, atol=1e-4)


def test_sdpa_backward_rejects_malformed_dropout():
    g = float_graph()
    X = g.tensor(name="x", dim=[1, 1, 4, 8], data_type=frost.data_type.FLOAT)
    with pytest.raises(frost.InvalidValueError, match="dropout"):
        g.sdpa_backward(X, X, X, X, X, X, dropout=(0.1,))


def test_resample_backward_average_and_max(rng):
    x = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    dy = rng.standard_normal((2, 3, 2, 3)).astype(np.float32)
    g = float_graph()
    X, DY = g.tensor_like(x), g.tensor_like(dy)
    DX_AVG = g.resample_backward(DY, frost.resample_mode.AVGPOOL_INCLUDE_PADDING, [2, 2], x=X)
    DX_MAX = g.resample_backward(DY, frost.resample_mode.MAXPOOL, [2, 2], x=X)
    DX_AVG.set_output(True), DX_MAX.set_output(True)
    dx_avg, dx_max = run(g, {X: x, DY: dy}, [DX_AVG, DX_MAX])

    want_avg = np.repeat(np.repeat(dy, 2, axis=2), 2, axis=3) / 4
    np.testing.assert_allclose(dx_avg, want_avg, rtol=1e-6)
    want_max = np.zeros_like(x)
    for i in range(2):
        for j in range(3):
            window = x[:, :, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].reshape(2, 3, 4)
            first = window.argmax(axis=-1)
            for n in range(2):
                for c in range(3):
                    r, s = divmod(int(first[n, c]), 2)
                    want_max[n, c, 2 * i + r, 2 * j + s] += dy[n, c, i, j]
    np.testing.assert_allclose(dx_max, want_max, rtol=1e-6)
    assert not np.allclose(dx_max, want_avg)
