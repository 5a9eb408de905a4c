"""sdpa_mxfp8 and sdpa_mxfp8_backward: attention on FP8 operands with E8M0 block scales (MXFP8), in cuDNN
Frontend's Python keywords. Every scale is an FP8_E8M0 rank-4 tensor, one scale per 32 elements along the
dimension its product reduces over, in block_scale_quantize's layout or cuDNN's F8_128x4 reordering (set on
the tensor): descale_q [b, h_q, s_q, ceil(d_qk / 32)], descale_k [b, h_k, s_kv, ceil(d_qk / 32)],
descale_v [b, h_v, ceil(s_kv / 32), d_v]; for the backward descale_q_T [b, h_q, ceil(s_q / 32), d_qk],
descale_k_T [b, h_k, ceil(s_kv / 32), d_qk], descale_dO [b, h_q, s_q, ceil(d_v / 32)],
descale_dO_T [b, h_q, ceil(s_q / 32), d_v]. Larger extents are padding.
"""

from .. import _frost
from .._errors import InvalidValueError
from ._common import reject_unsupported, set_tensors
from .attention import set_attn_scale
from .sdpa_fp8_backward import set_band


def _block_scales(named, what):
    """The scale tensors in order; a number (a per-tensor scale) is refused, block scales being tensors."""
    for port, t in named:
        if not isinstance(t, _frost.tensor):
            raise TypeError(f"{what}: {port} is a tensor of FP8_E8M0 block scales, got {type(t).__name__}")
    return [t for _, t in named]


class Builders:
    def sdpa_mxfp8(
        self,
        q,
        k,
        v,
        descale_q,
        descale_k,
        descale_v,
        attn_scale=None,
        use_causal_mask=False,
        use_causal_mask_bottom_right=False,
        diagonal_alignment=None,
        diagonal_band_left_bound=None,
        diagonal_band_right_bound=None,
        compute_data_type=None,
        name="",
        generate_stats=None,
        sink_token=None,
        unfuse_fma=False,
        use_padding_mask=False,
        seq_len_q=None,
        seq_len_kv=None,
    ):
        """MXFP8 attention: Q, K, V hold FP8 codes whose real values are code * the scale of their block.
        S = attn_scale * Q K^T (masked as in sdpa), e_j = exp(S_j - max S), l = sum_j e_j,
        O = sum_j (fp8(16 e_j) / 16) V_j / l (fp8: Q's type, the kernels' fixed probability scale 16),
        Stats = max S + log l (FP32), Amax_O = max |O|. O is BFLOAT16 unless set. generate_stats is required,
        as in cuDNN Frontend; use_padding_mask, seq_len_q, seq_len_kv are frost's (INT32 [b, 1, 1, 1]).
        Returns (O, Stats, Amax_O); Stats is None unless generate_stats."""
        what = "sdpa_mxfp8()"
        reject_unsupported(what, sink_token=sink_token, unfuse_fma=unfuse_fma)
        if not isinstance(generate_stats, bool):
            raise InvalidValueError(f"{what}: generate_stats must be True or False, got {generate_stats!r}")
        scales = _block_scales((("descale_q", descale_q), ("descale_k", descale_k), ("descale_v", descale_v)), what)
        attrs = self._attributes(_frost.SDPA_fp8_attributes(), name, compute_data_type)
        attrs.set_generate_stats(generate_stats)
        set_attn_scale(attrs, attn_scale)
        set_band(
            attrs,
            what,
            use_causal_mask,
            use_causal_mask_bottom_right,
            diagonal_alignment,
            diagonal_band_left_bound,
            diagonal_band_right_bound,
            "diagonal_band_right_bound",
        )
        attrs.set_padding_mask(bool(use_padding_mask))
        set_tensors(attrs, (("set_seq_len_q", seq_len_q), ("set_seq_len_kv", seq_len_kv)))
        return self._graph.sdpa_mxfp8(q, k, v, *scales, attrs)

    def sdpa_mxfp8_backward(
        self,
        q,
        q_T,
        k,
        k_T,
        v,
        o_f16,
        dO_f16,
        dO,
        dO_T,
        stats,
        descale_q,
        descale_q_T,
        descale_k,
        descale_k_T,
        descale_v,
        descale_dO,
        descale_dO_T,
        attn_scale=None,
        use_padding_mask=False,
        seq_len_q=None,
        seq_len_kv=None,
        use_causal_mask=False,
        use_causal_mask_bottom_right=False,
        diagonal_alignment=None,
        left_bound=None,
        right_bound=None,
        use_deterministic_algorithm=False,
        dropout=None,
        compute_data_type=None,
        name="",
        sink_token=None,
        dSink_token=None,
    ):
        """Gradients of sdpa_mxfp8. q_T, k_T, dO_T are the same data quantized in blocks along the sequence
        (for dK, dQ and dV); o_f16 and dO_f16 are HALF, BFLOAT16 or FLOAT. On real values, with
        P = exp(S - Stats): D = rowsum(dO_f16 o_f16), dP = dO V^T, dS = attn_scale * P (dP - D),
        dV = (fp8(256 P) / 256)^T dO_T (Q's type), dQ = mx_rows(dS) K_T, dK = mx_cols(dS)^T Q_T, where mx()
        quantizes dS to dO's type in MXFP8 blocks of 32 along s_kv (rows) or s_q (columns) with scale
        2^(floor(log2 amax) - emax). Amax_dX = max |dX|. The gradients are o_f16's type unless set.
        Returns (dQ, dK, dV, Amax_dQ, Amax_dK, Amax_dV)."""
        what = "sdpa_mxfp8_backward()"
        reject_unsupported(what, dropout=dropout, sink_token=sink_token, dSink_token=dSink_token)
        named = (("descale_q", descale_q), ("descale_q_T", descale_q_T), ("descale_k", descale_k))
        named += (("descale_k_T", descale_k_T), ("descale_v", descale_v), ("descale_dO", descale_dO))
        scales = _block_scales(named + (("descale_dO_T", descale_dO_T),), what)
        attrs = self._attributes(_frost.SDPA_fp8_backward_attributes(), name, compute_data_type)
        set_attn_scale(attrs, attn_scale)
        set_band(
            attrs, what, use_causal_mask, use_causal_mask_bottom_right, diagonal_alignment, left_bound, right_bound
        )
        attrs.set_padding_mask(bool(use_padding_mask)).set_deterministic_algorithm(bool(use_deterministic_algorithm))
        set_tensors(attrs, (("set_seq_len_q", seq_len_q), ("set_seq_len_kv", seq_len_kv)))
        return self._graph.sdpa_mxfp8_backward(q, q_T, k, k_T, v, o_f16, dO_f16, dO, dO_T, stats, *scales, attrs)
