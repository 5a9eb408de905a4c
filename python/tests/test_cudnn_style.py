"""Programs written for cuDNN Frontend's Python API run unchanged under `import frost as cudnn`."""

import numpy as np
import pytest

import frost as cudnn


def build_standard(graph):
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()


def workspace_for(graph):
    return np.empty(graph.get_workspace_size(), dtype=np.uint8)


def test_pointwise_chain(rng):
    x = rng.standard_normal((8, 64, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 64, 1, 1)).astype(np.float32)
    graph = cudnn.pygraph(
        io_data_type=cudnn.data_type.FLOAT,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
    )
    X = graph.tensor(name="X", dim=x.shape, stride=[s // x.itemsize for s in x.strides], data_type=x.dtype)
    B = graph.tensor_like(b)
    scaled = graph.scale(input=X, scale=0.5)
    biased = graph.bias(input=scaled, bias=B)
    Y = graph.gelu(input=graph.relu(input=biased))
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build_standard(graph)
    y = np.empty_like(x)
    graph.execute({X: x, B: b, Y: y}, workspace_for(graph))
    r = np.maximum(x * 0.5 + b, 0)
    from math import erf

    np.testing.assert_allclose(y, 0.5 * r * (1 + np.vectorize(erf)(r / np.sqrt(2))), rtol=1e-5, atol=1e-6)


def test_matmul_bias_relu(rng):
    a = rng.standard_normal((4, 16, 32)).astype(np.float32)
    w = rng.standard_normal((4, 32, 24)).astype(np.float32)
    bias = rng.standard_normal((4, 1, 24)).astype(np.float32)
    graph = cudnn.pygraph(
        io_data_type=cudnn.data_type.FLOAT,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
    )
    A = graph.tensor_like(a)
    W = graph.tensor_like(w)
    BIAS = graph.tensor_like(bias)
    C = graph.matmul(name="matmul", A=A, B=W, compute_data_type=cudnn.data_type.FLOAT)
    Y = graph.relu(name="relu", input=graph.add(name="bias", a=C, b=BIAS))
    Y.set_output(True)
    graph.build([cudnn.heur_mode.A])
    y = np.empty((4, 16, 24), np.float32)
    graph.execute({A: a, W: w, BIAS: bias, Y: y}, workspace_for(graph))
    np.testing.assert_allclose(y, np.maximum(a @ w + bias, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("training", [False, True])
def test_layernorm_and_rmsnorm(training, rng):
    batch, hidden = 6, 40
    x = rng.standard_normal((batch, hidden, 1, 1)).astype(np.float32)
    scale = rng.standard_normal((1, hidden, 1, 1)).astype(np.float32)
    bias = rng.standard_normal((1, hidden, 1, 1)).astype(np.float32)
    epsilon_cpu = np.full((1, 1, 1, 1), 1e-5, np.float32)
    phase = cudnn.norm_forward_phase.TRAINING if training else cudnn.norm_forward_phase.INFERENCE

    graph = cudnn.pygraph(
        io_data_type=cudnn.data_type.FLOAT,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
    )
    X = graph.tensor(name="X", dim=x.shape, stride=[hidden, 1, 1, 1], data_type=cudnn.data_type.FLOAT)
    SCALE = graph.tensor_like(scale)
    BIAS = graph.tensor_like(bias)
    EPS = graph.tensor(
        name="epsilon", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True, data_type=cudnn.data_type.FLOAT
    )
    Y, MEAN, INV_VAR = graph.layernorm(
        name="LN", norm_forward_phase=phase, input=X, scale=SCALE, bias=BIAS, epsilon=EPS
    )
    Y2, INV_RMS = graph.rmsnorm(name="RMS", norm_forward_phase=phase, input=X, scale=SCALE, bias=None, epsilon=EPS)
    outputs = [t for t in (Y, MEAN, INV_VAR, Y2, INV_RMS) if t is not None]
    for t in outputs:
        t.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build_standard(graph)
    buffers = {t: np.empty(t.get_dim(), np.float32) for t in outputs}
    graph.execute({X: x, SCALE: scale, BIAS: bias, EPS: epsilon_cpu, **buffers}, workspace_for(graph))

    xd = x.astype(np.float64)
    mean = xd.mean(axis=(1, 2, 3), keepdims=True)
    inv_var = 1 / np.sqrt(xd.var(axis=(1, 2, 3), keepdims=True) + 1e-5)
    inv_rms = 1 / np.sqrt((xd * xd).mean(axis=(1, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(buffers[Y], (xd - mean) * inv_var * scale + bias, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(buffers[Y2], xd * inv_rms * scale, rtol=1e-5, atol=1e-5)
    if training:
        np.testing.assert_allclose(buffers[MEAN], mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(buffers[INV_VAR], inv_var, rtol=1e-5)
        np.testing.assert_allclose(buffers[INV_RMS], inv_rms, rtol=1e-5)
    else:
        assert MEAN is None and INV_VAR is None and INV_RMS is None


def test_sdpa_causal_with_stats(rng):
    b, h, s, d = 2, 3, 33, 16
    q = rng.standard_normal((b, s, h, d)).astype(np.float32).transpose(0, 2, 1, 3)  # BSHD storage, BHSD view
    k = rng.standard_normal((b, s, h, d)).astype(np.float32).transpose(0, 2, 1, 3)
    v = rng.standard_normal((b, s, h, d)).astype(np.float32).transpose(0, 2, 1, 3)
    attn_scale = d**-0.5
    graph = cudnn.pygraph(
        io_data_type=cudnn.data_type.FLOAT,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
    )
    Q, K, V = graph.tensor_like(q), graph.tensor_like(k), graph.tensor_like(v)
    O, STATS = graph.sdpa(name="sdpa", q=Q, k=K, v=V, is_inference=False, attn_scale=attn_scale, use_causal_mask=True)
    O.set_output(True).set_dim([b, h, s, d]).set_stride([s * h * d, d, h * d, 1])
    STATS.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build_standard(graph)
    o = np.empty((b, s, h, d), np.float32).transpose(0, 2, 1, 3)
    stats = np.empty((b, h, s, 1), np.float32)
    graph.execute({Q: q, K: k, V: v, O: o, STATS: stats}, workspace_for(graph))

    logits = attn_scale * np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k)
    logits = np.where(np.tril(np.ones((s, s), bool)), logits, -np.inf)
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) + logits.max(-1, keepdims=True)
    np.testing.assert_allclose(o, np.einsum("bhij,bhjd->bhid", np.exp(logits - lse), v), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats, lse, rtol=1e-5, atol=1e-5)


def test_conv_batchnorm_and_conv_gradients(rng):
    """A convolution-batchnorm block and the convolution gradients, written as cuDNN Frontend's samples are."""
    n, c, h, w, k = 2, 3, 6, 5, 4
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    filt = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    scale, bias, running_mean = (rng.standard_normal((1, k, 1, 1)).astype(np.float32) for _ in range(3))
    running_var = np.ones((1, k, 1, 1), np.float32)
    epsilon_cpu = np.full((1, 1, 1, 1), 1e-3, np.float32)
    momentum_cpu = np.full((1, 1, 1, 1), 0.1, np.float32)

    graph = cudnn.pygraph(
        io_data_type=cudnn.data_type.FLOAT,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
    )
    X, W = graph.tensor_like(x), graph.tensor_like(filt)
    SCALE, BIAS, IN_MEAN, IN_VAR = (graph.tensor_like(a) for a in (scale, bias, running_mean, running_var))
    EPS, MOMENTUM = (
        graph.tensor(
            name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], is_pass_by_value=True, data_type=cudnn.data_type.FLOAT
        )
        for name in ("epsilon", "momentum")
    )
    conv = graph.conv_fprop(
        image=X,
        weight=W,
        padding=[1, 1],
        stride=[1, 1],
        dilation=[1, 1],
        convolution_mode=cudnn.convolution_mode.CROSS_CORRELATION,
    )
    Y, MEAN, INV_VAR, NEXT_MEAN, NEXT_VAR = graph.batchnorm(
        name="BN",
        input=conv,
        scale=SCALE,
        bias=BIAS,
        in_running_mean=IN_MEAN,
        in_running_var=IN_VAR,
        epsilon=EPS,
        momentum=MOMENTUM,
    )
    DW = graph.conv_wgrad(image=X, loss=Y, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    DW.set_output(True).set_dim([k, c, 3, 3])
    outputs = [Y, MEAN, INV_VAR, NEXT_MEAN, NEXT_VAR, DW]
    for t in outputs:
        t.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    build_standard(graph)
    buffers = {t: np.empty(t.get_dim(), np.float32) for t in outputs}
    pack = {
        X: x,
        W: filt,
        SCALE: scale,
        BIAS: bias,
        IN_MEAN: running_mean,
        IN_VAR: running_var,
        EPS: epsilon_cpu,
        MOMENTUM: momentum_cpu,
    }
    graph.execute({**pack, **buffers}, workspace_for(graph))

    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    windows = np.stack([xp[:, :, i : i + h, j : j + w] for i in range(3) for j in range(3)], axis=-1)
    y_conv = np.einsum("nchwt,kct->nkhw", windows, filt.reshape(k, c, 9))
    mean = y_conv.mean(axis=(0, 2, 3), keepdims=True)
    var = y_conv.var(axis=(0, 2, 3), keepdims=True)
    y = (y_conv - mean) / np.sqrt(var + 1e-3) * scale + bias
    np.testing.assert_allclose(buffers[Y], y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(buffers[NEXT_MEAN], 0.9 * running_mean + 0.1 * mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(buffers[NEXT_VAR], 0.9 + 0.1 * var * (n * h * w) / (n * h * w - 1), rtol=1e-4)
    want_dw = np.einsum("nkhw,nchwt->kct", buffers[Y].astype(np.float64), windows).reshape(k, c, 3, 3)
    np.testing.assert_allclose(buffers[DW], want_dw, rtol=1e-4, atol=1e-3)


def test_not_supported_is_catchable_under_the_cudnn_name():
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.FLOAT, intermediate_data_type=cudnn.data_type.FLOAT)
    X = graph.tensor(name="X", dim=[2, 2])
    graph.exp(input=X).set_output(True)
    graph.validate()
    graph.build_operation_graph()
    graph.deselect_engines(["reference"])
    try:
        graph.create_execution_plans([cudnn.heur_mode.A])
    except cudnn.cudnnGraphNotSupportedError as e:
        assert "no engine supports this graph" in str(e)
    else:
        pytest.fail("expected cudnnGraphNotSupportedError")


def test_torch_program():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 8)
    graph = cudnn.pygraph(
        io_data_type=cudnn.data_type.FLOAT,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
    )
    X = graph.tensor_like(x)
    Y = graph.tanh(input=graph.mul(a=X, b=X))
    Y.set_output(True)
    graph.build([cudnn.heur_mode.A])
    y = torch.empty_like(x)
    workspace = torch.empty(graph.get_workspace_size(), dtype=torch.uint8)
    graph.execute({X: x, Y: y}, workspace)
    torch.testing.assert_close(y, torch.tanh(x * x))
