"""Mixture-of-experts grouped matmul, forward and backward.

Routed row r belongs to the expert e with first_token_offset[e] <= r < first_token_offset[e + 1] (the last
expert ends at R) and gives Y[r] = X_r @ weight[e]. mode (frost.moe_grouped_matmul_mode): NONE (rows already
grouped: X_r = token[0, r], output[0, r] = Y[r]), GATHER (X_r = token[0, token_index[r]]) or SCATTER
(output[0, token_index[r] * top_k + token_ks[r]] = Y[r]). token [1, R or S, K], weight [E, K, N],
first_token_offset [E, 1, 1], token_index and token_ks [1, R, 1] (INT32 or INT64); output [1, R, N].
"""

from .. import _frost
from ._common import reject_unsupported

ENUMS = ("moe_grouped_matmul_mode",)


class Builders:
    def _moe_attributes(self, attrs, mode, top_k, compute_data_type, name):
        attrs = self._attributes(attrs, name, compute_data_type)
        if mode is not None:
            attrs.set_mode(mode)
        if top_k is not None:
            attrs.set_top_k(int(top_k))
        return attrs

    def moe_grouped_matmul(
        self,
        token,
        weight,
        first_token_offset,
        token_index=None,
        token_ks=None,
        mode=None,
        compute_data_type=None,
        top_k=None,
        name="",
        top_k_scores=None,
    ):
        """Grouped per-expert matmul with the routing of `mode` (NONE unless given; top_k is read in SCATTER
        mode, default 1). Rows before first_token_offset[0], and SCATTER slots no row targets, are zero.
        Returns the output tensor."""
        reject_unsupported("moe_grouped_matmul()", top_k_scores=top_k_scores)
        attrs = self._moe_attributes(_frost.Moe_grouped_matmul_attributes(), mode, top_k, compute_data_type, name)
        return self._graph.moe_grouped_matmul(token, weight, first_token_offset, token_index, token_ks, attrs)

    def moe_grouped_matmul_backward(
        self,
        doutput,
        token,
        weight,
        first_token_offset,
        token_index=None,
        token_ks=None,
        mode=None,
        top_k=None,
        compute_data_type=None,
        name="",
    ):
        """Gradients of moe_grouped_matmul for the same routing: (dToken, dWeight), dToken shaped as token and
        dWeight as weight. In GATHER mode a token routed to several experts sums their contributions; tokens
        routed nowhere get zero."""
        attrs = self._moe_attributes(
            _frost.Moe_grouped_matmul_backward_attributes(), mode, top_k, compute_data_type, name
        )
        return self._graph.moe_grouped_matmul_backward(
            doutput, token, weight, first_token_offset, token_index, token_ks, attrs
        )
