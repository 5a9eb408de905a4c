#!/usr/bin/env python3
"""Per-kernel device times of one attention-backward case: frost's three kernels (pre, main, post) and the kernels
of cuDNN's backward (torch SDPA's autograd), from the CUDA activity trace of torch.profiler. Shows where the time
beyond the main kernel goes (the pre and post kernels, launch gaps) on each side.

Usage: python3 kernel_times.py --lib build/sdpa_bwd/libfrost_sdpa_bwd.so [--d 256 --h 8 --b 1 --s 16384 --causal]
       [--det] [--iters 10]
"""
import argparse
import math
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from test_and_bench import Frost, empty_like_layout, rand


def kernel_table(fn, iters):
    """{kernel name: (calls per iteration, mean us per call)} and the span per iteration (first start to last end)."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    total = defaultdict(lambda: [0, 0.0])
    for e in events:
        total[e.name][0] += 1
        total[e.name][1] += e.device_time
    span = (max(e.time_range.end for e in events) - min(e.time_range.start for e in events)) / iters
    return {n: (c / iters, t / c) for n, (c, t) in total.items()}, span


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--h", type=int, default=8)
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--s", type=int, default=16384)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--det", action="store_true", help="frost's deterministic mode")
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(3)
    q, k, v, do = (rand(a.b, a.h, a.s, a.d, torch.bfloat16, "bshd", gen) for _ in range(4))
    scale = 1 / math.sqrt(a.d)
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=a.causal, scale=scale)
    o = out.detach()
    lse = torch.zeros(a.b, a.h, a.s, device="cuda")  # timing only: any finite statistics
    dq, dk, dv = empty_like_layout(q), empty_like_layout(k), empty_like_layout(v)
    frost = Frost(a.lib)
    right = 0 if a.causal else None
    sides = {
        "frost": lambda: frost(q, k, v, o, do, lse, dq, dk, dv, scale, None, right, False, deterministic=a.det),
        "cudnn": lambda: torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True),
    }
    for side, fn in sides.items():
        table, span = kernel_table(fn, a.iters)
        print(f"== {side}: span per iteration {span:.1f} us")
        for name, (calls, us) in sorted(table.items(), key=lambda kv: -kv[1][0] * kv[1][1]):
            print(f"  {calls * us:9.1f} us  {calls:4.1f} x {us:9.1f}  {name[:110]}")


if __name__ == "__main__":
    main()
