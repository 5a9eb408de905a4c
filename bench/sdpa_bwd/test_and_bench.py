#!/usr/bin/env python3
"""Correctness checks and benchmark of frost's sm90 attention backward (libfrost_sdpa_bwd.so, through ctypes).

Given Q, K, V, O, dO and the forward's Stats (LSE), with P = exp(scale * Q K^T + mask - LSE):
  D = rowsum(dO * O), dS = P * (dO V^T - D), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO,
  dSink[h] = -sum_rows exp(sink[h] - LSE) * D.
Every case is checked against those formulas evaluated in FP32 on the GPU: the relative L2 error of each gradient
must stay within 2x that of a straightforward bf16/fp16 backward (bf16 matmuls, P and dS rounded) plus a floor;
outputs are poisoned with NaN before each run. Then: bitwise determinism of the deterministic mode, CUDA-graph
capture + replay with changed inputs, and the TARGETS.md attention-backward suite against cuDNN and
FlashAttention-2 (both through torch SDPA's backward) in the same process.

Usage: python3 test_and_bench.py --lib build/sdpa_bwd/libfrost_sdpa_bwd.so [--smoke] [--no-bench] [--out DIR]
       [--large: the correctness sweep of the split-d kernels (d256 under each WARP_SPEC_CFG, 192/128) instead]
       [--base LIB: another build (e.g. main's) timed beside --lib in the same rounds; build both with build.sh,
        which exports only the C API, so two builds keep apart in one process]
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from timing import commit_of, time_many  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
LOG2E = 1.4426950408889634


class Frost:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        f = self.lib.frost_sm90_sdpa_bwd
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p]
        self.lib.frost_sm90_sdpa_bwd_workspace_size.restype = ctypes.c_int64
        self.lib.frost_sm90_sdpa_bwd_workspace_size.argtypes = [ctypes.c_void_p]
        self.lib.frost_sm90_sdpa_bwd_last_reason.restype = ctypes.c_char_p
        self.ws = None

    def __call__(self, q, k, v, o, do, lse, dq, dk, dv, scale, left=None, right=None, bottom_right=False,
                 lens=None, sink=None, dsink=None, lse_log2=False, deterministic=False, tile_m=0, tile_n=0,
                 stream=None, warp_spec=0):
        """q, k, v, o, do, dq, dk, dv: logical [b, h, s, d] views (contiguous last dim); lse: [b, h_q, s_q] fp32
        view (any strides); lens: (len_q, len_kv) int32 [b] tensors for the padding mask."""
        b, hq, sq, d = q.shape
        _, hkv, skv, dv_ = v.shape
        ints = [{torch.bfloat16: 0, torch.float16: 1}[q.dtype], b, hq, hkv, sq, skv, d, dv_]
        for t in (q, k, v, o, do, dq, dk, dv, lse):
            ints += [t.stride(0), t.stride(1), t.stride(2)]
        ints += [sink.stride(0) if sink is not None else 0, dsink.stride(0) if dsink is not None else 0,
                 lens[0].stride(0) if lens else 0, lens[1].stride(0) if lens else 0]
        ints += [int(lse_log2), int(left is not None), left or 0, int(right is not None), right or 0,
                 int(bottom_right), int(deterministic), tile_m, tile_n, warp_spec]
        arr = (ctypes.c_int64 * len(ints))(*ints)
        opt = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        ptrs = (ctypes.c_void_p * 13)(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), do.data_ptr(),
                                      lse.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), opt(sink),
                                      opt(dsink), opt(lens[0]) if lens else None, opt(lens[1]) if lens else None)
        need = self.lib.frost_sm90_sdpa_bwd_workspace_size(arr)
        if self.ws is None or self.ws.numel() < need:
            self.ws = torch.empty(max(need, 1), dtype=torch.uint8, device="cuda")
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        rc = self.lib.frost_sm90_sdpa_bwd(arr, ptrs, scale, self.ws.data_ptr(), stream)
        if rc == -1:
            return self.lib.frost_sm90_sdpa_bwd_last_reason().decode()
        if rc != 0:
            raise RuntimeError(f"frost_sm90_sdpa_bwd returned cudaError {rc}")
        return None


def rand(b, h, s, d, dtype, layout, gen):
    """Random [b, h, s, d] view over BSHD or BHSD storage."""
    if layout == "bshd":
        return torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=gen).transpose(1, 2)
    return torch.randn(b, h, s, d, device="cuda", dtype=dtype, generator=gen)


def empty_like_layout(t):
    """Uninitialised tensor with t's dims and stride order."""
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)


