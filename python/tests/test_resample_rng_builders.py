"""resample (pooling) against numpy window loops, and rng against a numpy Philox 4x32-10."""

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph
from references import philox_uniform, replay, run

MODE = frost.resample_mode


def pool_reference(x, window, stride, pre, post, mode, padding_mode):
    """(Y, Index) by a loop over output positions; Index is the row-major position of the first maximum."""
    pads = [(0, 0), (0, 0)] + list(zip(pre, post))
    if padding_mode == frost.padding_mode.EDGE_VAL_PAD:
        xp = np.pad(x, pads, mode="edge")
    else:
        xp = np.pad(x, pads, constant_values=-np.inf if padding_mode == frost.padding_mode.NEG_INF_PAD else 0)
    inside = np.pad(np.ones(x.shape), pads)
    out = [(s + a + b - w) // st + 1 for s, a, b, w, st in zip(x.shape[2:], pre, post, window, stride)]
    y = np.zeros(x.shape[:2] + tuple(out))
    index = np.zeros(y.shape, np.int32)
    for o in np.ndindex(*out):
        sl = (slice(None), slice(None)) + tuple(slice(i * s, i * s + w) for i, s, w in zip(o, stride, window))
        win = xp[sl].reshape(x.shape[0], x.shape[1], -1)
        at = (slice(None), slice(None)) + o
        if mode == MODE.MAXPOOL:
            y[at], index[at] = win.max(axis=-1), win.argmax(axis=-1)
        elif mode == MODE.AVGPOOL_INCLUDE_PADDING:
            y[at] = win.sum(axis=-1) / win.shape[-1]
        else:
            y[at] = win.sum(axis=-1) / inside[sl].reshape(win.shape).sum(axis=-1)
    return y, index


@pytest.mark.parametrize(
    "mode, padding_mode",
    [
        (MODE.MAXPOOL, None),
        (MODE.AVGPOOL_INCLUDE_PADDING, None),
        (MODE.AVGPOOL_EXCLUDE_PADDING, None),
        (MODE.MAXPOOL, frost.padding_mode.EDGE_VAL_PAD),
    ],
)
def test_pooling_2d(mode, padding_mode, rng):
    x = rng.standard_normal((2, 3, 7, 5)).astype(np.float32)
    window, stride, pre, post = [3, 2], [2, 2], [1, 0], [1, 1]
    g = float_graph()
    X = g.tensor_like(x)
    training = mode == MODE.MAXPOOL
    Y, INDEX = g.resample(
        input=X,
        resampling_mode=mode,
        window=window,
        stride=stride,
        pre_padding=pre,
        post_padding=post,
        padding_mode=padding_mode,
        is_inference=not training,
        compute_data_type=FLOAT,
    )
    outputs = [Y] + ([INDEX] if training else [])
    assert (INDEX is None) == (not training)
    for t in outputs:
        t.set_output(True)
    got = run(g, {X: x}, outputs, [np.float32, np.int32][: len(outputs)])
    default_pad = frost.padding_mode.NEG_INF_PAD if mode == MODE.MAXPOOL else frost.padding_mode.ZERO_PAD
    want_y, want_index = pool_reference(
        x.astype(np.float64), window, stride, pre, post, mode, padding_mode or default_pad
    )
    np.testing.assert_allclose(got[0], want_y, rtol=1e-6, atol=1e-6)
    if training:
        assert INDEX.get_data_type() == frost.data_type.INT32
        np.testing.assert_array_equal(got[1], want_index)


def test_pooling_3d_symmetric_padding_and_replay(rng):
    x = rng.standard_normal((1, 2, 5, 4, 3)).astype(np.float32)
    g = float_graph()
    X = g.tensor_like(x)
    Y, _ = g.resample(X, MODE.AVGPOOL_EXCLUDE_PADDING, [2, 2, 2], stride=[2, 1, 2], padding=[1, 0, 1])
    Y.set_output(True)
    (y,) = run(g, {X: x}, [Y])
    want, _ = pool_reference(
        x.astype(np.float64),
        [2, 2, 2],
        [2, 1, 2],
        [1, 0, 1],
        [1, 0, 1],
        MODE.AVGPOOL_EXCLUDE_PADDING,
        frost.padding_mode.ZERO_PAD,
    )
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    assert y.tobytes() == replay(g, {X: x}, [Y])[0].tobytes()


def test_resample_errors():
    g = float_graph()
    X = g.tensor(name="x", dim=[1, 2, 6, 6])
    with pytest.raises(frost.InvalidValueError, match="window"):
        g.resample(X, MODE.MAXPOOL, window=[2, "2"])
    Y, _ = g.resample(X, MODE.MAXPOOL, window=[2, 2, 2], name="pool3")  # three window extents for 2 spatial axes
    Y.set_output(True)
    with pytest.raises(frost.FrostError, match="pool3"):
        g.validate()


@pytest.mark.parametrize("as_buffers", [False, True])
def test_rng_bernoulli_matches_philox(as_buffers):
    seed, offset, p = 987654321012, 77, 0.37
    g = float_graph()
    if as_buffers:
        SEED = g.tensor(name="seed", dim=[1], data_type=frost.data_type.INT64)
        OFFSET = g.tensor(name="offset", dim=[1], data_type=frost.data_type.INT64)
        pack = {SEED: np.array([seed], np.int64), OFFSET: np.array([offset], np.int64)}
    else:
        SEED, OFFSET, pack = seed, offset, {}
    Y = g.rng(seed=SEED, offset=OFFSET, bernoulli_probability=p, dim=[3, 5, 17], name="mask")
    Y.set_output(True)
    (y,) = run(g, pack, [Y])
    want = (philox_uniform(seed, offset, y.size) < p).reshape(y.shape)
    np.testing.assert_array_equal(y, want.astype(np.float32))
    assert 0.2 < y.mean() < 0.55


def test_rng_dims_on_output_and_checker_can_fail():
    g = float_graph()
    Y = g.rng(1, 2, distribution=frost.rng_distribution.BERNOULLI, bernoulli_probability=0.5)
    Y.set_output(True).set_dim([4, 9])
    (y,) = run(g, {}, [Y])
    assert y.shape == (4, 9)
    np.testing.assert_array_equal(y.reshape(-1), philox_uniform(1, 2, 36) < 0.5)
    assert not np.array_equal(y.reshape(-1), philox_uniform(1, 3, 36) < 0.5)  # another offset, another mask


def test_rng_bad_probability_is_typed():
    g = float_graph()
    Y = g.rng(1, 2, bernoulli_probability=1.5, dim=[4], name="bad_rng")
    Y.set_output(True)
    with pytest.raises(frost.FrostError, match="bad_rng"):
        g.validate()
