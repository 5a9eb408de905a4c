"""sdpa_fp8: attention on FP8 Q, K, V with per-tensor descales and scales, as FP8 training recipes use it."""

from .. import _frost
from ._common import reject_unsupported, set_tensors
from .attention import set_attn_scale, set_mask


class Builders:
    def sdpa_fp8(
        self,
        q,
        k,
        v,
        descale_q,
        descale_k,
        descale_v,
        descale_s,
        scale_s,
        scale_o,
        is_inference=None,
        attn_scale=None,
        use_padding_mask=False,
        seq_len_q=None,
        seq_len_kv=None,
        use_causal_mask=False,
        use_causal_mask_bottom_right=False,
        dropout=None,
        compute_data_type=None,
        name="",
        generate_stats=None,
        sliding_window_length=None,
        diagonal_alignment=None,
        diagonal_band_left_bound=None,
        diagonal_band_right_bound=None,
    ):
        """FP8 attention: Q, K, V hold FP8 codes whose real values are code * descale.
        S = attn_scale * descale_q * descale_k * Q K^T (masked as in sdpa), P = softmax(S),
        amax_s = max |P|, P8 = fp8(P * scale_s), O' = (P8 V) * descale_s * descale_v, amax_o = max |O'|,
        O = O' * scale_o (Q's FP8 type unless set), Stats = logsumexp of S per row (FP32).
        Descales and scales are FLOAT [1, 1, 1, 1] tensors or Python numbers (pass-by-value scalars).
        Returns (O, Stats, Amax_S, Amax_O); Stats is None unless generate_stats (or is_inference=False)."""
        reject_unsupported("sdpa_fp8()", dropout=dropout)
        scales = [
            self._operand(t, f"sdpa_fp8(): {what}")
            for t, what in (
                (descale_q, "descale_q"),
                (descale_k, "descale_k"),
                (descale_v, "descale_v"),
                (descale_s, "descale_s"),
                (scale_s, "scale_s"),
                (scale_o, "scale_o"),
            )
        ]
        attrs = self._attributes(_frost.SDPA_fp8_attributes(), name, compute_data_type)
        if generate_stats is None:
            generate_stats = is_inference is not None and not is_inference
        attrs.set_generate_stats(bool(generate_stats))
        set_attn_scale(attrs, attn_scale)
        set_mask(
            attrs,
            use_causal_mask,
            use_causal_mask_bottom_right,
            sliding_window_length,
            diagonal_alignment,
            diagonal_band_left_bound,
            diagonal_band_right_bound,
        )
        attrs.set_padding_mask(bool(use_padding_mask))
        set_tensors(attrs, (("set_seq_len_q", seq_len_q), ("set_seq_len_kv", seq_len_kv)))
        return self._graph.sdpa_fp8(q, k, v, *scales, attrs)
