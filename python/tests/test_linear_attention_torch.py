"""frost.ops.gdn / kda (and their backward ops) and the torch custom ops frost::gdn_fwd, gdn_bwd, kda_fwd, kda_bwd
on CPU tensors (the reference engine): outputs and gradients against a pure-torch fp64 recurrence, opcheck,
gradcheck in float64, flash-linear-attention's packing (cu_seqlens with B == 1) and state pools."""

import pytest

torch = pytest.importorskip("torch")
import frost  # noqa: E402
from frost import ops, torch_ops  # noqa: E402

from delta_rule_reference import inputs, recurrence  # noqa: E402

OPS = ["gdn", "kda"]


def state(n=2, hv=2, kd=4, vd=5, seed=9, dtype=torch.float64):
    return torch.randn(n, hv, kd, vd, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("l2", [False, True])
def test_functional_forward_matches_the_recurrence(op, l2):
    q, k, v, g, beta = inputs(op == "kda", b=2, t=17, h=2, hv=4, kd=5, vd=3, dtype=torch.float32, seed=1)
    h0 = state(2, 4, 5, 3, dtype=torch.float32)
    o, final = getattr(ops, op)(q, k, v, g, beta, 0.7, h0, True, use_qk_l2norm_in_kernel=l2)
    assert o.dtype == torch.float32 and o.shape == v.shape
    assert final.dtype == torch.float32 and final.shape == (2, 4, 5, 3)
    want_o, want_final = recurrence(*(x.double() for x in (q, k, v, g, beta)), 0.7, h0.double(), l2=l2)
    torch.testing.assert_close(o.double(), want_o, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(final.double(), want_final, rtol=1e-4, atol=1e-5)
    o2, none = getattr(ops, op)(q, k, v, g, beta, 0.7, h0, use_qk_l2norm_in_kernel=l2)
    assert none is None and torch.equal(o2, o)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_keep_q_dtype_and_fp32_states(dtype):
    q, k, v, g, beta = inputs(False, b=1, t=33, h=1, hv=2, kd=8, vd=8, dtype=dtype, seed=2)
    o, final = ops.gdn(q, k, v, g.float(), beta, output_final_state=True)
    assert o.dtype == dtype and final.dtype == torch.float32
    want_o, want_final = recurrence(*(x.double() for x in (q, k, v, g, beta)))
    tol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    torch.testing.assert_close(o.double(), want_o, rtol=tol, atol=tol)
    torch.testing.assert_close(final.double(), want_final, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_packed_sequences_and_state_pool(index_dtype):
    q, k, v, g, beta = inputs(True, b=1, t=12, h=1, hv=2, dtype=torch.float32, seed=3)
    cu = torch.tensor([0, 5, 5, 12], dtype=index_dtype)  # three sequences, one of them empty
    h0 = state(3, dtype=torch.float32)
    o, final = ops.kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    want_o, want_final = recurrence(*(x.double() for x in (q, k, v, g, beta)), None, h0.double(), cu_seqlens=cu)
    torch.testing.assert_close(o.double(), want_o, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(final.double(), want_final, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(final[1], h0[1])  # the empty sequence keeps its state
    pool = state(5, dtype=torch.float32, seed=4)
    rows = torch.tensor([4, 0, 2], dtype=torch.int32)
    o, final = ops.kda(q, k, v, g, beta, None, pool, True, cu_seqlens=cu, state_indices=rows)
    want_o, want_final = recurrence(
        *(x.double() for x in (q, k, v, g, beta)), None, pool.double(), cu_seqlens=cu, state_indices=rows
    )
    assert final.shape == pool.shape
    torch.testing.assert_close(o.double(), want_o, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(final.double(), want_final, rtol=1e-4, atol=1e-5)


def test_fla_packing_rules_are_typed_errors():
    q, k, v, g, beta = inputs(False, b=2, t=6, dtype=torch.float32)
    with pytest.raises(frost.FrostError, match="(?i)cu_seqlens"):
        ops.gdn(q, k, v, g, beta, cu_seqlens=torch.tensor([0, 3, 6], dtype=torch.int32))
    with pytest.raises(TypeError):
        ops.gdn(q, k, v, g, beta, head_first=False)
    with pytest.raises(frost.FrostError, match="(?i)initial_state"):
        ops.gdn(q, k, v, g, beta, initial_state=state(2).to(torch.bfloat16))


@pytest.mark.parametrize("op", OPS)
def test_functional_backward_matches_autograd_of_the_recurrence(op):
    q, k, v, g, beta = inputs(op == "kda", b=2, t=7, h=1, hv=2, seed=5)
    h0 = state(2)
    do = torch.randn(v.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    dht = state(2, seed=7)
    grads = getattr(ops, op + "_backward")(q, k, v, g, beta, do, 0.625, h0, dht, use_qk_l2norm_in_kernel=True)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta, h0)]
    o, final = recurrence(*leaves[:5], 0.625, leaves[5], l2=True)
    want = torch.autograd.grad((o * do).sum() + (final * dht).sum(), leaves)
    for got, expected, name in zip(grads, want, ("dq", "dk", "dv", "dg", "dbeta", "dh0")):
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-10, msg=name)
    assert getattr(ops, op + "_backward")(q, k, v, g, beta, do)[5] is None


@pytest.mark.parametrize("op", OPS)
def test_opcheck_custom_ops(op):
    q, k, v, g, beta = inputs(op == "kda", b=1, t=9, h=1, hv=2, dtype=torch.float32, seed=8)
    fwd, bwd = getattr(torch.ops.frost, op + "_fwd"), getattr(torch.ops.frost, op + "_bwd")
    h0 = state(2, dtype=torch.float32)
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    do = torch.randn_like(v)
    torch.library.opcheck(fwd, (q, k, v, g, beta, 0.5, None, False, None, False, None))
    torch.library.opcheck(fwd, (q, k, v, g, beta, 0.5, h0, True, cu, True, None))
    torch.library.opcheck(bwd, (q, k, v, g, beta, do, 0.5, None, None, None, False, None))
    torch.library.opcheck(bwd, (q, k, v, g, beta, do, 0.5, h0, state(2, seed=1, dtype=torch.float32), cu, True, None))


@pytest.mark.parametrize("op", OPS)
def test_gradcheck_float64(op):
    q, k, v, g, beta = (x.requires_grad_() for x in inputs(op == "kda", b=2, t=4, h=1, hv=2, kd=2, vd=3, seed=10))
    h0 = state(2, 2, 2, 3).requires_grad_()
    fn = getattr(torch_ops, op)

    def both(*xs):
        o, final = fn(*xs[:5], 0.8, xs[5], True, use_qk_l2norm_in_kernel=True)
        return o, final

    assert torch.autograd.gradcheck(both, (q, k, v, g, beta, h0))


@pytest.mark.parametrize("op", OPS)
def test_autograd_with_packed_sequences_and_no_final_state(op):
    q, k, v, g, beta = inputs(op == "kda", b=1, t=10, h=1, hv=2, seed=11)
    cu = torch.tensor([0, 3, 10], dtype=torch.int64)
    h0 = state(2, seed=12)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta, h0)]
    o, final = getattr(torch_ops, op)(*leaves[:5], initial_state=leaves[5], cu_seqlens=cu)
    assert final is None
    do = torch.randn_like(o)
    got = torch.autograd.grad(o, leaves, do)
    ref_leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta, h0)]
    want_o, _ = recurrence(*ref_leaves[:5], None, ref_leaves[5], cu_seqlens=cu)
    torch.testing.assert_close(o, want_o, rtol=1e-10, atol=1e-12)
    want = torch.autograd.grad(want_o, ref_leaves, do)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-10)


