"""matmul_fp8: a matmul on per-tensor scaled operands with the amax of its result. cuDNN Frontend's Python
has no such builder (its C++ builds it inside FP8 attention), so the keywords are frost's C++ names."""

from .. import _frost
from ._common import set_tensors


class Builders:
    def matmul_fp8(
        self,
        a,
        b,
        descale_a,
        descale_b,
        scale_c,
        padding=None,
        m_override=None,
        n_override=None,
        k_override=None,
        compute_data_type=None,
        name="",
    ):
        """C' = (A @ B) * descale_a * descale_b, batched and broadcast as matmul; Amax_C = max |C'| (FLOAT
        [1, 1, 1, 1]); C = C' * scale_c in C's type (the io type, else A's; FP8 stores saturate). A and B take
        matmul's types (FP8_E4M3, FP8_E5M2, HALF, BFLOAT16, FLOAT, DOUBLE). The descales and scale_c are FLOAT
        [1, 1, 1, 1] tensors or Python numbers. Rank-4 A and B may give a C with h / g heads, each the sum of g
        consecutive heads (grouped-query reduction). Returns (C, Amax_C)."""
        what = "matmul_fp8()"
        scales = [
            self._operand(t, f"{what}: {port}")
            for t, port in ((descale_a, "descale_a"), (descale_b, "descale_b"), (scale_c, "scale_c"))
        ]
        attrs = self._attributes(_frost.Matmul_fp8_attributes(), name, compute_data_type)
        if padding is not None:
            attrs.set_padding(float(padding))
        set_tensors(
            attrs, (("set_m_override", m_override), ("set_n_override", n_override), ("set_k_override", k_override))
        )
        return self._graph.matmul_fp8(a, b, *scales, attrs)
