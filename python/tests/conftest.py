"""Shared fixtures of frost's Python tests: they run on the CPU reference engine with numpy buffers;
tests marked `gpu` skip cleanly where this build sees no CUDA device."""

import numpy as np
import pytest

import frost

FLOAT = frost.data_type.FLOAT


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped where none is usable")


def pytest_collection_modifyitems(config, items):
    if frost._frost.cuda_device_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA device usable by this frost build")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    return np.random.default_rng(20240607)


@pytest.fixture
def cpu_handle():
    return frost.create_handle("cpu")


def float_graph(handle=None, compute=FLOAT):
    """A graph with FLOAT io and intermediates on the host."""
    return frost.pygraph(
        io_data_type=FLOAT,
        intermediate_data_type=FLOAT,
        compute_data_type=compute,
        handle=handle or frost.create_handle("cpu"),
    )


def poisoned(shape, dtype=np.float32):
    """An output buffer full of NaN, so an element the engine forgets to write shows."""
    return np.full(shape, np.nan, dtype=dtype)
