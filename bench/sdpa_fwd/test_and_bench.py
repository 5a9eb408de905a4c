#!/usr/bin/env python3
"""Correctness checks and benchmark of frost's sm90 attention forward (libfrost_sdpa_fwd.so, through ctypes).

O = softmax(scale * Q K^T + mask) V, LSE = logsumexp(scale * Q K^T + mask) per query row (FP32).
Checks every case against an FP32 reference on the GPU: frost's error must stay within 2x the error of a plain
bf16/fp16 matmul-softmax implementation (plus a small floor); outputs are poisoned with NaN before each run.
Then: bitwise determinism, CUDA-graph capture + replay with changed inputs, and the TARGETS.md attention-forward
suite against cuDNN and FlashAttention-2 (both through torch SDPA) in the same process.

Usage: python3 test_and_bench.py --lib build/sdpa_fwd/libfrost_sdpa_fwd.so [--smoke] [--no-bench] [--out DIR]
       [--base LIB: another build (e.g. main's) timed beside --lib in the same rounds (its first plan, and its
       packed split for the decode cases); build both with build.sh]
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

I64 = ctypes.c_int64


class Frost:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        f = self.lib.frost_sm90_sdpa_fwd
        f.restype = ctypes.c_int
        f.argtypes = (
            [ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_void_p] + [I64] * 21
            + [ctypes.c_float] + [ctypes.c_int] * 9 + [ctypes.c_void_p, I64, ctypes.c_void_p]
        )
        self.lib.frost_sm90_sdpa_fwd_last_reason.restype = ctypes.c_char_p
        # SCHED_POLICY 3's workspace: one slot of FP32 partials per SM (at most 128 x 264 floats) plus the flags.
        self.workspace = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")

    def __call__(self, q, k, v, o, lse, scale, causal=False, bottom_right=False, lse_log2=False, tile_n=0,
                 stream=None, sched_policy=0, pack_gqa=0, cga=0):
        """q, k, v, o: logical [b, h, s, d] views (any strides with a contiguous last dim); lse: [b, h_q, s_q] fp32."""
        b, hq, sq, d = q.shape
        _, hkv, skv, dv = v.shape
        dtype = {torch.bfloat16: 0, torch.float16: 1}[q.dtype]
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        lse_ptr = lse.data_ptr() if lse is not None else None
        lsb, lsh = (lse.stride(0), lse.stride(1)) if lse is not None else (0, 0)
        rc = self.lib.frost_sm90_sdpa_fwd(
            dtype, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse_ptr,
            b, hq, hkv, sq, skv, d, dv,
            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2), lsb, lsh,
            scale, int(causal), int(bottom_right), int(lse_log2), 0, tile_n, 0, sched_policy, pack_gqa, cga,
            self.workspace.data_ptr(), self.workspace.numel(), stream)
        if rc == -1:
            return self.lib.frost_sm90_sdpa_fwd_last_reason().decode()
        if rc != 0:
            raise RuntimeError(f"frost_sm90_sdpa_fwd returned cudaError {rc}")
        return None


def split_pays(b, h, s_q, s_kv, d, causal):
    """Whether the engine ranks SCHED_POLICY 3 first for this dense BF16 problem on this GPU: tiles of 64 key blocks
    or more, and the tail split saves at least 2 % of the kernel (recommend() in
    src/engines/sm90/sdpa_fwd/engine/sm90_sdpa_fwd_engine.cpp, split_gain in sm90_fwd_tail_split.h, default tiles)."""
    if causal:
        return False
    m, n = {64: (192, 128), 128: (128, 176 if s_kv >= 8192 else 128), 192: (128, 112), 256: (128, 80)}[d]
    tiles, blocks = b * h * -(-s_q // m), -(-s_kv // n)
    ctas = torch.cuda.get_device_properties(0).multi_processor_count
    waves, tail = divmod(tiles, ctas)
    if tail == 0 or blocks < 64:
        return False
    return (blocks - -(-tail * blocks // ctas)) / ((waves + 1) * blocks) >= 0.02


def make_qkv(b, hq, hkv, sq, skv, d, dtype, layout, gen=None):
    """Random q, k, v as logical [b, h, s, d] views over BSHD or BHSD storage."""
    def one(h, s):
        if layout == "bshd":
            return torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=gen).transpose(1, 2)
        return torch.randn(b, h, s, d, device="cuda", dtype=dtype, generator=gen)
    return one(hq, sq), one(hkv, skv), one(hkv, skv)


def empty_out(b, hq, sq, dv, dtype, layout):
    if layout == "bshd":
        return torch.empty(b, sq, hq, dv, device="cuda", dtype=dtype).transpose(1, 2)
    return torch.empty(b, hq, sq, dv, device="cuda", dtype=dtype)


def mask_for(sq, skv, causal, bottom_right):
    if not causal:
        return None
    off = skv - sq if bottom_right else 0
    i = torch.arange(sq, device="cuda")[:, None]
    j = torch.arange(skv, device="cuda")[None, :]
    return j > i + off  # True = masked


def reference(q, k, v, scale, causal, bottom_right, compute_dtype=torch.float32, rows=None):
    """Plain matmul-softmax. compute_dtype=float32: the reference; bf16/fp16: the straightforward low-precision
    implementation whose error sets the tolerance. rows: optional slice of query rows (absolute indices)."""
    hq, hkv = q.shape[1], k.shape[1]
    rep = hq // hkv
    kk = k.repeat_interleave(rep, dim=1) if rep > 1 else k
    vv = v.repeat_interleave(rep, dim=1) if rep > 1 else v
    qq = q if rows is None else q[:, :, rows]
    if compute_dtype == torch.float32:
        s = (qq.float() @ kk.float().transpose(-1, -2)) * scale
    else:
        s = (qq.to(compute_dtype) @ kk.to(compute_dtype).transpose(-1, -2)).float() * scale
    m = mask_for(q.shape[2], k.shape[2], causal, bottom_right)
    if m is not None:
        if rows is not None:
            m = m[rows]
        s = s.masked_fill(m, float("-inf"))
    mx = s.amax(-1, keepdim=True)
    dead = mx == float("-inf")
    mx = torch.where(dead, torch.zeros_like(mx), mx)
    p = torch.exp(s - mx)
    l = p.sum(-1, keepdim=True)
    if compute_dtype == torch.float32:
        o = (p @ vv.float()) / torch.where(l == 0, torch.ones_like(l), l)
    else:
        pn = (p / torch.where(l == 0, torch.ones_like(l), l)).to(compute_dtype)
        o = (pn @ vv.to(compute_dtype)).float()
    lse = torch.where(l == 0, torch.full_like(l, float("-inf")), mx + torch.log(l))
    return o, lse.squeeze(-1)


def errors(x, ref):
    diff = (x.float() - ref).abs()
    return diff.max().item(), (diff.norm() / ref.norm().clamp_min(1e-30)).item()


def check_case(frost, c, gen):
    b, hq, hkv, sq, skv, d = c["b"], c["hq"], c["hkv"], c["sq"], c["skv"], c["d"]
    dtype = c.get("dtype", torch.bfloat16)
    layout = c.get("layout", "bshd")
    causal, br = c.get("causal", False), c.get("br", False)
    lse_log2 = c.get("lse_log2", False)
    scale = c.get("scale", 1.0 / math.sqrt(d))
    q, k, v = make_qkv(b, hq, hkv, sq, skv, d, dtype, layout, gen)
    o = empty_out(b, hq, sq, d, dtype, layout)
    lse = torch.empty(b, hq, sq, device="cuda", dtype=torch.float32)
    o.fill_(float("nan"))
    lse.fill_(float("nan"))
    why = frost(q, k, v, o, lse, scale, causal, br, lse_log2, c.get("tile_n", 0), sched_policy=c.get("sp", 0),
                pack_gqa=c.get("pack", 0), cga=c.get("cga", 0))
    torch.cuda.synchronize()
    if c.get("expect_decline"):
        ok = why is not None and c["expect_decline"] in why and bool(torch.isnan(o).all().item())
        return dict(ok=ok, why=f"declined as expected: {why}" if ok else f"expected a decline naming "
                    f"{c['expect_decline']!r}, got {why!r}")
    if why is not None:
        return dict(ok=False, why="declined: " + why)
    ref_o, ref_lse = reference(q, k, v, scale, causal, br)
    lp_o, _ = reference(q, k, v, scale, causal, br, compute_dtype=dtype)
    unwritten = int(torch.isnan(o).sum().item()) + int(torch.isnan(lse).sum().item())
    max_e, rel_e = errors(o, ref_o)
    max_lp, rel_lp = errors(lp_o, ref_o)
    if lse_log2:
        ref_lse = ref_lse / math.log(2.0)
    inf_ok = bool(torch.equal(torch.isinf(lse), torch.isinf(ref_lse)))
    fin = torch.isfinite(ref_lse)
    lse_err = (lse[fin] - ref_lse[fin]).abs().max().item() if fin.any() else 0.0
    dead_rows = int((~fin).sum().item())
    dead_ok = True
    if dead_rows:
        dead_ok = bool((o.float().permute(0, 1, 2, 3)[~fin] == 0).all().item())
    ok = (unwritten == 0 and max_e <= 2 * max_lp + 2e-3 and rel_e <= 2 * rel_lp + 1e-4 and inf_ok
          and lse_err <= 2e-3 * max(1.0, ref_lse[fin].abs().max().item() if fin.any() else 1.0) and dead_ok)
    return dict(ok=ok, max_err=max_e, rel_err=rel_e, max_lp=max_lp, rel_lp=rel_lp, lse_err=lse_err,
                unwritten=unwritten, dead_rows=dead_rows, dead_ok=dead_ok, inf_ok=inf_ok)


def case_name(c):
    m = "none" if not c.get("causal") else ("causal-br" if c.get("br") else "causal-tl")
    dt = "fp16" if c.get("dtype") == torch.float16 else "bf16"
    extra = (" lse2" if c.get("lse_log2") else "") + (f" n{c['tile_n']}" if c.get("tile_n") else "")
    extra += f" sp{c['sp']}" if c.get("sp") else ""
    extra += " pack" if c.get("pack") else ""
    extra += f" cga{c['cga']}" if c.get("cga") else ""
    return (f"d{c['d']} b{c['b']} h{c['hq']}/{c['hkv']} sq{c['sq']} skv{c['skv']} {m} {c.get('layout', 'bshd')} "
            f"{dt}{extra}")


def correctness_cases(smoke, quick=False):
    cases = []
    if smoke:
        for d in (64, 128, 256):
            cases.append(dict(d=d, b=1, hq=2, hkv=2, sq=300, skv=300, causal=True))
            cases.append(dict(d=d, b=1, hq=2, hkv=1, sq=17, skv=1000, layout="bhsd"))
        return cases
    seqs = [(1, 1), (17, 17), (111, 111), (1000, 1000), (4097, 4097), (111, 1000), (1000, 111), (1, 4097),
            (4097, 17), (17, 4097)]
    if quick:
        seqs = [(1, 1), (17, 17), (111, 1000), (1000, 111), (4097, 4097), (4097, 17)]
    i = 0
    for d in (64, 128, 256):
        for sq, skv in seqs:
            for causal, br in ((False, False), (True, False), (True, True)):
                cases.append(dict(d=d, b=1, hq=2, hkv=2, sq=sq, skv=skv, causal=causal, br=br,
                                  layout="bshd" if i % 2 == 0 else "bhsd"))
                i += 1
    for d in (64, 128, 256):  # GQA 32/8 and MQA, fp16, both layouts
        cases.append(dict(d=d, b=2, hq=32, hkv=8, sq=1000, skv=1000, causal=True, br=True))
        cases.append(dict(d=d, b=2, hq=8, hkv=1, sq=777, skv=1234, layout="bhsd"))
        cases.append(dict(d=d, b=2, hq=4, hkv=2, sq=513, skv=700, dtype=torch.float16, causal=True))
        cases.append(dict(d=d, b=1, hq=4, hkv=4, sq=1000, skv=1000, dtype=torch.float16, layout="bhsd"))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=1000, skv=1000, tile_n=128))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=1000, skv=1000, causal=True, tile_n=176))
    cases.append(dict(d=128, b=2, hq=4, hkv=4, sq=600, skv=300, causal=True, br=True, lse_log2=True))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=333, skv=333, scale=0.3))
    # SCHED_POLICY 3 (tail split): fewer tiles than SMs (every tile cut), whole waves plus a tail, ranges of one or
    # two key blocks (owners merging dozens of pieces), more SMs than key blocks (empty ranges), every head dim.
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=4097, skv=4097, sp=3))
    cases.append(dict(d=128, b=2, hq=70, hkv=70, sq=300, skv=1000, sp=3, layout="bhsd"))
    cases.append(dict(d=128, b=3, hq=5, hkv=5, sq=1111, skv=8191, sp=3))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=200, skv=100, sp=3))
    cases.append(dict(d=128, b=2, hq=8, hkv=2, sq=999, skv=1500, sp=3, lse_log2=True, tile_n=176))
    cases.append(dict(d=64, b=2, hq=8, hkv=8, sq=1000, skv=777, sp=3, dtype=torch.float16, layout="bhsd"))
    cases.append(dict(d=256, b=1, hq=4, hkv=4, sq=700, skv=3000, sp=3))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=300, skv=300, causal=True, sp=3, expect_decline="SCHED_POLICY=3"))
    # The tail split on PACK_GQA tiles: decode with fewer tiles than SMs (every tile cut), a group of 4 with 17
    # positions, d64's 192-row tiles with a group of 3, FP16 MQA with a masked last key block.
    cases.append(dict(d=128, b=4, hq=64, hkv=8, sq=1, skv=20000, sp=3, pack=1, tile_n=176))
    cases.append(dict(d=128, b=2, hq=16, hkv=4, sq=17, skv=4097, sp=3, pack=1, lse_log2=True))
    cases.append(dict(d=64, b=3, hq=6, hkv=2, sq=5, skv=3001, sp=3, pack=1, layout="bhsd"))
    cases.append(dict(d=128, b=1, hq=8, hkv=1, sq=3, skv=999, sp=3, pack=1, dtype=torch.float16))
    # CTA pairs multicasting K/V: a masked last key block, GQA, BHSD, both key-block widths, FP16, d256,
    # more pair units than clusters (several waves), an odd m-block count and a causal mask (declined).
    cases.append(dict(d=128, b=2, hq=4, hkv=2, sq=256, skv=1000, cga=2))
    cases.append(dict(d=128, b=3, hq=48, hkv=48, sq=512, skv=777, cga=2, tile_n=176, layout="bhsd"))
    cases.append(dict(d=128, b=1, hq=4, hkv=1, sq=250, skv=4097, cga=2, dtype=torch.float16, lse_log2=True))
    cases.append(dict(d=256, b=1, hq=5, hkv=5, sq=256, skv=1200, cga=2, dtype=torch.float16))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=300, skv=300, cga=2, expect_decline="m-blocks"))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=256, skv=256, causal=True, cga=2, expect_decline="TILE_CGA_M=2"))
    # SCHED_POLICY 4 (tiles handed out through a counter): many more tiles than SMs under a causal mask (every head
    # dim, both alignments, tiles without keys when s_q > s_kv bottom-right), unmasked rows with a masked last key
    # block, fewer tiles than SMs, GQA in FP16; PACK_GQA and CTA pairs declined by name.
    cases.append(dict(d=128, b=2, hq=40, hkv=40, sq=1111, skv=1111, causal=True, sp=4))
    cases.append(dict(d=64, b=3, hq=24, hkv=8, sq=2000, skv=2000, causal=True, sp=4, layout="bhsd"))
    cases.append(dict(d=256, b=1, hq=16, hkv=16, sq=1500, skv=1000, causal=True, br=True, sp=4, lse_log2=True))
    cases.append(dict(d=128, b=2, hq=16, hkv=4, sq=700, skv=3000, causal=True, br=True, sp=4, tile_n=176))
    cases.append(dict(d=128, b=3, hq=30, hkv=30, sq=999, skv=777, sp=4, dtype=torch.float16))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=300, skv=300, causal=True, sp=4))
    cases.append(dict(d=128, b=1, hq=8, hkv=2, sq=256, skv=256, sp=4, pack=1, expect_decline="SCHED_POLICY=4"))
    cases.append(dict(d=128, b=1, hq=2, hkv=2, sq=256, skv=256, sp=4, cga=2, expect_decline="SCHED_POLICY=4"))
    return cases


def run_correctness(frost, smoke, quick=False):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    results, n_fail = [], 0
    for c in correctness_cases(smoke, quick):
        r = check_case(frost, c, gen)
        r["case"] = case_name(c)
        results.append(r)
        if not r["ok"]:
            n_fail += 1
        status = "ok  " if r["ok"] else "FAIL"
        if "max_err" in r:
            print(f"{status} {r['case']:<58} max {r['max_err']:.2e} (lp {r['max_lp']:.2e}) rel {r['rel_err']:.2e} "
                  f"(lp {r['rel_lp']:.2e}) lse {r['lse_err']:.1e} unwritten {r['unwritten']} dead {r['dead_rows']}")
        else:
            print(f"{status} {r['case']:<58} {r.get('why')}")
    return results, n_fail


def checker_self_test(frost):
    """The checker must be able to fail: corrupt one output element and check that the comparison catches it."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    q, k, v = make_qkv(1, 2, 2, 257, 257, 128, torch.bfloat16, "bshd", gen)
    o = empty_out(1, 2, 257, 128, torch.bfloat16, "bshd")
    lse = torch.empty(1, 2, 257, device="cuda")
    frost(q, k, v, o, lse, 1 / math.sqrt(128), True)
    ref_o, _ = reference(q, k, v, 1 / math.sqrt(128), True, False)
    lp_o, _ = reference(q, k, v, 1 / math.sqrt(128), True, False, compute_dtype=torch.bfloat16)
    o[0, 1, 100, 5] += 0.5
    max_e, rel_e = errors(o, ref_o)
    max_lp, rel_lp = errors(lp_o, ref_o)
    caught = not (max_e <= 2 * max_lp + 2e-3 and rel_e <= 2 * rel_lp + 1e-4)
    print(f"checker self-test (one corrupted element is caught): {'ok' if caught else 'FAIL'}")
    return caught


