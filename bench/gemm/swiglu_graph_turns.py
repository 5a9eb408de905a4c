"""The SwiGLU MLP through frost's Python graph API (swiglu_mlp, served by sm90_gemm) against PyTorch's unfused MLP,
in one process and in both timing regimes of bench/timing.py: in turns over a long run (time_many: the card at its
power limit) and in short bursts after idle gaps (time_bursts: below it). Needs the frost package built with CUDA.
usage: python3 bench/gemm/swiglu_graph_turns.py [--t 8192 --h 4096 --f 14336] [--json out.json]"""
import argparse
import datetime
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import frost  # noqa: E402
from frost_gemm_ctypes import interleave_gate_up  # noqa: E402
from timing import commit_of, time_bursts, time_many  # noqa: E402


def frost_mlp(handle, x, weights, y):
    """A built swiglu_mlp graph and a callable executing it on these tensors (weights: (w_gate_up,) or (w_gate,
    w_up), then w_down)."""
    g = frost.pygraph(io_data_type=frost.data_type.BFLOAT16, intermediate_data_type=frost.data_type.FLOAT,
                      compute_data_type=frost.data_type.FLOAT, handle=handle)
    X, Ws = g.tensor_like(x), [g.tensor_like(w) for w in weights]
    if len(Ws) == 2:
        Y = g.swiglu_mlp(input=X, w_gate_up=Ws[0], w_down=Ws[1], name="mlp")
    else:
        Y = g.swiglu_mlp(X, Ws[0], Ws[1], Ws[2], name="mlp")
    Y.set_output(True)
    g.build([frost.heur_mode.A])
    pack = {X: x, Y: y, **dict(zip(Ws, weights))}
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    return g.get_plan_name(), lambda: g.execute(pack, ws)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--t", type=int, default=8192)
    ap.add_argument("--h", type=int, default=4096)
    ap.add_argument("--f", type=int, default=14336)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.manual_seed(0)
    rand = lambda *s, scale=1.0: (torch.randn(*s, device="cuda") * scale).to(torch.bfloat16)  # noqa: E731
    x = rand(a.t, a.h)
    wg, wu, wd = rand(a.h, a.f, scale=0.02), rand(a.h, a.f, scale=0.02), rand(a.f, a.h, scale=0.02)
    handle = frost.create_handle("cuda:0")
    frost.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    ref = (F.silu(x.float() @ wg.float()) * (x.float() @ wu.float())).bfloat16().float() @ wd.float()
    fns, checks = {"torch unfused (2 GEMMs)": lambda: (F.silu(x @ wg) * (x @ wu)) @ wd}, {}
    for form, weights in (("W_GATE_UP interleaved", (interleave_gate_up(wg, wu), wd)), ("W_GATE, W_UP", (wg, wu, wd))):
        y = torch.full((a.t, a.h), float("nan"), dtype=torch.bfloat16, device="cuda")
        plan, fn = frost_mlp(handle, x, weights, y)
        fn()
        torch.cuda.synchronize()
        name = f"frost swiglu_mlp, {form} [{plan}]"
        checks[name] = ((y.float() - ref).norm() / ref.norm()).item()
        fns[name] = fn
    flops = 6.0 * a.t * a.h * a.f
    rows = []
    for regime, ms in (("in turns", time_many(fns, 41, 5)), ("bursts", time_bursts(fns))):
        peer = ms["torch unfused (2 GEMMs)"]
        for name, t in ms.items():
            rows.append({"case": f"swiglu_mlp T{a.t} H{a.h} F{a.f} {regime}", "impl": name, "ms": t,
                         "value": flops / t / 1e9, "unit": "TFLOP/s", "vs_torch": peer / t,
                         "rel_err": checks.get(name)})
            print(f"{regime:8s} {name:60s} {t:7.3f} ms {flops / t / 1e9:7.1f} TFLOP/s  x{peer / t:.3f}"
                  + (f"  rel_err {checks[name]:.2e}" if name in checks else ""), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"suite": "swiglu_graph", "date": datetime.date.today().isoformat(),
                       "device": torch.cuda.get_device_name(), "commit": commit_of(), "records": rows}, f, indent=1)


if __name__ == "__main__":
    main()
