"""The chunked KDA backward that the sm90 kernels implement (sm90_kda_bwd_kernels.cuh: the reverse state pass
with per-channel state decay, the per-chunk gradient kernel through the WY form, and the intra-chunk kernel for
the products that carry exp(G_i - G_j) inside the sum over key channels), written out in float64 torch with the
kernels' split and blocking (a padded last chunk with zero q, k, beta and g on padded rows, the chunk's last
cumulative decay taken from its last row, dG summed backwards within a chunk), against autograd through the token
recurrence. Runs on the CPU: it checks the algebra, not the kernels."""

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
    lower, strict = idx[None, :] <= idx[:, None], idx[None, :] < idx[:, None]

    def chunk(n):
        rows = min(c, t_ - n * c)
        part = slice(n * c, n * c + rows)
        qc, kc, gc = (torch.zeros(c, kd, dtype=D) for _ in range(3))
        vc, doc = torch.zeros(c, vd, dtype=D), torch.zeros(c, vd, dtype=D)
        bc = torch.zeros(c, dtype=D)
        qc[:rows], kc[:rows], vc[:rows], doc[:rows] = qn[part], kn[part], v[part], d_o[part]
        gc[:rows], bc[:rows] = g[part], beta[part]
        return rows, part, qc, kc, vc, torch.cumsum(gc, 0), bc, doc

    def gated(x, y, gcum, mask):
        # sum_d x_id y_jd exp(G_id - G_jd), pairs outside mask zero: the exponent is only formed for j <= i.
        e = torch.exp(torch.where(lower[:, :, None], gcum[:, None, :] - gcum[None, :, :], torch.zeros(1, dtype=D)))
        return torch.where(mask, (x[:, None, :] * y[None, :, :] * e).sum(-1), torch.zeros(c, c, dtype=D))

    # Forward recomputation (the forward's chunk kernel and the recording state pass): KK, W, U, P, the states
    # entering the chunks and U'.
    fw, s = [], h0.clone()
    for n in range(chunks):
        rows, part, qc, kc, vc, gcum, bc, doc = chunk(n)
        gl = gcum[c - 1]
        kk = gated(kc, kc, gcum, strict)
        tm = torch.linalg.inv(torch.eye(c, dtype=D) + bc[:, None] * kk)
        w = tm @ (bc[:, None] * kc * torch.exp(gcum))
        u = tm @ (bc[:, None] * vc)
        up = u - w @ s
        qs = scale * qc * torch.exp(gcum)
        kr = kc * torch.exp(gl - gcum)
        fw.append(dict(s=s.clone(), kk=kk, tm=tm, w=w, up=up, p=scale * gated(qc, kc, gcum, lower), qs=qs, kr=kr))
        s = torch.exp(gl)[:, None] * s + kr.T @ up
    # Reverse state pass: dS of the state leaving each chunk, dU'.
    ds = d_final.clone()
    for n in reversed(range(chunks)):
        rows, part, qc, kc, vc, gcum, bc, doc = chunk(n)
        f = fw[n]
        f["dsn"] = ds.clone()
        f["dup"] = f["p"].T @ doc + f["kr"] @ ds
        ds = torch.exp(gcum[c - 1])[:, None] * ds + f["qs"].T @ doc - f["w"].T @ f["dup"]
    grads = [torch.zeros_like(x) for x in (q, k, v, g, beta)]
    for n in range(chunks):
        rows, part, qc, kc, vc, gcum, bc, doc = chunk(n)
        f = fw[n]
        s, dsn, up, dup, tm, kk = f["s"], f["dsn"], f["up"], f["dup"], f["tm"], f["kk"]
        last, gam = rows - 1, torch.exp(gcum)
        gl = gcum[c - 1]
        # The chunk gradient kernel.
        dps = torch.where(lower, scale * (doc @ up.T), torch.zeros(c, c, dtype=D))
        dqs = doc @ s.T
        dq = scale * gam * dqs
        dg = scale * qc * gam * dqs
        dgl = torch.exp(gl) * (s * dsn).sum(1)
        dkr = up @ dsn.T
        fr = torch.exp(gl - gcum)
        dk = fr * dkr
        x = kc * fr * dkr
        dg = dg - x
        dgl = dgl + x.sum(0)
        dw = -(dup @ s.T)
        kg = kc * gam
        dt = torch.tril(bc[None, :] * (dup @ vc.T + dw @ kg.T))
        y = tm.T @ dup
        dv = bc[:, None] * y
        dbc = (vc * y).sum(1)
        z = tm.T @ dw
        dk = dk + bc[:, None] * gam * z
        dg = dg + bc[:, None] * kg * z
        dbc = dbc + (kg * z).sum(1)
        xm = tm.T @ dt
        da = torch.where(strict, -(xm @ tm.T), torch.zeros(c, c, dtype=D))
        dbc = dbc + (da * kk).sum(1)
        dkk = bc[:, None] * da
        dg[last] += dgl
        # The intra-chunk kernel: per (i, d), sums over j <= i of exp(G_id - G_jd) terms, formed directly.
        e = torch.exp(torch.where(lower[:, :, None], gcum[:, None, :] - gcum[None, :, :], torch.zeros(1, dtype=D)))
        aq = (dps[:, :, None] * kc[None, :, :] * e).sum(1)
        ak = (dkk[:, :, None] * kc[None, :, :] * e).sum(1)
        ac = ((dps[:, :, None] * qc[:, None, :] + dkk[:, :, None] * kc[:, None, :]) * e).sum(0)
        dq = dq + aq
        dk = dk + ak + ac
        dg = dg + qc * aq + kc * ak - kc * ac
        for grad, xx in zip(grads, (dq, dk, dv)):
            grad[part] = xx[:rows]
        grads[3][part] = torch.flip(torch.cumsum(torch.flip(dg, [0]), 0), [0])[:rows]
        grads[4][part] = dbc[:rows]

    grads[0], grads[1] = l2norm_backward(q, grads[0]), l2norm_backward(k, grads[1])
    return grads + [ds]


@pytest.mark.parametrize("t", [1, 4, 11, 16])
def test_chunked_backward_matches_autograd_of_the_recurrence(t):
    check_chunked_backward(chunked_backward, t, lambda t, kd: -torch.rand(t, kd, dtype=D) * 2.0)
