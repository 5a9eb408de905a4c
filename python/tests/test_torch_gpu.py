"""frost on CUDA tensors (marked gpu; skipped where this build or torch sees no CUDA device).

pygraph.execute and the functional ops run torch CUDA tensors on the GPU engines (sm90_norm for the
normalizations, sm90_sdpa_fwd and sm90_sdpa_bwd for attention) on torch's current stream; the torch custom
ops pass opcheck, gradcheck where an engine serves FP32 (the norms), match the CPU reference on bf16
gradients, and compile with fullgraph=True. frost::sdpa_bwd and the autograd of frost::sdpa_fwd run on sm90_sdpa_bwd."""

import pytest

torch = pytest.importorskip("torch")
import frost  # noqa: E402
from frost import ops, torch_ops  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device"),
]


def plan_of(kind):
    """The plan name of the most recent functional-op graph of this kind."""
    for key, (g, _tensors) in reversed(list(ops._cache.items())):
        if key[0] == kind:
            return g.get_plan_name()
    raise AssertionError(f"no cached {kind} graph")


def rms_ref(x, w, b=None, eps=1e-5):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()
    return y + b.float() if b is not None else y


def ln_ref(x, w, b, eps=1e-5):
    return torch.nn.functional.layer_norm(x.float(), x.shape[-1:], w.float().reshape(-1), b.float().reshape(-1), eps)


def test_pygraph_executes_torch_cuda_tensors_on_sm90_norm():
    handle = frost.create_handle("cuda:0")
    frost.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    g = frost.pygraph(
        io_data_type=frost.data_type.BFLOAT16,
        intermediate_data_type=frost.data_type.FLOAT,
        compute_data_type=frost.data_type.FLOAT,
        handle=handle,
    )
    x = torch.randn(333, 1000, device="cuda", dtype=torch.bfloat16)
    w = torch.rand(1, 1000, device="cuda", dtype=torch.bfloat16) + 0.5
    X, W = g.tensor_like(x), g.tensor_like(w)
    Y, INV = g.rmsnorm(norm_forward_phase=frost.norm_forward_phase.TRAINING, input=X, scale=W, epsilon=1e-5)
    Y.set_output(True)
    INV.set_output(True).set_data_type(frost.data_type.FLOAT)
    g.build([frost.heur_mode.A])
    assert g.get_plan_name().startswith("sm90_norm")
    y = torch.full_like(x, float("nan"))
    inv = torch.full((333, 1), float("nan"), device="cuda")
    g.execute({X: x, W: w, Y: y, INV: inv})  # torch tensors as declared: the fast path
    torch.testing.assert_close(y.float(), rms_ref(x, w), rtol=1.6e-2, atol=1.6e-2)
    want_inv = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    torch.testing.assert_close(inv, want_inv, rtol=1e-5, atol=1e-6)
    # The same pack by uids, and through the checked path (a permuted dense view of the output).
    y2 = torch.full_like(x, float("nan"))
    g.execute([x, w, y2, inv], tensor_uids=[X.get_uid(), W.get_uid(), Y.get_uid(), INV.get_uid()])
    assert torch.equal(y2, y)
    y3 = torch.full((1000, 333), float("nan"), device="cuda", dtype=torch.bfloat16).t()
    with pytest.raises(frost.InvalidVariantPackError, match="strides"):
        g.execute({X: x, W: w, Y: y3, INV: inv})
    with pytest.raises(frost.InvalidVariantPackError, match="is on cpu"):
        g.execute({X: x.cpu(), W: w, Y: y, INV: inv})


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("cols", [1, 17, 111, 1000, 4097])
def test_functional_norms_on_sm90_norm(dtype, cols):
    g = torch.Generator(device="cuda").manual_seed(cols)
    x = torch.randn(333, cols, device="cuda", dtype=dtype, generator=g) + 1
    w = torch.rand(1, cols, device="cuda", dtype=dtype, generator=g) + 0.5
    b = torch.randn(1, cols, device="cuda", dtype=dtype, generator=g)
    tol = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3, torch.float32: 2e-5}[dtype]
    y = ops.rms_norm(x, w, b)
    assert plan_of("rms_norm").startswith("sm90_norm")
    torch.testing.assert_close(y.float(), rms_ref(x, w, b), rtol=tol, atol=tol)
    y = ops.layer_norm(x, w, b)
    assert plan_of("layer_norm").startswith("sm90_norm")
    torch.testing.assert_close(y.float(), ln_ref(x, w, b), rtol=tol, atol=tol)


