"""conv_fprop, conv_dgrad and conv_wgrad against numpy tap loops, on odd shapes, groups, NHWC and 1-D/3-D."""

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph
from references import conv_dgrad, conv_fprop, conv_wgrad, replay, run

CASES = {
    # x dims, w dims, pre, post, stride, dilation
    "2d stride dilation": ([2, 3, 7, 6], [4, 3, 3, 2], [1, 0], [2, 1], [2, 1], [1, 2]),
    "1d grouped": ([2, 4, 9], [6, 2, 3], [1], [1], [1], [1]),
    "3d": ([1, 2, 5, 4, 3], [3, 2, 2, 3, 1], [0, 1, 0], [1, 1, 0], [2, 1, 1], [1, 1, 1]),
}


@pytest.mark.parametrize("case", CASES)
def test_fprop_dgrad_wgrad(case, rng):
    x_dims, w_dims, pre, post, stride, dilation = CASES[case]
    x = rng.standard_normal(x_dims).astype(np.float32)
    w = rng.standard_normal(w_dims).astype(np.float32)
    want_y = conv_fprop(x.astype(np.float64), w, pre, post, stride, dilation)
    dy = rng.standard_normal(want_y.shape).astype(np.float32)

    g = float_graph()
    X, W, DY = g.tensor_like(x, name="x"), g.tensor_like(w, name="w"), g.tensor_like(dy, name="dy")
    geometry = dict(pre_padding=pre, post_padding=post, stride=stride, dilation=dilation)
    Y = g.conv_fprop(image=X, weight=W, compute_data_type=FLOAT, name="fprop", **geometry)
    DX = g.conv_dgrad(loss=DY, filter=W, name="dgrad", **geometry)
    DW = g.conv_wgrad(image=X, loss=DY, name="wgrad", **geometry)
    DX.set_dim(x_dims)
    DW.set_dim(w_dims)
    outputs = [Y, DX, DW]
    for t in outputs:
        t.set_output(True)
    pack = {X: x, W: w, DY: dy}
    y, dx, dw = run(g, pack, outputs)

    assert Y.get_dim() == list(want_y.shape) and Y.get_data_type() == FLOAT
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        dx, conv_dgrad(dy.astype(np.float64), w, x_dims, pre, post, stride, dilation), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        dw, conv_wgrad(dy.astype(np.float64), x, w_dims, pre, post, stride, dilation), rtol=1e-5, atol=1e-4
    )
    for have, again in zip((y, dx, dw), replay(g, pack, outputs)):
        assert have.tobytes() == again.tobytes()


def test_symmetric_padding_nhwc_and_convolution_mode(rng):
    n, c, h, w_, k = 2, 3, 5, 7, 4
    x_nhwc = rng.standard_normal((n, h, w_, c)).astype(np.float32)
    w = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    g = float_graph()
    X = g.tensor(name="x", dim=[n, c, h, w_], stride=[h * w_ * c, 1, w_ * c, c])  # channels-last
    W = g.tensor_like(w)
    Y = g.conv_fprop(X, W, [1, 1], [1, 2], [1, 1], frost.convolution_mode.CONVOLUTION)
    Y.set_output(True)
    (y,) = run(g, {X: x_nhwc, W: w}, [Y])
    x = x_nhwc.transpose(0, 3, 1, 2).astype(np.float64)
    flipped = w[:, :, ::-1, ::-1]  # CONVOLUTION flips the filter on every spatial axis
    np.testing.assert_allclose(y, conv_fprop(x, flipped, [1, 1], [1, 1], [1, 2], [1, 1]), rtol=1e-5, atol=1e-5)


def test_cross_correlation_differs_from_convolution(rng):
    """The checker can fail: the unflipped reference does not match a CONVOLUTION-mode result."""
    x = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    w = rng.standard_normal((1, 1, 2, 2)).astype(np.float32)
    g = float_graph()
    X, W = g.tensor_like(x), g.tensor_like(w)
    Y = g.conv_fprop(image=X, weight=W, convolution_mode=frost.convolution_mode.CONVOLUTION)
    Y.set_output(True)
    (y,) = run(g, {X: x, W: w}, [Y])
    assert not np.allclose(y, conv_fprop(x, w, [0, 0], [0, 0], [1, 1], [1, 1]), atol=1e-3)


def test_keyword_and_shape_errors():
    g = float_graph()
    X = g.tensor(name="x", dim=[1, 3, 8, 8])
    W = g.tensor(name="w", dim=[2, 3, 3, 3])
    with pytest.raises(frost.InvalidValueError, match="padding"):
        g.conv_fprop(image=X, weight=W, padding=[1, 1], pre_padding=[1, 1])
    with pytest.raises(frost.InvalidValueError, match="stride"):
        g.conv_fprop(image=X, weight=W, stride=[1.5, 1])
    with pytest.raises(TypeError):
        g.conv_fprop(image=X, weights=W)
    bad = g.tensor(name="w_bad", dim=[2, 2, 3, 3])  # 3 channels are not a multiple of 2 per group
    g.conv_fprop(image=X, weight=bad, name="bad_conv").set_output(True)
    with pytest.raises(frost.FrostError, match="bad_conv"):
        g.validate()


def test_dgrad_needs_dims():
    g = float_graph()
    DY = g.tensor(name="dy", dim=[1, 2, 4, 4])
    W = g.tensor(name="w", dim=[2, 3, 3, 3])
    g.conv_dgrad(loss=DY, filter=W, padding=[1, 1], name="dg").set_output(True)
    with pytest.raises(frost.FrostError, match="dg"):
        g.validate()
