"""sdpa_fp8 against a numpy reference on decoded FP8 inputs, and sdpa's dropout, paged K/V and block-mask
keywords against numpy."""

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph
from references import attention, e4m3_to_float, philox_uniform, random_e4m3, replay, run

E4M3 = frost.data_type.FP8_E4M3


def causal(s_q, s_kv):
    return np.arange(s_kv)[None, :] <= np.arange(s_q)[:, None]


def test_sdpa_fp8_matches_decoded_reference(rng):
    b, h, s_q, s_kv, d = 1, 2, 5, 7, 8
    codes = [random_e4m3(rng, (b, h, s, d)) for s in (s_q, s_kv, s_kv)]
    descale_q, descale_k, descale_v, scale_s = 0.5, 0.25, 0.5, 448.0
    g = float_graph()
    Q, K, V = (g.tensor(name=n, dim=list(c.shape), data_type=E4M3) for n, c in zip("qkv", codes))
    O, STATS, AMAX_S, AMAX_O = g.sdpa_fp8(
        q=Q,
        k=K,
        v=V,
        descale_q=descale_q,
        descale_k=descale_k,
        descale_v=descale_v,
        descale_s=1 / scale_s,
        scale_s=scale_s,
        scale_o=1.0,
        generate_stats=True,
        attn_scale=0.3,
        use_causal_mask=True,
        name="fp8",
    )
    O.set_data_type(FLOAT)
    outputs = [O, STATS, AMAX_S, AMAX_O]
    for t in outputs:
        t.set_output(True)
    pack = {Q: codes[0], K: codes[1], V: codes[2]}
    o, stats, amax_s, amax_o = run(g, pack, outputs)

    qd, kd, vd = (e4m3_to_float(c) * s for c, s in zip(codes, (descale_q, descale_k, descale_v)))
    want_o, want_lse = attention(qd, kd, vd, 0.3, causal(s_q, s_kv))
    assert AMAX_S.get_dim() == [1, 1, 1, 1] and STATS.get_dim() == [b, h, s_q, 1]
    np.testing.assert_allclose(stats, want_lse, rtol=1e-5, atol=1e-5)
    # P is requantized to E4M3 (3 mantissa bits) before P V, so O carries up to 2^-4 relative error per term.
    tolerance = 2.0**-4 * np.abs(vd).max() + 1e-6
    np.testing.assert_allclose(o, want_o, atol=tolerance)
    assert not np.allclose(o, 2 * want_o, atol=tolerance)
    s = 0.3 * np.einsum("bhid,bhjd->bhij", qd, kd)
    p = np.exp(np.where(causal(s_q, s_kv), s, -np.inf) - want_lse)
    np.testing.assert_allclose(amax_s.reshape(()), p.max(), rtol=1e-5)
    np.testing.assert_allclose(amax_o.reshape(()), np.abs(want_o).max(), atol=tolerance)
    for have, again in zip((o, stats, amax_s, amax_o), replay(g, pack, outputs)):
        assert have.tobytes() == again.tobytes()


def test_sdpa_fp8_errors(rng):
    g = float_graph()
    Q = g.tensor(name="q", dim=[1, 1, 4, 8], data_type=E4M3)
    with pytest.raises(frost.InvalidValueError, match="dropout"):
        g.sdpa_fp8(Q, Q, Q, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, dropout=(0.1, 1, 2))
    with pytest.raises(TypeError, match="descale_s"):
        g.sdpa_fp8(Q, Q, Q, 1.0, 1.0, 1.0, None, 1.0, 1.0)
    H = g.tensor(name="half_q", dim=[1, 1, 4, 8], data_type=frost.data_type.HALF)
    g.sdpa_fp8(H, H, H, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, name="not_fp8")[0].set_output(True)
    with pytest.raises(frost.FrostError, match="not_fp8"):
        g.validate()


def test_sdpa_dropout_mask_and_philox(rng):
    b, h, s_q, s_kv, d = 1, 2, 6, 9, 4
    q, k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32) for s in (s_q, s_kv, s_kv))
    mask = (rng.uniform(size=(b, h, s_q, s_kv)) > 0.3).astype(np.float32)
    g = float_graph()
    Q, K, V, MASK = (g.tensor_like(a) for a in (q, k, v, mask))
    O_MASK, STATS = g.sdpa(Q, K, V, attn_scale=0.5, generate_stats=True, dropout=(MASK, 1.25))
    O_PHILOX, _ = g.sdpa(Q, K, V, attn_scale=0.5, dropout=(0.2, 42, 7))
    outputs = [O_MASK, STATS, O_PHILOX]
    for t in outputs:
        t.set_output(True)
    o_mask, stats, o_philox = run(g, {Q: q, K: k, V: v, MASK: mask}, outputs)
    q64 = q.astype(np.float64)
    want_mask, want_lse = attention(q64, k, v, 0.5, p_weights=mask * 1.25)
    np.testing.assert_allclose(o_mask, want_mask, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats, want_lse, rtol=1e-5, atol=1e-5)  # dropout leaves Stats alone
    keep = (philox_uniform(42, 7, q.shape[0] * h * s_q * s_kv) >= 0.2).reshape(b, h, s_q, s_kv)
    want_philox, _ = attention(q64, k, v, 0.5, p_weights=keep / 0.8)
    np.testing.assert_allclose(o_philox, want_philox, rtol=1e-5, atol=1e-5)
    with pytest.raises(frost.InvalidValueError, match="dropout"):
        g.sdpa(Q, K, V, dropout=(0.1, 1))


