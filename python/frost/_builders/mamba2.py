"""Mamba-2's selective state-space scan (SSD), forward and backward, in mamba_ssm's `mamba_chunk_scan_combined`
conventions and keywords.

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
    def _mamba2_attributes(self, attrs, D, z, dt_bias, initial_states, cu_seqlens, dt_softplus, dt_limit, c_type, name):
        attrs = self._attributes(attrs, name, c_type)
        attrs.set_dt_softplus(bool(dt_softplus))
        lo, hi = (float(v) for v in dt_limit)
        if (lo, hi) != (0.0, math.inf):
            attrs.set_dt_limit(lo, hi)
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
        return attrs

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
        options = (D, z, dt_bias, initial_states, cu_seqlens, dt_softplus, dt_limit, compute_data_type, name)
        attrs = self._mamba2_attributes(_frost.Mamba2_attributes(), *options)
        attrs.set_output_final_state(bool(return_final_states))
        return self._graph.mamba2(x, dt, A, B, C, attrs)

    def mamba2_backward(
        self,
        x,
        dt,
        A,
        B,
        C,
        dy,
        D=None,
        z=None,
        dt_bias=None,
        initial_states=None,
        cu_seqlens=None,
        dt_softplus=False,
        dt_limit=(0.0, math.inf),
        dfinal_states=None,
        compute_data_type=None,
        name="",
    ):
        """Gradients of mamba2 from dy and, when the final states feed a loss, dfinal_states; the forward is
        recomputed from the inputs. Returns (dx, ddt, dA, dB, dC, dD, dz, ddt_bias, dinitial_states); the last
        four are None without D, z, dt_bias, initial_states."""
        options = (D, z, dt_bias, initial_states, cu_seqlens, dt_softplus, dt_limit, compute_data_type, name)
        attrs = self._mamba2_attributes(_frost.Mamba2_backward_attributes(), *options)
        if dfinal_states is not None:
            attrs.set_d_final_state(dfinal_states)
        return self._graph.mamba2_backward(x, dt, A, B, C, dy, attrs)
