#!/usr/bin/env python3
"""Linear-attention benchmark: flash-linear-attention's (FLA) chunk_gated_delta_rule and chunk_kda against
frost.ops.gdn / kda (forward) and gdn_backward / kda_backward (backward), bf16 q, k, v, beta, fp32 g,
K = V = 128, on torch CUDA tensors.

Suites gdn_fwd, gdn_bwd, kda_fwd, kda_bwd; each row gives the case, frost's and FLA's median ms (CUDA events,
L2 flushed before every timed launch, the two sides taking turns) and frost / FLA as a speed ratio, or the reason a
side did not run (the planner's decline for frost, FLA's own error, e.g. its refusal of the GDN backward on
Hopper with Triton < 3.7.1). The backward is timed alone: FLA's autograd backward from a retained forward graph,
frost's backward op (which recomputes the forward from the inputs). Where both sides run a forward, their outputs
and final states are held against an fp32 token recurrence on a smaller case: frost's error must stay within
twice FLA's (its own bf16 noise) plus a small floor.

The sides can run in separate processes (the FLA side needs no frost build): --side fla writes the FLA half,
--side frost --merge that file adds frost's half and writes the full results.

Usage: python3 bench/linear_attention/test_and_bench.py [--side both|fla|frost] [--merge FILE] [--out DIR]
       [--budget SECONDS]   -> DIR/linear_attention.json (or DIR/linear_attention_fla.json for --side fla)
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from timing import commit_of, time_many  # noqa: E402

DIM = 128
# (suite, B, T, H, HV): one TARGETS.md case of each suite first (FLA's first call of a head count tunes and
# compiles its kernels for tens of seconds), then TARGETS.md's other cases, then the sweep over B = 1..8,
# T = 4K..64K, H = 16..32.
CASES = [
    ("gdn_fwd", 1, 32768, 32, 32),
    ("kda_fwd", 1, 8192, 64, 64),
    ("kda_bwd", 1, 8192, 64, 64),
    ("gdn_bwd", 1, 32768, 32, 32),
    ("gdn_fwd", 4, 8192, 32, 32),
    ("gdn_fwd", 8, 8192, 16, 16),
    ("gdn_fwd", 1, 65536, 32, 32),
    ("gdn_fwd", 4, 8192, 16, 32),
    ("gdn_bwd", 4, 8192, 32, 32),
    ("gdn_bwd", 8, 8192, 16, 16),
    ("gdn_fwd", 1, 4096, 16, 16),
    ("gdn_fwd", 2, 16384, 16, 16),
    ("gdn_fwd", 8, 4096, 32, 32),
    ("gdn_fwd", 2, 65536, 16, 16),
    ("gdn_fwd", 8, 16384, 32, 32),
    ("kda_fwd", 2, 4096, 64, 64),
    ("kda_fwd", 1, 16384, 64, 64),
    ("kda_bwd", 1, 16384, 64, 64),
    ("kda_fwd", 4, 8192, 32, 32),
    ("kda_bwd", 4, 8192, 32, 32),
    ("kda_fwd", 8, 4096, 16, 16),
    ("kda_bwd", 8, 4096, 16, 16),
]
SUITES = ("gdn_fwd", "gdn_bwd", "kda_fwd", "kda_bwd")


def case_name(b, t, h, hv):
    return f"B{b} T{t} H{h}" + (f" HV{hv}" if hv != h else "")


def make_inputs(op, b, t, h, hv, seed=0):
    """FLA's benchmark-style inputs: unit-norm keys, log-sigmoid decays, sigmoid betas."""
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, device="cuda", generator=gen)

    q = randn(b, t, h, DIM).to(torch.bfloat16)
    k = F.normalize(randn(b, t, h, DIM), p=2, dim=-1).to(torch.bfloat16)
    v = randn(b, t, hv, DIM).to(torch.bfloat16)
    g = F.logsigmoid(randn(b, t, hv, DIM) if op == "kda" else randn(b, t, hv)) * (0.1 if op == "kda" else 1.0)
    beta = torch.sigmoid(randn(b, t, hv)).to(torch.bfloat16)
    return q, k, v, g.float().contiguous(), beta


