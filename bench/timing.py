"""What the benchmark scripts share: CUDA-event medians with the L2 flushed before every timed launch (time_many),
medians over short bursts after idle gaps (time_bursts), and the commit a results file names."""
import os
import subprocess
import time

import torch

_FLUSH = None


def time_many(fns, iters=21, warmup=2, lead_us=0):
    """Median ms of each callable of the dict `fns`. The callables take turns inside every round (rotating who goes
    first), so clock and power drift during the run hit all of them alike; a 256 MB write before every timed
    launch evicts the 60 MB L2. lead_us > 0: the GPU also spins that long (at ~2 GHz) before the start event, so
    the host has queued the callable's launches by the time the GPU reaches them and host-side launch work does
    not count as idle GPU time inside the measure (device time only)."""
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = torch.empty(256 * 1024 * 1024 // 4, device="cuda", dtype=torch.float32)
    names = list(fns)
    for _ in range(warmup):
        for n in names:
            fns[n]()
    events = {n: [] for n in names}
    for i in range(iters):
        for n in names[i % len(names):] + names[:i % len(names)]:
            _FLUSH.zero_()
            if lead_us > 0:
                torch.cuda._sleep(int(lead_us * 2000))
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fns[n]()
            end.record()
            events[n].append((start, end))
    torch.cuda.synchronize()
    return {n: sorted(s.elapsed_time(e) for s, e in events[n])[iters // 2] for n in names}


def time_bursts(fns, bursts=7, runs=10, gap_s=1.0):
    """Median ms per call of each callable over short bursts (runs back to back) after an idle gap, the callables
    taking turns: the clocks of a GPU that has not yet hit its power limit, where bench_many's long run in turns
    measures the power-limited steady state."""
    names, per = list(fns), {n: [] for n in fns}
    for n in names:
        fns[n]()
    for b in range(bursts):
        for n in names[b % len(names):] + names[:b % len(names)]:
            torch.cuda.synchronize()
            time.sleep(gap_s)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(runs):
                fns[n]()
            end.record()
            torch.cuda.synchronize()
            per[n].append(start.elapsed_time(end) / runs)
    return {n: sorted(v)[len(v) // 2] for n, v in per.items()}


def commit_of():
    """FROST_COMMIT where the tree runs as a copy outside its checkout (the GPU machine: a .git there, if any, is
    not this tree's, so pass it there), else git's HEAD with "-dirty" when tracked files differ from it, else
    "uncommitted"."""
    commit = os.environ.get("FROST_COMMIT")
    if commit:
        return commit
    try:
        return subprocess.check_output(
            ["git", "describe", "--always", "--dirty", "--abbrev=40"], text=True, stderr=subprocess.DEVNULL
        ).strip()
    except Exception:
        return "uncommitted"
