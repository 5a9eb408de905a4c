"""gdn / kda on CUDA tensors (marked gpu). A test runs where the planner has an engine for its graph on the GPU
(the Hopper engine sm90_linear_attention); where none serves it, the test is reported as SKIPPED with the
planner's reason, never as passed. Where an engine serves: bf16 K = V = 128 outputs and gradients against the
CPU reference on the same values, opcheck on CUDA, and frost.fla with flash-linear-attention when it is
installed."""

import pytest

torch = pytest.importorskip("torch")
from frost import ops, torch_ops  # noqa: E402

from delta_rule_reference import inputs, recurrence  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device"),
]
ENGINE = "sm90_linear_attention"


def cuda_inputs(op, b=2, t=300, h=2, hv=4, kd=128, vd=128, seed=0):
    q, k, v, g, beta = inputs(op == "kda", b=b, t=t, h=h, hv=hv, kd=kd, vd=vd, dtype=torch.float32, seed=seed)
    k = torch.nn.functional.normalize(k, dim=-1)
    return [x.to("cuda", torch.bfloat16) if i != 3 else x.cuda() for i, x in enumerate((q, k, v, g, beta))]


def require_engine(op, *args, backward=False, **kwargs):
    """Skips, naming the engine and the planner's reason, unless an engine serves the graph on the GPU."""
    reason = ops.delta_rule_support(op, *args, backward=backward, **kwargs)
    if reason is not None:
        pytest.skip(f"no engine serves {op}{' backward' if backward else ''} on CUDA tensors ({ENGINE}): {reason}")


def plan_of(kind):
    for key, (g, _tensors) in reversed(list(ops._cache.items())):
        if key[0] == kind:
            return g.get_plan_name()
    raise AssertionError(f"no cached {kind} graph")


