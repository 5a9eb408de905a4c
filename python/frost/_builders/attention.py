"""Scaled dot-product attention builders: sdpa and sdpa_backward (sdpa_fp8 has its own module).

Masking keywords are shared: key j is visible from query i when i' - left_bound < j <= i' + right_bound,
with i' = i, or i + s_kv - s_q for BOTTOM_RIGHT alignment; use_causal_mask is right_bound 0 and
sliding_window_length w adds left_bound w.
"""

import numbers

from .. import _frost
from .._errors import InvalidValueError
from ._common import set_tensors

ENUMS = ("attention_implementation",)


def set_attn_scale(attrs, attn_scale):
    if attn_scale is not None:
        is_number = isinstance(attn_scale, numbers.Real) and not isinstance(attn_scale, bool)
        attrs.set_attn_scale(float(attn_scale) if is_number else attn_scale)


def set_mask(
    attrs,
    use_causal_mask,
    use_causal_mask_bottom_right,
    sliding_window_length,
    diagonal_alignment,
    diagonal_band_left_bound,
    diagonal_band_right_bound,
):
    """The causal / sliding-window shorthands first, then the explicit alignment and band bounds."""
    if use_causal_mask:
        attrs.set_causal_mask(True)
    if use_causal_mask_bottom_right:
        attrs.set_causal_mask_bottom_right(True)
    if sliding_window_length is not None:
        attrs.set_sliding_window_length(int(sliding_window_length))
    if diagonal_alignment is not None:
        attrs.set_diagonal_alignment(diagonal_alignment)
    if diagonal_band_left_bound is not None:
        attrs.set_diagonal_band_left_bound(int(diagonal_band_left_bound))
    if diagonal_band_right_bound is not None:
        attrs.set_diagonal_band_right_bound(int(diagonal_band_right_bound))


