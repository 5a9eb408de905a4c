"""Every op builder of the C++ Graph (include/frost/graph.h) is reachable from Python, on frost._frost.Graph
and on frost.pygraph, and every builder of pygraph has a docstring stating what it computes."""

import pathlib
import re

import pytest

import frost

GRAPH_H = pathlib.Path(__file__).resolve().parents[2] / "include" / "frost" / "graph.h"


def cpp_builders():
    text = GRAPH_H.read_text()
    section = text[text.index("// Op builders.") : text.index("// Lifecycle.")]
    return sorted(set(re.findall(r"^\s+(?:TensorPtr|std::array<TensorPtr, \d+>)\s+(\w+)\(", section, re.M)))


@pytest.mark.skipif(not GRAPH_H.exists(), reason="needs the source tree")
def test_every_cpp_builder_is_bound():
    names = cpp_builders()
    assert len(names) >= 40 and "conv_fprop" in names and "kda_backward" in names
    missing_low = [n for n in names if not hasattr(frost._frost.Graph, n)]
    missing_high = [n for n in names if not callable(getattr(frost.pygraph, n, None))]
    assert not missing_low, f"frost._frost.Graph lacks {missing_low}"
    assert not missing_high, f"frost.pygraph lacks {missing_high}"
    undocumented = [n for n in names if n != "pointwise" and not (getattr(frost.pygraph, n).__doc__ or "").strip()]
    assert not undocumented, f"builders without a docstring: {undocumented}"


def test_family_enums_are_exported():
    for name in ("convolution_mode", "resample_mode", "padding_mode", "rng_distribution", "moe_grouped_matmul_mode"):
        assert getattr(frost, name) is getattr(frost._frost, name)
        assert name in frost.__all__
    assert frost.convolution_mode.CROSS_CORRELATION != frost.convolution_mode.CONVOLUTION
    assert frost.moe_grouped_matmul_mode.SCATTER.name == "SCATTER"