def close_to_reference(got, want):
    """frost's bf16 result must stay within 2x the error of the same recurrence run on the bf16-rounded inputs
    in fp32 and rounded to bf16 (a straightforward low-precision implementation), plus a small floor."""
    plain = want.to(torch.bfloat16).double()
    err, base = (got.double() - want).abs().max().item(), (plain - want).abs().max().item()
    assert err <= 2 * base + 2e-2 * want.abs().max().item(), (err, base)


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_forward_on_the_gpu_matches_the_reference(op):
    q, k, v, g, beta = cuda_inputs(op)
    h0 = torch.randn(2, 4, 128, 128, device="cuda") * 0.1
    require_engine(op, q, k, v, g, beta, None, h0, True)
    o, final = getattr(ops, op)(q, k, v, g, beta, None, h0, True)
    assert plan_of(op).startswith(ENGINE)
    want_o, want_final = recurrence(*(x.cpu().double() for x in (q, k, v, g, beta)), None, h0.cpu().double())
    assert torch.isfinite(o).all() and o.dtype == torch.bfloat16
    close_to_reference(o.cpu(), want_o)
    torch.testing.assert_close(final.cpu().double(), want_final, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_packed_sequences_on_the_gpu(op):
    q, k, v, g, beta = cuda_inputs(op, b=1, t=333, seed=1)
    cu = torch.tensor([0, 1, 130, 130, 333], dtype=torch.int32, device="cuda")
    require_engine(op, q, k, v, g, beta, None, None, True, cu_seqlens=cu)
    o, final = getattr(ops, op)(q, k, v, g, beta, None, None, True, cu_seqlens=cu)
    want_o, want_final = recurrence(*(x.cpu().double() for x in (q, k, v, g, beta)), cu_seqlens=cu.cpu())
    close_to_reference(o.cpu(), want_o)
    torch.testing.assert_close(final.cpu().double(), want_final, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_gradients_on_the_gpu_match_the_cpu_reference(op):
    q, k, v, g, beta = cuda_inputs(op, b=1, t=200, seed=2)
    h0 = torch.randn(1, 4, 128, 128, device="cuda") * 0.1
    require_engine(op, q, k, v, g, beta, None, h0, True, backward=True)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta, h0)]
    o, final = getattr(torch_ops, op)(*leaves[:5], None, leaves[5], True)
    do = torch.randn_like(o)
    dht = torch.randn_like(final) * 0.1
    got = torch.autograd.grad((o.float() * do.float()).sum() + (final * dht).sum(), leaves)
    cpu = [x.detach().cpu().double().requires_grad_() for x in (q, k, v, g, beta, h0)]
    want_o, want_final = recurrence(*cpu[:5], None, cpu[5])
    want = torch.autograd.grad((want_o * do.cpu().double()).sum() + (want_final * dht.cpu().double()).sum(), cpu)
    for a, e, name in zip(got, want, ("dq", "dk", "dv", "dg", "dbeta", "dh0")):
        scale = e.abs().max().item()
        err = (a.cpu().double() - e).abs().max().item()
        assert err <= 3e-2 * scale + 1e-3, (name, err, scale)


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_backward_on_the_gpu_matches_the_cpu_engine(op):
    """frost.ops.gdn_backward / kda_backward on CUDA tensors (packed sequences with an empty one, GVA, l2norm,
    initial state and the final state's gradient) against the same call on CPU tensors (the reference engine)."""
    q, k, v, g, beta = cuda_inputs(op, b=1, t=333, h=2, hv=4, seed=5)
    cu = torch.tensor([0, 1, 130, 130, 333], dtype=torch.int64, device="cuda")
    h0 = torch.randn(4, 4, 128, 128, device="cuda") * 0.1
    dht = torch.randn(4, 4, 128, 128, device="cuda") * 0.1
    do = torch.randn_like(v)
    options = dict(cu_seqlens=cu, use_qk_l2norm_in_kernel=True)
    require_engine(op, q, k, v, g, beta, None, h0, True, backward=True, **options)
    backward = getattr(ops, op + "_backward")
    got = backward(q, k, v, g, beta, do, None, h0, dht, **options)
    assert plan_of(op + "_backward").startswith(ENGINE)
    cpu = [x.cpu() for x in (q, k, v, g, beta, do)]
    want = backward(*cpu, None, h0.cpu(), dht.cpu(), cu_seqlens=cu.cpu(), use_qk_l2norm_in_kernel=True)
    for a, e, name in zip(got, want, ("dq", "dk", "dv", "dg", "dbeta", "dh0")):
        assert a.is_cuda and a.dtype == e.dtype and a.shape == e.shape, name
        scale = e.double().abs().max().item()
        err = (a.cpu().double() - e.double()).abs().max().item()
        assert err <= 3e-2 * scale + 1e-3, (name, err, scale)


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_opcheck_on_cuda(op):
    q, k, v, g, beta = cuda_inputs(op, b=1, t=64, seed=3)
    require_engine(op, q, k, v, g, beta, None, None, False)
    torch.library.opcheck(
        getattr(torch.ops.frost, op + "_fwd"), (q, k, v, g, beta, 0.1, None, False, None, False, None)
    )


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_fla_calls_run_on_frost_or_fall_back_to_identical_fla_results(op):
    fla_ops = pytest.importorskip("fla.ops", reason="flash-linear-attention is not installed")
    import frost.fla

    # The benchmark's head counts (GDN 32, KDA 64): FLA tunes nothing new.
    heads = 32 if op == "gdn" else 64
    q, k, v, g, beta = cuda_inputs(op, b=1, t=256, h=heads, hv=heads, seed=4)
    name = "chunk_gated_delta_rule" if op == "gdn" else "chunk_kda"
    expected = getattr(fla_ops, name)(q, k, v, g, beta, output_final_state=True)
    frost.fla.accelerate_fla()
    try:
        got = getattr(fla_ops, name)(q, k, v, g, beta, output_final_state=True)
        served = frost.fla.stats()
    finally:
        frost.fla.restore_fla()
    if served["frost"] == 0:
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
        pytest.skip(f"frost.fla fell back to FLA on CUDA ({ENGINE} missing): {served['last_reason']}")
    want_o, want_final = recurrence(*(x.cpu().double() for x in (q, k, v, g, beta)))
    close_to_reference(got[0].cpu(), want_o)
    torch.testing.assert_close(got[1].cpu().double(), want_final, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_gradients_within_flas_noise_where_its_backward_runs(op):
    """The gradients through FLA's function with frost.fla on (frost::gdn_bwd / kda_bwd) and through FLA's own
    kernels, each against autograd through the fp64 recurrence: frost's error must stay within twice FLA's (FLA's
    own bf16 noise) plus a small floor. Skipped with FLA's message where FLA's backward does not run (its GDN
    backward refuses Triton 3.4.0 to 3.7.0 on Hopper)."""
    fla_ops = pytest.importorskip("fla.ops", reason="flash-linear-attention is not installed")
    import frost.fla

    heads = 4
    q, k, v, g, beta = cuda_inputs(op, b=1, t=256, h=heads, hv=heads, seed=6)
    do = torch.randn_like(v)
    dht = torch.randn(1, heads, 128, 128, device="cuda") * 0.1
    name = "chunk_gated_delta_rule" if op == "gdn" else "chunk_kda"

    def grads(fn):
        leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta)]
        o, final = fn(*leaves, output_final_state=True)
        return torch.autograd.grad((o.float() * do.float()).sum() + (final * dht).sum(), leaves)

    try:
        fla = grads(getattr(fla_ops, name))
    except Exception as e:  # FLA's own refusal or failure; frost is not involved yet
        pytest.skip(f"FLA's {name} backward does not run here: {str(e).splitlines()[0][:300]}")
    frost.fla.accelerate_fla()
    try:
        got = grads(getattr(fla_ops, name))
        served = frost.fla.stats()
    finally:
        frost.fla.restore_fla()
    if served["frost"] == 0:
        pytest.skip(f"frost.fla fell back to FLA on CUDA ({ENGINE} missing): {served['last_reason']}")
    cpu = [x.detach().cpu().double().requires_grad_() for x in (q, k, v, g, beta)]
    want_o, want_final = recurrence(*cpu)
    want = torch.autograd.grad((want_o * do.cpu().double()).sum() + (want_final * dht.cpu().double()).sum(), cpu)
    for a, f, e, grad in zip(got, fla, want, ("dq", "dk", "dv", "dg", "dbeta")):
        err = (a.cpu().double() - e).abs().max().item()
        fla_err = (f.cpu().double() - e).abs().max().item()
        assert err <= 2 * fla_err + 1e-2 * e.abs().max().item(), (grad, err, fla_err)
