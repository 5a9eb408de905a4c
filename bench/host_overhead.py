#!/usr/bin/env python3
"""Host time per call of frost from Python with torch CUDA tensors (TARGETS.md: execute() <= 10 us).

Measures, each as the median over REPEATS loops of CALLS back-to-back calls (no synchronization inside a
loop; the GPU work is tiny, so the launch queue never fills and the loop measures the host):
  - pygraph.execute({tensor: torch tensor}) on a built plan (RMSNorm TRAINING, bf16 [16, 1024] on sm90_norm);
  - the same with an ordered list and tensor_uids;
  - the raw binding underneath (pointers already known): what the C++ side plus the launch costs;
  - frost.ops.rms_norm on an already-seen shape (the functional op's cache-hit path, outputs allocated);
  - torch.nn.functional.rms_norm on the same tensors, for scale.
Writes host_overhead.json under --out (default $OUT or .).

Usage: python3 bench/host_overhead.py [--out DIR]
"""

import argparse
import datetime
import json
import os
import statistics
import time

import torch

import frost
from frost import ops
from timing import commit_of

CALLS, REPEATS = 400, 25


def per_call_us(fn):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    loops = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        loops.append((time.perf_counter() - t0) / CALLS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(loops)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    rows, cols = 16, 1024
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(1, cols, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    inv = torch.empty(rows, 1, device="cuda")

    handle = frost.create_handle("cuda:0")
    frost.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    g = frost.pygraph(
        io_data_type=frost.data_type.BFLOAT16,
        intermediate_data_type=frost.data_type.FLOAT,
        compute_data_type=frost.data_type.FLOAT,
        handle=handle,
    )
    X, W = g.tensor_like(x), g.tensor_like(w)
    Y, INV = g.rmsnorm(norm_forward_phase=frost.norm_forward_phase.TRAINING, input=X, scale=W, epsilon=1e-5)
    Y.set_output(True)
    INV.set_output(True).set_data_type(frost.data_type.FLOAT)
    g.build([frost.heur_mode.A])
    plan = g.get_plan_name()
    pack = {X: x, W: w, Y: y, INV: inv}
    uids = [X.get_uid(), W.get_uid(), Y.get_uid(), INV.get_uid()]
    buffers = [x, w, y, inv]
    pointers = [t.data_ptr() for t in buffers]

    g.execute(pack)
    torch.cuda.synchronize()
    torch.testing.assert_close(
        y.float(), (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)), rtol=2e-2, atol=2e-2
    )
    ops.rms_norm(x, w)

    figures = {
        "pygraph.execute(dict of torch tensors)": per_call_us(lambda: g.execute(pack)),
        "pygraph.execute(list, tensor_uids)": per_call_us(lambda: g.execute(buffers, tensor_uids=uids)),
        "binding execute_uids (C++ execute + launch)": per_call_us(
            lambda: g._graph.execute_uids(handle, uids, pointers, 0)
        ),
        "frost.ops.rms_norm cache hit": per_call_us(lambda: ops.rms_norm(x, w)),
        "torch.nn.functional.rms_norm": per_call_us(lambda: torch.nn.functional.rms_norm(x, (cols,), w[0])),
    }
    stats = ops.cache_stats()
    commit = commit_of()
    doc = {
        "suite": "host_overhead",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "commit": commit,
        "versions": {"cuda": torch.version.cuda, "torch": torch.__version__, "frost": frost.__version__},
        "plan": plan,
        "shape": [rows, cols],
        "calls_per_loop": CALLS,
        "loops": REPEATS,
        "records": [
            {
                "case": name,
                "impl": "torch" if name.startswith("torch") else "frost",
                "ms": us / 1000,
                "value": us,
                "unit": "us per call (host)",
                "ok": True,
            }
            for name, us in figures.items()
        ],
        "functional_cache": stats._asdict(),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "host_overhead.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"plan: {plan}")
    for name, us in figures.items():
        print(f"{name:<48}{us:8.2f} us")


if __name__ == "__main__":
    main()
