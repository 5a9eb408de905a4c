"""A naive numpy recurrence of Mamba-2's scan (docs/ops/mamba2.md), the tests' reference in float64."""

import numpy as np


def softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def scan(x, dt, A, B, C, D=None, z=None, dt_bias=None, h0=None, cu_seqlens=None, dt_softplus=False, dt_limit=None):
    """y and the final states, token by token in float64."""
    b_, t_, h_, p_ = x.shape
    g_, n_ = B.shape[2:]
    step = dt + (0 if dt_bias is None else dt_bias)
    if dt_softplus:
        step = softplus(step)
    if dt_limit is not None:
        step = np.clip(step, *dt_limit)
    bounds = (
        [(b, 0, t_) for b in range(b_)]
        if cu_seqlens is None
        else [(0, int(cu_seqlens[i]), int(cu_seqlens[i + 1])) for i in range(len(cu_seqlens) - 1)]
    )
    y = np.zeros(x.shape)
    final = np.zeros((len(bounds), h_, p_, n_))
    for s, (b, start, end) in enumerate(bounds):
        for h in range(h_):
            grp = h // (h_ // g_)
            state = np.zeros((p_, n_)) if h0 is None else h0[s, h].astype(np.float64)
            for t in range(start, end):
                state = np.exp(step[b, t, h] * A[h]) * state + step[b, t, h] * np.outer(x[b, t, h], B[b, t, grp])
                out = state @ C[b, t, grp]
                if D is not None:
                    out = out + D[h] * x[b, t, h]  # D [H] or [H, P]
                if z is not None:
                    out = out * z[b, t, h] / (1 + np.exp(-z[b, t, h]))
                y[b, t, h] = out
            final[s, h] = state
    return y, final
