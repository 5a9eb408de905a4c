"""Shared pieces of the sm90 GEMM checks and benchmarks: the library handle, random inputs,
error measures against float64, NaN poisoning, result records and CUDA-event timing with L2 flushes."""
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from frost_gemm_ctypes import FrostGemm  # noqa: E402
from timing import time_many  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
dev = "cuda"
LIB = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../build-gemm/libfrost_gemm.so")
fg = FrostGemm(LIB)
RESULTS = {"pass": 0, "fail": 0, "failures": []}


def rand(shape, dtype, scale=1.0):
    t = torch.randn(shape, device=dev, dtype=torch.float32) * scale
    return t.to(dtype)


def act_ref(x, act):
    return {"none": lambda v: v, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
            "silu": F.silu, "sigmoid": torch.sigmoid}[act](x)


def errors(out, ref):
    out, ref = out.double(), ref.double()
    diff = (out - ref).abs()
    return diff.max().item(), (diff.norm() / ref.norm().clamp_min(1e-30)).item()


def record(name, ok, detail=""):
    RESULTS["pass" if ok else "fail"] += 1
    if not ok:
        RESULTS["failures"].append(f"{name}: {detail}")
    print(f"  [{'PASS' if ok else 'FAIL'}] {name} {detail}", flush=True)


def check(name, out, ref, naive, floor_rel=1e-4, written=None):
    """frost's error vs float64 must stay within 2x that of the plain low-precision path (+ a floor)."""
    if written is not None and not written:
        record(name, False, "unwritten (NaN) output elements")
        return False
    if torch.isnan(out.float()).any():
        record(name, False, "NaN in output")
        return False
    fmax, frel = errors(out, ref)
    nmax, nrel = errors(naive, ref)
    scale = ref.double().abs().max().item() + 1e-30
    ok = frel <= 2 * nrel + floor_rel and fmax <= 2 * nmax + floor_rel * scale * 10
    record(name, ok, f"max_err={fmax:.3e} rel_l2={frel:.3e} (plain {nmax:.3e}/{nrel:.3e})")
    return ok


def poisoned(shape, dtype, ld=None):
    """Output buffer full of NaN; with ld, a padded [m, ld] buffer viewed as [m, n]."""
    if ld is None:
        return torch.full(shape, float("nan"), device=dev).to(dtype)
    n = shape[-1]
    base = torch.full(shape[:-1] + (ld,), float("nan"), device=dev).to(dtype)
    return base[..., :n], base


def padding_intact(base, n):
    return bool(torch.isnan(base[..., n:].float()).all().item()) if base.shape[-1] > n else True


def guarded(fn):
    """A case that raises (e.g. a kernel that failed to build returns an error) is a recorded failure."""
    def run(name, *args, **kw):
        try:
            return fn(name, *args, **kw)
        except Exception as e:  # noqa: BLE001
            record(name, False, f"exception: {e}")
    return run


# ----------------------------------------------------------------------------------------------
# (b) benchmarks
# ----------------------------------------------------------------------------------------------
def bench(fn, runs=25, warmup=5):
    """Median ms of fn, CUDA events, L2 flushed before every launch (bench/timing.py)."""
    return time_many({"fn": fn}, runs, warmup)["fn"]


def bench_many(fns, runs=41, warmup=5):
    """Median ms of each callable of the dict fns, measured in turns within every round (bench/timing.py), so
    clock and power drift reach the peer and every configuration alike."""
    return time_many(fns, runs, warmup)


RECORDS = []
TABLE = []


def add(case, impl, ms, flops, ok, declined=None):
    rec = {"case": case, "impl": impl, "ms": ms, "value": (flops / ms / 1e9 if ms else None), "unit": "TFLOP/s",
           "ok": ok}
    if declined:
        rec["declined"] = declined
    RECORDS.append(rec)
    print(f"  {case:42s} {impl:16s} " + (f"{ms:8.3f} ms {rec['value']:8.1f} TFLOP/s ok={ok}" if ms else
                                          f"declined: {declined}"), flush=True)
    return rec


def rel(x, y):
    return (x.float() - y.float()).norm().item() / max(y.float().norm().item(), 1e-30)


def guarded_bench(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        print(f"  bench {fn.__name__}{args} raised: {e}", flush=True)
        RECORDS.append({"case": f"{fn.__name__}{args}", "impl": "frost", "ms": None, "value": None,
                        "unit": "TFLOP/s", "ok": False, "declined": f"exception: {e}"})


def versions():
    drv = "?"
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True).stdout.strip()
    except OSError:
        pass
    return {"cuda": torch.version.cuda, "driver": drv, "cudnn": str(torch.backends.cudnn.version()),
            "torch": torch.__version__, "cutlass": "4.2.0"}