def test_checker_fails_on_a_wrong_gradient():
    """The comparison above can fail: a gradient taken with another scale does not pass."""
    q, k, v, g, beta = inputs(False, seed=13)
    do = torch.randn_like(v)
    right = ops.gdn_backward(q, k, v, g, beta, do, 0.625)
    wrong = ops.gdn_backward(q, k, v, g, beta, do, 0.61)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(wrong[0], right[0], rtol=1e-9, atol=1e-10)


def test_delta_rule_support_asks_the_planner_without_running():
    q, k, v, g, beta = inputs(False, dtype=torch.float32, seed=14)
    h0 = state(2, dtype=torch.float32)
    assert ops.delta_rule_support("gdn", q, k, v, g, beta, None, h0, True, backward=True) is None
    reason = ops.delta_rule_support("kda", q, k, v, g, beta)  # kda needs g [B, T, HV, K]
    assert isinstance(reason, str) and "kda" in reason.lower() and "\n" not in reason
    assert "BFLOAT16" in ops.delta_rule_support("gdn", q, k, v, g, beta, initial_state=h0.to(torch.bfloat16))
    with pytest.raises(ValueError, match="mamba2"):
        ops.delta_rule_support("mamba2", q, k, v, g, beta)


def test_compiled_fullgraph_matches_eager():
    q, k, v, g, beta = inputs(True, b=1, t=6, seed=15)
    h0 = state(1, seed=16)

    def step(q_, k_, v_, g_, beta_, h0_):
        o, final = torch_ops.kda(q_, k_, v_, g_, beta_, None, h0_, True, use_qk_l2norm_in_kernel=True)
        return o.square().sum() + final.sum()

    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta, h0)]
    loss = torch.compile(step, fullgraph=True, backend="aot_eager")(*leaves)  # tracing, not C++ codegen
    got = torch.autograd.grad(loss, leaves)
    ref = [x.clone().requires_grad_() for x in (q, k, v, g, beta, h0)]
    want = torch.autograd.grad(step(*ref), ref)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-12, atol=1e-12)
