#!/usr/bin/env python3
"""The attention forward, attention backward and GEMM cases of TARGETS.md as frost graph JSONs, each run
on the cudnn engine and on frost's own sm90 engine with `frost bench`, side by side.

Every case is written twice: at full size (timed, not checked: the fp64 reference would take minutes)
and as a small twin with the same features (b1 h2 s256 for attention, 256^3 for GEMM) that both engines
run and check against the reference. A case an engine declines is kept with the decline reason.

Usage: python3 bench/engines/run_suites.py --frost build/cuda/tools/frost --out DIR
         [--suites attention_fwd,attention_bwd,gemm] [--deadline EPOCH_SECONDS] [--graphs-only]
Writes DIR/engines.json (the results schema of DESIGN.md section 6 plus suite, engine, plan, ratio,
declined per record) and DIR/graphs/*.json. The commit comes from FROST_COMMIT (scripts/device sets it).
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time

FWD, BWD, GEMM = "attention_fwd", "attention_bwd", "gemm"
SM90 = {FWD: "sm90_sdpa_fwd", BWD: "sm90_sdpa_bwd", GEMM: "sm90_gemm"}


def attention_cases():
    """(suite, name, b, h, s, d, causal): TARGETS.md's attention tables, tensors [b, s, h, d]."""
    fwd = [(4, 16, 4096, 128, False), (1, 16, 16384, 128, False), (1, 16, 16384, 128, True),
           (2, 32, 8192, 64, False), (2, 8, 8192, 256, False), (16, 16, 1024, 128, True)]
    bwd = [(1, 16, 16384, 128, False), (1, 16, 16384, 128, True), (1, 32, 16384, 64, False),
           (1, 8, 16384, 256, False)]
    for suite, rows in ((FWD, fwd), (BWD, bwd)):
        for b, h, s, d, causal in rows:
            name = f"{'fwd' if suite == FWD else 'bwd'} d{d} h{h} b{b} s{s}{' causal' if causal else ''}"
            yield suite, name, dict(b=b, h=h, s=s, d=d, causal=causal)


def gemm_cases():
    """(suite, name, m, n, k, dtype): the dense bf16 and fp8 squares and the MLP projections."""
    rows = [(8192, 8192, 8192, "BFLOAT16", "bf16 8192^3"),
            (16384, 14336, 4096, "BFLOAT16", "bf16 mlp up m16384 n14336 k4096"),
            (16384, 4096, 14336, "BFLOAT16", "bf16 mlp down m16384 n4096 k14336"),
            (8192, 8192, 8192, "FP8_E4M3", "fp8 e4m3 8192^3 (bf16 out)")]
    for m, n, k, dt, name in rows:
        yield GEMM, name, dict(m=m, n=n, k=k, dt=dt)


def tensor(uid, name, dim, stride, dt):
    return {"alignment": 16, "data_type": dt, "dim": dim, "is_pass_by_value": False, "is_virtual": False,
            "name": name, "pass_by_value": None, "ragged_offset_uid": None, "reordering_type": "NONE",
            "stride": stride, "uid": uid}


def context(name, io="BFLOAT16"):
    return {"compute_data_type": "FLOAT", "dynamic_shape_enabled": False, "intermediate_data_type": "FLOAT",
            "io_data_type": io, "name": name, "override_shape_enabled": False, "sm_count": -1, "sm_version": -1}


def bshd(uid, name, b, h, s, d):
    return tensor(uid, name, [b, h, s, d], [s * h * d, d, h * d, 1], "BFLOAT16")


