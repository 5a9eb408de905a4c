#!/usr/bin/env python3
"""Per-CTA timeline of frost's sm90 attention forward, from a library built with
EXTRA_NVCC_FLAGS=-DFROST_FWD_TIMELINE (bench/sdpa_fwd/build.sh): runs one dense BF16 case once under each given
SCHED_POLICY (after warm-up) and prints where the CTAs' time goes: the span, when each CTA finishes, unit
durations by kind, the owners' merges and the gaps between units.

Usage: python3 bench/sdpa_fwd/timeline.py --lib build/sdpa_fwd_tl/libfrost_sdpa_fwd.so [--d 128 --h 16 --b 4
       --s 4096] [--hkv H --sq S --pack-gqa 1] [--policies 1 3] [--tile-n 0] [--flush]
"""
import argparse
import ctypes
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_and_bench import Frost, empty_out, make_qkv  # noqa: E402

# TimelineRecord of src/engines/sm90/sdpa_fwd/sm90_fwd_timeline.h; kTimelineUnits records per CTA.
RECORD = np.dtype([("start", "<u8"), ("merged", "<u8"), ("end", "<u8"), ("tile", "<i4"), ("n_lo", "<i4"),
                   ("n_hi", "<i4"), ("kind", "<i4")])
UNITS = 64
KINDS = {0: "whole", 1: "owner", 2: "piece"}


def stats(x):
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return "-"
    return f"n {x.size} min {x.min():.2f} med {np.median(x):.2f} max {x.max():.2f}"


def report(rec, sp):
    used = rec["start"] > 0
    t0 = rec["start"][used].min()
    us = lambda t: (t.astype(np.float64) - t0) / 1e3  # noqa: E731
    ends = np.array([us(rec["end"][c][used[c]]).max() for c in range(rec.shape[0]) if used[c].any()])
    span = ends.max()
    print(f"\nSCHED_POLICY={sp}: {len(ends)} CTAs, span {span:.1f} us; CTA ends {stats(ends)}; "
          f"idle after the last unit {100 * (span - ends).sum() / (len(ends) * span):.2f} % of CTA time")
    firsts = [c for c in range(rec.shape[0]) if used[c, 0]]
    print(f"  first units: start us {stats([us(rec['start'][c][0]) for c in firsts])}; "
          f"us {stats([us(rec['end'][c][0]) - us(rec['start'][c][0]) for c in firsts])}")
    units = rec[used]
    dur = us(units["end"]) - us(units["start"])
    for kind, name in KINDS.items():
        sel = units["kind"] == kind
        if sel.any():
            blocks = (units["n_hi"][sel] - units["n_lo"][sel]).astype(np.float64)
            line = f"  {name:<6} units: us {stats(dur[sel])}"
            if kind != 0:
                line += f"; key blocks {stats(blocks)}; us per block {stats(dur[sel] / np.maximum(blocks, 1))}"
            print(line)
    owners = units[units["kind"] == 1]
    if owners.size:
        print(f"  owners: start->merged us {stats(us(owners['merged']) - us(owners['start']))}; "
              f"merged->end us {stats(us(owners['end']) - us(owners['merged']))}")
    gaps = []
    for c in range(rec.shape[0]):
        r = rec[c][used[c]]
        gaps += list(us(r["start"][1:]) - us(r["end"][:-1]))
    print(f"  gaps between a CTA's units, us: {stats(gaps)}")
    # The tail split's units after the whole waves: when the pieces and the owners start and end.
    for kind, name in ((2, "pieces"), (1, "owners")):
        sel = units[units["kind"] == kind]
        if sel.size:
            print(f"  {name} start at us {stats(us(sel['start']))}; end at us {stats(us(sel['end']))}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--h", type=int, default=16)
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--s", type=int, default=4096)
    ap.add_argument("--hkv", type=int, default=0, help="K/V heads (default: --h)")
    ap.add_argument("--sq", type=int, default=0, help="query positions (default: --s; 1 for decode)")
    ap.add_argument("--pack-gqa", type=int, default=0)
    ap.add_argument("--tile-n", type=int, default=0)
    ap.add_argument("--policies", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--flush", action="store_true",
                    help="write 256 MB before the recorded launch, as the bench does (a cold L2 full of dirty lines)")
    args = ap.parse_args()
    frost = Frost(args.lib)
    set_timeline = frost.lib.frost_sm90_sdpa_fwd_set_timeline
    set_timeline.argtypes = [ctypes.c_void_p]
    ctas = torch.cuda.get_device_properties(0).multi_processor_count
    buf = torch.zeros(ctas * UNITS * RECORD.itemsize, dtype=torch.uint8, device="cuda")
    d, h, b, s = args.d, args.h, args.b, args.s
    hkv, sq = args.hkv or h, args.sq or s
    q, k, v = make_qkv(b, h, hkv, sq, s, d, torch.bfloat16, "bshd")
    o = empty_out(b, h, sq, d, torch.bfloat16, "bshd")
    lse = torch.empty(b, h, sq, device="cuda")
    scale = 1 / math.sqrt(d)
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda", dtype=torch.float32) if args.flush else None
    print(f"d{d} h{h}/{hkv} b{b} s_q {sq} s_kv {s} PACK_GQA={args.pack_gqa} tile_n {args.tile_n or 'default'} "
          f"on {ctas} SMs")
    for sp in args.policies:
        for _ in range(3):
            why = frost(q, k, v, o, lse, scale, tile_n=args.tile_n, sched_policy=sp, pack_gqa=args.pack_gqa)
            if why is not None:
                print(f"SCHED_POLICY={sp}: declined: {why}")
                break
        if why is not None:
            continue
        buf.zero_()
        if args.flush:
            flush.zero_()
        set_timeline(buf.data_ptr())
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        frost(q, k, v, o, lse, scale, tile_n=args.tile_n, sched_policy=sp, pack_gqa=args.pack_gqa)
        end.record()
        torch.cuda.synchronize()
        set_timeline(None)
        rec = np.frombuffer(buf.cpu().numpy().tobytes(), dtype=RECORD).reshape(ctas, UNITS)
        report(rec, sp)
        # The events bracket the whole call (launch, and the memset node under policy 3): against the span, what
        # the CTAs' own timestamps do not see.
        print(f"  the call by CUDA events: {start.elapsed_time(end) * 1e3:.1f} us"
              f"{' after a 256 MB flush' if args.flush else ''}")


if __name__ == "__main__":
    main()
