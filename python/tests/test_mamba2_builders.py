"""mamba2 (mamba_ssm's keywords) against a naive numpy recurrence of Mamba-2's scan, and mamba2_backward against
finite differences of it, on the CPU reference."""

import math

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph

DOUBLE = frost.data_type.DOUBLE
from mamba2_reference import scan
from references import replay, run


def inputs(rng, b=2, t=6, h=4, g=2, p=3, n=5):
    x = rng.standard_normal((b, t, h, p))
    dt = rng.uniform(-2.0, 1.0, (b, t, h))
    A = -rng.uniform(0.2, 1.5, h)
    B = rng.standard_normal((b, t, g, n))
    C = rng.standard_normal((b, t, g, n))
    return [a.astype(np.float32) for a in (x, dt, A, B, C)]


@pytest.mark.parametrize("d_per_channel", [False, True])
def test_forward_with_every_option_matches_the_recurrence(d_per_channel, rng):
    x, dt, A, B, C = inputs(rng)
    D = rng.standard_normal((4, 3) if d_per_channel else 4).astype(np.float32)
    z = rng.standard_normal(x.shape).astype(np.float32)
    dt_bias = rng.uniform(-0.5, 0.5, 4).astype(np.float32)
    h0 = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)
    g = float_graph()
    X, DT, AA, BB, CC, DD, Z, BIAS, H0 = (g.tensor_like(a) for a in (x, dt, A, B, C, D, z, dt_bias, h0))
    Y, FINAL = g.mamba2(
        X,
        DT,
        AA,
        BB,
        CC,
        D=DD,
        z=Z,
        dt_bias=BIAS,
        initial_states=H0,
        dt_softplus=True,
        dt_limit=(0.05, 2.0),
        return_final_states=True,
        name="ssd",
    )
    Y.set_output(True)
    FINAL.set_output(True)
    pack = {X: x, DT: dt, AA: A, BB: B, CC: C, DD: D, Z: z, BIAS: dt_bias, H0: h0}
    y, final = run(g, pack, [Y, FINAL])
    assert FINAL.get_data_type() == FLOAT and FINAL.get_dim() == [2, 4, 3, 5]
    want_y, want_final = scan(
        *(a.astype(np.float64) for a in (x, dt, A, B, C)),
        D=D.astype(np.float64),
        z=z.astype(np.float64),
        dt_bias=dt_bias.astype(np.float64),
        h0=h0,
        dt_softplus=True,
        dt_limit=(0.05, 2.0),
    )
    np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(final, want_final, rtol=1e-4, atol=1e-5)
    for have, again in zip((y, final), replay(g, pack, [Y, FINAL])):
        assert have.tobytes() == again.tobytes()


def test_packed_sequences_and_the_default_dt_limit(rng):
    x, dt, A, B, C = inputs(rng, b=1, t=9)
    cu = np.array([0, 4, 4, 9], np.int64)  # the middle sequence is empty
    g = float_graph()
    X, DT, AA, BB, CC, CU = (g.tensor_like(a) for a in (x, dt, A, B, C, cu))
    Y, FINAL = g.mamba2(X, DT, AA, BB, CC, cu_seqlens=CU, dt_limit=(0.0, math.inf), return_final_states=True)
    Y.set_output(True)
    FINAL.set_output(True)
    y, final = run(g, {X: x, DT: dt, AA: A, BB: B, CC: C, CU: cu}, [Y, FINAL])
    # mamba_ssm's default limit clamps nothing: steps below 0 stay as they are.
    assert (dt < 0).any()
    want_y, want_final = scan(*(a.astype(np.float64) for a in (x, dt, A, B, C)), cu_seqlens=cu)
    assert FINAL.get_dim() == [3, 4, 3, 5]
    np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(final, want_final, rtol=1e-4, atol=1e-5)
    assert not final[1].any()  # the empty sequence keeps the zero start


def test_backward_matches_finite_differences(rng):
    x, dt, A, B, C = (a.astype(np.float64) for a in inputs(rng, b=1, t=4, h=2, g=1, p=2, n=3))
    D = rng.standard_normal((2, 2))
    z = rng.standard_normal(x.shape)
    dt_bias = rng.uniform(-0.5, 0.5, 2)
    h0 = rng.standard_normal((1, 2, 2, 3))
    dy = rng.standard_normal(x.shape)
    dh = rng.standard_normal(h0.shape)
    operands = {"x": x, "dt": dt, "A": A, "B": B, "C": C, "D": D, "z": z, "dt_bias": dt_bias, "h0": h0}

    def loss(values):
        y, final = scan(
            values["x"],
            values["dt"],
            values["A"],
            values["B"],
            values["C"],
            D=values["D"],
            z=values["z"],
            dt_bias=values["dt_bias"],
            h0=values["h0"],
            dt_softplus=True,
        )
        return (dy * y).sum() + (dh * final).sum()

    g = frost.pygraph(
        io_data_type=DOUBLE, intermediate_data_type=DOUBLE, compute_data_type=DOUBLE, handle=frost.create_handle("cpu")
    )
    T = {k: g.tensor_like(v) for k, v in operands.items()}
    DY, DH = g.tensor_like(dy), g.tensor_like(dh)
    grads = g.mamba2_backward(
        T["x"],
        T["dt"],
        T["A"],
        T["B"],
        T["C"],
        DY,
        D=T["D"],
        z=T["z"],
        dt_bias=T["dt_bias"],
        initial_states=T["h0"],
        dt_softplus=True,
        dfinal_states=DH,
    )
    assert all(t is not None for t in grads)
    for t in grads:
        t.set_output(True).set_data_type(DOUBLE)
    pack = {**{T[k]: v for k, v in operands.items()}, DY: dy, DH: dh}
    got = run(g, pack, list(grads), dtype=np.float64)
    step = 1e-6
    for name, have in zip(("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "h0"), got):
        want = np.zeros(operands[name].shape)
        for i in np.ndindex(want.shape):
            up = {k: v.copy() for k, v in operands.items()}
            down = {k: v.copy() for k, v in operands.items()}
            up[name][i] += step
            down[name][i] -= step
            want[i] = (loss(up) - loss(down)) / (2 * step)
        np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-7, err_msg=name)


def test_errors_name_the_port(rng):
    x, dt, A, B, C = inputs(rng)
    g = float_graph()
    X, DT, AA, CC = (g.tensor_like(a) for a in (x, dt, A, C))
    B3 = g.tensor(name="b3", dim=[2, 6, 3, 5])  # 3 groups for 4 heads
    g.mamba2(X, DT, AA, B3, CC, name="bad_groups")[0].set_output(True)
    with pytest.raises(frost.FrostError, match="B.dim"):
        g.validate()
    with pytest.raises(TypeError):
        float_graph().mamba2(X, DT, AA, B3, CC, initial_state=X)  # mamba_ssm's keyword is initial_states