def attention_graph(suite, name, b, h, s, d, causal):
    """One SDPA (with Stats) or SDPA_BACKWARD node, bf16 [b, s, h, d] tensors, FLOAT Stats [b, h, s, 1]."""
    stats = lambda uid: tensor(uid, "stats", [b, h, s, 1], [h * s, s, 1, 1], "FLOAT")  # noqa: E731
    common = {"alibi_mask": False, "attn_scale_value": 1.0 / math.sqrt(d), "compute_data_type": "NOT_SET",
              "diagonal_alignment": "TOP_LEFT", "implementation": "AUTO", "name": "attention",
              "padding_mask": False, "stats_use_log2": False}
    if causal:
        common["right_bound"] = 0
    if suite == FWD:
        names = ["q", "k", "v", "o"]
        tensors = {str(i + 1): bshd(i + 1, n, b, h, s, d) for i, n in enumerate(names)}
        tensors["5"] = stats(5)
        node = dict(common, generate_stats=True, tag="SDPA", inputs={"Q": 1, "K": 2, "V": 3},
                    outputs={"O": 4, "STATS": 5})
    else:
        names = ["q", "k", "v", "o", "dO", "dQ", "dK", "dV"]
        tensors = {str(i + 1): bshd(i + 1, n, b, h, s, d) for i, n in enumerate(names)}
        tensors["9"] = stats(9)
        node = dict(common, deterministic_algorithm=False, tag="SDPA_BACKWARD",
                    inputs={"Q": 1, "K": 2, "V": 3, "O": 4, "DO": 5, "STATS": 9},
                    outputs={"DQ": 6, "DK": 7, "DV": 8})
    return {"context": context(name), "json_version": "2.0", "nodes": [node], "tensors": tensors}


def gemm_graph(name, m, n, k, dt):
    """C[1, m, n] (bf16) = A[1, m, k] (row-major) x B[1, k, n] (column-major: an nn.Linear weight)."""
    return {"context": context(name), "json_version": "2.0",
            "nodes": [{"compute_data_type": "NOT_SET", "inputs": {"A": 1, "B": 2}, "name": "mm", "outputs": {"C": 3},
                       "padding_value": 0.0, "tag": "MATMUL"}],
            "tensors": {"1": tensor(1, "A", [1, m, k], [m * k, k, 1], dt),
                        "2": tensor(2, "B", [1, k, n], [k * n, 1, k], dt),
                        "3": tensor(3, "C", [1, m, n], [m * n, n, 1], "BFLOAT16")}}


def flops(suite, p):
    if suite == GEMM:
        return 2.0 * p["m"] * p["n"] * p["k"]
    f = 4.0 * p["b"] * p["h"] * p["s"] * p["s"] * p["d"] * (0.5 if p["causal"] else 1.0)
    return f if suite == FWD else 2.5 * f


def graph_of(suite, name, p):
    if suite == GEMM:
        return gemm_graph(name, p["m"], p["n"], p["k"], p["dt"])
    return attention_graph(suite, name, **p)


def small_twin(suite, p):
    if suite == GEMM:
        return dict(p, m=256, n=256, k=256)
    return dict(p, b=1, h=2, s=256)


