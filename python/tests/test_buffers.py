"""Variant-pack buffers: DLPack/buffer-protocol arrays and raw pointers are checked against their
declarations before anything runs, and a rejected call leaves every buffer untouched."""

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph, poisoned


@pytest.fixture
def scaled(rng):
    """Y = X * 2 on a [4, 6] FLOAT graph, built."""
    g = float_graph()
    X = g.tensor(name="X", dim=[4, 6], stride=[6, 1])
    Y = g.mul(a=X, b=2.0)
    Y.set_output(True)
    g.build()
    x = rng.standard_normal((4, 6)).astype(np.float32)
    return g, X, Y, x


def expect_rejected(g, pack, pattern, workspace=None):
    """The call raises InvalidVariantPackError matching pattern and writes no buffer."""
    before = {id(v): v.copy() for v in pack.values() if isinstance(v, np.ndarray)}
    with pytest.raises(frost.InvalidVariantPackError, match=pattern) as e:
        g.execute(pack, workspace)
    assert e.value.code == frost.error_code.INVALID_VARIANT_PACK
    assert isinstance(e.value, ValueError)
    for v in pack.values():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, before[id(v)])


def test_good_buffers_run(scaled):
    g, X, Y, x = scaled
    y = poisoned((4, 6))
    g.execute({X: x, Y: y}, None)
    np.testing.assert_array_equal(y, x * 2)


def test_wrong_dtype(scaled):
    g, X, Y, x = scaled
    expect_rejected(g, {X: x.astype(np.float64), Y: poisoned((4, 6))}, "float64 does not fit declared data type FLOAT")
    expect_rejected(g, {X: x, Y: poisoned((4, 6), np.float16)}, "float16 does not fit")
    expect_rejected(g, {X: x.view(np.int32), Y: poisoned((4, 6))}, "int32 does not fit")


def test_wrong_shape(scaled):
    g, X, Y, x = scaled
    expect_rejected(g, {X: x[:3], Y: poisoned((4, 6))}, r"shape \[3, 6\].*declared dims \[4, 6\]")
    expect_rejected(g, {X: np.zeros((6, 6), np.float32), Y: poisoned((4, 6))}, "exactly the 24 elements")
    expect_rejected(g, {X: np.zeros(23, np.float32), Y: poisoned((4, 6))}, "does not match")


def test_wrong_strides(scaled):
    g, X, Y, x = scaled
    transposed_layout = np.asfortranarray(x)
    expect_rejected(
        g, {X: transposed_layout, Y: poisoned((4, 6))}, r"strides \[1, 4\] differ from declared strides \[6, 1\]"
    )
    padded = np.zeros((4, 8), np.float32)[:, :6]
    expect_rejected(g, {X: padded, Y: poisoned((4, 6))}, "differ from declared strides")


def test_missing_and_unknown_entries(scaled):
    g, X, Y, x = scaled
    expect_rejected(g, {X: x}, "has no buffer in the variant pack")
    expect_rejected(g, {X: x, Y: poisoned((4, 6)), 999: poisoned((4, 6))}, "uid 999 names no graph input")
    expect_rejected(g, {X: x, Y: None}, "NoneType is not a buffer")
    expect_rejected(g, {X: x, Y: [0.0] * 24}, "list is not a buffer")
    expect_rejected(g, {X: x, Y: 0}, "null")
    other = float_graph()
    T = other.tensor(name="T", dim=[4, 6])
    other.neg(input=T).set_output(True)
    other.validate()
    expect_rejected(g, {X: x, Y: poisoned((4, 6)), T: x}, "not a graph input or output of this graph")


def test_sequence_form_checks_too(scaled):
    g, X, Y, x = scaled
    y = poisoned((4, 6))
    with pytest.raises(frost.InvalidVariantPackError, match="2 buffers for 1 tensor_uids"):
        g.execute((x, y), None, tensor_uids=[X.get_uid()])
    with pytest.raises(frost.InvalidVariantPackError, match="float64"):
        g.execute((x.astype(np.float64), y), None, tensor_uids=[X.get_uid(), Y.get_uid()])
    assert np.isnan(y).all()
    with pytest.raises(TypeError):
        g.execute((x, y), None)


def test_dense_storage_of_another_shape_is_accepted(scaled):
    g, X, Y, x = scaled
    y_flat = np.full(24 + 5, np.nan, np.float32)  # a longer 1-D run
    g.execute({X: x.reshape(-1), Y: y_flat}, None)
    np.testing.assert_array_equal(y_flat[:24].reshape(4, 6), x * 2)
    assert np.isnan(y_flat[24:]).all()
    y3 = poisoned((2, 3, 4))
    g.execute({X: x.reshape(2, 12), Y: y3}, None)
    np.testing.assert_array_equal(y3.reshape(4, 6), x * 2)


def test_transposed_declaration_takes_its_storage(rng):
    # X declared as the [6, 4] transpose view of a row-major [4, 6] array.
    g = float_graph()
    X = g.tensor(name="Xt", dim=[6, 4], stride=[1, 6])
    Y = g.identity(input=X)
    Y.set_output(True).set_stride([4, 1])
    g.build()
    x = rng.standard_normal((4, 6)).astype(np.float32)
    y = poisoned((6, 4))
    g.execute({X: x, Y: y}, None)  # the storage, of another shape: a dense run of the same 24 elements
    np.testing.assert_array_equal(y, x.T)
    y2 = poisoned((6, 4))
    g.execute({X: x.T, Y: y2}, None)  # the view itself: same dims, same strides
    np.testing.assert_array_equal(y2, x.T)


