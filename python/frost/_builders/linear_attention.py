"""Linear attention with the (gated) delta rule in flash-linear-attention's conventions and keywords:
gdn (Gated DeltaNet), kda (Kimi Delta Attention), and their backward ops.

q, k [B, T, H, K]; v [B, T, HV, V] with HV a multiple of H (value head hv reads q/k head hv // (HV / H));
g, the log-space decay, [B, T, HV] (gdn) or [B, T, HV, K] (kda); beta [B, T, HV] (after the sigmoid);
states [N, HV, K, V] FP32. Per sequence and value head, from S_0 = initial_state (zero if none):
    S' = diag(exp(g_t)) S_{t-1};  u_t = beta_t (v_t - S'^T k_t);  S_t = S' + k_t u_t^T;  o_t = scale S_t^T q_t
scale defaults to K^-0.5; use_qk_l2norm_in_kernel first maps q and k to x * rsqrt(sum(x^2) + 1e-6).
cu_seqlens ([N + 1], INT32 or INT64, B == 1) packs variable-length sequences along T; state_indices (INT32
[N]) picks each sequence's row of an initial-state pool [P, HV, K, V].
"""

from .. import _frost
from .._errors import InvalidValueError
from ._common import set_tensors


class Builders:
    def _delta_rule_attributes(
        self, attrs, scale, initial_state, cu_seqlens, use_qk_l2norm_in_kernel, state_indices, compute_data_type, name
    ):
        attrs = self._attributes(attrs, name, compute_data_type)
        if scale is not None:
            attrs.set_scale(float(scale))
        attrs.set_use_qk_l2norm_in_kernel(bool(use_qk_l2norm_in_kernel))
        set_tensors(
            attrs,
            (
                ("set_initial_state", initial_state),
                ("set_cu_seqlens", cu_seqlens),
                ("set_state_indices", state_indices),
            ),
        )
        return attrs

    def _forward(self, op, attrs, q, k, v, g, beta, output_final_state, *options):
        attrs = self._delta_rule_attributes(attrs, *options)
        attrs.set_output_final_state(bool(output_final_state))
        return getattr(self._graph, op)(q, k, v, g, beta, attrs)

    def _backward(self, op, attrs, q, k, v, g, beta, do, dht, d_final_state, *options):
        if dht is not None and d_final_state is not None:
            raise InvalidValueError(f"{op}(): dht and d_final_state name the same input; give one")
        attrs = self._delta_rule_attributes(attrs, *options)
        final = dht if dht is not None else d_final_state
        if final is not None:
            attrs.set_d_final_state(final)
        return getattr(self._graph, op)(q, k, v, g, beta, do, attrs)

    def gdn(
        self,
        q,
        k,
        v,
        g,
        beta,
        scale=None,
        initial_state=None,
        output_final_state=False,
        cu_seqlens=None,
        use_qk_l2norm_in_kernel=False,
        state_indices=None,
        compute_data_type=None,
        name="",
    ):
        """Gated DeltaNet forward (g [B, T, HV]). Returns (o, final_state); final_state is None unless
        output_final_state."""
        options = (scale, initial_state, cu_seqlens, use_qk_l2norm_in_kernel, state_indices, compute_data_type, name)
        return self._forward("gdn", _frost.Gdn_attributes(), q, k, v, g, beta, output_final_state, *options)

    def kda(
        self,
        q,
        k,
        v,
        g,
        beta,
        scale=None,
        initial_state=None,
        output_final_state=False,
        cu_seqlens=None,
        use_qk_l2norm_in_kernel=False,
        state_indices=None,
        compute_data_type=None,
        name="",
    ):
        """Kimi Delta Attention forward (g [B, T, HV, K], one decay per key channel). Returns (o, final_state);
        final_state is None unless output_final_state."""
        options = (scale, initial_state, cu_seqlens, use_qk_l2norm_in_kernel, state_indices, compute_data_type, name)
        return self._forward("kda", _frost.Kda_attributes(), q, k, v, g, beta, output_final_state, *options)

    def gdn_backward(
        self,
        q,
        k,
        v,
        g,
        beta,
        do,
        scale=None,
        initial_state=None,
        dht=None,
        cu_seqlens=None,
        use_qk_l2norm_in_kernel=False,
        state_indices=None,
        compute_data_type=None,
        name="",
        d_final_state=None,
    ):
        """Gradients of gdn from do (dO) and, when the final state feeds a loss, dht (its gradient; the C++
        name d_final_state is accepted too). The forward is recomputed from the inputs. Returns
        (dq, dk, dv, dg, dbeta, dh0); dh0 (the initial state's gradient) is None without initial_state."""
        options = (scale, initial_state, cu_seqlens, use_qk_l2norm_in_kernel, state_indices, compute_data_type, name)
        attrs = _frost.Gdn_backward_attributes()
        return self._backward("gdn_backward", attrs, q, k, v, g, beta, do, dht, d_final_state, *options)

    def kda_backward(
        self,
        q,
        k,
        v,
        g,
        beta,
        do,
        scale=None,
        initial_state=None,
        dht=None,
        cu_seqlens=None,
        use_qk_l2norm_in_kernel=False,
        state_indices=None,
        compute_data_type=None,
        name="",
        d_final_state=None,
    ):
        """Gradients of kda, as gdn_backward. Returns (dq, dk, dv, dg, dbeta, dh0)."""
        options = (scale, initial_state, cu_seqlens, use_qk_l2norm_in_kernel, state_indices, compute_data_type, name)
        attrs = _frost.Kda_backward_attributes()
        return self._backward("kda_backward", attrs, q, k, v, g, beta, do, dht, d_final_state, *options)
