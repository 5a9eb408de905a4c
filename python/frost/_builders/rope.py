"""Rotary position embedding (frost's own op; its tables are explicit cos and sin inputs)."""

from .. import _frost


class Builders:
    def _rope_attributes(self, attrs, interleaved, rotary_dim, compute_data_type, name):
        attrs = self._attributes(attrs, name, compute_data_type).set_interleaved(bool(interleaved))
        if rotary_dim is not None:
            attrs.set_rotary_dim(int(rotary_dim))
        return attrs

    def rope(self, input, cos, sin, interleaved=False, rotary_dim=None, compute_data_type=None, name=""):
        """input [b, h, s, d]; cos and sin [s, r/2] or [1, 1, s, r/2] with r = rotary_dim (default d, even).
        Each pair (a, b) of the first r channels turns by its angle: y_a = x_a cos - x_b sin,
        y_b = x_b cos + x_a sin, with pairs (i, i + r/2) (rotate-half, the default) or (2i, 2i + 1)
        (interleaved). Channels r..d-1 are copied. Returns Y."""
        attrs = self._rope_attributes(_frost.Rope_attributes(), interleaved, rotary_dim, compute_data_type, name)
        return self._graph.rope(input, cos, sin, attrs)

    def rope_backward(self, dY, cos, sin, interleaved=False, rotary_dim=None, compute_data_type=None, name=""):
        """The inverse rotation applied to dY (dx_a = dy_a cos + dy_b sin, dx_b = dy_b cos - dy_a sin), the
        exact gradient of rope for any tables. Returns dX."""
        attrs = self._rope_attributes(
            _frost.Rope_backward_attributes(), interleaved, rotary_dim, compute_data_type, name
        )
        return self._graph.rope_backward(dY, cos, sin, attrs)
