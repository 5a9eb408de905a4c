"""frost.fla on CPU with a stand-in `fla` package in sys.modules (flash-linear-attention need not be installed):
accelerate_fla() / restore_fla() / is_accelerated(), idempotence, the names patched (defining modules, packages,
aliases, layers, modules imported later), calls served on frost matching the recurrence with gradients, and the
fallback to FLA's function, with the arguments untouched, for every call frost does not serve."""

import sys
import types

import pytest

torch = pytest.importorskip("torch")
import frost.fla  # noqa: E402

from delta_rule_reference import inputs, recurrence  # noqa: E402


def _fake_chunk_gated_delta_rule(
    q,
    k,
    v,
    g,
    beta,
    scale=None,
    initial_state=None,
    output_final_state=False,
    use_qk_l2norm_in_kernel=False,
    use_beta_sigmoid_in_kernel=False,
    allow_neg_eigval=False,
    state_v_first=False,
    cu_seqlens=None,
    cu_seqlens_cpu=None,
    chunk_indices=None,
    cp_context=None,
    **kwargs,
):
    """Stands for FLA 0.6's chunk_gated_delta_rule (same signature); records the call."""
    CALLS.append(("gdn", dict(locals())))
    return "fla-gdn", None


def _fake_chunk_kda(
    q,
    k,
    v,
    g,
    beta,
    scale=None,
    initial_state=None,
    output_final_state=False,
    use_qk_l2norm_in_kernel=False,
    use_gate_in_kernel=False,
    use_beta_sigmoid_in_kernel=False,
    allow_neg_eigval=False,
    safe_gate=False,
    lower_bound=None,
    disable_recompute=False,
    return_intermediate_states=False,
    state_v_first=False,
    cu_seqlens=None,
    cu_seqlens_cpu=None,
    cp_context=None,
    use_graph=False,
    max_num_seqs=None,
    **kwargs,
):
    """Stands for FLA 0.6's chunk_kda (same signature); records the call."""
    CALLS.append(("kda", dict(locals())))
    return "fla-kda", None


CALLS = []


@pytest.fixture
def fake_fla(monkeypatch):
    """fla, fla.ops, the two op packages with their chunk modules, and two layer modules that imported the ops."""
    CALLS.clear()
    mods = {
        name: types.ModuleType(name)
        for name in (
            "fla",
            "fla.ops",
            "fla.ops.gated_delta_rule",
            "fla.ops.gated_delta_rule.chunk",
            "fla.ops.kda",
            "fla.ops.kda.chunk",
            "fla.layers",
            "fla.layers.gated_deltanet",
            "fla.layers.kda",
        )
    }
    gdn, kda = _fake_chunk_gated_delta_rule, _fake_chunk_kda
    mods["fla.ops.gated_delta_rule.chunk"].chunk_gated_delta_rule = gdn
    mods["fla.ops.gated_delta_rule.chunk"].chunk_gdn = gdn
    mods["fla.ops.kda.chunk"].chunk_kda = kda
    for name in ("fla.ops.gated_delta_rule", "fla.ops"):
        mods[name].chunk_gated_delta_rule = gdn
        mods[name].chunk_gdn = gdn
    mods["fla.ops.kda"].chunk_kda = kda
    mods["fla.ops"].chunk_kda = kda
    mods["fla.layers.gated_deltanet"].chunk_gated_delta_rule = gdn
    mods["fla.layers.kda"].chunk_kda = kda
    for name, module in mods.items():
        if "." in name:
            parent, _, child = name.rpartition(".")
            setattr(mods[parent], child, module)
        monkeypatch.setitem(sys.modules, name, module)
    yield mods
    frost.fla.restore_fla()


def patched_names(mods, value):
    return sorted(f"{n}.{a}" for n, m in mods.items() for a, v in vars(m).items() if v is value)