def first_line(e):
    """The error on one line: its first line, then any lines below it (frost lists each engine's decline there)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {' '.join(lines[:1] + ['; '.join(lines[1:])]).strip()}"[:400]


# ---- FLA's side


def fla_function(op):
    if op == "gdn":
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule

        return chunk_gated_delta_rule
    from fla.ops.kda import chunk_kda

    return chunk_kda


def fla_callable(op, direction, x):
    """A timed callable for FLA, or raises FLA's error."""
    fn = fla_function(op)
    if direction == "fwd":
        with torch.no_grad():
            fn(*x, output_final_state=True)
        torch.cuda.synchronize()

        def run():
            with torch.no_grad():
                return fn(*x, output_final_state=True)

        return run
    leaves = [t.detach().clone().requires_grad_() for t in x]
    o, _ = fn(*leaves, output_final_state=True)
    do = torch.randn_like(o)
    torch.autograd.grad(o, leaves, do, retain_graph=True)
    torch.cuda.synchronize()
    return lambda: torch.autograd.grad(o, leaves, do, retain_graph=True)


def fla_version():
    try:
        import importlib.metadata as md

        return md.version("fla-core")
    except Exception as e:
        return f"unknown ({first_line(e)})"


# ---- frost's side


def frost_callable(op, direction, x):
    """A timed callable for frost, or None with the reason no engine serves the graph."""
    import frost
    from frost import ops

    q, k, v, g, beta = x
    reason = ops.delta_rule_support(op, q, k, v, g, beta, None, None, direction == "fwd", backward=direction != "fwd")
    if reason is not None:
        return None, reason
    try:
        if direction == "fwd":
            fn = getattr(ops, op)
            fn(q, k, v, g, beta, None, None, True)
            return (lambda: fn(q, k, v, g, beta, None, None, True)), None
        do = torch.randn_like(v)
        fn = getattr(ops, op + "_backward")
        fn(q, k, v, g, beta, do)
        return (lambda: fn(q, k, v, g, beta, do)), None
    except frost.FrostError as e:
        return None, first_line(e)


def frost_plan(op, direction):
    from frost import ops

    kind = op if direction == "fwd" else op + "_backward"
    for key, (g, _tensors) in reversed(list(ops._cache.items())):
        if key[0] == kind:
            return g.get_plan_name()
    return None


def recurrence_fp32(q, k, v, g, beta):
    """o and the final state by the token recurrence in fp32 (a torch loop over T; for the accuracy check)."""
    b_, t_, h_, kd = q.shape
    hv_ = v.shape[2]
    qf, kf = (x.float().repeat_interleave(hv_ // h_, dim=2) for x in (q, k))
    vf, bf = v.float(), beta.float()
    s = torch.zeros(b_, hv_, kd, v.shape[3], device=q.device)
    o = torch.empty(b_, t_, hv_, v.shape[3], device=q.device)
    for t in range(t_):
        decay = torch.exp(g[:, t])
        s = s * (decay[..., None, None] if decay.dim() == 2 else decay[..., None])
        u = bf[:, t, :, None] * (vf[:, t] - torch.einsum("bhkv,bhk->bhv", s, kf[:, t]))
        s = s + kf[:, t, :, :, None] * u[:, :, None, :]
        o[:, t] = torch.einsum("bhkv,bhk->bhv", s, qf[:, t]) * kd**-0.5
    return o, s


def accuracy_check(op):
    """frost's and FLA's forward against the fp32 recurrence on B1 T4096 H16: max abs errors and the verdict."""
    from frost import ops

    x = make_inputs(op, 1, 4096, 16, 16, seed=7)
    want_o, want_s = recurrence_fp32(*x)
    fla_o, fla_s = fla_function(op)(*x, output_final_state=True)
    frost_o, frost_s = getattr(ops, op)(*x, None, None, True)

    def err(a, b):
        return (a.float() - b).abs().max().item()

    row = {
        "case": "B1 T4096 H16 vs fp32 recurrence",
        "fla_o_err": err(fla_o, want_o),
        "fla_state_err": err(fla_s, want_s),
        "frost_o_err": err(frost_o, want_o),
        "frost_state_err": err(frost_s, want_s),
    }
    floor = 1e-3
    row["ok"] = (
        row["frost_o_err"] <= 2 * row["fla_o_err"] + floor
        and row["frost_state_err"] <= 2 * row["fla_state_err"] + floor
    )
    return row


# ---- driver


def versions():
    driver = "?"
    try:
        out = subprocess.check_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], text=True)
        driver = out.strip().splitlines()[0]
    except Exception:
        pass
    import triton

    return {"cuda": torch.version.cuda, "driver": driver, "torch": torch.__version__, "triton": triton.__version__}