def visible_mask(b, sq, skv, left, right, bottom_right, lens):
    """[b, 1, sq, skv] bool, True = key j visible to query i."""
    i = torch.arange(sq, device="cuda").view(1, 1, sq, 1)
    j = torch.arange(skv, device="cuda").view(1, 1, 1, skv)
    if lens is None:
        lq = torch.full((b, 1, 1, 1), sq, device="cuda")
        lk = torch.full((b, 1, 1, 1), skv, device="cuda")
    else:
        lq, lk = (x.view(b, 1, 1, 1).long() for x in lens)
    off = (lk - lq) if bottom_right else torch.zeros_like(lk)
    vis = (j < lk) & (i < lq)
    if right is not None:
        vis &= j <= i + off + right
    if left is not None:
        vis &= j > i + off - left
    return vis


def forward_stats(q, k, v, scale, vis, sink):
    """FP32 forward: O (rounded to the input type, as a forward kernel stores it) and LSE (natural log, FP32)."""
    rep = q.shape[1] // k.shape[1]
    kk, vv = k.float().repeat_interleave(rep, 1), v.float().repeat_interleave(rep, 1)
    s = (q.float() @ kk.transpose(-1, -2)) * scale
    s = s.masked_fill(~vis, float("-inf"))
    if sink is not None:
        s_ext = torch.cat([s, sink.view(1, -1, 1, 1).expand(s.shape[0], -1, s.shape[2], 1)], -1)
    else:
        s_ext = s
    lse = torch.logsumexp(s_ext, -1)
    p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)
    o = (p @ vv).to(q.dtype)
    return o, lse


def backward_formulas(q, k, v, o, do, lse, scale, vis, sink, lowp=None):
    """The backward from the given O and Stats. lowp=None: FP32 throughout (the oracle); lowp=bf16/fp16: the
    straightforward low-precision implementation (matmuls in that type, P and dS rounded), the error yardstick."""
    rep = q.shape[1] // k.shape[1]
    ct = torch.float32 if lowp is None else lowp
    kk, vv = k.repeat_interleave(rep, 1).to(ct), v.repeat_interleave(rep, 1).to(ct)
    qq, dd = q.to(ct), do.to(ct)
    s = (qq @ kk.transpose(-1, -2)).float() * scale
    dead = (lse == float("-inf")).unsqueeze(-1)
    p = torch.exp(s - torch.where(dead, torch.zeros_like(lse.unsqueeze(-1)), lse.unsqueeze(-1)))
    p = torch.where(vis & ~dead, p, torch.zeros_like(p))
    dp = (dd @ vv.transpose(-1, -2)).float()
    delta = (do.float() * o.float()).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    pc, dsc = p.to(ct), ds.to(ct)
    dq = (dsc @ kk).float() * scale
    dk = (dsc.transpose(-1, -2) @ qq).float() * scale
    dv = (pc.transpose(-1, -2) @ dd).float()
    b, hkv = k.shape[0], k.shape[1]
    dk = dk.view(b, hkv, rep, *dk.shape[2:]).sum(2)
    dv = dv.view(b, hkv, rep, *dv.shape[2:]).sum(2)
    dsink = None
    if sink is not None:
        w = torch.where(dead.squeeze(-1), torch.zeros_like(lse), torch.exp(sink.view(1, -1, 1) - lse))
        dsink = -(w * torch.where(dead.squeeze(-1), torch.zeros_like(lse), delta.squeeze(-1))).sum((0, 2))
    if lowp is not None:
        dq, dk, dv = dq.to(lowp).float(), dk.to(lowp).float(), dv.to(lowp).float()
    return dq, dk, dv, dsink


