"""matmul_fp8 and sdpa_fp8_backward against numpy formulas on decoded FP8 codes, with the quantization points
of the ops replayed in float64: tolerances are FP32 noise, far below one FP8 step, so a wrong scale fails."""

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph
from references import (
    attention,
    attention_backward_terms,
    e4m3_round,
    e4m3_to_float,
    float_to_e4m3,
    random_e4m3,
    repeat_heads,
    replay,
    run,
    sum_head_groups,
)

E4M3 = frost.data_type.FP8_E4M3


def f32(x):
    """A scale as the FLOAT scalar the graph stores it."""
    return float(np.float32(x))


def power_of_two_below(x):
    return float(2.0 ** np.floor(np.log2(x)))


def test_matmul_fp8_scales_broadcast_saturate_and_group(rng):
    m, k, n = 5, 7, 3
    a_codes = random_e4m3(rng, (2, 1, m, k))
    b_codes = random_e4m3(rng, (1, 3, k, n))
    ga_codes, gb_codes = random_e4m3(rng, (1, 4, m, k)), random_e4m3(rng, (1, 4, k, n))
    descale_a, descale_b, scale_c = 0.5, 0.25, 1.5
    g = float_graph()
    A, B, GA, GB = (g.tensor_like(c) for c in (a_codes, b_codes, ga_codes, gb_codes))
    for t in (A, B, GA, GB):
        t.set_data_type(E4M3)
    C, AMAX = g.matmul_fp8(a=A, b=B, descale_a=descale_a, descale_b=descale_b, scale_c=scale_c, name="mm8")
    # FP8 C with a scale that pushes the largest products past 448: they saturate.
    a_real, b_real = e4m3_to_float(a_codes) * descale_a, e4m3_to_float(b_codes) * descale_b
    c_real = a_real @ b_real
    big_scale = power_of_two_below(4 * 448 / np.abs(c_real).max())
    C8, _ = g.matmul_fp8(A, B, descale_a, descale_b, big_scale)
    C8.set_data_type(E4M3)
    # Grouped-query form: C declared with half the heads sums consecutive pairs of heads.
    CG, AMAX_G = g.matmul_fp8(GA, GB, 1.0, 2.0, 0.5)
    CG.set_dim([1, 2, m, n]).set_data_type(FLOAT)
    outputs = [C, AMAX, C8, CG, AMAX_G]
    for t in outputs:
        t.set_output(True)
    pack = {A: a_codes, B: b_codes, GA: ga_codes, GB: gb_codes}
    dtypes = [np.float32, np.float32, np.uint8, np.float32, np.float32]
    c, amax, c8, cg, amax_g = run(g, pack, outputs, dtypes)

    assert C.get_dim() == [2, 3, m, n] and AMAX.get_dim() == [1, 1, 1, 1]
    np.testing.assert_allclose(c, c_real * scale_c, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(amax.reshape(()), np.abs(c_real).max(), rtol=1e-6)  # before scale_c
    assert not np.allclose(c, c_real * scale_c * 1.01, rtol=1e-6, atol=1e-6)  # a 1% scale error fails
    np.testing.assert_array_equal(c8, float_to_e4m3(c_real * big_scale))
    assert (np.abs(e4m3_to_float(c8)) == 448).any()
    grouped = e4m3_to_float(ga_codes) @ e4m3_to_float(gb_codes)
    want_g = (grouped[:, 0::2] + grouped[:, 1::2]) * 2.0
    np.testing.assert_allclose(cg, want_g * 0.5, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(amax_g.reshape(()), np.abs(want_g).max(), rtol=1e-6)
    for have, again in zip((c, amax, c8, cg, amax_g), replay(g, pack, outputs, dtypes)):
        assert have.tobytes() == again.tobytes()


def test_matmul_fp8_errors():
    g = float_graph()
    A = g.tensor(name="a", dim=[1, 4, 8], data_type=E4M3)
    B = g.tensor(name="b", dim=[1, 8, 3], data_type=E4M3)
    with pytest.raises(TypeError, match="descale_a"):
        g.matmul_fp8(A, B, None, 1.0, 1.0)
    with pytest.raises(TypeError, match="alpha"):
        g.matmul_fp8(A, B, 1.0, 1.0, 1.0, alpha=2.0)
    wide = g.tensor(name="wide_scale", dim=[1, 1, 1, 2], data_type=FLOAT)
    g.matmul_fp8(A, B, 1.0, wide, 1.0, name="bad_scale")[0].set_output(True)
    with pytest.raises(frost.FrostError, match="bad_scale.*DESCALE_B"):
        g.validate()


def _fp8_backward_problem(rng):
    """Random FP8 codes for a bottom-right causal MQA problem (odd extents), their real values, and the forward's
    O (stored as E4M3 codes) and Stats."""
    b, h_q, h_kv, s_q, s_kv, d = 1, 2, 1, 5, 7, 8
    p = {"shape": (b, h_q, h_kv, s_q, s_kv, d), "attn_scale": 0.3}
    p["descale"] = {"q": 0.5, "k": 0.25, "v": 0.5, "dO": 0.125, "o": 0.25}
    p["codes"] = {
        "q": random_e4m3(rng, (b, h_q, s_q, d)),
        "k": random_e4m3(rng, (b, h_kv, s_kv, d)),
        "v": random_e4m3(rng, (b, h_kv, s_kv, d)),
        "dO": random_e4m3(rng, (b, h_q, s_q, d)),
    }
    p["real"] = {n: e4m3_to_float(c) * p["descale"][n] for n, c in p["codes"].items()}
    p["visible"] = np.arange(s_kv)[None, :] <= np.arange(s_q)[:, None] + (s_kv - s_q)
    real = p["real"]
    o, lse = attention(real["q"], repeat_heads(real["k"], h_q), repeat_heads(real["v"], h_q), 0.3, p["visible"])
    p["codes"]["o"] = float_to_e4m3(o / p["descale"]["o"])
    p["real"]["o"] = e4m3_to_float(p["codes"]["o"]) * p["descale"]["o"]
    p["stats"] = lse.astype(np.float32)
    return p


def _fp8_backward_reference(p, scales, quantize=True):
    """(dQ', dK', dV', Amax_dP) before the output scales, with P and dS requantized as the op does."""
    h_q, h_kv = p["shape"][1], p["shape"][2]
    r = p["real"]
    k, v = repeat_heads(r["k"], h_q), repeat_heads(r["v"], h_q)
    prob, ds = attention_backward_terms(
        r["q"], k, v, r["o"], r["dO"], p["stats"].astype(np.float64), p["attn_scale"], p["visible"]
    )
    if quantize:
        p_dv = e4m3_round(prob * scales["scale_s"]) * scales["descale_s"]
        ds_q = e4m3_round(ds * scales["scale_dP"]) * scales["descale_dP"]
    else:
        p_dv, ds_q = prob, ds
    dv = sum_head_groups(np.einsum("bhij,bhid->bhjd", p_dv, r["dO"]), h_kv)
    dq = np.einsum("bhij,bhjd->bhid", ds_q, k)
    dk = sum_head_groups(np.einsum("bhij,bhid->bhjd", ds_q, r["q"]), h_kv)
    return dq, dk, dv, np.abs(ds).max()


def test_sdpa_fp8_backward_matches_quantized_reference(rng):
    p = _fp8_backward_problem(rng)
    amax_dp_want = _fp8_backward_reference(p, None, quantize=False)[3]
    scales = {"scale_s": 448.0, "descale_s": f32(1 / 448), "scale_dP": power_of_two_below(448 / amax_dp_want)}
    scales["descale_dP"] = 1 / scales["scale_dP"]
    dq_want, dk_want, dv_want, _ = _fp8_backward_reference(p, scales)
    scale_dv = power_of_two_below(448 / np.abs(dv_want).max())

    g = float_graph()
    t = {n: g.tensor_like(c, name=n).set_data_type(E4M3) for n, c in p["codes"].items()}
    STATS = g.tensor_like(p["stats"], name="stats")
    ds = p["descale"]
    DQ, DK, DV, AMAX_DQ, AMAX_DK, AMAX_DV, AMAX_DP = g.sdpa_fp8_backward(
        q=t["q"],
        k=t["k"],
        v=t["v"],
        o=t["o"],
        dO=t["dO"],
        stats=STATS,
        descale_q=ds["q"],
        descale_k=ds["k"],
        descale_v=ds["v"],
        descale_o=ds["o"],
        descale_dO=ds["dO"],
        descale_s=scales["descale_s"],
        descale_dP=scales["descale_dP"],
        scale_s=scales["scale_s"],
        scale_dQ=0.5,
        scale_dK=2.0,
        scale_dV=scale_dv,
        scale_dP=scales["scale_dP"],
        attn_scale=0.3,
        use_causal_mask_bottom_right=True,
        use_deterministic_algorithm=True,
        name="fp8_bwd",
    )
    DQ.set_data_type(FLOAT)
    DK.set_data_type(FLOAT)
    DV.set_data_type(E4M3)
    outputs = [DQ, DK, DV, AMAX_DQ, AMAX_DK, AMAX_DV, AMAX_DP]
    for x in outputs:
        x.set_output(True)
    pack = {t[n]: c for n, c in p["codes"].items()}
    pack[STATS] = p["stats"]
    dtypes = [np.float32, np.float32, np.uint8] + [np.float32] * 4
    dq, dk, dv, amax_dq, amax_dk, amax_dv, amax_dp = run(g, pack, outputs, dtypes)

    assert DK.get_dim() == [1, 1, 7, 8] and DV.get_data_type() == E4M3
    atol = 1e-5 * np.abs(dq_want).max()
    np.testing.assert_allclose(dq, 0.5 * dq_want, rtol=1e-4, atol=0.5 * atol)
    np.testing.assert_allclose(dk, 2.0 * dk_want, rtol=1e-4, atol=2.0 * atol)
    # dV is stored as E4M3: within half an FP8 step of the exact scaled value.
    np.testing.assert_allclose(e4m3_to_float(dv), dv_want * scale_dv, rtol=2.0**-4, atol=2.0**-10)
    for have, want in ((amax_dq, dq_want), (amax_dk, dk_want), (amax_dv, dv_want)):
        np.testing.assert_allclose(have.reshape(()), np.abs(want).max(), rtol=1e-4)
    np.testing.assert_allclose(amax_dp.reshape(()), amax_dp_want, rtol=1e-4)
    # The tolerance sees the quantization points and the scales: without requantizing dS, or with a
    # descale 1/16 off, the expectation fails.
    dq_unquantized = _fp8_backward_reference(p, scales, quantize=False)[0]
    assert not np.allclose(dq, 0.5 * dq_unquantized, rtol=1e-4, atol=0.5 * atol)
    assert not np.allclose(dq, 0.5 * dq_want * 1.0625, rtol=1e-4, atol=0.5 * atol)
    for have, again in zip((dq, dk, dv, amax_dq, amax_dk, amax_dv, amax_dp), replay(g, pack, outputs, dtypes)):
        assert have.tobytes() == again.tobytes()


def test_sdpa_fp8_backward_errors():
    g = float_graph()
    Q = g.tensor(name="q", dim=[1, 1, 4, 8], data_type=E4M3)
    S = g.tensor(name="stats", dim=[1, 1, 4, 1], data_type=FLOAT)
    scales = [1.0] * 12
    with pytest.raises(frost.InvalidValueError, match="dropout"):
        g.sdpa_fp8_backward(Q, Q, Q, Q, Q, S, *scales, dropout=(0.1, 1, 2))
    with pytest.raises(frost.InvalidValueError, match="right_bound"):
        g.sdpa_fp8_backward(Q, Q, Q, Q, Q, S, *scales, use_causal_mask=True, right_bound=2)
    with pytest.raises(TypeError, match="scale_dV"):
        g.sdpa_fp8_backward(Q, Q, Q, Q, Q, S, *scales[:10], "0.5", 1.0, 1.0)
    with pytest.raises(TypeError, match="sliding_window_length"):
        g.sdpa_fp8_backward(Q, Q, Q, Q, Q, S, *scales, sliding_window_length=3)
    H = g.tensor(name="half_do", dim=[1, 1, 4, 8], data_type=frost.data_type.HALF)
    g.sdpa_fp8_backward(Q, Q, Q, Q, H, S, *scales, name="half_dO")[0].set_output(True)
    with pytest.raises(frost.FrostError, match="half_dO"):
        g.validate()