def test_work_runs_on_torchs_current_stream():
    """A side stream with queued work: frost's kernels follow it without any synchronization."""
    side = torch.cuda.Stream()
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(1, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        big = x.float() @ x.float()  # keeps the side stream busy
        z = (big * 0 + x.float()).to(torch.bfloat16)  # ready only after the matmul
        y = ops.rms_norm(z, w)
        assert frost.get_stream(ops._handles[(2, 0)]) == side.cuda_stream
    side.synchronize()
    torch.testing.assert_close(y.float(), rms_ref(x, w), rtol=1.6e-2, atol=1.6e-2)


def test_torch_custom_norm_ops_opcheck_and_fp32_gradcheck():
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(17, 64, device="cuda", generator=g)
    w = torch.rand(1, 64, device="cuda", generator=g) + 0.5
    b = torch.randn(1, 64, device="cuda", generator=g)
    torch.library.opcheck(torch.ops.frost.rms_norm, (x, w, 1e-5))
    torch.library.opcheck(torch.ops.frost.layer_norm, (x, w, b, 1e-5))
    y, inv = torch.ops.frost.rms_norm(x, w, 1e-5)
    torch.library.opcheck(torch.ops.frost.rms_norm_bwd, (torch.randn_like(y), x, w, inv))
    _, mean, inv = torch.ops.frost.layer_norm(x, w, b, 1e-5)
    torch.library.opcheck(torch.ops.frost.layer_norm_bwd, (torch.randn_like(y), x, w, mean, inv))
    # FP32 on the GPU engine: finite differences in FP32 need a wide step and loose tolerances.
    xs = torch.randn(5, 7, device="cuda", generator=g, requires_grad=True)
    ws = (torch.rand(1, 7, device="cuda", generator=g) + 0.5).requires_grad_()
    bs = torch.randn(1, 7, device="cuda", generator=g, requires_grad=True)
    kw = dict(eps=1e-2, atol=5e-2, rtol=5e-2, fast_mode=True)
    assert torch.autograd.gradcheck(lambda a, c: torch_ops.rms_norm(a, c, 1e-5), (xs, ws), **kw)
    assert torch.autograd.gradcheck(lambda a, c, d: torch_ops.layer_norm(a, c, d, 1e-5), (xs, ws, bs), **kw)


@pytest.mark.parametrize("kind", ["rms", "ln"])
def test_bf16_gradients_match_the_cpu_reference(kind):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(333, 1000, generator=g).to(torch.bfloat16)
    w = (torch.rand(1, 1000, generator=g) + 0.5).to(torch.bfloat16)
    b = torch.randn(1, 1000, generator=g).to(torch.bfloat16)
    dy = torch.randn(333, 1000, generator=g).to(torch.bfloat16)

    def grads(device):
        xs, ws, bs = (t.to(device).requires_grad_() for t in (x, w, b))
        if kind == "rms":
            y = torch_ops.rms_norm(xs, ws)
            return [y, *torch.autograd.grad(y, (xs, ws), dy.to(device))]
        y = torch_ops.layer_norm(xs, ws, bs)
        return [y, *torch.autograd.grad(y, (xs, ws, bs), dy.to(device))]

    gpu = grads("cuda")
    assert plan_of(("rms_norm" if kind == "rms" else "layer_norm") + "_backward").startswith("sm90_norm")
    cpu = grads("cpu")
    for got, want in zip(gpu, cpu):
        # Both compute in FP32 from the same bf16 values; the outputs differ by bf16 rounding at most.
        torch.testing.assert_close(got.cpu().float(), want.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sdpa_fwd_on_sm90(dtype):
    g = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(2, 4, 111, 128, device="cuda", dtype=dtype, generator=g)
    k = torch.randn(2, 2, 1000, 128, device="cuda", dtype=dtype, generator=g)
    v = torch.randn(2, 2, 1000, 128, device="cuda", dtype=dtype, generator=g)
    o, stats = torch.ops.frost.sdpa_fwd(q, k, v, 128**-0.5, True)
    assert plan_of("sdpa").startswith("sm90_sdpa_fwd")
    kk, vv = k.repeat_interleave(2, dim=1).float(), v.repeat_interleave(2, dim=1).float()
    mask = torch.ones(111, 1000, dtype=torch.bool, device="cuda").tril()
    want = torch.nn.functional.scaled_dot_product_attention(q.float(), kk, vv, attn_mask=mask)
    torch.testing.assert_close(o.float(), want, rtol=2e-2, atol=2e-2)
    s = (q.float() @ kk.transpose(-1, -2)) * 128**-0.5
    lse = torch.logsumexp(s.masked_fill(~mask, float("-inf")), dim=-1, keepdim=True)
    torch.testing.assert_close(stats, lse, rtol=1e-3, atol=1e-3)
    torch.library.opcheck(torch.ops.frost.sdpa_fwd, (q, k, v, 128**-0.5, True))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sdpa_bwd_on_sm90(dtype):
    g = torch.Generator(device="cuda").manual_seed(6)
    q = torch.randn(2, 4, 111, 128, device="cuda", dtype=dtype, generator=g)
    k, v = (torch.randn(2, 2, 300, 128, device="cuda", dtype=dtype, generator=g) for _ in range(2))
    o, stats = torch.ops.frost.sdpa_fwd(q, k, v, 128**-0.5, True)
    do = torch.randn_like(o)
    dq, dk, dv = torch.ops.frost.sdpa_bwd(q, k, v, o, do, stats, 128**-0.5, True)
    assert plan_of("sdpa_backward").startswith("sm90_sdpa_bwd")
    qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
    mask = torch.ones(111, 300, dtype=torch.bool, device="cuda").tril()
    ref = torch.nn.functional.scaled_dot_product_attention(
        qf, kf.repeat_interleave(2, dim=1), vf.repeat_interleave(2, dim=1), attn_mask=mask, scale=128**-0.5)
    want = torch.autograd.grad(ref, (qf, kf, vf), do.float())
    for got, exp in zip((dq, dk, dv), want):
        assert got.dtype == dtype
        torch.testing.assert_close(got.float(), exp, rtol=5e-2, atol=5e-2)
    torch.library.opcheck(torch.ops.frost.sdpa_bwd, (q, k, v, o, do, stats, 128**-0.5, True))


def test_sdpa_autograd_runs_both_passes_on_sm90():
    g = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = (torch.randn(1, 2, 200, 64, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
               for _ in range(3))
    out = torch_ops.sdpa(q, k, v, is_causal=True)
    assert plan_of("sdpa").startswith("sm90_sdpa_fwd")
    dout = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert plan_of("sdpa_backward").startswith("sm90_sdpa_bwd")
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=True)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)
    for got, exp in zip((dq, dk, dv), torch.autograd.grad(ref, (qf, kf, vf), dout.float())):
        torch.testing.assert_close(got.float(), exp, rtol=5e-2, atol=5e-2)


def test_compiled_fullgraph_attention_block():
    class Block(torch.nn.Module):
        def __init__(self, hidden=256, heads=2):
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
    block = Block().cuda().to(torch.bfloat16)
    x = torch.randn(2, 136, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        eager = block(x)
        out = torch.compile(block, fullgraph=True)(x)
    assert plan_of("sdpa").startswith("sm90_sdpa_fwd")
    torch.testing.assert_close(out.float(), eager.float(), rtol=2e-2, atol=2e-2)


def test_compiled_norm_training_step_gradients():
    torch.manual_seed(5)
    x = torch.randn(64, 512, device="cuda", requires_grad=True)
    w = torch.nn.Parameter(torch.rand(1, 512, device="cuda") + 0.5)

    def step(a, c):
        return torch_ops.rms_norm(a, c).square().sum()

    loss = torch.compile(step, fullgraph=True)(x, w)
    got = torch.autograd.grad(loss, (x, w))
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    want = torch.autograd.grad(rms_ref(xr, wr).square().sum(), (xr, wr))
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-3)
