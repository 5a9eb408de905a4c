"""`python -m frost.env`: what frost sees on this machine (versions, CUDA, GPUs, cuDNN, engines)."""

import ctypes
import importlib
import platform
import sys

from . import _frost


def _module_version(name):
    try:
        module = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - an absent or broken package is reported, not raised
        return "not installed"
    return getattr(module, "__version__", "installed")


def _cuda_version_string(v):
    return f"{v // 1000}.{(v % 1000) // 10}" if v else "none"


def _driver_probe():
    """Driver version and GPU names straight from libcuda (what exists, whether or not frost can use it)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0, []
    version, count = ctypes.c_int(0), ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(version)) != 0 or cuda.cuInit(0) != 0:
        return version.value, []
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return version.value, []
    names = []
    for i in range(count.value):
        device, name = ctypes.c_int(0), ctypes.create_string_buffer(256)
        if cuda.cuDeviceGet(ctypes.byref(device), i) == 0 and cuda.cuDeviceGetName(name, 256, device) == 0:
            names.append(name.value.decode(errors="replace"))
    return version.value, names


def _cudnn_probe():
    for soname in ("libcudnn.so.9", "libcudnn.so"):
        try:
            lib = ctypes.CDLL(soname)
        except OSError:
            continue
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        return f"found ({soname}, version {lib.cudnnGetVersion()})"
    return "not found"


def _engine_lines():
    """Each engine's verdict on a small FLOAT pointwise graph on the default handle."""
    g = _frost.Graph()
    g.set_io_data_type(_frost.data_type.FLOAT).set_intermediate_data_type(_frost.data_type.FLOAT)
    x = g.tensor(_frost.tensor().set_name("x").set_dim([8, 8]))
    attrs = _frost.Pointwise_attributes().set_mode(_frost.pointwise_mode.RELU_FWD)
    g.pointwise(x, attrs).set_output(True)
    handle = _frost.create_handle()
    g.validate()
    g.build_operation_graph(handle)
    try:
        g.create_execution_plans([_frost.heur_mode.A, _frost.heur_mode.FALLBACK])
    except Exception:  # noqa: BLE001 - declines are listed below
        pass
    lines = [f"{g.get_plan_name_at_index(i)}: supports it" for i in range(g.get_execution_plan_count())]
    return lines + [f"{reason}" for reason in g.get_decline_reasons()]


def report():
    """The lines `python -m frost.env` prints."""
    runtime = _frost.cuda_runtime_version()
    driver = _frost.cuda_driver_version()
    probed_driver, probed_gpus = _driver_probe()
    lines = [
        f"frost: {_frost.version_string()} (graph API level of cuDNN {_frost.backend_version_string()}, "
        f"backend_version {_frost.backend_version()})",
        f"python: {platform.python_version()} ({sys.executable})",
        f"numpy: {_module_version('numpy')}",
        f"torch: {_module_version('torch')}",
        f"cupy: {_module_version('cupy')}",
        f"frost build: {'CUDA engines (runtime ' + _cuda_version_string(runtime) + ')' if runtime else 'CPU only'}",
        f"CUDA driver: {_cuda_version_string(driver or probed_driver)}",
    ]
    usable = _frost.cuda_device_count()
    if usable:
        for i in range(usable):
            f = _frost.device_facts(i)
            lines.append(f"GPU {i}: {f.get('name')} (sm_{f.get('sm')}, {f.get('sm_count')} SMs, usable by frost)")
    elif probed_gpus:
        lines += [f"GPU {i}: {name} (not usable by this frost build)" for i, name in enumerate(probed_gpus)]
    else:
        lines.append("GPUs: none")
    lines.append(f"cuDNN: {_cudnn_probe()}")
    lines.append("engines on a sample pointwise graph:")
    lines += [f"  {line}" for line in _engine_lines()]
    return lines


def main():
    print("\n".join(report()))


if __name__ == "__main__":
    main()