def slug(name):
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def run_bench(args, path, engines, case, suite, extra, timeout):
    """One `frost bench` call; its records, or one record per engine saying why there are none."""
    out = path[:-len(".json")] + ".result.json"
    cmd = [args.frost, "bench", path, "--engines", ",".join(engines), "--case", case, "--suite", suite,
           "--json", out] + extra
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            sys.stdout.write(proc.stderr)
            raise RuntimeError(f"frost bench exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
        with open(out) as f:
            return json.load(f)["records"]
    except (subprocess.TimeoutExpired, RuntimeError, OSError, ValueError) as e:
        why = f"timed out after {timeout} s" if isinstance(e, subprocess.TimeoutExpired) else str(e)
        print(f"  {case}: {why}")
        return [{"case": case, "impl": eng, "engine": eng, "ms": None, "value": None, "declined": why}
                for eng in engines]


def device_name():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frost", default="build/cuda/tools/frost")
    ap.add_argument("--out", default="/tmp/frost_engines")
    ap.add_argument("--suites", default=f"{FWD},{BWD},{GEMM}")
    ap.add_argument("--engines", default="", help="override the pair, e.g. reference (for a dry run on the host)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=90, help="seconds for one frost bench call")
    ap.add_argument("--deadline", type=float, default=0, help="epoch seconds after which no case starts")
    ap.add_argument("--graphs-only", action="store_true", help="write the graph JSONs and stop")
    ap.add_argument("--small-only", action="store_true", help="run only the checked small twins")
    args = ap.parse_args()
    suites = [s for s in args.suites.split(",") if s]
    graphs = os.path.join(args.out, "graphs")
    os.makedirs(graphs, exist_ok=True)
    cases = [c for c in list(attention_cases()) + list(gemm_cases()) if c[0] in suites]
    records, correctness = [], []
    timing = ["--warmup", str(args.warmup), "--iters", str(args.iters), "--reps", str(args.reps)]
    out = os.path.join(args.out, "engines.json")
    device = "" if args.graphs_only else device_name()

    def write_results():  # after every case, so that a run cut short still leaves its results
        doc = {"suite": "engines", "date": datetime.date.today().isoformat(), "device": device,
               "commit": os.environ.get("FROST_COMMIT", "unknown"),
               "versions": {"frost bench": " ".join(timing), "cudnn": os.environ.get("FROST_CUDNN_VERSION", "")},
               "records": records, "correctness": correctness}
        with open(out, "w") as f:
            json.dump(doc, f, indent=1)

    def call_timeout():  # a call may not run far past the deadline
        return args.timeout if not args.deadline else max(10, min(args.timeout, int(args.deadline - time.time()) + 20))
    for suite, name, p in cases:
        engines = args.engines.split(",") if args.engines else ["cudnn", SM90[suite]]
        big = os.path.join(graphs, slug(name) + ".json")
        small = os.path.join(graphs, slug(name) + "_small.json")
        for path, params in ((big, p), (small, small_twin(suite, p))):
            with open(path, "w") as f:
                json.dump(graph_of(suite, name, params), f, indent=1)
        if args.graphs_only:
            continue
        if args.deadline and time.time() > args.deadline:
            why = "not run: the device call's time ran out before this case"
            records += [{"suite": suite, "case": name, "impl": eng, "engine": eng, "ms": None, "value": None,
                         "declined": why} for eng in engines]
            print(f"{name}: {why}")
            write_results()
            continue
        print(f"== {suite}: {name}", flush=True)
        for r in run_bench(args, small, engines, name + " (small twin)", suite, ["--iters", "1", "--reps", "1"],
                           call_timeout()):
            correctness.append({"suite": suite, "case": name, "graph": os.path.basename(small), "engine": r["impl"],
                                "plan": r.get("plan", ""), "ok": r.get("ok"), "errors": r.get("errors", []),
                                "declined": r.get("declined")})
        if args.small_only:
            continue
        got = run_bench(args, big, engines, name, suite, ["--no-check", "--flops", repr(flops(suite, p))] + timing,
                        call_timeout())
        ms = {r["impl"]: r.get("ms") for r in got}
        for r in got:
            eng = r["impl"]
            rec = {"suite": suite, "case": name, "engine": eng,
                   "impl": "cudnn" if eng == "cudnn" else f"frost {eng}", "plan": r.get("plan", ""),
                   "ms": r.get("ms"), "value": r.get("value"), "unit": "TFLOP/s"}
            ok = [c["ok"] for c in correctness if c["case"] == name and c["engine"] == eng]
            rec["ok"] = ok[-1] if ok else None  # the small twin's check
            if r.get("declined"):
                rec["declined"] = r["declined"]
            if eng != "cudnn" and ms.get(eng) and ms.get("cudnn"):
                rec["ratio"] = ms["cudnn"] / ms[eng]  # frost over cudnn in TFLOP/s (> 1: frost faster)
            records.append(rec)
        write_results()
    if args.graphs_only:
        print(f"wrote {2 * len(cases)} graphs to {graphs}")
        return 0
    write_results()
    print(f"\n{'case':44s} {'cudnn ms':>9s} {'TFLOP/s':>8s} {'frost ms':>9s} {'TFLOP/s':>8s} {'ratio':>6s}")
    for suite, name, _ in cases:
        row = {r["engine"]: r for r in records if r["case"] == name}
        c = row.get("cudnn", {})
        f = next((r for e, r in row.items() if e != "cudnn"), {})
        fmt = lambda v, w, p: f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}s}"  # noqa: E731
        print(f"{name:44s} {fmt(c.get('ms'), 9, 3)} {fmt(c.get('value'), 8, 1)} {fmt(f.get('ms'), 9, 3)} "
              f"{fmt(f.get('value'), 8, 1)} {fmt(f.get('ratio'), 6, 2)}")
        for r in (c, f):
            if r.get("declined"):
                print(f"    {r['engine']} declined: {r['declined'][:300]}")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
