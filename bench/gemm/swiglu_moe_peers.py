"""PyTorch peers of bench/gemm/swiglu_moe_bench.cpp, timed the same way (CUDA events, L2 flushed before every
run, median), and the merge of both into one results file (DESIGN.md section 6 schema).

  unfused SwiGLU MLP T8192 H4096 F14336 bf16: x@Wg, x@Wu (or one x@W_gate_up then chunk), silu(g)*u, @Wd;
  the equal-FLOP dense GEMM of the MoE case: [16384, 4096] @ [4096, 14336] bf16 (cuBLAS), and in FP8 e4m3
  torch._scaled_mm with per-tensor scales and FP32 accumulation (cuBLASLt).

usage: python3 bench/gemm/swiglu_moe_peers.py FROST_JSON OUT_JSON [--quick]
"""

import datetime
import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from timing import commit_of, time_many  # noqa: E402

dev = "cuda"


def bench(fn, runs=15, warmup=3):
    """Median ms of fn, CUDA events, L2 flushed before every launch (bench/timing.py)."""
    return time_many({"fn": fn}, runs, warmup)["fn"]


def record(suite, case, impl, ms, flops):
    """One peer row of the results schema."""
    return dict(suite=suite, case=case, impl=impl, ms=ms, value=flops / ms / 1e9)


def peers(quick):
    out = []
    t, h, f = (2048 if quick else 8192), 4096, 14336
    x = torch.randn(t, h, device=dev, dtype=torch.bfloat16)
    wg, wu = (torch.randn(h, f, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(2))
    wgu = torch.randn(h, 2 * f, device=dev, dtype=torch.bfloat16) * 0.02
    wd = torch.randn(f, h, device=dev, dtype=torch.bfloat16) * 0.02
    mlp_flops = 2.0 * t * h * f * 3
    ms = bench(lambda: (F.silu(x @ wg) * (x @ wu)) @ wd)
    out.append(record("swiglu_mlp", f"mlp T{t} H4096 F14336", "torch unfused (2 GEMMs + silu, mul)", ms, mlp_flops))

    def concat_gate_up():
        g, u = (x @ wgu).chunk(2, dim=-1)
        return (F.silu(g) * u) @ wd

    ms = bench(concat_gate_up)
    out.append(record("swiglu_mlp", f"mlp T{t} H4096 F14336", "torch unfused (gate_up GEMM + chunk)", ms, mlp_flops))
    ms = bench(lambda: F.silu(x @ wg) * (x @ wu))
    out.append(record("swiglu_mlp", f"gate_up T{t} H4096 F14336", "torch unfused", ms, 2.0 * t * h * f * 2))
    del x, wg, wu, wgu, wd

    rows, n, k = (4096 if quick else 16384), 14336, 4096
    a = torch.randn(rows, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16) * 0.02
    ms = bench(lambda: a @ b)
    dense_flops = 2.0 * rows * n * k
    out.append(record("moe_grouped_matmul", f"dense equal-FLOP m{rows} n14336 k4096", "cublas (bf16)", ms, dense_flops))
    a8 = a.to(torch.float8_e4m3fn)
    b8 = (b * 25).t().contiguous().to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt's FP8 wants
    sa = torch.tensor(0.5, device=dev)
    sb = torch.tensor(0.25, device=dev)
    ms = bench(lambda: torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16))
    out.append(record("moe_grouped_matmul", f"dense equal-FLOP m{rows} n14336 k4096 e4m3", "cublaslt (e4m3, scaled_mm)",
                      ms, dense_flops))
    return out


def versions():
    drv = "?"
    try:
        drv = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        pass
    return {"cuda": torch.version.cuda, "driver": drv, "torch": torch.__version__, "cutlass": "4.2.0"}


def main():
    frost_json, out_json = sys.argv[1], sys.argv[2]
    quick = "--quick" in sys.argv
    records = []
    if os.path.exists(frost_json):
        for r in json.load(open(frost_json)):
            records.append(r)
    peer = peers(quick)
    for p in peer:
        p.setdefault("unit", "TFLOP/s")
        p["ok"] = None  # peers are the baseline; not checked here
        print(f"{p['case']:<50} {p['impl']:<40} {p['ms']:9.4f} ms {p['value']:7.1f} TFLOP/s", flush=True)
    records += peer
    # Ratios: frost against the best peer of the same suite and case family.
    best = {}
    for p in peer:
        key = p["case"].replace(" e4m3", "") + (" e4m3" if "e4m3" in p["case"] else "")
        best[key] = min(best.get(key, p["ms"]), p["ms"])
    for r in records:
        if r.get("impl") != "frost":
            continue
        c = r["case"]
        t = next(w for w in c.split() if w[0] == "T" and w[1:].isdigit())
        if c.startswith("mlp"):
            key = f"mlp {t} H4096 F14336"
        elif c.startswith("gate_up"):
            key = f"gate_up {t} H4096 F14336"
        else:
            key = f"dense equal-FLOP m{t[1:]} n14336 k4096" + (" e4m3" if c.startswith("e4m3") else "")
        if key in best and r.get("ms"):
            r["peer_ms"] = best[key]
            r["ratio"] = best[key] / r["ms"]
            print(f"{c:<75} frost {r['ms']:8.4f} ms  best peer {best[key]:8.4f} ms  ratio {r['ratio']:.3f}", flush=True)
    doc = {
        "suite": "swiglu_moe",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "commit": commit_of(),
        "versions": versions(),
        "records": records,
    }
    with open(out_json, "w") as fh:
        json.dump(doc, fh, indent=1)


if __name__ == "__main__":
    main()
