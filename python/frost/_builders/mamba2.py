"""Mamba-2's selective state-space scan (SSD), forward, in mamba_ssm's `mamba_chunk_scan_combined` conventions
and keywords.

x [B, T, H, P]; dt [B, T, H]; A [H] (usually negative); B, C [B, T, G, N] with G dividing H (head h reads group
h // (H / G)); optional D [H] or [H, P], z [B, T, H, P], dt_bias [H]; states [S, H, P, N] FP32. Per sequence and
head, from H_0 = initial_states (zero if none):
    dt_t = dt + dt_bias, softplus(dt_t) with dt_softplus, clamped to dt_limit
    H_t = exp(dt_t A) H_{t-1} + dt_t x_t B_t^T;  y_t = H_t C_t + D x_t;  y_t *= silu(z_t) with z
cu_seqlens ([S + 1], INT32 or INT64, B == 1) packs variable-length sequences along T.
"""

import math

from .. import _frost
from ._common import set_tensors


class Builders:
    def mamba2(
        self,
        x,
        dt,
        A,
        B,
        C,
        D=None,
        z=None,
        dt_bias=None,
        initial_states=None,
        cu_seqlens=None,
        dt_softplus=False,
        dt_limit=(0.0, math.inf),
        return_final_states=False,
        compute_data_type=None,
        name="",
    ):
        """Mamba-2 scan forward. Returns (y, final_states); final_states is None unless return_final_states.
        dt_limit (lo, hi) clamps the step; an infinite side is not clamped, and the default (0, inf), as in
        mamba_ssm, clamps nothing."""
        attrs = self._attributes(_frost.Mamba2_attributes(), name, compute_data_type)
        attrs.set_dt_softplus(bool(dt_softplus))
        lo, hi = (float(v) for v in dt_limit)
        if (lo, hi) != (0.0, math.inf):
            attrs.set_dt_limit(lo, hi)
        attrs.set_output_final_state(bool(return_final_states))
        set_tensors(
            attrs,
            (
                ("set_d", D),
                ("set_z", z),
                ("set_dt_bias", dt_bias),
                ("set_initial_state", initial_states),
                ("set_cu_seqlens", cu_seqlens),
            ),
        )
        return self._graph.mamba2(x, dt, A, B, C, attrs)
