"""frost.ops.mamba2 / mamba2_backward on arrays, and the torch custom ops frost::mamba2_fwd / mamba2_bwd with their
autograd (frost.torch_ops.mamba2), on the CPU reference: against the numpy recurrence, and gradcheck."""

import math

import numpy as np
import pytest

import frost
from mamba2_reference import scan

torch = pytest.importorskip("torch")
import frost.torch_ops  # noqa: E402  (needs torch)


def operands(rng, b=1, t=5, h=2, g=1, p=2, n=3):
    return dict(
        x=rng.standard_normal((b, t, h, p)),
        dt=rng.uniform(-2.0, 1.0, (b, t, h)),
        A=-rng.uniform(0.2, 1.5, h),
        B=rng.standard_normal((b, t, g, n)),
        C=rng.standard_normal((b, t, g, n)),
        D=rng.standard_normal((h, p)),
        z=rng.standard_normal((b, t, h, p)),
        dt_bias=rng.uniform(-0.5, 0.5, h),
        initial_states=rng.standard_normal((b, h, p, n)),
    )


def test_functional_forward_on_numpy_and_torch_arrays(rng):
    ops = operands(rng, b=2)
    want_y, want_final = scan(
        ops["x"],
        ops["dt"],
        ops["A"],
        ops["B"],
        ops["C"],
        D=ops["D"],
        z=ops["z"],
        dt_bias=ops["dt_bias"],
        h0=ops["initial_states"],
        dt_softplus=True,
        dt_limit=(0.05, 1.5),
    )
    for wrap in (np.asarray, torch.from_numpy):
        args = {k: wrap(v) for k, v in ops.items()}
        y, final = frost.ops.mamba2(**args, dt_softplus=True, dt_limit=(0.05, 1.5), return_final_states=True)
        np.testing.assert_allclose(np.asarray(y), want_y, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.asarray(final), want_final, rtol=1e-12, atol=1e-12)
        assert type(y) is type(args["x"])
    y, final = frost.ops.mamba2(ops["x"], ops["dt"], ops["A"], ops["B"], ops["C"])
    assert final is None
    np.testing.assert_allclose(y, scan(ops["x"], ops["dt"], ops["A"], ops["B"], ops["C"])[0], rtol=1e-12)


@pytest.mark.parametrize("with_options", [False, True])
def test_autograd_passes_gradcheck(with_options, rng):
    ops = {k: torch.from_numpy(v).requires_grad_() for k, v in operands(rng).items()}
    if not with_options:
        for k in ("D", "z", "dt_bias", "initial_states"):
            ops[k] = None

    def f(x, dt, A, B, C, D, z, dt_bias, initial_states):
        y, final = frost.torch_ops.mamba2(
            x,
            dt,
            A,
            B,
            C,
            D=D,
            z=z,
            dt_bias=dt_bias,
            initial_states=initial_states,
            dt_softplus=True,
            dt_limit=(0.0, math.inf),
            return_final_states=True,
        )
        return y, final

    names = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states")
    assert torch.autograd.gradcheck(f, tuple(ops[k] for k in names), eps=1e-6, atol=1e-6)


def test_backward_gradients_of_absent_inputs_are_none(rng):
    ops = operands(rng)
    dy = rng.standard_normal(ops["x"].shape)
    grads = frost.ops.mamba2_backward(ops["x"], ops["dt"], ops["A"], ops["B"], ops["C"], dy, dt_softplus=True)
    assert len(grads) == 9
    assert all(g is not None for g in grads[:5]) and all(g is None for g in grads[5:])
    assert grads[3].shape == ops["B"].shape and grads[2].shape == ops["A"].shape


def test_opcheck(rng):
    ops = {k: torch.from_numpy(v) for k, v in operands(rng).items()}
    args = (*ops.values(), None, True, 0.0, math.inf, True)
    torch.library.opcheck(torch.ops.frost.mamba2_fwd, args)
