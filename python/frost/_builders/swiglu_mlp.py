"""Gated MLP forward with SwiGLU (frost's own op): Y = (silu(X @ W_gate) * (X @ W_up)) @ W_down."""

from .. import _frost


class Builders:
    def swiglu_mlp(self, input, w_gate=None, w_up=None, w_down=None, w_gate_up=None, compute_data_type=None, name=""):
        """Y = (silu(input @ w_gate) * (input @ w_up)) @ w_down with input [T, H], w_gate and w_up [H, F],
        w_down [F, H]; Y [T, H]. Instead of w_gate and w_up, w_gate_up [H, 2F] may hold both with gate and
        up columns interleaved in blocks of 8 (column 16q + r is gate column 8q + r, 16q + 8 + r up column
        8q + r), the layout the sm90 fused kernel reads without a copy. Sums accumulate in FP32; the
        intermediate is rounded once to input's data type. Returns Y."""
        attrs = self._attributes(_frost.Swiglu_mlp_attributes(), name, compute_data_type)
        if w_gate_up is not None:
            if w_gate is not None or w_up is not None:
                raise ValueError("swiglu_mlp: pass either w_gate_up or w_gate and w_up, not both")
            return self._graph.swiglu_mlp(input, w_gate_up, w_down, attrs)
        return self._graph.swiglu_mlp(input, w_gate, w_up, w_down, attrs)
