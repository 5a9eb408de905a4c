"""frost's torch custom ops on CPU tensors (the reference engine, FP32 and FP64): opcheck, gradients against
torch's own formulas and finite differences, and torch.compile(fullgraph=True) of a small attention block.
test_torch_gpu.py runs them on CUDA tensors, in the types the GPU engines serve."""

import pytest

torch = pytest.importorskip("torch")
from frost import torch_ops  # noqa: E402


def devices():
    return ["cpu"]


def rms_ref(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=tuple(range(1, x.dim())), keepdim=True) + eps) * w


def ln_ref(x, w, b, eps):
    dims = tuple(range(1, x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=False)
    return (x - mean) * torch.rsqrt(var + eps) * w + b


@pytest.mark.parametrize("device", devices())
def test_opcheck_every_op(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(17, 64, generator=g).to(device)
    w = torch.randn(1, 64, generator=g).to(device)
    b = torch.randn(1, 64, generator=g).to(device)
    torch.library.opcheck(torch.ops.frost.rms_norm, (x, w, 1e-5))
    torch.library.opcheck(torch.ops.frost.layer_norm, (x, w, b, 1e-5))
    y, inv = torch.ops.frost.rms_norm(x, w, 1e-5)
    torch.library.opcheck(torch.ops.frost.rms_norm_bwd, (torch.randn_like(y), x, w, inv))
    q = torch.randn(2, 4, 17, 16, generator=g).to(device)
    k = torch.randn(2, 2, 33, 16, generator=g).to(device)
    v = torch.randn(2, 2, 33, 16, generator=g).to(device)
    torch.library.opcheck(torch.ops.frost.sdpa_fwd, (q, k, v, 0.25, True))


@pytest.mark.parametrize("device", devices())
def test_norm_forward_and_gradients_match_torch(device):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(111, 48, generator=g, dtype=torch.float64).to(device).requires_grad_()
    w = torch.randn(1, 48, generator=g, dtype=torch.float64).to(device).requires_grad_()
    b = torch.randn(1, 48, generator=g, dtype=torch.float64).to(device).requires_grad_()
    dy = torch.randn(111, 48, generator=g, dtype=torch.float64).to(device)
    for ours, theirs, params in (
        (lambda: torch_ops.rms_norm(x, w, 1e-5), lambda: rms_ref(x, w, 1e-5), (x, w)),
        (lambda: torch_ops.layer_norm(x, w, b, 1e-5), lambda: ln_ref(x, w, b, 1e-5), (x, w, b)),
    ):
        y1 = ours()
        g1 = torch.autograd.grad(y1, params, dy)
        y2 = theirs()
        g2 = torch.autograd.grad(y2, params, dy)
        torch.testing.assert_close(y1, y2, rtol=1e-6, atol=1e-6)
        for a, e in zip(g1, g2):
            torch.testing.assert_close(a, e, rtol=1e-6, atol=1e-6)


def test_gradcheck_on_small_shapes():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(5, 7, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(1, 7, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(1, 7, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, c: torch_ops.rms_norm(a, c, 1e-5), (x, w))
    assert torch.autograd.gradcheck(lambda a, c, d: torch_ops.layer_norm(a, c, d, 1e-5), (x, w, b))


@pytest.mark.parametrize("device", devices())
def test_sdpa_matches_torch(device):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 4, 17, 32, generator=g).to(device)
    k = torch.randn(1, 2, 17, 32, generator=g).to(device)
    v = torch.randn(1, 2, 17, 32, generator=g).to(device)
    o = torch_ops.sdpa(q, k, v, is_causal=True)
    kk, vv = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    want = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, is_causal=True)
    torch.testing.assert_close(o, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("device", devices())
def test_sdpa_gradients_match_torch(device):
    g = torch.Generator().manual_seed(6)
    q = torch.randn(2, 4, 17, 16, generator=g, dtype=torch.float64).to(device).requires_grad_()
    k = torch.randn(2, 2, 33, 16, generator=g, dtype=torch.float64).to(device).requires_grad_()
    v = torch.randn(2, 2, 33, 16, generator=g, dtype=torch.float64).to(device).requires_grad_()
    do = torch.randn(2, 4, 17, 16, generator=g, dtype=torch.float64).to(device)
    for causal in (False, True):
        ours = torch.autograd.grad(torch_ops.sdpa(q, k, v, is_causal=causal), (q, k, v), do)
        kk, vv = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
        # frost's is_causal is top-left aligned, as torch's.
        diag = torch.ones(17, 33, dtype=torch.bool, device=device).tril() if causal else None
        o = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=diag)
        want = torch.autograd.grad(o, (q, k, v), do)
        for a, e in zip(ours, want):
            torch.testing.assert_close(a, e, rtol=1e-6, atol=1e-6)


def test_sdpa_gradcheck():
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 2, 5, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda a, b, c: torch_ops.sdpa(a, b, c, is_causal=True), (q, k, v))


def test_compile_fullgraph_attention_block():
    class Block(torch.nn.Module):
        def __init__(self, hidden=64, heads=4):
            super().__init__()
            self.heads = heads
            self.norm = torch.nn.Parameter(torch.ones(1, hidden))
            self.qkv = torch.nn.Linear(hidden, 3 * hidden, bias=False)
            self.out = torch.nn.Linear(hidden, hidden, bias=False)

        def forward(self, x):
            b, s, hidden = x.shape
            h = torch_ops.rms_norm(x.reshape(b * s, hidden), self.norm, 1e-5).reshape(b, s, hidden)
            q, k, v = self.qkv(h).reshape(b, s, 3, self.heads, hidden // self.heads).permute(2, 0, 3, 1, 4)
            o = torch_ops.sdpa(q.contiguous(), k.contiguous(), v.contiguous(), is_causal=True)
            return x + self.out(o.transpose(1, 2).reshape(b, s, hidden))

    torch.manual_seed(4)
    block = Block()
    x = torch.randn(2, 17, 64)
    eager = block(x)
    compiled = torch.compile(block, fullgraph=True)
    out = compiled(x)
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)
    # Gradients through the compiled block match eager ones.
    grads = torch.autograd.grad(out.square().sum(), list(block.parameters()))
    want = torch.autograd.grad(eager.square().sum(), list(block.parameters()))
    for a, e in zip(grads, want):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def test_norm_gradients_flow_in_training_step():
    torch.manual_seed(5)
    x = torch.randn(8, 32, requires_grad=True)
    w = torch.nn.Parameter(torch.ones(1, 32))
    loss = torch_ops.rms_norm(x, w).square().sum()
    loss.backward()
    assert x.grad is not None and w.grad is not None
    assert w.grad.dtype == w.dtype and torch.isfinite(x.grad).all()