class Builders:
    def _set_packing_and_masks(
        self, attrs, what, dropout, cu_q, cu_kv, max_total_q, max_total_kv, block_mask, block_mask_tile_size
    ):
        """The packed-sequence, block-mask and dropout keywords that sdpa and sdpa_backward share."""
        set_tensors(attrs, (("set_cu_seq_len_q", cu_q), ("set_cu_seq_len_kv", cu_kv), ("set_block_mask", block_mask)))
        if max_total_q is not None:
            attrs.set_max_total_seq_len_q(int(max_total_q))
        if max_total_kv is not None:
            attrs.set_max_total_seq_len_kv(int(max_total_kv))
        if block_mask_tile_size is not None:
            tile_q, tile_kv = block_mask_tile_size
            attrs.set_block_mask_tile_size(int(tile_q), int(tile_kv))
        if dropout is not None:
            attrs.set_dropout(*self._dropout_operands(dropout, what))

    def _dropout_operands(self, dropout, what):
        """(probability, seed, offset) or (mask, scale[, scale_inv]) with numbers made pass-by-value scalars."""
        if not isinstance(dropout, (tuple, list)) or len(dropout) not in (2, 3):
            raise InvalidValueError(f"{what}: dropout is (probability, seed, offset) or (mask, scale), got {dropout!r}")
        if isinstance(dropout[0], _frost.tensor):
            mask, *scales = dropout
            return (mask, *[self._operand(s, f"{what}: dropout scale") for s in scales])
        if len(dropout) == 3:
            probability, seed, offset = dropout
            return (
                float(probability),
                self._operand(seed, f"{what}: dropout seed", _frost.data_type.INT64),
                self._operand(offset, f"{what}: dropout offset", _frost.data_type.INT64),
            )
        mask, scale = dropout
        if not isinstance(mask, _frost.tensor):
            raise InvalidValueError(f"{what}: the dropout mask is a frost.tensor, got {type(mask).__name__}")
        return mask, self._operand(scale, f"{what}: dropout scale")

    def sdpa(
        self,
        q,
        k,
        v,
        attn_scale=None,
        generate_stats=None,
        is_inference=None,
        use_causal_mask=False,
        use_causal_mask_bottom_right=False,
        sliding_window_length=None,
        diagonal_alignment=None,
        diagonal_band_left_bound=None,
        diagonal_band_right_bound=None,
        use_padding_mask=False,
        seq_len_q=None,
        seq_len_kv=None,
        bias=None,
        use_alibi_mask=False,
        sink_token=None,
        stats_use_log2=False,
        implementation=None,
        dropout=None,
        paged_attention_k_table=None,
        paged_attention_v_table=None,
        paged_attention_max_seq_len_kv=None,
        cu_seq_len_q=None,
        cu_seq_len_kv=None,
        max_total_seq_len_q=None,
        max_total_seq_len_kv=None,
        block_mask=None,
        block_mask_tile_size=None,
        compute_data_type=None,
        name="",
    ):
        """Scaled dot-product attention.
        S = attn_scale * Q K^T (+ bias) (+ ALiBi), masked, P = softmax(S) (a sink logit per head joins the
        denominator), O = dropout(P) V, Stats = logsumexp of each row of S (FP32; base 2 with stats_use_log2).
        Q [b, h_q, s_q, d_qk], K [b, h_k, s_kv, d_qk], V [b, h_v, s_kv, d_v] with any strides; h_k | h_q.
        dropout is (probability, seed, offset) (Philox) or (mask, scale). Paged K/V: K and V are page pools
        [pages, h, page_size, d] and paged_attention_k/v_table INT32 [b, 1, pages_per_seq, 1] name each
        batch's pages (needs use_padding_mask and seq_len_kv). cu_seq_len_q/kv (INT32 [b + 1]) read packed
        (THD) Q/O and K/V. block_mask: UINT8/BOOLEAN [b, h, ceil(s_q / tq), ceil(s_kv / tkv)] with
        block_mask_tile_size (tq, tkv), default (128, 128).
        Returns (O, Stats); Stats is None unless generate_stats (or is_inference=False)."""
        attrs = self._attributes(_frost.SDPA_attributes(), name, compute_data_type)
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
        attrs.set_padding_mask(bool(use_padding_mask)).set_alibi_mask(bool(use_alibi_mask))
        attrs.set_stats_use_log2(bool(stats_use_log2))
        set_tensors(
            attrs,
            (
                ("set_seq_len_q", seq_len_q),
                ("set_seq_len_kv", seq_len_kv),
                ("set_bias", bias),
                ("set_sink_token", sink_token),
                ("set_paged_attention_k_table", paged_attention_k_table),
                ("set_paged_attention_v_table", paged_attention_v_table),
            ),
        )
        if paged_attention_max_seq_len_kv is not None:
            attrs.set_paged_attention_max_seq_len_kv(int(paged_attention_max_seq_len_kv))
        self._set_packing_and_masks(
            attrs,
            "sdpa()",
            dropout,
            cu_seq_len_q,
            cu_seq_len_kv,
            max_total_seq_len_q,
            max_total_seq_len_kv,
            block_mask,
            block_mask_tile_size,
        )
        if implementation is not None:
            attrs.set_implementation(implementation)
        return self._graph.sdpa(q, k, v, attrs)

    def sdpa_backward(
        self,
        q,
        k,
        v,
        o,
        dO,
        stats,
        attn_scale=None,
        use_causal_mask=False,
        use_causal_mask_bottom_right=False,
        sliding_window_length=None,
        diagonal_alignment=None,
        diagonal_band_left_bound=None,
        diagonal_band_right_bound=None,
        use_padding_mask=False,
        seq_len_q=None,
        seq_len_kv=None,
        bias=None,
        dBias=None,
        use_alibi_mask=False,
        sink_token=None,
        dSink_token=None,
        stats_use_log2=False,
        use_deterministic_algorithm=False,
        implementation=None,
        dropout=None,
        cu_seq_len_q=None,
        cu_seq_len_kv=None,
        max_total_seq_len_q=None,
        max_total_seq_len_kv=None,
        block_mask=None,
        block_mask_tile_size=None,
        compute_data_type=None,
        name="",
    ):
        """Gradients of sdpa: (dQ, dK, dV) from Q, K, V, the forward's O and Stats, and dO, with the same
        attributes as the forward. dBias / dSink_token, when given, are output tensors the caller declares
        (dBias reduced over the bias's broadcast dims, dSink FP32 [1, h, 1, 1]). dropout, cu_seq_len_q/kv,
        max_total_seq_len_q/kv and block_mask take the forward's values: the same Philox seed and offset
        give the forward's mask; the mask form also takes (mask, scale, scale_inv). Paged K/V has no
        backward."""
        attrs = self._attributes(_frost.SDPA_backward_attributes(), name, compute_data_type)
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
        attrs.set_padding_mask(bool(use_padding_mask)).set_alibi_mask(bool(use_alibi_mask))
        attrs.set_stats_use_log2(bool(stats_use_log2)).set_deterministic_algorithm(bool(use_deterministic_algorithm))
        set_tensors(
            attrs,
            (
                ("set_seq_len_q", seq_len_q),
                ("set_seq_len_kv", seq_len_kv),
                ("set_bias", bias),
                ("set_dbias", dBias),
                ("set_sink_token", sink_token),
                ("set_dsink_token", dSink_token),
            ),
        )
        self._set_packing_and_masks(
            attrs,
            "sdpa_backward()",
            dropout,
            cu_seq_len_q,
            cu_seq_len_kv,
            max_total_seq_len_q,
            max_total_seq_len_kv,
            block_mask,
            block_mask_tile_size,
        )
        if implementation is not None:
            attrs.set_implementation(implementation)
        return self._graph.sdpa_backward(q, k, v, o, dO, stats, attrs)