def test_accelerate_patches_every_name_and_restore_undoes_it(fake_fla):
    mods = fake_fla
    assert not frost.fla.is_accelerated()
    assert frost.fla.accelerate_fla() == ("gdn", "kda")
    assert frost.fla.is_accelerated()
    gdn = mods["fla.ops.gated_delta_rule"].chunk_gated_delta_rule
    kda = mods["fla.ops.kda"].chunk_kda
    assert gdn is not _fake_chunk_gated_delta_rule and kda is not _fake_chunk_kda
    assert gdn.__name__ == "_fake_chunk_gated_delta_rule" and gdn.__wrapped__ is _fake_chunk_gated_delta_rule
    assert patched_names(mods, gdn) == [
        "fla.layers.gated_deltanet.chunk_gated_delta_rule",
        "fla.ops.chunk_gated_delta_rule",
        "fla.ops.chunk_gdn",
        "fla.ops.gated_delta_rule.chunk.chunk_gated_delta_rule",
        "fla.ops.gated_delta_rule.chunk.chunk_gdn",
        "fla.ops.gated_delta_rule.chunk_gated_delta_rule",
        "fla.ops.gated_delta_rule.chunk_gdn",
    ]
    assert patched_names(mods, kda) == [
        "fla.layers.kda.chunk_kda",
        "fla.ops.chunk_kda",
        "fla.ops.kda.chunk.chunk_kda",
        "fla.ops.kda.chunk_kda",
    ]
    assert patched_names(mods, _fake_chunk_gated_delta_rule) == patched_names(mods, _fake_chunk_kda) == []
    # Idempotent: a second call wraps nothing twice.
    frost.fla.accelerate_fla()
    assert mods["fla.ops"].chunk_gdn is gdn and gdn.__wrapped__ is _fake_chunk_gated_delta_rule
    # A module imported after patching took the replacement from its package; restore finds it too.
    late = types.ModuleType("fla.layers.late")
    late.chunk_gated_delta_rule = mods["fla.ops.gated_delta_rule"].chunk_gated_delta_rule
    sys.modules["fla.layers.late"] = late
    try:
        frost.fla.restore_fla()
        assert late.chunk_gated_delta_rule is _fake_chunk_gated_delta_rule
    finally:
        del sys.modules["fla.layers.late"]
    assert not frost.fla.is_accelerated()
    assert len(patched_names(mods, _fake_chunk_gated_delta_rule)) == 7
    assert len(patched_names(mods, _fake_chunk_kda)) == 4
    frost.fla.restore_fla()  # restoring twice is harmless
    assert mods["fla.ops"].chunk_kda is _fake_chunk_kda


def test_accelerate_without_fla_raises_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "fla", None)
    with pytest.raises(ImportError):
        frost.fla.accelerate_fla()
    assert not frost.fla.is_accelerated()


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_served_calls_run_on_frost_with_gradients(fake_fla, op):
    frost.fla.accelerate_fla()
    fn = fake_fla["fla.ops"].chunk_gated_delta_rule if op == "gdn" else fake_fla["fla.ops"].chunk_kda
    q, k, v, g, beta = inputs(op == "kda", b=1, t=9, h=1, hv=2, seed=21)
    h0 = torch.randn(2, 2, 4, 5, dtype=torch.float64)
    cu = torch.tensor([0, 4, 9], dtype=torch.int64)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta, h0)]
    o, final = fn(
        *leaves[:5],
        scale=0.875,
        initial_state=leaves[5],
        output_final_state=True,
        use_qk_l2norm_in_kernel=True,
        cu_seqlens=cu,
        cu_seqlens_cpu=cu,
    )
    assert CALLS == [] and frost.fla.stats()["frost"] == 1
    ref = [x.clone().requires_grad_() for x in (q, k, v, g, beta, h0)]
    want_o, want_final = recurrence(*ref[:5], 0.875, ref[5], cu_seqlens=cu, l2=True)
    torch.testing.assert_close(o, want_o, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(final, want_final, rtol=1e-10, atol=1e-12)
    do, dht = torch.randn_like(o), torch.randn_like(final)
    got = torch.autograd.grad((o * do).sum() + (final * dht).sum(), leaves)
    want = torch.autograd.grad((want_o * do).sum() + (want_final * dht).sum(), ref)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-10)
    # Positional arguments bind as in FLA's signature; no final state gives None as FLA does.
    o2, none = fn(q, k, v, g, beta, None, None, False)
    assert none is None and o2.shape == v.shape and CALLS == []


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_gate_beta_sigmoid_and_v_first_state_are_served_around_frost(fake_fla, op):
    """FLA's layers pass raw gates and beta logits with a V-first state: torch computes the gate and the sigmoid
    in FP32 around frost's call, and gradients reach A_log and dt_bias."""
    frost.fla.accelerate_fla()
    fn = fake_fla["fla.ops"].chunk_gated_delta_rule if op == "gdn" else fake_fla["fla.ops"].chunk_kda
    q, k, v, raw_g, raw_beta = inputs(op == "kda", b=2, t=6, h=1, hv=2, seed=23)
    gen = torch.Generator().manual_seed(24)
    a_log = torch.randn(2, generator=gen, dtype=torch.float64)
    dt_bias = torch.randn(2 * 4 if op == "kda" else 2, generator=gen, dtype=torch.float64)
    h0_v_first = torch.randn(2, 2, 5, 4, generator=gen, dtype=torch.float64)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, raw_g, raw_beta, a_log, dt_bias, h0_v_first)]
    o, final = fn(
        *leaves[:5],
        initial_state=leaves[7],
        output_final_state=True,
        use_beta_sigmoid_in_kernel=True,
        allow_neg_eigval=True,
        state_v_first=True,
        use_gate_in_kernel=True,
        A_log=leaves[5],
        dt_bias=leaves[6],
    )
    assert CALLS == [] and frost.fla.stats()["frost"] == 1
    assert final.shape == h0_v_first.shape and final.is_contiguous()
    ref = [x.clone().requires_grad_() for x in (q, k, v, raw_g, raw_beta, a_log, dt_bias, h0_v_first)]
    bias = ref[6].view(2, 4) if op == "kda" else ref[6]
    decay = -ref[5].exp()
    g = (decay.view(2, 1) if op == "kda" else decay) * torch.nn.functional.softplus(ref[3] + bias)
    want_o, want_final = recurrence(*ref[:3], g, 2 * torch.sigmoid(ref[4]), None, ref[7].transpose(-1, -2))
    torch.testing.assert_close(o, want_o, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(final, want_final.transpose(-1, -2), rtol=1e-10, atol=1e-12)
    do, dht = torch.randn_like(o), torch.randn_like(final)
    got = torch.autograd.grad((o * do).sum() + (final * dht).sum(), leaves)
    want = torch.autograd.grad((want_o * do).sum() + (want_final.transpose(-1, -2) * dht).sum(), ref)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-10)


