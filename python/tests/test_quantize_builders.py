"""block_scale_quantize / block_scale_dequantize: MXFP8 scale codes by formula, and quantize -> dequantize
round trips for MXFP8 and NVFP4 within the formats' rounding."""

import numpy as np
import pytest

import frost
from conftest import float_graph
from references import e4m3_to_float, e8m0_to_float, float_to_e4m3, replay, run

DT = frost.data_type


def test_mxfp8_codes_and_round_trip(rng):
    x = (rng.standard_normal((3, 64)) * rng.uniform(0.01, 50, (3, 1))).astype(np.float32)
    g = float_graph()
    X = g.tensor_like(x, name="x")
    Y, S = g.block_scale_quantize(input=X, block_size=32, name="q")
    Z = g.block_scale_dequantize(input=Y, descale=S, block_size=[1, 32], name="dq")
    for t in (Y, S, Z):
        t.set_output(True)
    pack = {X: x}
    y, s, z = run(g, pack, [Y, S, Z], [np.uint8, np.uint8, np.float32])
    assert Y.get_data_type() == DT.FP8_E4M3 and S.get_data_type() == DT.FP8_E8M0
    assert S.get_dim() == [3, 2]

    amax = np.abs(x.reshape(3, 2, 32)).max(axis=-1)
    np.testing.assert_array_equal(s, np.floor(np.log2(amax)) - 8 + 127)  # 2^(floor(log2 amax) - emax(E4M3))
    scale = np.repeat(e8m0_to_float(s), 32, axis=1)
    np.testing.assert_array_equal(y, float_to_e4m3(x / scale))  # round to nearest even, saturating at 448
    values = e4m3_to_float(y) * scale
    np.testing.assert_array_equal(z, values.astype(np.float32))
    # Within half an E4M3 step of x, except where x / scale passed 448 and saturated.
    assert np.all(np.abs(values - x) <= np.maximum(np.abs(x) * 2.0**-4, np.abs(x) - 448 * scale) + 1e-30)
    for have, again in zip((y, s, z), replay(g, pack, [Y, S, Z], [np.uint8, np.uint8, np.float32])):
        assert have.tobytes() == again.tobytes()


def test_nvfp4_round_trip_along_axis_0(rng):
    x = rng.standard_normal((32, 5)).astype(np.float32)
    g = float_graph()
    X = g.tensor_like(x)
    Y, S = g.block_scale_quantize(X, 16, axis=0, global_scale=1.0)
    S.set_data_type(DT.FP8_E4M3)
    Z = g.block_scale_dequantize(Y, S, 16, axis=0, global_scale=1.0)
    Z.set_output(True)
    (z,) = run(g, {X: x}, [Z])
    assert Y.get_data_type() == DT.FP4_E2M1 and S.get_dim() == [2, 5]
    amax = np.repeat(np.abs(x.reshape(2, 16, 5)).max(axis=1), 16, axis=0)
    error = np.abs(z - x)
    # Half the widest E2M1 step (4 -> 6) is amax / 6, plus the E4M3 rounding of the block scale.
    assert np.all(error <= 0.25 * amax)
    assert error.max() > 0  # four-bit values do lose information


def test_quantize_keyword_and_shape_errors():
    g = float_graph()
    X = g.tensor(name="x", dim=[4, 48])
    with pytest.raises(frost.InvalidValueError, match="block_size"):
        g.block_scale_dequantize(X, X, block_size=[32, 32])
    with pytest.raises(frost.InvalidValueError, match="axis"):
        g.block_scale_dequantize(X, X, block_size=[1, 16], axis=0)
    with pytest.raises(frost.InvalidValueError, match="is_negative_scale"):
        g.block_scale_dequantize(X, X, block_size=16, is_negative_scale=True)
    Y, _ = g.block_scale_quantize(X, block_size=32, name="q32")  # 48 is not a multiple of 32
    Y.set_output(True)
    with pytest.raises(frost.FrostError, match="q32"):
        g.validate()
