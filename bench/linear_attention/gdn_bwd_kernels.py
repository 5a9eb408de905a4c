#!/usr/bin/env python3
"""Where frost's GDN (or KDA) backward spends its time: the CUDA time of each kernel of frost.ops.gdn_backward
(kda_backward with --kda), from the torch profiler (CUPTI), over a few calls on the benchmark's inputs (bf16 q, k,
v, beta, fp32 g, K = V = 128, no state, no l2norm), and the total per call.

Usage (a GPU machine, frost importable): python3 bench/linear_attention/gdn_bwd_kernels.py [--kda] [B T H] ...
e.g. python3 bench/linear_attention/gdn_bwd_kernels.py 1 32768 32 4 8192 32 (HV = H)
"""

import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_and_bench import make_inputs  # noqa: E402

from frost import ops  # noqa: E402

CALLS = 5


def split(op, b, t, h, hv):
    q, k, v, g, beta = make_inputs(op, b, t, h, hv)
    do = torch.randn_like(v)
    backward = getattr(ops, op + "_backward")
    backward(q, k, v, g, beta, do)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            backward(q, k, v, g, beta, do)
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if us > 0 and "frost" in e.key:
            rows.append((us / CALLS / 1e3, e.key))
    total = sum(ms for ms, _ in rows)
    print(f"{op} backward B{b} T{t} H{h} HV{hv}: {total:.3f} ms of kernels per call")
    for ms, name in sorted(rows, reverse=True):
        short = name.split("(")[0].replace("void frost::sm90::gdn::", "")
        print(f"  {ms:8.3f} ms  {100 * ms / total:5.1f} %  {short[:90]}")


def main():
    op = "kda" if "--kda" in sys.argv[1:] else "gdn"
    args = [int(x) for x in sys.argv[1:] if x != "--kda"] or [1, 32768, 32]
    for i in range(0, len(args) - 2, 3):
        b, t, h = args[i : i + 3]
        split(op, b, t, h, h)


if __name__ == "__main__":
    main()