def test_sdpa_paged_kv_and_block_mask(rng):
    b, h, s_q, d, page, pages_per_seq, pool = 2, 1, 3, 4, 4, 3, 7
    q = rng.standard_normal((b, h, s_q, d)).astype(np.float32)
    k_pool, v_pool = (rng.standard_normal((pool, h, page, d)).astype(np.float32) for _ in range(2))
    table = np.array([[6, 0, 3], [2, 5, 1]], np.int32).reshape(b, 1, pages_per_seq, 1)
    len_kv = np.array([10, 7], np.int32).reshape(b, 1, 1, 1)
    len_q = np.full((b, 1, 1, 1), s_q, np.int32)
    block = (rng.uniform(size=(1, 1, 2, 4)) > 0.4).astype(np.uint8)
    block[..., 0] = 1  # every query tile sees its first key tile
    g = float_graph()
    Q, KP, VP, KT, VT, LEN, LEN_Q = (g.tensor_like(a) for a in (q, k_pool, v_pool, table, table.copy(), len_kv, len_q))
    O_PAGED, _ = g.sdpa(
        Q,
        KP,
        VP,
        use_padding_mask=True,
        seq_len_q=LEN_Q,
        seq_len_kv=LEN,
        paged_attention_k_table=KT,
        paged_attention_v_table=VT,
        paged_attention_max_seq_len_kv=pages_per_seq * page,
    )
    k_dense = rng.standard_normal((b, h, 12, d)).astype(np.float32)
    KD = g.tensor_like(k_dense)
    BLOCK = g.tensor_like(block)
    O_BLOCK, _ = g.sdpa(Q, KD, KD, block_mask=BLOCK, block_mask_tile_size=(2, 3))
    for t in (O_PAGED, O_BLOCK):
        t.set_output(True)
    pack = {Q: q, KP: k_pool, VP: v_pool, KT: table, VT: table.copy(), LEN: len_kv, LEN_Q: len_q}
    pack.update({KD: k_dense, BLOCK: block})
    o_paged, o_block = run(g, pack, [O_PAGED, O_BLOCK])

    q64 = q.astype(np.float64)
    for bi in range(b):
        pages = table[bi, 0, :, 0]
        k_seq = np.concatenate([k_pool[p] for p in pages], axis=1)[None, :, : len_kv[bi, 0, 0, 0]]
        v_seq = np.concatenate([v_pool[p] for p in pages], axis=1)[None, :, : len_kv[bi, 0, 0, 0]]
        want, _ = attention(q64[bi : bi + 1], k_seq, v_seq, 1.0)
        np.testing.assert_allclose(o_paged[bi : bi + 1], want, rtol=1e-5, atol=1e-5)
    visible = block[0, 0][np.arange(s_q)[:, None] // 2, np.arange(12)[None, :] // 3] != 0
    want_block, _ = attention(q64, k_dense, k_dense, 1.0, visible)
    np.testing.assert_allclose(o_block, want_block, rtol=1e-5, atol=1e-5)


def test_sdpa_packed_sequences_with_cu_seq_len(rng):
    """THD: tokens of all batches back to back; cu_seq_len_q/kv say where each batch starts."""
    b, h, d = 2, 2, 4
    lens_q, lens_kv = [3, 5], [4, 6]
    cu_q = np.array([0, 3, 8], np.int32)
    cu_kv = np.array([0, 4, 10], np.int32)
    q, k, v = (rng.standard_normal((sum(n), h, d)).astype(np.float32) for n in (lens_q, lens_kv, lens_kv))
    g = float_graph()

    def packed(name, s_max, total):
        # [b, h, s, d] dims over token-major storage; the batch stride is unused with cu_seq_len.
        return g.tensor(name=name, dim=[b, h, s_max, d], stride=[total * h * d, d, h * d, 1])

    Q, K, V = packed("q", 5, 8), packed("k", 6, 10), packed("v", 6, 10)
    CU_Q, CU_KV = g.tensor_like(cu_q), g.tensor_like(cu_kv)
    O, _ = g.sdpa(Q, K, V, attn_scale=0.5, use_padding_mask=True, cu_seq_len_q=CU_Q, cu_seq_len_kv=CU_KV)
    O.set_output(True).set_dim([b, h, 5, d]).set_stride([8 * h * d, d, h * d, 1])
    g.build()
    # A 1-D buffer may be longer than the packed tokens: the declared layout spans one batch stride more.
    spans = {t: np.zeros(t.get_dim()[0] * t.get_stride()[0], np.float32) for t in (Q, K, V)}
    for t, a in ((Q, q), (K, k), (V, v)):
        spans[t][: a.size] = a.reshape(-1)
    o_span = np.full(b * O.get_stride()[0], np.nan, np.float32)
    g.execute({**spans, CU_Q: cu_q, CU_KV: cu_kv, O: o_span}, None)
    o = o_span[: 8 * h * d].reshape(8, h, d)
    for bi in range(b):
        qs = q[cu_q[bi] : cu_q[bi + 1]].transpose(1, 0, 2)[None].astype(np.float64)
        ks = k[cu_kv[bi] : cu_kv[bi + 1]].transpose(1, 0, 2)[None]
        vs = v[cu_kv[bi] : cu_kv[bi + 1]].transpose(1, 0, 2)[None]
        want, _ = attention(qs, ks, vs, 0.5)
        np.testing.assert_allclose(o[cu_q[bi] : cu_q[bi + 1]], want[0].transpose(1, 0, 2), rtol=1e-5, atol=1e-5)
