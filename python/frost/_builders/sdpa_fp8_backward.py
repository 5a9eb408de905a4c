"""sdpa_fp8_backward: the gradients of sdpa_fp8 with per-tensor FP8 scaling, in cuDNN Frontend's keywords."""

from .. import _frost
from .._errors import InvalidValueError
from ._common import reject_unsupported, set_tensors
from .attention import set_attn_scale, set_mask

_SCALES = (
    "descale_q",
    "descale_k",
    "descale_v",
    "descale_o",
    "descale_dO",
    "descale_s",
    "descale_dP",
    "scale_s",
    "scale_dQ",
    "scale_dK",
    "scale_dV",
    "scale_dP",
)


def set_band(
    attrs,
    what,
    use_causal_mask,
    use_causal_mask_bottom_right,
    diagonal_alignment,
    left_bound,
    right_bound,
    right_keyword="right_bound",
):
    """The FP8 attention ops' mask keywords. As in cuDNN Frontend, a causal shorthand fixes the alignment and
    a right bound of 0, so it may not be combined with the other shorthand or with an explicit right bound
    (given as `right_keyword`)."""
    if use_causal_mask and use_causal_mask_bottom_right:
        raise InvalidValueError(f"{what}: use_causal_mask and use_causal_mask_bottom_right cannot both be set")
    if (use_causal_mask or use_causal_mask_bottom_right) and right_bound is not None:
        raise InvalidValueError(
            f"{what}: a causal mask sets the right bound; do not give {right_keyword}={right_bound}"
        )
    set_mask(attrs, use_causal_mask, use_causal_mask_bottom_right, None, diagonal_alignment, left_bound, right_bound)


class Builders:
    def sdpa_fp8_backward(
        self,
        q,
        k,
        v,
        o,
        dO,
        stats,
        descale_q,
        descale_k,
        descale_v,
        descale_o,
        descale_dO,
        descale_s,
        descale_dP,
        scale_s,
        scale_dQ,
        scale_dK,
        scale_dV,
        scale_dP,
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
        """Gradients of sdpa_fp8. Q, K, V, dO hold FP8 codes and O FP8 codes or HALF/BFLOAT16/FLOAT values; a
        real value is code * descale. With P = exp(S - Stats), S = attn_scale * Q K^T masked as in the forward:
        D = rowsum(dO O), dP = dO V^T, dS = attn_scale * P (dP - D), Amax_dP = max |dS|,
        P8 = fp8(P * scale_s) in Q's type, dS8 = fp8(dS * scale_dP) in dO's type,
        dV' = P8^T dO * descale_s, dQ' = dS8 K * descale_dP, dK' = dS8^T Q * descale_dP (real dO, K, Q),
        Amax_dX = max |dX'|, dX = dX' * scale_dX (the operand's FP8 type unless set; FP8 stores saturate).
        GQA/MQA sums each group's query heads into dK and dV. Descales and scales are FLOAT [1, 1, 1, 1]
        tensors or Python numbers. Returns (dQ, dK, dV, Amax_dQ, Amax_dK, Amax_dV, Amax_dP)."""
        what = "sdpa_fp8_backward()"
        reject_unsupported(what, dropout=dropout, sink_token=sink_token, dSink_token=dSink_token)
        given = (descale_q, descale_k, descale_v, descale_o, descale_dO, descale_s, descale_dP)
        given += (scale_s, scale_dQ, scale_dK, scale_dV, scale_dP)
        scales = [self._operand(t, f"{what}: {port}") for t, port in zip(given, _SCALES)]
        attrs = self._attributes(_frost.SDPA_fp8_backward_attributes(), name, compute_data_type)
        set_attn_scale(attrs, attn_scale)
        set_band(
            attrs, what, use_causal_mask, use_causal_mask_bottom_right, diagonal_alignment, left_bound, right_bound
        )
        attrs.set_padding_mask(bool(use_padding_mask)).set_deterministic_algorithm(bool(use_deterministic_algorithm))
        set_tensors(attrs, (("set_seq_len_q", seq_len_q), ("set_seq_len_kv", seq_len_kv)))
        return self._graph.sdpa_fp8_backward(q, k, v, o, dO, stats, *scales, attrs)