def rel_err(x, ref):
    return ((x.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def rms(x):
    return (x.float().square().mean().sqrt().item()) if x.numel() else 0.0


def within(got, want, base):
    """DESIGN.md's rule: the error stays within 2x that of the straightforward implementation, plus a floor (a small
    fraction of the gradient's own size: where a gradient is nearly 0, e.g. a row with one visible key, both errors
    are rounding noise). Errors as root-mean-square over the tensor."""
    return rms(got.float() - want) <= 2 * rms(base - want) + 1e-3 * rms(want) + 1e-6


def structural_zeros(vis, lse, hkv):
    """Rows of dQ and rows of dK/dV that no visible (query, key) pair touches: they must be exactly 0."""
    b, hq = lse.shape[0], lse.shape[1]
    dead = (lse == float("-inf")) | ~vis.any(-1)  # [b, hq, sq]
    live_pairs = vis & ~dead.unsqueeze(-1)          # [b, hq, sq, skv]
    touched = live_pairs.any(2).view(b, hkv, hq // hkv, -1).any(2)  # [b, hkv, skv]
    return dead, ~touched


def diagnose(name, got, want):
    """Where a gradient is wrong: the worst element, and how the large errors spread over rows and columns."""
    err = (got.float() - want).abs().nan_to_num(float("inf"))
    tol = 0.05 * want.abs().max().clamp_min(1e-6)
    bad = err > tol
    idx = tuple(int(i) for i in torch.nonzero(err == err.max())[0])
    rows = torch.nonzero(bad.any(-1).flatten(0, 1).any(0)).flatten()
    cols = torch.nonzero(bad.flatten(0, 2).any(0)).flatten()
    return (f"{name}: worst {tuple(idx)} got {got[idx].item():.4g} want {want[idx].item():.4g}; "
            f"{bad.float().mean().item():.3%} large; bad rows {rows[:8].tolist()}..({rows.numel()}) "
            f"bad cols {cols[:8].tolist()}..({cols.numel()})")


def check_case(frost, c, gen):
    b, hq, hkv, sq, skv, d = c["b"], c["hq"], c["hkv"], c["sq"], c["skv"], c["d"]
    dv_, ws = c.get("dv", d), c.get("ws", 0)
    dtype = c.get("dtype", torch.bfloat16)
    layout = c.get("layout", "bshd")
    left, right, br = c.get("left"), c.get("right"), c.get("br", False)
    scale = c.get("scale", 1.0 / math.sqrt(d))
    lens = None
    if "lens" in c:
        lens = tuple(torch.tensor(x, dtype=torch.int32, device="cuda") for x in c["lens"])
    sink = (torch.rand(hq, device="cuda", generator=gen) * 4 - 1) if c.get("sink") else None
    q, do = rand(b, hq, sq, d, dtype, layout, gen), rand(b, hq, sq, dv_, dtype, layout, gen)
    k, v = rand(b, hkv, skv, d, dtype, layout, gen), rand(b, hkv, skv, dv_, dtype, layout, gen)
    vis = visible_mask(b, sq, skv, left, right, br, lens)
    o, lse = forward_stats(q, k, v, scale, vis, sink)
    o = o.transpose(1, 2).contiguous().transpose(1, 2) if layout == "bshd" else o.contiguous()
    if c.get("stats_token_major"):  # Stats stored [b, s, h]
        lse_arg = lse.transpose(1, 2).contiguous().transpose(1, 2)
    else:
        lse_arg = lse.contiguous()
    if c.get("lse_log2"):
        lse_arg = lse_arg * LOG2E
    dq, dk, dv = empty_like_layout(q), empty_like_layout(k), empty_like_layout(v)
    for t in (dq, dk, dv):
        t.fill_(float("nan"))
    dsink = torch.full((hq,), float("nan"), device="cuda") if sink is not None else None
    det = c.get("det", False)
    lse_log2 = c.get("lse_log2", False)
    why = frost(q, k, v, o, do, lse_arg, dq, dk, dv, scale, left, right, br, lens, sink, dsink, lse_log2, det,
                tile_m=c.get("tile_m", 0), warp_spec=ws)
    torch.cuda.synchronize()
    if why is not None:
        return dict(ok=False, why="declined: " + why)
    ref = backward_formulas(q, k, v, o, do, lse, scale, vis, sink)
    lp = backward_formulas(q, k, v, o, do, lse, scale, vis, sink, lowp=dtype)
    r = dict(ok=True)
    zero_q, zero_kv = structural_zeros(vis, lse, hkv)
    for name, got, want, base, zero in zip(("dq", "dk", "dv"), (dq, dk, dv), ref[:3], lp[:3],
                                           (zero_q, zero_kv, zero_kv)):
        unwritten = int(torch.isnan(got).sum().item())
        r[name] = rel_err(got, want)
        r[name + "_lp"] = rel_err(base, want)
        r["unwritten"] = r.get("unwritten", 0) + unwritten
        zero_ok = bool((got.float()[zero] == 0).all().item())  # masked / padded / empty rows stay exactly 0
        good = unwritten == 0 and within(got, want, base) and zero_ok
        r["ok"] &= good
        if not zero_ok:
            r["why"] = f"{name} nonzero where the reference is 0"
        if not good:
            r.setdefault("diag", []).append(diagnose(name, got, want))
    if sink is not None:
        e = ((dsink - ref[3]).abs().max() / ref[3].abs().max().clamp_min(1.0)).item()
        r["dsink"] = e
        r["ok"] &= e <= 2e-3
    if det:  # the deterministic mode reruns bit for bit
        again = [empty_like_layout(t) for t in (dq, dk, dv)]
        frost(q, k, v, o, do, lse_arg, *again, scale, left, right, br, lens, sink, None, lse_log2, True,
              tile_m=c.get("tile_m", 0), warp_spec=ws)
        torch.cuda.synchronize()
        same = all(torch.equal(x, y) for x, y in zip((dq, dk, dv), again))
        r["bitwise"] = same
        r["ok"] &= same
    return r


def case_name(c):
    m = "none"
    if c.get("right") is not None or c.get("left") is not None:
        m = f"band({c.get('left')},{c.get('right')}){'-br' if c.get('br') else ''}"
    dt = "fp16" if c.get("dtype") == torch.float16 else "bf16"
    extra = "".join(f" {k}" for k in ("lse_log2", "sink", "det", "stats_token_major") if c.get(k))
    extra += f" lens{c['lens']}" if "lens" in c else ""
    extra += f" ws{c['ws']}" if c.get("ws") else ""
    extra += f" m{c['tile_m']}" if c.get("tile_m") else ""
    dims = f"{c['d']}/{c['dv']}" if "dv" in c else f"{c['d']}"
    return (f"d{dims} b{c['b']} h{c['hq']}/{c['hkv']} sq{c['sq']} skv{c['skv']} {m} {c.get('layout', 'bshd')} "
            f"{dt}{extra}")


def large_dim_cases():
    """The split-d kernels: d256 under both WARP_SPEC_CFG values, and 192/128."""
    cases = []
    for dims in ((256, 256, 1), (256, 256, 2), (192, 128, 1)):
        d, dv, ws = dims
        for sq, skv in ((1, 1), (17, 17), (111, 1000), (1000, 111), (4097, 4097), (17, 4097)):
            for right, br in ((None, False), (0, False), (0, True)):
                cases.append(dict(d=d, dv=dv, ws=ws, b=1, hq=2, hkv=2, sq=sq, skv=skv, right=right, br=br,
                                  layout="bshd" if (sq + skv) % 2 == 0 else "bhsd"))
        cases.append(dict(d=d, dv=dv, ws=ws, b=2, hq=16, hkv=4, sq=1000, skv=1000, right=0, br=True))
        cases.append(dict(d=d, dv=dv, ws=ws, b=2, hq=4, hkv=2, sq=513, skv=700, dtype=torch.float16, right=0))
        cases.append(dict(d=d, dv=dv, ws=ws, b=1, hq=4, hkv=2, sq=1500, skv=1500, left=256, right=0))
        cases.append(dict(d=d, dv=dv, ws=ws, b=3, hq=4, hkv=2, sq=700, skv=800, right=0, br=True,
                          lens=([700, 333, 0], [800, 100, 9])))
        cases.append(dict(d=d, dv=dv, ws=ws, b=2, hq=4, hkv=2, sq=400, skv=450, sink=True, right=0))
        cases.append(dict(d=d, dv=dv, ws=ws, b=2, hq=4, hkv=4, sq=600, skv=300, right=0, br=True, lse_log2=True,
                          stats_token_major=True))
        if ws == 1:  # the deterministic mode: no mask, causal, and a window with a right bound over padding
            cases.append(dict(d=d, dv=dv, ws=ws, b=1, hq=8, hkv=2, sq=2048, skv=2048, det=True))
            cases.append(dict(d=d, dv=dv, ws=ws, b=1, hq=4, hkv=4, sq=3000, skv=3000, right=0, det=True))
            cases.append(dict(d=d, dv=dv, ws=ws, b=2, hq=4, hkv=1, sq=1111, skv=999, left=300, right=0, br=True,
                              det=True, lens=([1111, 500], [999, 400])))
    return cases


def correctness_cases(smoke, quick=False, det="with", large=False):
    """det: "with" every case, "without" the deterministic-mode cases, "only" those. large: only the split-d
    (d_qk 192 / 256) cases."""
    if large:
        return large_dim_cases()
    cases = []
    if smoke:
        for d in (64, 128):
            cases.append(dict(d=d, b=1, hq=2, hkv=2, sq=300, skv=300, right=0))
            cases.append(dict(d=d, b=1, hq=2, hkv=1, sq=17, skv=1000, layout="bhsd"))
        return cases
    seqs = [(1, 1), (17, 17), (111, 111), (1000, 1000), (4097, 4097), (111, 1000), (1000, 111), (1, 4097),
            (4097, 17), (17, 4097)]
    if quick:
        seqs = [(1, 1), (17, 17), (111, 1000), (1000, 111), (4097, 4097), (4097, 17)]
    i = 0
    for d in (64, 128):
        for sq, skv in seqs:
            for right, br in ((None, False), (0, False), (0, True)):
                cases.append(dict(d=d, b=1, hq=2, hkv=2, sq=sq, skv=skv, right=right, br=br,
                                  layout="bshd" if i % 2 == 0 else "bhsd"))
                i += 1
    for d in (64, 128):  # GQA 32/8 and MQA, fp16, windows, padding, sinks, Stats layouts, deterministic
        cases.append(dict(d=d, b=2, hq=32, hkv=8, sq=1000, skv=1000, right=0, br=True))
        cases.append(dict(d=d, b=2, hq=8, hkv=1, sq=777, skv=1234, layout="bhsd"))
        cases.append(dict(d=d, b=2, hq=4, hkv=2, sq=513, skv=700, dtype=torch.float16, right=0))
        cases.append(dict(d=d, b=1, hq=4, hkv=4, sq=1000, skv=1000, dtype=torch.float16, layout="bhsd"))
        cases.append(dict(d=d, b=1, hq=4, hkv=2, sq=1500, skv=1500, left=256, right=0))
        cases.append(dict(d=d, b=2, hq=2, hkv=2, sq=600, skv=900, left=100, right=37, br=True))
        cases.append(dict(d=d, b=3, hq=4, hkv=2, sq=700, skv=800, right=0, br=True,
                          lens=([700, 333, 0], [800, 100, 9])))
        cases.append(dict(d=d, b=2, hq=4, hkv=4, sq=500, skv=600, lens=([1, 500], [600, 1]), layout="bhsd"))
        cases.append(dict(d=d, b=2, hq=4, hkv=2, sq=400, skv=450, sink=True, right=0))
        cases.append(dict(d=d, b=2, hq=4, hkv=4, sq=600, skv=300, right=0, br=True, lse_log2=True,
                          stats_token_major=True))
        cases.append(dict(d=d, b=1, hq=8, hkv=2, sq=2048, skv=2048, det=True))
        cases.append(dict(d=d, b=1, hq=4, hkv=4, sq=3000, skv=3000, right=0, det=True))
        cases.append(dict(d=d, b=2, hq=4, hkv=1, sq=1111, skv=999, left=300, right=0, br=True, det=True,
                          lens=([1111, 500], [999, 400])))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=333, skv=333, scale=0.3))
    # d64 with 64-row query blocks (TILE_M 64; the default is 128)
    cases.append(dict(d=64, tile_m=64, b=2, hq=8, hkv=2, sq=1000, skv=1111, right=0, br=True))
    cases.append(dict(d=64, tile_m=64, b=1, hq=4, hkv=4, sq=777, skv=777, layout="bhsd", dtype=torch.float16))
    cases.append(dict(d=64, tile_m=64, b=2, hq=4, hkv=1, sq=1111, skv=999, left=300, right=0, br=True, det=True,
                      lens=([1111, 500], [999, 400])))
    if det != "with":
        cases = [c for c in cases if c.get("det", False) == (det == "only")]
    return cases


def run_correctness(frost, smoke, quick=False, det="with", large=False):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    results, n_fail = [], 0
    for c in correctness_cases(smoke, quick, det, large):
        r = check_case(frost, c, gen)
        r["case"] = case_name(c)
        results.append(r)
        n_fail += 0 if r["ok"] else 1
        status = "ok  " if r["ok"] else "FAIL"
        if "dq" in r:
            extra = f" dsink {r['dsink']:.1e}" if "dsink" in r else ""
            extra += f" bitwise {r['bitwise']}" if "bitwise" in r else ""
            extra += f" ({r['why']})" if "why" in r else ""
            extra += "".join("\n      " + x for x in r.get("diag", []))
            print(f"{status} {r['case']:<70} rel dq {r['dq']:.2e} ({r['dq_lp']:.2e}) dk {r['dk']:.2e} "
                  f"({r['dk_lp']:.2e}) dv {r['dv']:.2e} ({r['dv_lp']:.2e}) unwritten {r['unwritten']}{extra}")
        else:
            print(f"{status} {r['case']:<70} {r.get('why')}")
    return results, n_fail


def checker_self_test():
    """The checker must be able to fail: one corrupted element of a correct gradient is caught."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    want = torch.randn(1, 2, 257, 128, device="cuda", generator=gen)
    base = want.bfloat16().float()
    bad = base.clone()
    bad[0, 1, 100, 5] += 4.0
    caught = not within(bad, want, base) and within(base, want, base)
    print(f"checker self-test (one corrupted element is caught): {'ok' if caught else 'FAIL'}")
    return caught


def graph_replay(frost):
    """CUDA graph: capture one backward, change the inputs in place, replay, check against the oracle."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(99)
    b, h, hkv, s, d, scale = 2, 16, 4, 1111, 128, 0.1
    vis = visible_mask(b, s, s, None, 0, True, None)
    q, do = rand(b, h, s, d, torch.bfloat16, "bshd", gen), rand(b, h, s, d, torch.bfloat16, "bshd", gen)
    k, v = rand(b, hkv, s, d, torch.bfloat16, "bshd", gen), rand(b, hkv, s, d, torch.bfloat16, "bshd", gen)
    o, lse = forward_stats(q, k, v, scale, vis, None)
    o = o.transpose(1, 2).contiguous().transpose(1, 2)
    dq, dk, dv = empty_like_layout(q), empty_like_layout(k), empty_like_layout(v)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        frost(q, k, v, o, do, lse, dq, dk, dv, scale, None, 0, True)  # sizes the workspace outside the capture
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        why = frost(q, k, v, o, do, lse, dq, dk, dv, scale, None, 0, True)
    assert why is None, why
    ok_all = True
    for trial in range(2):
        for t in (q, k, v, do):
            t.copy_(torch.randn(t.shape, device="cuda", dtype=t.dtype, generator=gen))
        o2, lse2 = forward_stats(q, k, v, scale, vis, None)
        o.copy_(o2)
        lse.copy_(lse2)
        for t in (dq, dk, dv):
            t.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ref = backward_formulas(q, k, v, o, do, lse, scale, vis, None)
        lp = backward_formulas(q, k, v, o, do, lse, scale, vis, None, lowp=torch.bfloat16)
        errs = [(rel_err(x, r), rel_err(y, r)) for x, y, r in zip((dq, dk, dv), lp[:3], ref[:3])]
        ok = all(within(x, r, y) for x, y, r in zip((dq, dk, dv), lp[:3], ref[:3]))
        ok &= not any(torch.isnan(t).any().item() for t in (dq, dk, dv))
        ok_all &= ok
        print(f"cuda graph replay {trial} with new inputs (gqa16/4 d128 s1111 causal-br): {'ok' if ok else 'FAIL'} "
              + " ".join(f"{n} {e:.2e} ({eb:.2e})" for n, (e, eb) in zip(("dq", "dk", "dv"), errs)))
    return ok_all


# ------------------------------------------------------------------------------------------------ benchmark
BENCH = [
    ("d128 h16 b1 s16384", 128, 16, 1, 16384, False),
    ("d128 h16 b1 s16384 causal", 128, 16, 1, 16384, True),
    ("d64 h32 b1 s16384", 64, 32, 1, 16384, False),
    ("d64 h32 b1 s16384 causal", 64, 32, 1, 16384, True),
    ("d256 h8 b1 s16384", 256, 8, 1, 16384, False),
    ("d128 h16 b4 s4096", 128, 16, 4, 4096, False),
    ("d128 h16 b4 s4096 causal", 128, 16, 4, 4096, True),
    ("d64 h32 b4 s4096", 64, 32, 4, 4096, False),
    ("d64 h32 b4 s4096 causal", 64, 32, 4, 4096, True),
    ("d128 h16 b2 s8192 causal", 128, 16, 2, 8192, True),
    ("d256 h8 b1 s16384 causal", 256, 8, 1, 16384, True),
    ("d192/128 h16 b1 s16384", (192, 128), 16, 1, 16384, False),
    ("d192/128 h16 b1 s16384 causal", (192, 128), 16, 1, 16384, True),
]


def run_bench(frost, only=None, with_det=True, base=None, lead_us=0):
    """base: a second build of the library (--base), timed as "frost[base]" in the same rounds as frost. lead_us:
    time_many's GPU lead (device time only, for every implementation alike)."""
    records, table = [], []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(5)
    for name, d, h, b, s, causal in BENCH:
        if only and not any(o in name for o in only):
            continue
        d, dv = d if isinstance(d, tuple) else (d, d)  # (d_qk, d_v)
        # forward FLOPs 2 s^2 (d_qk + d_v) per head (4 s^2 d for d_qk = d_v); the backward counts 2.5x
        flops = 2.5 * 2.0 * b * h * s * s * (d + dv) * (0.5 if causal else 1.0)
        scale = 1 / math.sqrt(d)
        q, k = (rand(b, h, s, d, torch.bfloat16, "bshd", gen) for _ in range(2))
        v, do = (rand(b, h, s, dv, torch.bfloat16, "bshd", gen) for _ in range(2))
        # O and LSE for frost from the peers' own forward (cuDNN), as a training step would hand them over.
        # (FlashAttention-2 needs d_qk = d_v; 192/128 takes the next backend that serves it)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
            o_ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        # Check every implementation on head 0 of batch 0 against the FP32 formulas.
        vis = visible_mask(1, s, s, None, 0 if causal else None, False, None)
        o0, lse0 = forward_stats(q[:1, :1], k[:1, :1], v[:1, :1], scale, vis, None)
        ref = backward_formulas(q[:1, :1], k[:1, :1], v[:1, :1], o0, do[:1, :1], lse0, scale, vis, None)
        lp = backward_formulas(q[:1, :1], k[:1, :1], v[:1, :1], o0, do[:1, :1], lse0, scale, vis, None,
                               lowp=torch.bfloat16)
        del vis
        o = o_ref.transpose(1, 2).contiguous().transpose(1, 2)
        o[:1, :1].copy_(o0)
        lse = torch.empty(b, h, s, device="cuda")
        with torch.no_grad():  # the LSE of every head (FP32 logsumexp, head by head to bound memory)
            for bi in range(b):
                for hi in range(h):
                    sc = (q[bi, hi].float() @ k[bi, hi].float().T) * scale
                    if causal:
                        sc.masked_fill_(torch.ones(s, s, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
                    lse[bi, hi] = torch.logsumexp(sc, -1)
                    del sc
        lse[:1, :1].copy_(lse0)

        def ok_of(dq0, dk0, dv0):
            return bool(all(within(x, r, y) for x, y, r in zip((dq0, dk0, dv0), lp, ref)))

        row = {"case": name}
        fns, oks = {}, {}
        dq, dk, dv = empty_like_layout(q), empty_like_layout(k), empty_like_layout(v)
        impls = [("frost", False, 0), ("frost[deterministic]", True, 0)][:2 if with_det else 1]
        impls = [(name_, det, 0, ws) for name_, det, ws in impls]  # (impl, deterministic, tile_m, warp_spec)
        if base is not None:
            impls.insert(1, ("frost[base]", False, 0, 0))
        if d > 128:  # the split-d kernels: each WARP_SPEC_CFG (see sm90_bwd_variants.h) beside the default
            impls += [("frost[ws1]", False, 0, 1), ("frost[ws2]", False, 0, 2)]
        if d == 64:  # 64-row query blocks beside the default 128
            impls += [("frost[m64]", False, 64, 0)] + ([("frost[m64 det]", True, 64, 0)] if with_det else [])
        for impl, det, tm, ws in impls:
            lib = base if impl == "frost[base]" else frost
            for t in (dq, dk, dv):
                t.fill_(float("nan"))
            why = lib(q, k, v, o, do, lse, dq, dk, dv, scale, None, 0 if causal else None, False, deterministic=det,
                      tile_m=tm, warp_spec=ws)
            if why is not None:
                records.append(dict(case=name, impl=impl, ms=None, value=None, unit="TFLOP/s", ok=False, declined=why))
                continue
            torch.cuda.synchronize()
            oks[impl] = ok_of(dq[:1, :1], dk[:1, :1], dv[:1, :1]) and not torch.isnan(dq).any().item()
            fns[impl] = (lambda lib=lib, det=det, tm=tm, ws=ws: lib(q, k, v, o, do, lse, dq, dk, dv, scale, None,
                                                                    0 if causal else None, False, deterministic=det,
                                                                    tile_m=tm, warp_spec=ws))
        for impl, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
            try:
                qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, scale=scale)
                gq, gk, gv = torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)
                torch.cuda.synchronize()
                oks[impl] = ok_of(gq[:1, :1], gk[:1, :1], gv[:1, :1])
                del gq, gk, gv
                fns[impl] = (lambda out=out, qg=qg, kg=kg, vg=vg: torch.autograd.grad(out, (qg, kg, vg), do,
                                                                                      retain_graph=True))
            except Exception as e:  # a backend that declines the shape
                records.append(dict(case=name, impl=impl, ms=None, value=None, unit="TFLOP/s", ok=False,
                                    declined=str(e).splitlines()[0][:200]))
        for impl, ms in time_many(fns, iters=15, lead_us=lead_us).items():
            tf = flops / ms / 1e9
            records.append(dict(case=name, impl=impl, ms=ms, value=tf, unit="TFLOP/s", ok=oks[impl]))
            row[impl] = tf
        print(f"{name:<28}" + " ".join(f"{k} {v:.1f}" for k, v in row.items() if k != "case") +
              " ok " + str(oks), flush=True)
        table.append(row)
        del q, k, v, do, o, o_ref, lse, dq, dk, dv, fns, ref, lp
        torch.cuda.empty_cache()
    return records, table


def versions():
    drv = "?"
    try:
        drv = subprocess.check_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                      text=True).strip().splitlines()[0]
    except Exception:
        pass
    return {"cuda": torch.version.cuda, "driver": drv, "cudnn": str(torch.backends.cudnn.version()),
            "torch": torch.__version__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness sweep (bench only)")
    ap.add_argument("--quick", action="store_true", help="smaller sequence-length sweep")
    ap.add_argument("--large", action="store_true", help="correctness sweep of the split-d kernels only")
    ap.add_argument("--only", nargs="*", help="bench cases whose name contains one of these")
    ap.add_argument("--det", choices=("with", "without", "only"), default="with",
                    help="correctness cases of the deterministic mode (and its bench timing unless 'without')")
    ap.add_argument("--no-graph", action="store_true", help="skip the checker self-test and the CUDA-graph check")
    ap.add_argument("--base", help="a second build of the library, timed beside --lib as frost[base] (same rounds)")
    ap.add_argument("--gpu-lead", type=float, default=0, metavar="US",
                    help="the GPU spins this long before each timed call, so host launch work is not timed")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--json", default="sdpa_bwd.json", help="results file name under --out")
    args = ap.parse_args()
    frost = Frost(args.lib)
    print(f"device: {torch.cuda.get_device_name()}  versions: {versions()}")
    results, n_fail = ([], 0) if args.no_check else run_correctness(frost, args.smoke, args.quick, args.det,
                                                                              args.large)
    print(f"correctness: {len(results) - n_fail}/{len(results)} cases ok")
    if args.smoke:
        sys.exit(1 if n_fail else 0)
    summary = dict(cases=len(results), failed=n_fail)
    if not args.no_check and not args.no_graph:
        summary.update(checker_catches=checker_self_test(), graph=graph_replay(frost))
    base = Frost(args.base) if args.base else None
    records, table = ([], []) if args.no_bench else run_bench(frost, args.only, args.det != "without", base,
                                                              args.gpu_lead)
    commit = commit_of()
    doc = {"suite": "sdpa_bwd", "date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
           "commit": commit, "versions": versions(), "records": records, "correctness": summary,
           "correctness_cases": results}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, args.json), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"summary: {summary}")
    if table:
        print(f"\n{'case':<28}{'frost':>8}{'f[det]':>8}{'f[base]':>8}{'cuDNN':>8}{'FA2':>8}{'frost/best':>11}"
              f"{'det/frost':>10}{'base/best':>10}")
        for r in table:
            def fmt(k):
                return f"{r[k]:.1f}" if k in r else "-"
            best = max([r[k] for k in ("cudnn", "fa2") if k in r], default=None)
            ratio = f"{r['frost'] / best:.3f}" if "frost" in r and best else "-"
            det = r.get("frost[deterministic]")
            dr = f"{det / r['frost']:.3f}" if "frost" in r and det else "-"
            br = f"{r['frost[base]'] / best:.3f}" if "frost[base]" in r and best else "-"
            print(f"{r['case']:<28}{fmt('frost'):>8}{fmt('frost[deterministic]'):>8}{fmt('frost[base]'):>8}"
                  f"{fmt('cudnn'):>8}{fmt('fa2'):>8}{ratio:>11}{dr:>10}{br:>10}")


if __name__ == "__main__":
    main()
