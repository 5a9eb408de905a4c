"""pygraph.execute's fast path for torch tensors laid out as declared (on the CPU engine here): it binds
the same pointers as the checked path, steps aside for anything else, and follows rebuilds."""

import pytest

torch = pytest.importorskip("torch")
import frost  # noqa: E402
from frost import ops  # noqa: E402

FLOAT = frost.data_type.FLOAT


def relu_graph(x):
    g = frost.pygraph(
        io_data_type=FLOAT, intermediate_data_type=FLOAT, compute_data_type=FLOAT, handle=frost.create_handle("cpu")
    )
    X = g.tensor_like(x)
    Y = g.relu(input=X)
    Y.set_output(True)
    g.build([frost.heur_mode.A])
    return g, X, Y


def test_declared_layouts_take_the_fast_path_and_match():
    x = torch.randn(17, 33)
    g, X, Y = relu_graph(x)
    y = torch.full_like(x, float("nan"))
    g.execute({X: x, Y: y})
    assert g._binder is not None and g._binder.pointers([(X, x), (Y, y)], -1, None) is not None
    assert torch.equal(y, x.relu())
    y2 = torch.full_like(x, float("nan"))
    g.execute([x, y2], tensor_uids=[X.get_uid(), Y.get_uid()])
    assert torch.equal(y2, y)


def test_anything_else_goes_through_the_checked_path():
    x = torch.randn(17, 33)
    g, X, Y = relu_graph(x)
    binder = g._binder or frost._buffers.Binder(g._graph, g.get_workspace_size())
    y = torch.empty(33, 17).t()  # other strides
    assert binder.pointers([(X, x), (Y, y)], -1, None) is None
    with pytest.raises(frost.InvalidVariantPackError, match="strides"):
        g.execute({X: x, Y: y})
    with pytest.raises(frost.InvalidVariantPackError, match="dtype"):
        g.execute({X: x.double(), Y: torch.empty_like(x)})
    with pytest.raises(frost.InvalidVariantPackError, match="bound twice"):
        g.execute({X: x, Y: torch.empty_like(x), Y.get_uid(): torch.empty_like(x)})
    with pytest.raises(frost.InvalidVariantPackError, match="no buffer"):
        g.execute({X: x})
    # numpy buffers are served by the checked path as before
    out = torch.empty_like(x)
    g.execute({X: x.numpy(), Y: out.numpy()})
    assert torch.equal(out, x.relu())


def test_a_rebuild_refreshes_the_fast_path_facts():
    x = torch.randn(4, 8)
    g, X, Y = relu_graph(x)
    g.execute({X: x, Y: torch.empty_like(x)})
    assert g._binder is not None
    g.build([frost.heur_mode.A])
    assert g._binder is None
    y = torch.empty_like(x)
    g.execute({X: x, Y: y})
    assert torch.equal(y, x.relu())


def test_functional_ops_reuse_their_graph_on_the_fast_path():
    ops.clear_cache()
    x, w = torch.randn(16, 64), torch.rand(1, 64) + 0.5
    first = ops.rms_norm(x, w)
    second = ops.rms_norm(x, w)
    stats = ops.cache_stats()
    assert stats.hits == 1 and stats.misses == 1
    assert torch.equal(first, second)
    torch.testing.assert_close(first, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w)