def determinism_and_graph(frost):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(99)
    det = True
    # (b, h, s, causal, sched_policy): the causal default, the tail split (594 tiles = 4.5 waves of 132) and the
    # hand-out (tiles go to whichever CTA comes free: each tile's bits must not depend on it)
    for b, h, s, causal, sp in ((2, 8, 4097, True, 0), (2, 9, 4097, False, 3), (2, 8, 4097, True, 4)):
        d = 128
        q, k, v = make_qkv(b, h, h, s, s, d, torch.bfloat16, "bshd", gen)
        outs = []
        for _ in range(2):
            o = empty_out(b, h, s, d, torch.bfloat16, "bshd").fill_(float("nan"))
            lse = torch.full((b, h, s), float("nan"), device="cuda")
            frost(q, k, v, o, lse, 1 / math.sqrt(d), causal, sched_policy=sp)
            outs.append((o, lse))
        torch.cuda.synchronize()
        same = bool(torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1]))
        det = det and same
        print(f"determinism (bitwise rerun, d128 b{b} h{h} s{s} {'causal' if causal else 'none'} sp{sp}): "
              f"{'ok' if same else 'FAIL'}")

    # CUDA graph: capture one launch, then change the inputs in place and replay. The tail split's graph holds the
    # memset of its flags too, the hand-out's that of its counter.
    graph_ok = True
    for causal, br, sp in ((True, True, 0), (False, False, 3), (True, False, 4)):
        b, h, hkv, s, d = 2, 16, 4, 1111, 128
        q, k, v = make_qkv(b, h, hkv, s, s, d, torch.bfloat16, "bshd", gen)
        o = empty_out(b, h, s, d, torch.bfloat16, "bshd")
        lse = torch.empty(b, h, s, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            frost(q, k, v, o, lse, 0.1, causal, br, sched_policy=sp)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            why = frost(q, k, v, o, lse, 0.1, causal, br, sched_policy=sp)
        assert why is None, why
        for trial in range(2):
            q2, k2, v2 = make_qkv(b, h, hkv, s, s, d, torch.bfloat16, "bshd", gen)
            q.copy_(q2)
            k.copy_(k2)
            v.copy_(v2)
            o.fill_(float("nan"))
            lse.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            ref_o, ref_lse = reference(q, k, v, 0.1, causal, br)
            lp_o, _ = reference(q, k, v, 0.1, causal, br, compute_dtype=torch.bfloat16)
            max_e, rel_e = errors(o, ref_o)
            max_lp, rel_lp = errors(lp_o, ref_o)
            lse_err = (lse - ref_lse).abs().max().item()
            ok = (not torch.isnan(o).any().item() and max_e <= 2 * max_lp + 2e-3 and rel_e <= 2 * rel_lp + 1e-4
                  and lse_err < 2e-3 * max(1.0, ref_lse.abs().max().item()))
            graph_ok = graph_ok and ok
            mask = "causal-br" if causal else "none"
            print(f"cuda graph replay {trial} with new inputs (gqa16/4 d128 s1111 {mask} sp{sp}): "
                  f"{'ok' if ok else 'FAIL'} max {max_e:.2e} rel {rel_e:.2e} lse {lse_err:.1e}")
    return det, graph_ok


# ------------------------------------------------------------------------------------------------ benchmark
BENCH = [
    ("d128 h16 b4 s4096", 128, 16, 4, 4096, False),
    ("d128 h16 b1 s16384", 128, 16, 1, 16384, False),
    ("d128 h16 b1 s16384 causal", 128, 16, 1, 16384, True),
    ("d64 h32 b2 s8192", 64, 32, 2, 8192, False),
    ("d256 h8 b2 s8192", 256, 8, 2, 8192, False),
    ("d128 h16 b16 s1024 causal", 128, 16, 16, 1024, True),
    # the target's other head dims and lengths under a causal mask (not in TARGETS.md's table)
    ("d128 h16 b4 s4096 causal", 128, 16, 4, 4096, True),
    ("d64 h32 b2 s8192 causal", 64, 32, 2, 8192, True),
    ("d256 h8 b2 s8192 causal", 256, 8, 2, 8192, True),
]


def run_bench(frost, base=None, only=None):
    """base: a second build of the library (--base), timed as "frost[base]" with the headline knobs in the same
    rounds as frost. only: substrings of the case names to time (all when empty)."""
    records, table = [], []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(5)
    for name, d, h, b, s, causal in BENCH:
        if only and not any(o in name for o in only):
            continue
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        q, k, v = make_qkv(b, h, h, s, s, d, torch.bfloat16, "bshd", gen)
        scale = 1 / math.sqrt(d)
        o = empty_out(b, h, s, d, torch.bfloat16, "bshd")
        lse = torch.empty(b, h, s, device="cuda")
        # check frost on this case against an FP32 reference over the last 256 query rows of batch 0
        rows = torch.arange(s - 256, s, device="cuda")
        ref_o, _ = reference(q[:1], k[:1], v[:1], scale, causal, False, rows=rows)
        lp_o, _ = reference(q[:1], k[:1], v[:1], scale, causal, False, compute_dtype=torch.bfloat16, rows=rows)
        max_lp, rel_lp = errors(lp_o, ref_o)
        row = {"case": name}
        fns, oks = {}, {}
        # "frost" is the engine's first plan: the tail split (policy 3) where it pays, else CTA pairs where they
        # serve (d128 and d256, unmasked, an even m-block count), the hand-out (policy 4) under a causal mask with
        # more than 16 m-blocks, else the kernel default.
        split = split_pays(b, h, s, s, d, causal)
        pair = not causal and not split and d in (128, 256) and -(-s // 128) % 2 == 0
        hand_out = causal and -(-s // (192 if d == 64 else 128)) > 16
        variants = [("frost", 0, 4 if hand_out else 3 if split else 0, 2 if pair else 0)]  # (impl, TILE_N,
        # SCHED_POLICY, TILE_CGA_M)
        if pair:
            variants += [("frost[TILE_CGA_M=1]", 0, 0, 0)]
        if d == 128:
            variants += [("frost[TILE_N=128]", 128, 0, 0), ("frost[TILE_N=176]", 176, 0, 0)]
        if causal or split:  # the default under a causal mask is policy 2 (one global longest-first order)
            variants += [("frost[SCHED_POLICY=1]", 0, 1, 0)]
        if hand_out:  # the kernel's default there: one global longest-first order, handed out in waves
            variants += [("frost[SCHED_POLICY=2]", 0, 2, 0)]
        if not causal and not split:  # the tail split where the engine does not rank it first
            variants += [("frost[SCHED_POLICY=3]", 0, 3, 0)]
        if not causal and d >= 128:  # CTA pairs multicasting K/V, on each key-block width
            variants += [(f"frost[TILE_CGA_M=2{f' TILE_N={tn}' if tn else ''}]", tn, 0, 2)
                         for tn in ((128, 176) if d == 128 else (0,))]
        if base is not None:
            variants.insert(1, ("frost[base]",) + variants[0][1:])
        for impl, tn, sp, cga in variants:
            lib = base if impl == "frost[base]" else frost
            o.fill_(float("nan"))
            why = lib(q, k, v, o, lse, scale, causal, False, False, tn, sched_policy=sp, cga=cga)
            if why is not None:
                records.append(dict(case=name, impl=impl, ms=None, value=None, unit="TFLOP/s", ok=False, declined=why))
                continue
            torch.cuda.synchronize()
            max_e, rel_e = errors(o[:1, :, s - 256:], ref_o)
            oks[impl] = bool(not torch.isnan(o).any().item() and rel_e <= 2 * rel_lp + 1e-4
                             and max_e <= 2 * max_lp + 2e-3)
            fns[impl] = (lambda lib=lib, tn=tn, sp=sp, cga=cga: lib(q, k, v, o, lse, scale, causal, False, False,
                                                                    tn, sched_policy=sp, cga=cga))
        for impl, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
            def peer(backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            try:
                po = peer()
                torch.cuda.synchronize()
                max_e, rel_e = errors(po[:1, :, s - 256:], ref_o)
                oks[impl] = bool(rel_e <= 2 * rel_lp + 1e-4)
                fns[impl] = peer
            except Exception as e:  # a backend that declines the shape
                records.append(dict(case=name, impl=impl, ms=None, value=None, unit="TFLOP/s", ok=False,
                                    declined=str(e).splitlines()[0][:200]))
        for impl, ms in time_many(fns).items():
            tf = flops / ms / 1e9
            records.append(dict(case=name, impl=impl, ms=ms, value=tf, unit="TFLOP/s", ok=oks[impl]))
            row[impl] = tf
        print(f"{name:<28}" + " ".join(f"{k} {v:.1f}" for k, v in row.items() if k != "case") + f" ok {oks}",
              flush=True)
        table.append(row)
        del q, k, v, o, lse, fns
        torch.cuda.empty_cache()
    return records, table


# Grouped-query cases: (name, d, h_q, h_kv, b, s_q, s_kv, causal). Decode (s_q = 1) is measured in GB/s of K and V
# read (TARGETS.md's decode table), the prefill case in TFLOP/s. frost runs with and without PACK_GQA.
GQA_BENCH = [
    ("decode d128 GQA 64/8 b32 L4096", 128, 64, 8, 32, 1, 4096, False),
    ("decode d128 GQA 64/8 b64 L8192", 128, 64, 8, 64, 1, 8192, False),
    ("decode d128 GQA 64/8 b8 L32768", 128, 64, 8, 8, 1, 32768, False),
    ("prefill d128 GQA 64/8 b2 s8192 causal", 128, 64, 8, 2, 8192, 8192, True),
]


def run_gqa_bench(frost, base=None):
    records, table = [], []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    for name, d, hq, hkv, b, sq, skv, causal in GQA_BENCH:
        decode = sq == 1
        unit = "GB/s" if decode else "TFLOP/s"
        work = (2.0 * b * hkv * skv * d * 2 / 1e6) if decode else (4.0 * b * hq * sq * skv * d * 0.5 / 1e9)
        q, k, v = make_qkv(b, hq, hkv, sq, skv, d, torch.bfloat16, "bshd", gen)
        scale = 1 / math.sqrt(d)
        o = empty_out(b, hq, sq, d, torch.bfloat16, "bshd")
        lse = torch.empty(b, hq, sq, device="cuda")
        rows = torch.arange(max(0, sq - 64), sq, device="cuda")
        ref_o, _ = reference(q[:1], k[:1], v[:1], scale, causal, False, rows=rows)
        lp_o, _ = reference(q[:1], k[:1], v[:1], scale, causal, False, compute_dtype=torch.bfloat16, rows=rows)
        max_lp, rel_lp = errors(lp_o, ref_o)
        row = {"case": name, "unit": unit}
        fns, oks = {}, {}
        variants = [("frost[PACK_GQA=0]", 0, 0, 0, frost), ("frost[PACK_GQA=1]", 1, 0, 0, frost),
                    ("frost[PACK_GQA=1 SCHED_POLICY=3]", 1, 3, 0, frost),
                    ("frost[PACK_GQA=1 SCHED_POLICY=3 TILE_N=128]", 1, 3, 128, frost)]
        if causal and not decode:  # the engine's first plan on long causal rows: the hand-out, unpacked
            variants += [("frost[PACK_GQA=0 SCHED_POLICY=4]", 0, 4, 0, frost)]
        if base is not None:
            variants += [("frost[base PACK_GQA=1 SCHED_POLICY=3 TILE_N=128]", 1, 3, 128, base)]
        for impl, pack, sp, tn, lib in variants:
            o.fill_(float("nan"))
            why = lib(q, k, v, o, lse, scale, causal, False, False, tn, pack_gqa=pack, sched_policy=sp)
            if why is not None:
                records.append(dict(case=name, impl=impl, ms=None, value=None, unit=unit, ok=False, declined=why))
                continue
            torch.cuda.synchronize()
            max_e, rel_e = errors(o[:1, :, rows[0]:], ref_o)
            oks[impl] = bool(not torch.isnan(o).any().item() and rel_e <= 2 * rel_lp + 1e-4
                             and max_e <= 2 * max_lp + 2e-3)
            fns[impl] = (lambda pack=pack, sp=sp, tn=tn, lib=lib: lib(q, k, v, o, lse, scale, causal, False, False,
                                                                      tn, pack_gqa=pack, sched_policy=sp))
        for impl, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
            def peer(backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
            try:
                po = peer()
                torch.cuda.synchronize()
                max_e, rel_e = errors(po[:1, :, rows[0]:], ref_o)
                oks[impl] = bool(rel_e <= 2 * rel_lp + 1e-4)
                fns[impl] = peer
            except Exception as e:  # a backend that declines the shape
                records.append(dict(case=name, impl=impl, ms=None, value=None, unit=unit, ok=False,
                                    declined=str(e).splitlines()[0][:200]))
        for impl, ms in time_many(fns).items():
            records.append(dict(case=name, impl=impl, ms=ms, value=work / ms, unit=unit, ok=oks[impl]))
            row[impl] = work / ms
        table.append(row)
        del q, k, v, o, lse, fns
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
    ap.add_argument("--quick", action="store_true", help="smaller sequence-length sweep")
    ap.add_argument("--bench-only", action="store_true", help="skip the correctness sweep (the GPU tests cover it)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--gqa-only", action="store_true", help="time only the grouped-query cases (decode, prefill)")
    ap.add_argument("--base", help="a second build of the library, timed beside --lib as frost[base] (same rounds)")
    ap.add_argument("--only", nargs="*", help="time only the dense cases whose names contain one of these")
    args = ap.parse_args()
    frost = Frost(args.lib)
    base = Frost(args.base) if args.base else None
    print(f"device: {torch.cuda.get_device_name()}  versions: {versions()}")
    results, summary = [], dict(cases=0, skipped="--bench-only")
    if not args.bench_only:
        results, n_fail = run_correctness(frost, args.smoke, args.quick)
        print(f"correctness: {len(results) - n_fail}/{len(results)} cases ok")
        if args.smoke:
            sys.exit(1 if n_fail else 0)
        caught = checker_self_test(frost)
        det, graph_ok = determinism_and_graph(frost)
        summary = dict(cases=len(results), failed=n_fail, checker_catches=caught, deterministic=det, graph=graph_ok)
    records, table = ([], []) if args.no_bench or args.gqa_only else run_bench(frost, base, args.only)
    gqa_records, gqa_table = ([], []) if args.no_bench or args.only else run_gqa_bench(frost, base)
    records += gqa_records
    commit = commit_of()
    doc = {"suite": "sdpa_fwd", "date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
           "commit": commit, "versions": versions(), "records": records, "correctness": summary,
           "correctness_cases": results}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sdpa_fwd.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"summary: {summary}")
    if table:
        print(f"\n{'case':<28}{'frost':>8}{'f[base]':>9}{'f[n128]':>9}{'f[n176]':>9}{'f[sp1]':>9}{'f[sp3]':>9}"
              f"{'f[sp2]':>9}{'cuDNN':>8}{'FA2':>8}"
              f"{'frost/cuDNN':>12}")
        for r in table:
            def fmt(k):
                return f"{r[k]:.1f}" if k in r else "-"
            ratio = f"{r['frost'] / r['cudnn']:.3f}" if "frost" in r and "cudnn" in r else "-"
            print(f"{r['case']:<28}{fmt('frost'):>8}{fmt('frost[base]'):>9}{fmt('frost[TILE_N=128]'):>9}"
                  f"{fmt('frost[TILE_N=176]'):>9}"
                  f"{fmt('frost[SCHED_POLICY=1]'):>9}{fmt('frost[SCHED_POLICY=3]'):>9}{fmt('frost[SCHED_POLICY=2]'):>9}"
                  f"{fmt('cudnn'):>8}{fmt('fa2'):>8}{ratio:>12}")
    if gqa_table:
        print(f"\n{'case':<40}{'unit':>8}{'pack 0':>9}{'p0 sp4':>9}{'pack 1':>9}{'p1 sp3':>9}{'+n128':>9}{'base':>9}"
              f"{'cuDNN':>8}{'FA2':>8}")
        for r in gqa_table:
            def fmt(k):
                return f"{r[k]:.1f}" if k in r else "-"
            print(f"{r['case']:<40}{r['unit']:>8}{fmt('frost[PACK_GQA=0]'):>9}"
                  f"{fmt('frost[PACK_GQA=0 SCHED_POLICY=4]'):>9}{fmt('frost[PACK_GQA=1]'):>9}"
                  f"{fmt('frost[PACK_GQA=1 SCHED_POLICY=3]'):>9}"
                  f"{fmt('frost[PACK_GQA=1 SCHED_POLICY=3 TILE_N=128]'):>9}"
                  f"{fmt('frost[base PACK_GQA=1 SCHED_POLICY=3 TILE_N=128]'):>9}"
                  f"{fmt('cudnn'):>8}{fmt('fa2'):>8}")


if __name__ == "__main__":
    main()
