"""Graph lifecycle, queries, handles, serialization and error mapping on the CPU reference engine."""

import json

import numpy as np
import pytest

import frost
from conftest import FLOAT, float_graph, poisoned


def relu_add_graph(rng, shape=(3, 17)):
    g = float_graph()
    x = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal((1, shape[1])).astype(np.float32)
    X = g.tensor(name="X", dim=x.shape, stride=[s // 4 for s in x.strides], data_type=FLOAT)
    B = g.tensor_like(b, name="B")
    Y = g.relu(input=g.add(a=X, b=B, name="add"), name="relu")
    Y.set_output(True)
    return g, (X, B, Y), (x, b)


def test_full_lifecycle_step_by_step(rng):
    g, (X, B, Y), (x, b) = relu_add_graph(rng)
    g.validate()
    assert Y.get_dim() == [3, 17] and Y.get_stride() == [17, 1] and Y.get_data_type() == FLOAT
    assert len({X.get_uid(), B.get_uid(), Y.get_uid()}) == 3
    g.build_operation_graph()
    g.create_execution_plans([frost.heur_mode.A, frost.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(frost.build_plan_policy.ALL)
    assert g.get_execution_plan_count() >= 1
    assert g.get_plan_name_at_index(0).startswith("reference")
    assert g.get_workspace_size() == 0
    engine_id, knobs = g.get_engine_and_knobs_at_index(0)
    assert isinstance(engine_id, int) and isinstance(knobs, dict)
    y = poisoned(x.shape)
    g.execute({X: x, B: b, Y: y}, None)
    np.testing.assert_allclose(y, np.maximum(x + b, 0), rtol=1e-6, atol=1e-6)
    y2 = poisoned(x.shape)
    g.execute_plan_at_index({X: x, B: b, Y: y2}, None, 0)
    np.testing.assert_array_equal(y, y2)


def test_build_shortcut_and_uid_keys(rng):
    g, (X, B, Y), (x, b) = relu_add_graph(rng)
    g.build([frost.heur_mode.A])
    y = poisoned(x.shape)
    g.execute({X.get_uid(): x, B.get_uid(): b, Y.get_uid(): y}, None)
    np.testing.assert_allclose(y, np.maximum(x + b, 0), rtol=1e-6, atol=1e-6)
    y3 = poisoned(x.shape)
    g.execute((x, b, y3), None, tensor_uids=[X.get_uid(), B.get_uid(), Y.get_uid()])
    np.testing.assert_array_equal(y, y3)


def test_calls_out_of_order_raise_invalid_value(rng):
    g, _, _ = relu_add_graph(rng)
    with pytest.raises(frost.InvalidValueError) as e:
        g.build_plans()
    assert e.value.code == frost.error_code.INVALID_VALUE
    assert "create_execution_plans" in str(e.value)
    with pytest.raises(frost.FrostError):
        g.get_workspace_size()


def test_validation_error_names_node_and_is_typed():
    g = float_graph()
    X = g.tensor(name="X", dim=[2, 3])
    Z = g.tensor(name="Z", dim=[4, 5])
    g.add(a=X, b=Z, name="bad_add").set_output(True)
    with pytest.raises(frost.FrostError) as e:
        g.validate()
    assert "bad_add" in str(e.value)
    assert isinstance(e.value.code, frost.error_code)


def test_graph_not_supported_when_every_engine_is_deselected(rng):
    g, _, _ = relu_add_graph(rng)
    g.validate()
    g.build_operation_graph()
    g.deselect_engines(["reference"])
    with pytest.raises(frost.GraphNotSupportedError) as e:
        g.create_execution_plans([frost.heur_mode.A])
    assert e.value.code == frost.error_code.GRAPH_NOT_SUPPORTED
    assert isinstance(e.value, frost.cudnnGraphNotSupportedError)
    assert isinstance(e.value, frost.FrostError)
    assert any("reference" in r for r in g.get_decline_reasons())


@pytest.mark.skipif(frost._frost.cuda_device_count() > 0, reason="needs a machine without a usable GPU")
def test_cuda_handle_without_gpu_is_refused():
    with pytest.raises(frost.InvalidCudaDeviceError) as e:
        frost.create_handle("cuda:0")
    assert e.value.code == frost.error_code.INVALID_CUDA_DEVICE


def test_handles_and_streams():
    h = frost.create_handle()
    assert h.device in ("cpu", "cuda:0")
    assert frost.get_stream(h) == 0
    frost.set_stream(handle=h, stream=0x1234)
    assert frost.get_stream(h) == 0x1234
    frost.destroy_handle(h)
    with pytest.raises(frost.InvalidValueError):
        frost.create_handle("tpu")


def test_versions():
    assert frost.__version__.count(".") == 2
    assert frost.backend_version() >= 90000
    assert frost.backend_version_string().startswith("9.")


def test_json_round_trip_runs_bitwise_equal(rng):
    g, (X, B, Y), (x, b) = relu_add_graph(rng)
    g.build()
    text = g.serialize()
    doc = json.loads(text)
    assert doc["json_version"] == "2.0" and doc["nodes"][0]["tag"] == "POINTWISE"
    y = poisoned(x.shape)
    g.execute({X: x, B: b, Y: y}, None)

    g2 = frost.pygraph(handle=frost.create_handle("cpu"))
    g2.deserialize(text)
    g2.build()
    assert g2.key() == g.key()
    y2 = poisoned(x.shape)
    uid = {t.get_name(): t.get_uid() for t in g2.get_tensors()}
    g2.execute({uid["X"]: x, uid["B"]: b, g2.get_tensor_by_name(Y.get_name()): y2}, None)
    np.testing.assert_array_equal(y, y2)


def test_plan_bytes_round_trip(rng):
    g, (X, B, Y), (x, b) = relu_add_graph(rng)
    g.build()
    data = g.serialize(plan=True)
    assert isinstance(data, bytes) and len(data) > 0
    g2 = frost.pygraph()
    g2.deserialize(g2.handle, data)
    y = poisoned(x.shape)
    g2.execute({X.get_uid(): x, B.get_uid(): b, Y.get_uid(): y}, None)
    np.testing.assert_allclose(y, np.maximum(x + b, 0), rtol=1e-6, atol=1e-6)


def test_malformed_json_is_unsupported_graph_format():
    g = frost.pygraph()
    with pytest.raises(frost.FrostError) as e:
        g.deserialize('{"json_version": "0.1"}')
    assert e.value.code != frost.error_code.OK


def test_key_ignores_names_and_tracks_shapes(rng):
    def build(name, n):
        g = float_graph()
        X = g.tensor(name=name, dim=[2, n])
        g.exp(input=X).set_output(True)
        g.validate()
        return g.key()

    assert build("a", 5) == build("b", 5)
    assert build("a", 5) != build("a", 6)


def test_enums_are_exposed():
    for enum, member in [
        (frost.data_type, "BFLOAT16"),
        (frost.heur_mode, "FALLBACK"),
        (frost.build_plan_policy, "ALL"),
        (frost.norm_forward_phase, "TRAINING"),
        (frost.reduction_mode, "AMAX"),
        (frost.diagonal_alignment, "BOTTOM_RIGHT"),
        (frost.pointwise_mode, "GELU_APPROX_TANH_BWD"),
        (frost.knob_type, "TILE_CGA"),
        (frost.numerical_note, "TENSOR_CORE"),
        (frost.behavior_note, "SUPPORTS_CUDA_GRAPH_NATIVE_API"),
    ]:
        assert hasattr(enum, member)
    assert frost.knob_type.WARP_SPEC_CFG.value == 28 and frost.knob_type.SCHED_POLICY.value == 1000


def test_tensor_object_api():
    t = frost.tensor().set_name("t").set_dim([2, 3]).set_stride([3, 1]).set_data_type(frost.data_type.HALF)
    assert (t.get_name(), t.get_dim(), t.get_stride(), t.get_data_type()) == ("t", [2, 3], [3, 1], frost.data_type.HALF)
    assert t.set_output(True) is t and t.get_is_virtual() is False
    assert t.set_is_virtual(True).get_is_virtual()
    assert t.get_volume() == 6
    assert "t" in repr(t)
