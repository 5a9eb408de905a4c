"""gdn / kda (flash-linear-attention keywords) against a naive numpy delta-rule recurrence, and their backward
ops against finite differences of that recurrence (FP64 graphs, tiny shapes)."""

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph
from references import replay, run

DOUBLE = frost.data_type.DOUBLE


def l2norm(x):
    return x / np.sqrt((x * x).sum(axis=-1, keepdims=True) + 1e-6)


def delta_rule(q, k, v, g, beta, scale, h0=None, l2=False, cu_seqlens=None):
    """o and the final states by the token-by-token recurrence; g is [B, T, HV] (GDN) or [B, T, HV, K] (KDA)."""
    if l2:
        q, k = l2norm(q), l2norm(k)
    b_, t_, h_, kd = q.shape
    hv_, vd = v.shape[2:]
    bounds = (
        [(b, 0, t_) for b in range(b_)]
        if cu_seqlens is None
        else [(0, int(cu_seqlens[i]), int(cu_seqlens[i + 1])) for i in range(len(cu_seqlens) - 1)]
    )
    o = np.zeros(v.shape)
    final = np.zeros((len(bounds), hv_, kd, vd))
    for n, (b, start, end) in enumerate(bounds):
        for hv in range(hv_):
            h = hv // (hv_ // h_)
            s = np.zeros((kd, vd)) if h0 is None else h0[n, hv].astype(np.float64)
            for t in range(start, end):
                decay = np.exp(g[b, t, hv])
                s = (decay[:, None] if np.ndim(decay) else decay) * s
                u = beta[b, t, hv] * (v[b, t, hv] - s.T @ k[b, t, h])
                s = s + np.outer(k[b, t, h], u)
                o[b, t, hv] = scale * s.T @ q[b, t, h]
            final[n, hv] = s
    return o, final


def inputs(rng, kda, b=2, t=5, h=1, hv=2, kd=3, vd=4):
    q = rng.standard_normal((b, t, h, kd))
    k = rng.standard_normal((b, t, h, kd)) / np.sqrt(kd)
    v = rng.standard_normal((b, t, hv, vd))
    g = -rng.uniform(0.05, 0.5, (b, t, hv, kd) if kda else (b, t, hv))
    beta = rng.uniform(0.2, 0.9, (b, t, hv))
    return q, k, v, g, beta


@pytest.mark.parametrize("op", ["gdn", "kda"])
@pytest.mark.parametrize("l2", [False, True])
def test_forward_matches_recurrence(op, l2, rng):
    q, k, v, g_, beta = (a.astype(np.float32) for a in inputs(rng, op == "kda"))
    h0 = rng.standard_normal((2, 2, 3, 4)).astype(np.float32)
    g = float_graph()
    Q, K, V, G, BETA, H0 = (g.tensor_like(a) for a in (q, k, v, g_, beta, h0))
    O, FINAL = getattr(g, op)(
        q=Q,
        k=K,
        v=V,
        g=G,
        beta=BETA,
        scale=0.7,
        initial_state=H0,
        output_final_state=True,
        use_qk_l2norm_in_kernel=l2,
        name=op,
    )
    O.set_output(True)
    FINAL.set_output(True)
    pack = {Q: q, K: k, V: v, G: g_, BETA: beta, H0: h0}
    o, final = run(g, pack, [O, FINAL])
    assert FINAL.get_data_type() == FLOAT and FINAL.get_dim() == [2, 2, 3, 4]
    want_o, want_final = delta_rule(*(a.astype(np.float64) for a in (q, k, v, g_, beta)), 0.7, h0, l2)
    np.testing.assert_allclose(o, want_o, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(final, want_final, rtol=1e-4, atol=1e-5)
    for have, again in zip((o, final), replay(g, pack, [O, FINAL])):
        assert have.tobytes() == again.tobytes()


def test_gdn_packed_sequences_default_scale(rng):
    q, k, v, g_, beta = (a.astype(np.float32) for a in inputs(rng, False, b=1, t=7))
    cu = np.array([0, 3, 7], np.int32)
    g = float_graph()
    Q, K, V, G, BETA, CU = (g.tensor_like(a) for a in (q, k, v, g_, beta, cu))
    O, FINAL = g.gdn(Q, K, V, G, BETA, cu_seqlens=CU, output_final_state=True)
    O.set_output(True)
    FINAL.set_output(True)
    o, final = run(g, {Q: q, K: k, V: v, G: g_, BETA: beta, CU: cu}, [O, FINAL])
    want_o, want_final = delta_rule(*(a.astype(np.float64) for a in (q, k, v, g_, beta)), 3**-0.5, cu_seqlens=cu)
    assert FINAL.get_dim() == [2, 2, 3, 4]
    np.testing.assert_allclose(o, want_o, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(final, want_final, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_backward_matches_finite_differences(op, rng):
    q, k, v, g_, beta = inputs(rng, op == "kda")
    h0 = rng.standard_normal((2, 2, 3, 4))
    do = rng.standard_normal(v.shape)
    dht = rng.standard_normal(h0.shape)
    scale = 0.6
    g = frost.pygraph(
        io_data_type=DOUBLE, intermediate_data_type=DOUBLE, compute_data_type=DOUBLE, handle=frost.create_handle("cpu")
    )
    Q, K, V, G, BETA, H0, DO, DHT = (g.tensor_like(a) for a in (q, k, v, g_, beta, h0, do, dht))
    grads = getattr(g, op + "_backward")(
        q=Q, k=K, v=V, g=G, beta=BETA, do=DO, scale=scale, initial_state=H0, dht=DHT, name=op + "_bwd"
    )
    for t in grads:
        t.set_output(True).set_data_type(DOUBLE)
    got = run(g, {Q: q, K: k, V: v, G: g_, BETA: beta, H0: h0, DO: do, DHT: dht}, list(grads), np.float64)

    def loss(q_, k_, v_, g__, beta_, h0_):
        o, final = delta_rule(q_, k_, v_, g__, beta_, scale, h0_)
        return (o * do).sum() + (final * dht).sum()

    base = [q, k, v, g_, beta, h0]
    eps = 1e-6
    for i, grad in enumerate(got):  # dq, dk, dv, dg, dbeta, dh0
        direction = rng.standard_normal(base[i].shape)
        plus, minus = list(base), list(base)
        plus[i] = base[i] + eps * direction
        minus[i] = base[i] - eps * direction
        numeric = (loss(*plus) - loss(*minus)) / (2 * eps)
        assert abs((grad * direction).sum() - numeric) <= 1e-6 * max(1.0, abs(numeric)), i


def test_keyword_errors():
    g = float_graph()
    X = g.tensor(name="x", dim=[1, 2, 1, 3])
    with pytest.raises(frost.InvalidValueError, match="dht"):
        g.gdn_backward(X, X, X, X, X, X, dht=X, d_final_state=X)
    with pytest.raises(TypeError):
        g.gdn(X, X, X, X, X, initial_states=X)
    B = g.tensor(name="beta", dim=[1, 2, 7])  # beta's head count disagrees with v's
    g.gdn(X, X, X, g.tensor(name="g", dim=[1, 2, 1]), B, name="bad_gdn")[0].set_output(True)
    with pytest.raises(frost.FrostError, match="bad_gdn"):
        g.validate()