def run_side(side, cases, budget, rows, write):
    start = time.time()
    for suite, b, t, h, hv in cases:
        op, direction = suite.split("_")
        row = rows.setdefault((suite, case_name(b, t, h, hv)), {"suite": suite, "case": case_name(b, t, h, hv)})
        if time.time() - start > budget:
            row[f"{side}_reason"] = f"not run: the {budget:.0f} s budget of this run was spent"
            continue
        x = make_inputs(op, b, t, h, hv)
        try:
            if side == "fla":
                fn, reason = fla_callable(op, direction, x), None
            else:
                fn, reason = frost_callable(op, direction, x)
        except Exception as e:  # FLA's refusals and failures are results: record them
            fn, reason = None, first_line(e)
        if fn is None:
            row[f"{side}_ms"], row[f"{side}_reason"] = None, reason
        else:
            row[f"{side}_ms"] = time_many({side: fn}, iters=9)[side]
            if side == "frost":
                row["frost_plan"] = frost_plan(op, direction)
        shown = f"{row[f'{side}_ms']:.3f} ms" if row.get(f"{side}_ms") else row.get(f"{side}_reason")
        print(f"{suite:8} {row['case']:<22} {side}: {shown}", flush=True)
        del x, fn
        torch.cuda.empty_cache()
        write()


def assemble(rows, meta):
    suites = {s: [] for s in SUITES}
    records = []
    for (suite, _), row in rows.items():
        frost_ms, fla_ms = row.get("frost_ms"), row.get("fla_ms")
        row["ratio"] = fla_ms / frost_ms if frost_ms and fla_ms else None  # > 1: frost is faster
        suites[suite].append(row)
        for impl in ("frost", "fla"):
            ms = row.get(f"{impl}_ms")
            rec = {"case": f"{suite} {row['case']}", "impl": impl, "ms": ms, "unit": "M head-tokens/s"}
            rec["value"] = head_tokens(row["case"]) / ms / 1e3 if ms else None
            if not ms:
                rec["reason"] = row.get(f"{impl}_reason")
            records.append(rec)
    return {**meta, "suites": suites, "records": records}


def head_tokens(case):
    parts = {p[0]: int(p[1:]) for p in case.split() if p[0] in "BT"}
    hv = [int(p[2:]) for p in case.split() if p.startswith("HV")]
    h = [int(p[1:]) for p in case.split() if p.startswith("H") and not p.startswith("HV")][0]
    return parts["B"] * parts["T"] * (hv[0] if hv else h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--side", choices=("both", "fla", "frost"), default="both")
    ap.add_argument("--merge", help="a --side fla results file whose FLA half to keep")
    ap.add_argument("--budget", type=float, default=150.0, help="seconds after which no new case starts, per side")
    ap.add_argument("--suites", default=",".join(SUITES), help="comma-separated suites to run (default: all)")
    args = ap.parse_args()
    chosen = args.suites.split(",")
    unknown = [s for s in chosen if s not in SUITES]
    if unknown:
        ap.error(f"unknown suites {unknown}: expected some of {SUITES}")
    cases = [c for c in CASES if c[0] in chosen]
    os.makedirs(args.out, exist_ok=True)
    rows = {}
    meta = {
        "suite": "linear_attention",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "commit": commit_of(),
        "versions": versions(),
        "dtypes": "bf16 q, k, v, beta; fp32 g; K = V = 128; frost / FLA ratio = FLA ms / frost ms",
    }
    if args.merge:
        with open(args.merge) as f:
            doc = json.load(f)
        meta["versions"] = doc.get("versions", meta["versions"])
        for suite_rows in doc["suites"].values():
            for row in suite_rows:
                rows[(row["suite"], row["case"])] = row
    name = "linear_attention_fla.json" if args.side == "fla" else "linear_attention.json"
    path = os.path.join(args.out, name)

    def write():
        with open(path, "w") as f:
            json.dump(assemble(rows, meta), f, indent=1)

    if args.side in ("both", "fla"):
        meta["versions"]["fla"] = fla_version()
        run_side("fla", cases, args.budget, rows, write)
    if args.side in ("both", "frost"):
        run_side("frost", cases, args.budget, rows, write)
        checks = []
        for op in ("gdn", "kda"):
            if any(r.get("frost_ms") and r.get("fla_ms") for (s, _), r in rows.items() if s == op + "_fwd"):
                checks.append({"op": op, **accuracy_check(op)})
        meta["accuracy"] = checks or "not run: frost and FLA did not both run a forward"
    write()
    print(path)


if __name__ == "__main__":
    main()
