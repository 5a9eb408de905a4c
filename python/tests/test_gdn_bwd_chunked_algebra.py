"""The chunked GDN backward that the sm90 kernels implement (sm90_gdn_bwd_kernels.cuh: the reverse state pass
and the per-chunk gradients through the WY form), written out in float64 torch with the kernels' blocking (a
padded last chunk, zero key factors on padded rows, dG summed backwards within a chunk), against autograd
through the token recurrence. Runs on the CPU: it checks the algebra, not the kernels."""

import pytest

torch = pytest.importorskip("torch")

from delta_rule_reference import check_chunked_backward, l2norm, l2norm_backward  # noqa: E402

D = torch.float64


def chunked_backward(q, k, v, g, beta, h0, d_o, d_final, scale, c):
    t_, kd = q.shape
    vd = v.shape[1]
    qn, kn = l2norm(q), l2norm(k)
    chunks = (t_ + c - 1) // c
    idx = torch.arange(c)

    def chunk(n):
        rows = min(c, t_ - n * c)
        part = slice(n * c, n * c + rows)
        pad = [torch.zeros(c, w, dtype=D) for w in (kd, kd, vd, vd)]
        qc, kc, vc, doc = pad
        qc[:rows], kc[:rows], vc[:rows], doc[:rows] = qn[part], kn[part], v[part], d_o[part]
        gc, bc = torch.zeros(c, dtype=D), torch.zeros(c, dtype=D)
        gc[:rows], bc[:rows] = g[part], beta[part]
        return rows, qc, kc, vc, torch.cumsum(gc, 0), bc, doc

    def masks(gcum):
        lower = idx[None, :] <= idx[:, None]
        m = torch.where(lower, torch.exp(gcum[:, None] - gcum[None, :]), torch.zeros(c, c, dtype=D))
        return m, idx[None, :] < idx[:, None]

    # Forward recomputation: the state entering each chunk, U' = U - W S, W and P.
    states, unew, ws, ps, s = [], [], [], [], h0.clone()
    for n in range(chunks):
        rows, qc, kc, vc, gcum, bc, _ = chunk(n)
        m, strict = masks(gcum)
        kk = torch.where(strict, (kc @ kc.T) * m, torch.zeros(c, c, dtype=D))
        tm = torch.linalg.inv(torch.eye(c, dtype=D) + bc[:, None] * kk)
        w = tm @ ((bc * torch.exp(gcum))[:, None] * kc)
        u = tm @ (bc[:, None] * vc)
        states.append(s.clone())
        unew.append(u - w @ s)
        ws.append(w)
        ps.append(scale * (qc @ kc.T) * m)
        kf = torch.exp(gcum[rows - 1] - gcum)
        kf[rows:] = 0
        s = torch.exp(gcum[rows - 1]) * s + kc.T @ (kf[:, None] * unew[-1])
    # Reverse state pass: dS of the state leaving each chunk, and dU'.
    ds, dss, dus = d_final.clone(), [None] * chunks, [None] * chunks
    for n in reversed(range(chunks)):
        rows, qc, kc, vc, gcum, bc, doc = chunk(n)
        dss[n] = ds.clone()
        kf = torch.exp(gcum[rows - 1] - gcum)
        kf[rows:] = 0
        dus[n] = ps[n].T @ doc + kf[:, None] * (kc @ ds)
        ds = torch.exp(gcum[rows - 1]) * ds + qc.T @ (scale * torch.exp(gcum)[:, None] * doc) - ws[n].T @ dus[n]
    grads = [torch.zeros_like(x) for x in (q, k, v, g, beta)]
    for n in range(chunks):
        rows, qc, kc, vc, gcum, bc, doc = chunk(n)
        last, gam = rows - 1, torch.exp(gcum)
        s, dsn, up, dup = states[n], dss[n], unew[n], dus[n]
        m, strict = masks(gcum)
        kk = torch.where(strict, (kc @ kc.T) * m, torch.zeros(c, c, dtype=D))
        tm = torch.linalg.inv(torch.eye(c, dtype=D) + bc[:, None] * kk)
        dgc, dbc = torch.zeros(c, dtype=D), torch.zeros(c, dtype=D)
        dp = scale * (doc @ up.T) * m
        e = dp * (qc @ kc.T)
        dgc += e.sum(1) - e.sum(0)
        dq = scale * gam[:, None] * (doc @ s.T)
        dgc += (dq * qc).sum(1)
        dq = dq + dp @ kc
        dk = torch.exp(gcum[last] - gcum)[:, None] * (up @ dsn.T)
        moved = (dk * kc).sum(1)
        dgc -= moved
        dgc[last] += moved.sum() + torch.exp(gcum[last]) * (dsn * s).sum()
        dk = dk + dp.T @ qc
        dw = -(dup @ s.T)
        dt = torch.tril(bc[None, :] * (dup @ vc.T + gam[None, :] * (dw @ kc.T)))
        y = tm.T @ dup
        dv = bc[:, None] * y
        dbc += (vc * y).sum(1)
        z = tm.T @ dw
        dk = dk + (bc * gam)[:, None] * z
        kz = (kc * z).sum(1)
        dbc += gam * kz
        dgc += bc * gam * kz
        da = torch.where(strict, -(tm.T @ dt @ tm.T), torch.zeros(c, c, dtype=D))
        dbc += (da * kk).sum(1)
        e = da * bc[:, None] * kk
        dgc += e.sum(1) - e.sum(0)
        dkk = bc[:, None] * da * m
        dk = dk + dkk @ kc + dkk.T @ kc
        part = slice(n * c, n * c + rows)
        for grad, x in zip(grads, (dq, dk, dv)):
            grad[part] = x[:rows]
        grads[3][part] = torch.flip(torch.cumsum(torch.flip(dgc[:rows], [0]), 0), [0])
        grads[4][part] = dbc[:rows]

    grads[0], grads[1] = l2norm_backward(q, grads[0]), l2norm_backward(k, grads[1])
    return grads + [ds]


@pytest.mark.parametrize("t", [1, 4, 11, 16])
def test_chunked_backward_matches_autograd_of_the_recurrence(t):
    check_chunked_backward(chunked_backward, t, lambda t, kd: -torch.rand(t, dtype=D) * 0.5)
