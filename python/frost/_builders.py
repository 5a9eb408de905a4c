"""Matmul, reduction, data-movement, normalization and attention builders of frost.pygraph.

Keywords follow cuDNN Frontend's Python API. Tensors are frost.tensor declarations; where a
scalar is expected (epsilon, attn_scale, a pointwise operand) a Python number becomes a
pass-by-value scalar. Outputs are virtual until ``set_output(True)``.
"""

from . import _frost
from ._errors import InvalidValueError


def _ranges(slices, dims):
    """Python slice objects or (start, end) pairs -> half-open (start, end) pairs, one per dim."""
    out = []
    for axis, s in enumerate(slices):
        if isinstance(s, slice):
            if s.step not in (None, 1):
                raise InvalidValueError(f"slice(): axis {axis} has step {s.step}; only step 1 is supported")
            if axis >= len(dims) and (s.start is None or s.stop is None or s.start < 0 or s.stop < 0):
                raise InvalidValueError(f"slice(): axis {axis}: open or negative bounds need the input's dims set")
            start, stop, _ = s.indices(dims[axis]) if axis < len(dims) else (s.start, s.stop, 1)
            out.append((start, stop))
        else:
            start, stop = s
            out.append((int(start), int(stop)))
    return out


class OpBuilders:
    """Mixin of frost.pygraph: every op builder but the pointwise ones."""

    def matmul(
        self, A, B, compute_data_type=None, padding=None, m_override=None, n_override=None, k_override=None, name=""
    ):
        """C[..., m, n] = sum_k A[..., m, k] B[..., k, n]; batch dims broadcast over extent 1.
        Accumulates in FP32. Returns C."""
        attrs = self._attributes(_frost.Matmul_attributes(), name, compute_data_type)
        if padding is not None:
            attrs.set_padding(float(padding))
        for setter, t in (
            ("set_m_override", m_override),
            ("set_n_override", n_override),
            ("set_k_override", k_override),
        ):
            if t is not None:
                getattr(attrs, setter)(t)
        return self._graph.matmul(A, B, attrs)

    def reduction(self, input, mode, compute_data_type=None, is_deterministic=False, name=""):
        """Y has input's rank; every axis where Y's extent is 1 and input's is not is reduced with
        mode (frost.reduction_mode). Set Y's dims (Y.set_dim) to choose the reduced axes."""
        attrs = self._attributes(_frost.Reduction_attributes(), name, compute_data_type)
        attrs.set_mode(mode).set_is_deterministic(bool(is_deterministic))
        return self._graph.reduction(input, attrs)

    def reshape(self, input, dim=None, stride=None, compute_data_type=None, name=""):
        """Same elements in the same row-major order under new dims (given here or set on the output)."""
        attrs = self._attributes(_frost.Reshape_attributes(), name, compute_data_type)
        if dim is not None:
            attrs.set_dim(list(dim))
        if stride is not None:
            attrs.set_stride(list(stride))
        return self._graph.reshape(input, attrs)

    def transpose(self, input, permutation, compute_data_type=None, name=""):
        """Y.dim[i] = input.dim[permutation[i]], Y[j] = input[i] with i[permutation[k]] = j[k]."""
        attrs = self._attributes(_frost.Transpose_attributes(), name, compute_data_type)
        attrs.set_permutation(list(permutation))
        return self._graph.transpose(input, attrs)

    def slice(self, input, slices, compute_data_type=None, name=""):
        """Y = input[start_0:end_0, start_1:end_1, ...]; slices are Python slice objects (step 1)
        or (start, end) pairs, one per dim."""
        attrs = self._attributes(_frost.Slice_attributes(), name, compute_data_type)
        attrs.set_slices(_ranges(slices, list(input.get_dim())))
        return self._graph.slice(input, attrs)

    def concatenate(self, inputs, axis, in_place_index=None, compute_data_type=None, name=""):
        """Y = inputs joined along axis."""
        attrs = self._attributes(_frost.Concatenate_attributes(), name, compute_data_type)
        attrs.set_axis(int(axis))
        if in_place_index is not None:
            attrs.set_in_place_index(int(in_place_index))
        return self._graph.concatenate(list(inputs), attrs)

    def rmsnorm(self, norm_forward_phase, input, scale=None, bias=None, epsilon=None, compute_data_type=None, name=""):
        """Y = input * inv_rms * scale (+ bias), inv_rms = 1 / sqrt(mean(input^2) + epsilon) over every
        axis but the first. Returns (Y, inv_rms); inv_rms is None unless norm_forward_phase is TRAINING."""
        attrs = self._attributes(_frost.Rmsnorm_attributes(), name, compute_data_type)
        attrs.set_forward_phase(norm_forward_phase)
        if epsilon is not None:
            attrs.set_epsilon(self._operand(epsilon, "rmsnorm(): epsilon"))
        if bias is not None:
            attrs.set_bias(bias)
        return self._graph.rmsnorm(input, scale, attrs)

    def layernorm(
        self, norm_forward_phase, input, scale=None, bias=None, epsilon=None, compute_data_type=None, name=""
    ):
        """Y = (input - mean) * inv_variance * scale + bias, inv_variance = 1 / sqrt(var(input) + epsilon)
        over every axis but the first. Returns (Y, mean, inv_variance); the statistics are None unless
        norm_forward_phase is TRAINING."""
        attrs = self._attributes(_frost.Layernorm_attributes(), name, compute_data_type)
        attrs.set_forward_phase(norm_forward_phase)
        if epsilon is not None:
            attrs.set_epsilon(self._operand(epsilon, "layernorm(): epsilon"))
        return self._graph.layernorm(input, scale, bias, attrs)

    def rmsnorm_backward(
        self, grad, input, scale, inv_rms=None, has_dbias=False, compute_data_type=None, name="", inv_variance=None
    ):
        """(dX, dScale, dBias) of rmsnorm from grad (dY), input, scale and the saved inv_rms
        (cuDNN Frontend's keyword inv_variance is accepted too). dBias is None unless has_dbias."""
        saved = inv_rms if inv_rms is not None else inv_variance
        attrs = self._attributes(_frost.Rmsnorm_backward_attributes(), name, compute_data_type)
        attrs.has_dbias_output(bool(has_dbias))
        return self._graph.rmsnorm_backward(grad, input, scale, saved, attrs)

    def layernorm_backward(self, grad, input, scale, mean, inv_variance, epsilon=None, compute_data_type=None, name=""):
        """(dX, dScale, dBias) of layernorm from grad (dY), input, scale and the saved mean and inv_variance."""
        attrs = self._attributes(_frost.Layernorm_backward_attributes(), name, compute_data_type)
        attrs.set_saved_mean_and_inv_variance(mean, inv_variance)
        if epsilon is not None:
            attrs.set_epsilon(self._operand(epsilon, "layernorm_backward(): epsilon"))
        return self._graph.layernorm_backward(grad, input, scale, attrs)

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
        compute_data_type=None,
        name="",
    ):
        """Scaled dot-product attention.
        S = attn_scale * Q K^T (+ bias) (+ ALiBi), masked, P = softmax(S) (a sink logit per head joins the
        denominator), O = P V, Stats = logsumexp of each row of S (FP32; base 2 with stats_use_log2).
        Q [b, h_q, s_q, d_qk], K [b, h_k, s_kv, d_qk], V [b, h_v, s_kv, d_v] with any strides; h_k | h_q.
        Key j is visible from query i when i' - left_bound < j <= i' + right_bound (i' = i, or
        i + s_kv - s_q for BOTTOM_RIGHT alignment); use_causal_mask is right_bound 0, sliding_window_length w
        adds left_bound w. Returns (O, Stats); Stats is None unless generate_stats (or is_inference=False)."""
        for keyword, value in (
            ("dropout", dropout),
            ("paged_attention_k_table", paged_attention_k_table),
            ("paged_attention_v_table", paged_attention_v_table),
            ("paged_attention_max_seq_len_kv", paged_attention_max_seq_len_kv),
        ):
            if value is not None:
                raise InvalidValueError(f"sdpa(): {keyword} is not supported by frost yet")
        attrs = self._attributes(_frost.SDPA_attributes(), name, compute_data_type)
        if generate_stats is None:
            generate_stats = is_inference is not None and not is_inference
        attrs.set_generate_stats(bool(generate_stats))
        if attn_scale is not None:
            attrs.set_attn_scale(float(attn_scale) if isinstance(attn_scale, (int, float)) else attn_scale)
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
        attrs.set_padding_mask(bool(use_padding_mask)).set_alibi_mask(bool(use_alibi_mask))
        attrs.set_stats_use_log2(bool(stats_use_log2))
        for setter, t in (
            ("set_seq_len_q", seq_len_q),
            ("set_seq_len_kv", seq_len_kv),
            ("set_bias", bias),
            ("set_sink_token", sink_token),
        ):
            if t is not None:
                getattr(attrs, setter)(t)
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
        compute_data_type=None,
        name="",
    ):
        """Gradients of sdpa: (dQ, dK, dV) from Q, K, V, the forward's O and Stats, and dO, with the same
        attributes as the forward. dBias / dSink_token, when given, are output tensors the caller declares
        (dBias reduced over the bias's broadcast dims, dSink FP32 [1, h, 1, 1])."""
        attrs = self._attributes(_frost.SDPA_backward_attributes(), name, compute_data_type)
        if attn_scale is not None:
            attrs.set_attn_scale(float(attn_scale) if isinstance(attn_scale, (int, float)) else attn_scale)
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
        attrs.set_padding_mask(bool(use_padding_mask)).set_alibi_mask(bool(use_alibi_mask))
        attrs.set_stats_use_log2(bool(stats_use_log2)).set_deterministic_algorithm(bool(use_deterministic_algorithm))
        for setter, t in (
            ("set_seq_len_q", seq_len_q),
            ("set_seq_len_kv", seq_len_kv),
            ("set_bias", bias),
            ("set_dbias", dBias),
            ("set_sink_token", sink_token),
            ("set_dsink_token", dSink_token),
        ):
            if t is not None:
                getattr(attrs, setter)(t)
        return self._graph.sdpa_backward(q, k, v, o, dO, stats, attrs)