def _fallback_cases(op):
    q, k, v, g, beta = inputs(op == "kda", b=2, t=5, dtype=torch.float32, seed=22)
    h0 = torch.randn(2, 2, 4, 5)
    cases = [
        ("keyword frost lacks", (q, k, v, g, beta), dict(chunk_size=32)),
        ("context parallel", (q, k, v, g, beta), dict(cp_context=object())),
        ("neg eigval without sigmoid", (q, k, v, g, beta), dict(allow_neg_eigval=True)),
        ("gate without A_log", (q, k, v, g, beta), dict(use_gate_in_kernel=True)),
        (
            "misshapen dt_bias",
            (q, k, v, g, beta),
            dict(use_gate_in_kernel=True, A_log=torch.zeros(2), dt_bias=torch.zeros(5)),
        ),
        ("bf16 initial state", (q, k, v, g, beta), dict(initial_state=h0.to(torch.bfloat16))),
        ("cu_seqlens with B == 2", (q, k, v, g, beta), dict(cu_seqlens=torch.tensor([0, 2, 5]))),
        ("integer g", (q, k, v, g.to(torch.int32), beta), {}),
        ("numpy q", (q.numpy(), k, v, g, beta), {}),
        ("unknown keyword", (q, k, v, g, beta), dict(head_first=True)),
    ]
    if op == "kda":
        cases += [
            ("lower bound", (q, k, v, g, beta), dict(lower_bound=-5.0)),
            ("safe gate", (q, k, v, g, beta), dict(safe_gate=True)),
            ("intermediate states", (q, k, v, g, beta), dict(return_intermediate_states=True)),
            ("graph mode", (q, k, v, g, beta), dict(use_graph=True)),
        ]
    return cases


@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_every_other_call_goes_to_fla_unchanged(fake_fla, op):
    frost.fla.accelerate_fla()
    fn = fake_fla["fla.ops"].chunk_gated_delta_rule if op == "gdn" else fake_fla["fla.ops"].chunk_kda
    for label, args, kwargs in _fallback_cases(op):
        CALLS.clear()
        out = fn(*args, **kwargs)
        assert out == (f"fla-{op}", None), label
        assert len(CALLS) == 1, label
        got_op, seen = CALLS[0]
        assert got_op == op, label
        for name, value in zip(("q", "k", "v", "g", "beta"), args):
            assert seen[name] is value, label
        for name, value in kwargs.items():
            assert (seen[name] if name in seen else seen["kwargs"][name]) is value, label
        assert frost.fla.stats()["last_reason"], label
    assert frost.fla.stats()["frost"] == 0


def test_restored_functions_are_called_directly(fake_fla):
    frost.fla.accelerate_fla()
    frost.fla.restore_fla()
    q, k, v, g, beta = inputs(False, dtype=torch.float32)
    assert fake_fla["fla.layers.gated_deltanet"].chunk_gated_delta_rule(q, k, v, g, beta) == ("fla-gdn", None)
    assert len(CALLS) == 1