def test_raw_pointers_are_trusted(scaled):
    g, X, Y, x = scaled
    y = poisoned((4, 6))
    g.execute({X: x.ctypes.data, Y: y.ctypes.data}, None)
    np.testing.assert_array_equal(y, x * 2)


def test_half_and_bfloat16_storage(rng):
    g = frost.pygraph(
        io_data_type=frost.data_type.BFLOAT16,
        intermediate_data_type=FLOAT,
        compute_data_type=FLOAT,
        handle=frost.create_handle("cpu"),
    )
    X = g.tensor(name="X", dim=[3, 5])
    H = g.tensor(name="H", dim=[3, 5], data_type=frost.data_type.HALF)
    Y = g.add(a=X, b=H)
    Y.set_output(True).set_data_type(FLOAT)
    g.build()
    x = rng.standard_normal((3, 5)).astype(np.float32)
    x_bf16 = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncation is exact bf16 storage
    h = rng.standard_normal((3, 5)).astype(np.float16)
    y = poisoned((3, 5))
    g.execute({X: x_bf16, H: h, Y: y}, None)
    x_back = (x_bf16.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_allclose(y, x_back + h.astype(np.float32), rtol=1e-6)
    with pytest.raises(frost.InvalidVariantPackError, match="float16 does not fit declared data type BFLOAT16"):
        g.execute({X: x.astype(np.float16), H: h, Y: y}, None)
    with pytest.raises(frost.InvalidVariantPackError, match="uint16 does not fit declared data type HALF"):
        g.execute({X: x_bf16, H: h.view(np.uint16), Y: y}, None)


def test_workspace_forms(scaled):
    g, X, Y, x = scaled
    assert g.get_workspace_size() == 0
    for ws in (None, 0, np.zeros(0, np.uint8), np.zeros(64, np.uint8)):
        y = poisoned((4, 6))
        g.execute({X: x, Y: y}, ws)
        np.testing.assert_array_equal(y, x * 2)
    with pytest.raises(frost.InvalidVariantPackError, match="workspace"):
        g.execute({X: x, Y: poisoned((4, 6))}, "workspace")


def test_tensor_like_reads_dims_strides_and_dtype(rng):
    g = float_graph()
    a = np.zeros((5, 7), np.float16)[:, ::2]  # strided view
    t = g.tensor_like(a, name="a")
    assert t.get_dim() == [5, 4] and t.get_stride() == [7, 2] and t.get_data_type() == frost.data_type.HALF
    for dtype, expected in [
        (np.float32, frost.data_type.FLOAT),
        (np.float64, frost.data_type.DOUBLE),
        (np.int32, frost.data_type.INT32),
        (np.int64, frost.data_type.INT64),
        (np.int8, frost.data_type.INT8),
        (np.uint8, frost.data_type.UINT8),
        (np.bool_, frost.data_type.BOOLEAN),
    ]:
        assert g.tensor_like(np.zeros((2, 2), dtype)).get_data_type() == expected
    like = g.tensor_like(t, name="copy")
    assert like.get_dim() == t.get_dim() and like is not t
    with pytest.raises(frost.InvalidValueError, match="no data type"):
        g.tensor_like(np.zeros(3, np.uint16))
    with pytest.raises(TypeError):
        g.tensor_like([1.0, 2.0])


def test_late_bound_pass_by_value_scalar(rng):
    # cuDNN Frontend style: a pass-by-value tensor whose value comes with the variant pack.
    g = float_graph()
    X = g.tensor(name="X", dim=[2, 3])
    S = g.tensor(name="s", dim=[1], is_pass_by_value=True, data_type=FLOAT)
    Y = g.mul(a=X, b=S)
    Y.set_output(True)
    g.build()
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = poisoned((2, 3))
    g.execute({X: x, S: np.full((1,), 3.0, np.float32), Y: y}, None)
    np.testing.assert_allclose(y, x * 3.0, rtol=1e-6)
    g.execute({X: x, S: 0.5, Y: y}, None)
    np.testing.assert_allclose(y, x * 0.5, rtol=1e-6)
    with pytest.raises(frost.InvalidVariantPackError, match="pass-by-value"):
        g.execute({X: x, Y: y}, None)


def test_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    g = float_graph()
    x = torch.randn(4, 6)
    X = g.tensor_like(x)
    Y = g.sigmoid(input=X)
    Y.set_output(True)
    g.build()
    y = torch.full((4, 6), float("nan"))
    g.execute({X: x, Y: y}, None)
    torch.testing.assert_close(y, torch.sigmoid(x))
    with pytest.raises(frost.InvalidVariantPackError):
        g.execute({X: x.double(), Y: y}, None)
    with pytest.raises(frost.InvalidVariantPackError):
        g.execute({X: x.t().contiguous().t(), Y: y}, None)
    assert g.tensor_like(torch.zeros(2, 3, dtype=torch.bfloat16)).get_data_type() == frost.data_type.BFLOAT16
