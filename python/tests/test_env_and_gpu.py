"""`python -m frost.env`, and the GPU path (marked gpu: skipped where this build sees no CUDA device)."""

import subprocess
import sys

import pytest

import frost


def test_env_module_prints_the_facts():
    out = subprocess.run([sys.executable, "-m", "frost.env"], check=True, capture_output=True, text=True).stdout
    for needle in (
        "frost: " + frost.__version__,
        "python: ",
        "numpy: ",
        "torch: ",
        "CUDA driver: ",
        "cuDNN: ",
        "reference",
    ):
        assert needle in out


@pytest.mark.gpu
def test_default_handle_is_on_the_gpu():
    h = frost.create_handle()
    assert h.is_cuda and h.device == "cuda:0"


@pytest.mark.gpu
def test_gpu_buffers_run_and_cpu_buffers_are_refused():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    handle = frost.create_handle("cuda:0")
    frost.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    g = frost.pygraph(
        io_data_type=frost.data_type.HALF,
        intermediate_data_type=frost.data_type.FLOAT,
        compute_data_type=frost.data_type.FLOAT,
        handle=handle,
    )
    x = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    X = g.tensor_like(x)
    Y = g.relu(input=X)
    Y.set_output(True)
    try:
        g.build([frost.heur_mode.A, frost.heur_mode.FALLBACK])
    except frost.GraphNotSupportedError as e:
        pytest.skip(f"no GPU engine for a pointwise graph yet: {e}")
    y = torch.empty_like(x)
    workspace = torch.empty(g.get_workspace_size(), device="cuda", dtype=torch.uint8)
    g.execute({X: x, Y: y}, workspace)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.relu(x))
    with pytest.raises(frost.InvalidVariantPackError, match="is on cpu"):
        g.execute({X: x.cpu(), Y: y}, workspace)


def test_device_rule_for_buffers():
    from types import SimpleNamespace

    from frost._buffers import DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED, _device_ok

    cpu = SimpleNamespace(is_cuda=False, device_ordinal=0)
    gpu1 = SimpleNamespace(is_cuda=True, device_ordinal=1)
    assert _device_ok(cpu, DL_CPU, 0) and _device_ok(cpu, DL_CUDA_HOST, 0) and not _device_ok(cpu, DL_CUDA, 0)
    assert _device_ok(gpu1, DL_CUDA, 1) and _device_ok(gpu1, DL_CUDA_MANAGED, 0)
    assert not _device_ok(gpu1, DL_CUDA, 0) and not _device_ok(gpu1, DL_CPU, 0)
