"""sdpa_mxfp8 and sdpa_mxfp8_backward against numpy formulas on operands decoded with their E8M0 block scales,
the MXFP8 quantization points replayed in float64; and cuDNN Frontend's C++ spelling of the same ops (the
six-tensor sdpa_fp8 and seventeen-tensor sdpa_fp8_backward overloads) giving the same bytes."""

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph
from references import (
    attention_backward_terms,
    e4m3_round,
    e4m3_to_float,
    e8m0_block_scales,
    mx_e4m3_round_trip,
    random_e4m3,
    repeat_heads,
    replay,
    run,
    sum_head_groups,
)

E4M3, E8M0 = frost.data_type.FP8_E4M3, frost.data_type.FP8_E8M0


def blocks(n):
    return -(-n // 32)


class Operands:
    """FP8 codes with random E8M0 block scales (2^-1 .. 2^1) declared on a graph, and their real values."""

    def __init__(self, g, rng):
        self.g, self.rng = g, rng
        self.tensors, self.arrays, self.real = {}, {}, {}

    def add(self, name, shape, along):
        """Codes [b, h, s, d] and scales with blocks along `along` (2: the sequence, 3: the head dim)."""
        codes = random_e4m3(self.rng, shape, 4, 7)
        scale_shape = list(shape)
        scale_shape[along] = blocks(shape[along])
        scales = self.rng.integers(126, 129, scale_shape).astype(np.uint8)
        self.tensors[name] = self.g.tensor_like(codes, name=name).set_data_type(E4M3)
        self.tensors["descale_" + name] = self.g.tensor_like(scales, name="descale_" + name).set_data_type(E8M0)
        self.arrays[name], self.arrays["descale_" + name] = codes, scales
        self.real[name] = e4m3_to_float(codes) * e8m0_block_scales(scales, shape, along)

    def add_plain(self, name, values):
        self.tensors[name] = self.g.tensor_like(values, name=name)
        self.arrays[name] = values
        self.real[name] = values.astype(np.float64)

    def pack(self):
        return {self.tensors[n]: a for n, a in self.arrays.items()}


def mxfp8_forward_reference(q, k, v, scale, visible):
    """O = sum_j (fp8(16 e_j) / 16) V_j / l with e = exp(S - max S), l = sum e; Stats = max S + log l."""
    s = np.where(visible, scale * np.einsum("bhid,bhjd->bhij", q, k), -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    denom = e.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", e4m3_round(16 * e) / 16, v) / denom
    return o, m + np.log(denom)


def test_sdpa_mxfp8_matches_block_scaled_reference(rng):
    b, h_q, h_kv, s_q, s_kv, d_qk, d_v = 1, 2, 1, 5, 37, 40, 24
    g = float_graph()
    x = Operands(g, rng)
    x.add("q", (b, h_q, s_q, d_qk), 3)
    x.add("k", (b, h_kv, s_kv, d_qk), 3)
    x.add("v", (b, h_kv, s_kv, d_v), 2)
    t = x.tensors
    O, STATS, AMAX_O = g.sdpa_mxfp8(
        q=t["q"],
        k=t["k"],
        v=t["v"],
        descale_q=t["descale_q"],
        descale_k=t["descale_k"],
        descale_v=t["descale_v"],
        attn_scale=0.25,
        use_causal_mask_bottom_right=True,
        diagonal_band_left_bound=20,
        generate_stats=True,
        name="mx_fwd",
    )
    O.set_data_type(FLOAT)
    # cuDNN Frontend's C++ spelling: the six-tensor overload of sdpa_fp8, with the same attributes.
    attrs = frost._frost.SDPA_fp8_attributes().set_generate_stats(False).set_attn_scale(0.25)
    attrs.set_causal_mask_bottom_right(True).set_diagonal_band_left_bound(20)
    O_CPP, STATS_CPP, AMAX_CPP = g._graph.sdpa_fp8(
        t["q"], t["k"], t["v"], t["descale_q"], t["descale_k"], t["descale_v"], attrs
    )
    O_CPP.set_data_type(FLOAT)
    assert STATS_CPP is None
    outputs = [O, STATS, AMAX_O, O_CPP, AMAX_CPP]
    for o in outputs:
        o.set_output(True)
    pack = x.pack()
    o, stats, amax_o, o_cpp, amax_cpp = run(g, pack, outputs)

    i, j = np.arange(s_q)[:, None] + (s_kv - s_q), np.arange(s_kv)[None, :]
    visible = (j <= i) & (j > i - 20)
    r = x.real
    k_rep, v_rep = repeat_heads(r["k"], h_q), repeat_heads(r["v"], h_q)
    want_o, want_stats = mxfp8_forward_reference(r["q"], k_rep, v_rep, 0.25, visible)
    assert STATS.get_dim() == [b, h_q, s_q, 1]
    atol = 1e-5 * np.abs(want_o).max()
    np.testing.assert_allclose(o, want_o, rtol=1e-4, atol=atol)
    np.testing.assert_allclose(stats, want_stats, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(amax_o.reshape(()), np.abs(want_o).max(), rtol=1e-4)
    # The tolerance resolves the FP8 probabilities and the block scales: unquantized probabilities fail, and
    # so does V read with one block scale of the wrong power of two.
    p = np.exp(np.where(visible, 0.25 * np.einsum("bhid,bhjd->bhij", r["q"], k_rep), -np.inf) - want_stats)
    unquantized = np.einsum("bhij,bhjd->bhid", p, v_rep)
    assert not np.allclose(o, unquantized, rtol=1e-4, atol=atol)
    v_wrong = r["v"].copy()
    v_wrong[:, :, 32:] *= 2
    wrong, _ = mxfp8_forward_reference(r["q"], k_rep, repeat_heads(v_wrong, h_q), 0.25, visible)
    assert not np.allclose(o, wrong, rtol=1e-4, atol=atol)
    assert o_cpp.tobytes() == o.tobytes() and amax_cpp.tobytes() == amax_o.tobytes()
    for have, again in zip((o, stats, amax_o, o_cpp, amax_cpp), replay(g, pack, outputs)):
        assert have.tobytes() == again.tobytes()


def test_sdpa_mxfp8_backward_matches_block_scaled_reference(rng):
    b, h_q, h_kv, s_q, s_kv, d_qk, d_v = 1, 2, 1, 33, 37, 40, 24
    g = float_graph()
    x = Operands(g, rng)
    # Each operand and its transposed copy are independent codes here, so the test tells which product
    # reads which copy.
    x.add("q", (b, h_q, s_q, d_qk), 3)
    x.add("q_T", (b, h_q, s_q, d_qk), 2)
    x.add("k", (b, h_kv, s_kv, d_qk), 3)
    x.add("k_T", (b, h_kv, s_kv, d_qk), 2)
    x.add("v", (b, h_kv, s_kv, d_v), 2)
    x.add("dO", (b, h_q, s_q, d_v), 3)
    x.add("dO_T", (b, h_q, s_q, d_v), 2)
    r = x.real
    k_rep, v_rep = repeat_heads(r["k"], h_q), repeat_heads(r["v"], h_q)
    visible = np.arange(s_kv)[None, :] <= np.arange(s_q)[:, None]
    o, stats = mxfp8_forward_reference(r["q"], k_rep, v_rep, 0.25, visible)
    x.add_plain("o_f16", o.astype(np.float32))
    x.add_plain("dO_f16", (r["dO"] * 1.03125).astype(np.float32))  # differs from dO: only D reads it
    x.add_plain("stats", stats.astype(np.float32))
    t = x.tensors
    names = ("q", "q_T", "k", "k_T", "v", "o_f16", "dO_f16", "dO", "dO_T", "stats")
    names += ("descale_q", "descale_q_T", "descale_k", "descale_k_T", "descale_v", "descale_dO", "descale_dO_T")
    grads = g.sdpa_mxfp8_backward(
        **{n: t[n] for n in names}, attn_scale=0.25, use_causal_mask=True, use_deterministic_algorithm=True
    )
    attrs = frost._frost.SDPA_fp8_backward_attributes().set_attn_scale(0.25).set_causal_mask(True)
    grads_cpp = g._graph.sdpa_fp8_backward(*(t[n] for n in names), attrs)
    outputs = list(grads) + list(grads_cpp)
    for o_t in outputs:
        o_t.set_output(True)
    pack = x.pack()
    got = run(g, pack, outputs)

    prob, ds = attention_backward_terms(
        r["q"], k_rep, v_rep, r["o_f16"], r["dO"], r["stats"], 0.25, visible, do_for_delta=r["dO_f16"]
    )
    dv = sum_head_groups(np.einsum("bhij,bhid->bhjd", e4m3_round(256 * prob) / 256, r["dO_T"]), h_kv)
    dq = np.einsum("bhij,bhjd->bhid", mx_e4m3_round_trip(ds, 3), repeat_heads(r["k_T"], h_q))
    dk = sum_head_groups(np.einsum("bhij,bhid->bhjd", mx_e4m3_round_trip(ds, 2), r["q_T"]), h_kv)
    assert grads[0].get_data_type() == FLOAT and grads[2].get_dim() == [b, h_kv, s_kv, d_v]
    for have, want in zip(got[:3], (dq, dk, dv)):
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
    for have, want in zip(got[3:6], (dq, dk, dv)):
        np.testing.assert_allclose(have.reshape(()), np.abs(want).max(), rtol=1e-4)
    # dS requantized per block of 32 matters at this tolerance: dS quantized along the wrong axis fails.
    dq_wrong_axis = np.einsum("bhij,bhjd->bhid", mx_e4m3_round_trip(ds, 2), repeat_heads(r["k_T"], h_q))
    assert not np.allclose(got[0], dq_wrong_axis, rtol=1e-4, atol=1e-5 * np.abs(dq).max())
    for have, same in zip(got[:6], got[6:]):
        assert have.tobytes() == same.tobytes()
    for have, again in zip(got, replay(g, pack, outputs)):
        assert have.tobytes() == again.tobytes()


def test_sdpa_mxfp8_errors(rng):
    g = float_graph()
    Q = g.tensor(name="q", dim=[1, 1, 4, 32], data_type=E4M3)
    SQ = g.tensor(name="sq", dim=[1, 1, 4, 1], data_type=E8M0)
    SV = g.tensor(name="sv", dim=[1, 1, 1, 32], data_type=E8M0)
    with pytest.raises(frost.InvalidValueError, match="generate_stats"):
        g.sdpa_mxfp8(Q, Q, Q, SQ, SQ, SV)
    with pytest.raises(TypeError, match="descale_k"):
        g.sdpa_mxfp8(Q, Q, Q, SQ, 0.5, SV, generate_stats=False)
    with pytest.raises(frost.InvalidValueError, match="sink_token"):
        g.sdpa_mxfp8(Q, Q, Q, SQ, SQ, SV, generate_stats=False, sink_token=SQ)
    with pytest.raises(frost.InvalidValueError, match="diagonal_band_right_bound=1"):
        g.sdpa_mxfp8(Q, Q, Q, SQ, SQ, SV, generate_stats=False, use_causal_mask=True, diagonal_band_right_bound=1)
    with pytest.raises(TypeError, match="scale_o"):
        g.sdpa_mxfp8(Q, Q, Q, SQ, SQ, SV, generate_stats=False, scale_o=1.0)
    FLOAT_SCALE = g.tensor(name="float_scale", dim=[1, 1, 4, 1], data_type=FLOAT)
    g.sdpa_mxfp8(Q, Q, Q, FLOAT_SCALE, SQ, SV, generate_stats=False, name="per_tensor")[0].set_output(True)
    with pytest.raises(frost.FrostError, match="per_tensor.*DESCALE_Q"):
        g.validate()

    h = float_graph()
    Q = h.tensor(name="q", dim=[1, 1, 4, 32], data_type=E4M3)
    SQ = h.tensor(name="sq", dim=[1, 1, 4, 1], data_type=E8M0)
    ST = h.tensor(name="st", dim=[1, 1, 1, 32], data_type=E8M0)
    W = h.tensor(name="wide", dim=[1, 1, 4, 32], data_type=FLOAT)
    S = h.tensor(name="stats", dim=[1, 1, 4, 1], data_type=FLOAT)
    operands = (Q, Q, Q, Q, Q, W, W, Q, Q, S, SQ, ST, SQ, ST, ST, SQ, ST)
    with pytest.raises(frost.InvalidValueError, match="dropout"):
        h.sdpa_mxfp8_backward(*operands, dropout=(0.1, 1, 2))
    with pytest.raises(frost.InvalidValueError, match="use_causal_mask"):
        h.sdpa_mxfp8_backward(*operands, use_causal_mask=True, use_causal_mask_bottom_right=True)
    with pytest.raises(TypeError, match="descale_dO_T"):
        h.sdpa_mxfp8_backward(*operands[:16], 1.0)
    h.sdpa_mxfp8_backward(*operands[:5], Q, *operands[6:], name="fp8_o")[0].set_output(True)
    with pytest.raises(frost.FrostError, match="fp8_o"):
        h.validate()
