"""A pure-torch delta-rule recurrence (token by token, differentiable) that the linear-attention tests hold frost
against, in flash-linear-attention's conventions: q, k [B, T, H, K]; v [B, T, HV, V]; g [B, T, HV] (GDN) or
[B, T, HV, K] (KDA); beta [B, T, HV]; states [N, HV, K, V]."""

import torch


def l2norm(x):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6)


def recurrence(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None, l2=False, state_indices=None):
    """(o, final_state) in the inputs' precision (compute in float64 by passing float64 tensors). With
    state_indices, final_state has the pool's rows and the rows no sequence names keep the initial state."""
    if l2:
        q, k = l2norm(q), l2norm(k)
    b_, t_, h_, kd = q.shape
    hv_, vd = v.shape[2], v.shape[3]
    scale = kd**-0.5 if scale is None else scale
    qq, kk = (x.repeat_interleave(hv_ // h_, dim=2) for x in (q, k))
    if cu_seqlens is None:
        bounds = [(b, 0, t_) for b in range(b_)]
    else:
        offsets = [int(x) for x in cu_seqlens]
        bounds = [(0, offsets[n], offsets[n + 1]) for n in range(len(offsets) - 1)]
    rows = {}
    finals = []
    for n, (b, start, end) in enumerate(bounds):
        if initial_state is None:
            s = q.new_zeros((hv_, kd, vd))
        else:
            row = n if state_indices is None else int(state_indices[n])
            s = initial_state[row].to(q.dtype)
        for t in range(start, end):
            decay = torch.exp(g[b, t])
            s = s * (decay[:, None, None] if decay.dim() == 1 else decay[:, :, None])
            u = beta[b, t][:, None] * (v[b, t] - torch.einsum("hkv,hk->hv", s, kk[b, t]))
            s = s + torch.einsum("hk,hv->hkv", kk[b, t], u)
            rows[(b, t)] = scale * torch.einsum("hkv,hk->hv", s, qq[b, t])
        finals.append(s)
    o = torch.stack([torch.stack([rows[(b, t)] for t in range(t_)]) for b in range(b_)])
    final = torch.stack(finals)
    if state_indices is not None:
        pool = list(initial_state.to(q.dtype).unbind(0))
        for n, row in enumerate(state_indices.tolist()):
            pool[row] = final[n]
        final = torch.stack(pool)
    return o, final


def inputs(kda, b=2, t=5, h=1, hv=2, kd=4, vd=5, dtype=torch.float64, seed=0, device="cpu"):
    """Fresh random q, k, v, g, beta with decays in (0.6, 0.95) and betas in (0.2, 0.9)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, h, kd, generator=gen, dtype=torch.float64)
    k = torch.randn(b, t, h, kd, generator=gen, dtype=torch.float64) / kd**0.5
    v = torch.randn(b, t, hv, vd, generator=gen, dtype=torch.float64)
    g = -(torch.rand((b, t, hv, kd) if kda else (b, t, hv), generator=gen, dtype=torch.float64) * 0.45 + 0.05)
    beta = torch.rand(b, t, hv, generator=gen, dtype=torch.float64) * 0.7 + 0.2
    return [x.to(device=device, dtype=dtype) for x in (q, k, v, g, beta)]


def l2norm_backward(x, dy):
    """The gradient through y = l2norm(x), given dy."""
    r = torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)
    y = x * r
    return r * (dy - y * (y * dy).sum(-1, keepdim=True))


def check_chunked_backward(chunked_backward, t, decay):
    """A chunked backward (dq, dk, dv, dg, dbeta, dh0) against autograd through the token recurrence (with the
    kernel's l2norm of q and k), in float64 on one sequence of t tokens (K 8, V 6, chunks of 4). decay(t, kd) draws
    the log decay g: [t] for GDN, [t, kd] for KDA."""
    torch.manual_seed(t)
    d, kd, vd, scale = torch.float64, 8, 6, 0.37
    q, k, v = torch.randn(t, kd, dtype=d), torch.randn(t, kd, dtype=d), torch.randn(t, vd, dtype=d)
    g, beta = decay(t, kd), torch.rand(t, dtype=d) * 0.9 + 0.05
    h0, d_o, d_final = torch.randn(kd, vd, dtype=d), torch.randn(t, vd, dtype=d), torch.randn(kd, vd, dtype=d)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta, h0)]
    # One batch, one head: [T, ...] -> [1, T, 1, ...], the initial state as a pool of one [1, 1, K, V].
    qb, kb, vb, gb, bb = (x.unsqueeze(0).unsqueeze(2) for x in leaves[:5])
    o, final = recurrence(qb, kb, vb, gb, bb, scale, initial_state=leaves[5][None, None], l2=True)
    o, final = o[0, :, 0], final[0, 0]
    want = torch.autograd.grad((o * d_o).sum() + (final * d_final).sum(), leaves)
    got = chunked_backward(q, k, v, g, beta, h0, d_o, d_final, scale, c=4)
    for name, a, b in zip(("dq", "dk", "dv", "dg", "dbeta", "dh0"), got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)
