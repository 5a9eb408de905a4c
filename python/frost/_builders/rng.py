"""rng: random tensors from the Philox 4x32-10 counter-based generator."""

from .. import _frost
from ._common import int_list

ENUMS = ("rng_distribution",)


class Builders:
    def rng(
        self,
        seed,
        offset,
        distribution=None,
        bernoulli_probability=None,
        dim=None,
        stride=None,
        compute_data_type=None,
        name="",
    ):
        """A random tensor Y (virtual until set_output). BERNOULLI (the default distribution): Y = 1 with
        probability bernoulli_probability, else 0. Element n of Y (row-major over its dims) is Philox block
        n // 4, word n % 4, with key (seed low, seed high) and counter (block low, block high, offset low,
        offset high): Y = (word * 2^-32 < p). seed and offset are one-element integer tensors or Python ints
        (INT64 pass-by-value scalars) in [0, 2^53). Y's dims come from dim= or from Y.set_dim."""
        attrs = self._attributes(_frost.Rng_attributes(), name, compute_data_type)
        attrs.set_distribution(_frost.rng_distribution.BERNOULLI if distribution is None else distribution)
        if bernoulli_probability is not None:
            attrs.set_bernoulli_probability(float(bernoulli_probability))
        if dim is not None:
            attrs.set_dim(int_list(dim, "rng(): dim"))
        if stride is not None:
            attrs.set_stride(int_list(stride, "rng(): stride"))
        int64 = _frost.data_type.INT64
        return self._graph.rng(
            self._operand(seed, "rng(): seed", int64), self._operand(offset, "rng(): offset", int64), attrs
        )
