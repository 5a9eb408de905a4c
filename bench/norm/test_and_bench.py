#!/usr/bin/env python3
"""Benchmark of frost's sm90_norm engine (RMSNorm and LayerNorm, forward and backward) against PyTorch,
through frost's Python package on torch CUDA tensors (pygraph.execute on a built plan).

GB/s = bytes an ideal kernel moves / time: forward reads x and writes y; backward reads x and dy and writes
dx (weights, biases and per-row statistics are added, they are small). Peers, in the same process and run:
torch.nn.functional.rms_norm / layer_norm, and their backward through autograd (dx and the weight gradients).
Each frost output is checked against torch in FP32 before timing ("ok"). CUDA events, L2 flushed before
every timed launch, implementations interleaved, median of 21 runs.

Usage: python3 bench/norm/test_and_bench.py [--out DIR] [--quick]   -> DIR/norm.json
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from timing import commit_of, time_many  # noqa: E402

import frost

BF16 = frost.data_type.BFLOAT16
FLOAT = frost.data_type.FLOAT
ENGINE_ID = 10400


def new_graph(handle):
    return frost.pygraph(io_data_type=BF16, intermediate_data_type=FLOAT, compute_data_type=FLOAT, handle=handle)


def build(g, threads_per_row):
    """Heuristic plan (threads_per_row None) or the sm90_norm plan with that BLOCK_SIZE knob."""
    if threads_per_row is None:
        g.build([frost.heur_mode.A])
        return
    g.validate()
    g.build_operation_graph()
    g.create_execution_plan(ENGINE_ID, {frost.knob_type.BLOCK_SIZE: threads_per_row})
    g.check_support()
    g.build_plans()


def frost_forward(kind, x, w, b, y, handle, threads_per_row=None):
    g = new_graph(handle)
    X, W = g.tensor_like(x), g.tensor_like(w)
    phase = frost.norm_forward_phase.INFERENCE
    if kind == "rms":
        Y, _ = g.rmsnorm(norm_forward_phase=phase, input=X, scale=W, epsilon=1e-5)
        pack = {X: x, W: w, Y: y}
    else:
        B = g.tensor_like(b)
        Y, _, _ = g.layernorm(norm_forward_phase=phase, input=X, scale=W, bias=B, epsilon=1e-5)
        pack = {X: x, W: w, B: b, Y: y}
    Y.set_output(True)
    build(g, threads_per_row)
    return g, pack


def frost_backward(kind, dy, x, w, mean, inv, dx, dw, db, handle, threads_per_row=None):
    g = new_graph(handle)
    DY, X, W, INV = g.tensor_like(dy), g.tensor_like(x), g.tensor_like(w), g.tensor_like(inv)
    if kind == "rms":
        DX, DW, _ = g.rmsnorm_backward(grad=DY, input=X, scale=W, inv_rms=INV)
        pack = {DY: dy, X: x, W: w, INV: inv, DX: dx, DW: dw}
    else:
        MEAN = g.tensor_like(mean)
        DX, DW, DB = g.layernorm_backward(grad=DY, input=X, scale=W, mean=MEAN, inv_variance=INV)
        DB.set_output(True).set_data_type(FLOAT)
        pack = {DY: dy, X: x, W: w, MEAN: mean, INV: inv, DX: dx, DW: dw, DB: db}
    DX.set_output(True)
    DW.set_output(True).set_data_type(FLOAT)
    build(g, threads_per_row)
    ws = torch.empty(g.get_workspace_size(), device="cuda", dtype=torch.uint8)
    return g, pack, ws


def close(got, want, tol=2e-2):
    return bool(torch.isfinite(got).all() and torch.allclose(got.float(), want.float(), rtol=tol, atol=tol))


def close_sums(got, want):
    """Weight gradients sum over all rows: compare relative to their largest magnitude."""
    scale = want.abs().max().clamp_min(1.0)
    return close(got / scale, want / scale, 1e-3)


def run_case(kind, direction, rows, cols, handle, knobs):
    name = f"{'RMSNorm' if kind == 'rms' else 'LayerNorm'} {direction} bf16 {rows}x{cols}"
    gen = torch.Generator(device="cuda").manual_seed(rows + cols)
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, generator=gen)
    w = (torch.rand(1, cols, device="cuda", generator=gen) + 0.5).to(torch.bfloat16)
    b = torch.randn(1, cols, device="cuda", dtype=torch.bfloat16, generator=gen)
    elems = rows * cols
    fns, oks, plans, records = {}, {}, {}, []
    if direction == "fwd":
        nbytes = 2 * elems * 2 + cols * 2 * (1 if kind == "rms" else 2)
        y = torch.empty_like(x)

        def peer():
            if kind == "rms":
                return F.rms_norm(x, (cols,), w[0], 1e-5)
            return F.layer_norm(x, (cols,), w[0], b[0], 1e-5)

        if kind == "rms":
            want = F.rms_norm(x.float(), (cols,), w[0].float(), 1e-5)
        else:
            want = F.layer_norm(x.float(), (cols,), w[0].float(), b[0].float(), 1e-5)
        for tpr in [None] + knobs:
            impl = "frost" if tpr is None else f"frost[BLOCK_SIZE={tpr}]"
            try:
                g, pack = frost_forward(kind, x, w, b, y, handle, tpr)
            except frost.FrostError as e:
                records.append(
                    dict(
                        case=name,
                        impl=impl,
                        ms=None,
                        value=None,
                        unit="GB/s",
                        ok=False,
                        declined=str(e).splitlines()[0][:200],
                    )
                )
                continue
            y.fill_(float("nan"))
            g.execute(pack)
            torch.cuda.synchronize()
            oks[impl], plans[impl] = close(y, want), g.get_plan_name()
            fns[impl] = lambda g=g, pack=pack: g.execute(pack)
        oks["torch"] = close(peer(), want)
        fns["torch"] = peer
    else:
        nbytes = 3 * elems * 2 + rows * 4 * (1 if kind == "rms" else 2) + cols * (2 + 4 * (1 if kind == "rms" else 2))
        dy = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, generator=gen)
        xf = x.float()
        mean = xf.mean(-1, keepdim=True) if kind == "ln" else torch.zeros(rows, 1, device="cuda")
        inv = torch.rsqrt((xf - mean).pow(2).mean(-1, keepdim=True) + 1e-5)
        xr, wr, br = (t.detach().float().requires_grad_() for t in (x, w, b))
        yr = F.rms_norm(xr, (cols,), wr[0], 1e-5) if kind == "rms" else F.layer_norm(xr, (cols,), wr[0], br[0], 1e-5)
        want = torch.autograd.grad(yr, (xr, wr) if kind == "rms" else (xr, wr, br), dy.float())
        dx = torch.empty_like(x)
        dw, db = torch.empty(1, cols, device="cuda"), torch.empty(1, cols, device="cuda")
        for tpr in [None] + knobs:
            impl = "frost" if tpr is None else f"frost[BLOCK_SIZE={tpr}]"
            try:
                g, pack, ws = frost_backward(kind, dy, x, w, mean, inv, dx, dw, db, handle, tpr)
            except frost.FrostError as e:
                records.append(
                    dict(
                        case=name,
                        impl=impl,
                        ms=None,
                        value=None,
                        unit="GB/s",
                        ok=False,
                        declined=str(e).splitlines()[0][:200],
                    )
                )
                continue
            for t in (dx, dw, db):
                t.fill_(float("nan"))
            g.execute(pack, ws)
            torch.cuda.synchronize()
            got = (dx, dw) if kind == "rms" else (dx, dw, db)
            oks[impl] = close(got[0], want[0]) and all(close_sums(a, e) for a, e in zip(got[1:], want[1:]))
            plans[impl] = g.get_plan_name()
            fns[impl] = lambda g=g, pack=pack, ws=ws: g.execute(pack, ws)
        xp, wp, bp = (t.detach().clone().requires_grad_() for t in (x, w, b))
        yp = F.rms_norm(xp, (cols,), wp[0], 1e-5) if kind == "rms" else F.layer_norm(xp, (cols,), wp[0], bp[0], 1e-5)
        params = (xp, wp) if kind == "rms" else (xp, wp, bp)

        def peer():
            return torch.autograd.grad(yp, params, dy, retain_graph=True)

        got = peer()
        oks["torch"] = close(got[0], want[0])
        fns["torch"] = peer
    for impl, ms in time_many(fns, warmup=3).items():
        rec = dict(case=name, impl=impl, ms=ms, value=nbytes / ms / 1e6, unit="GB/s", ok=oks[impl])
        if impl in plans:
            rec["plan"] = plans[impl]
        records.append(rec)
    return records


def device_copy_gbs():
    a = torch.empty(1024 * 1024 * 1024, device="cuda", dtype=torch.uint8)
    c = torch.empty_like(a)
    ms = time_many({"copy": lambda: c.copy_(a)}, iters=11, warmup=3)["copy"]
    return 2 * a.numel() / ms / 1e6


def versions():
    drv = "?"
    try:
        drv = (
            subprocess.check_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], text=True)
            .strip()
            .splitlines()[0]
        )
    except Exception:
        pass
    return {
        "cuda": torch.version.cuda,
        "driver": drv,
        "cudnn": str(torch.backends.cudnn.version()),
        "torch": torch.__version__,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="only the TARGETS.md shape, no knob sweep")
    args = ap.parse_args()
    handle = frost.create_handle("cuda:0")
    frost.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    shapes = [(16384, 4096)] if args.quick else [(16384, 4096), (16384, 1024), (8192, 8192), (4096, 16384)]
    records = []
    for rows, cols in shapes:
        knobs = [128, 256, 512] if (cols == 4096 and not args.quick) else []
        for kind in ("rms", "ln"):
            for direction in ("fwd", "bwd"):
                case = run_case(kind, direction, rows, cols, handle, knobs)
                records += case
                shown = (
                    (
                        f"{r['impl']}={r['value']:.0f}{'' if r['ok'] else '(WRONG)'}"
                        if r["value"]
                        else f"{r['impl']}=declined"
                    )
                    for r in case
                )
                print(f"{case[0]['case']:<36}", "  ".join(shown), flush=True)
    commit = commit_of()
    doc = {
        "suite": "norm",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "commit": commit,
        "versions": versions(),
        "ceilings": {"device_copy_GBps": device_copy_gbs()},
        "records": records,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "norm.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"device copy: {doc['ceilings']['device_copy_GBps']:.0f} GB/s")


if __name__ == "__main__":
    main()
