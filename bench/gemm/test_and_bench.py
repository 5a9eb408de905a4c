"""Correctness checks and benchmarks of frost's sm90 GEMM kernels against torch (cuBLAS / cuBLASLt).

Part (a): every dtype, layout and epilogue on odd shapes against a float64 reference, outputs
poisoned with NaN first (every element must be written, padding must stay untouched), declines
must name the attribute, CUDA-graph capture and replay. Part (b): timings with CUDA events, L2
flushed before every run, median of >= 20 runs, peers in the same process. Writes
$OUT/gemm.json (DESIGN.md section 6 schema) and prints a table last.
usage: python3 bench/gemm/test_and_bench.py [path/to/libfrost_gemm.so]
"""
import datetime
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_harness import (RECORDS, RESULTS, TABLE, add, bench, bench_many, check, dev, errors, fg, guarded,  # noqa: E402
                          guarded_bench, padding_intact, poisoned, rand, record, rel, versions, act_ref)
from frost_gemm_ctypes import interleave_gate_up  # noqa: E402
from timing import commit_of, time_bursts  # noqa: E402


# ----------------------------------------------------------------------------------------------
# (a) correctness
# ----------------------------------------------------------------------------------------------
@guarded
def dense_case(name, m, n, k, dt=torch.bfloat16, od=None, layout="kn", batch=0, ld=None, act="none", bias=False,
               resid=False, alpha=1.0, beta=0.0, clamp=None, broadcast=None, cfg=None):
    od = od or dt
    bshape = (batch,) if batch else ()
    a = rand(bshape + (m, k), dt)
    b = rand(bshape + (k, n), dt)
    if ld and layout[1] == "n":  # rows of B hold n values too: pad them to a 16-byte multiple as well
        b = rand(bshape + (k, ld), dt)[..., :n]
    if broadcast == "a":
        a = rand((m, k), dt).expand(batch, m, k)
    if broadcast == "b":
        b = rand((k, n), dt).expand(batch, k, n)
    if layout[0] == "m":  # column-major A: storage [k][m]
        a = a.transpose(-1, -2).contiguous().transpose(-1, -2) if broadcast != "a" else \
            rand((k, m), dt).t().expand(batch, m, k)
    if layout[1] == "k":  # K-contiguous B: storage [n][k]
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2) if broadcast != "b" else \
            rand((n, k), dt).t().expand(batch, k, n)
    d, dbase = poisoned(bshape + (m, n), od, ld or n)
    bias_t = rand((n,), torch.bfloat16 if od in (torch.float8_e4m3fn,) else od) if bias else None
    c = None
    if resid:
        c = rand(bshape + (m, ld or n), od)[..., :n]
    why = fg.gemm(a, b, d, alpha=alpha, bias=bias_t, c=c, beta=beta, act=act, clamp=clamp, cfg=cfg)
    if why:
        record(name, False, f"declined: {why}")
        return
    torch.cuda.synchronize()
    acc = torch.matmul(a.double(), b.double()) * alpha
    naive_acc = torch.matmul(a.float(), b.float()) * alpha
    outs = []
    for base_acc, prec in ((acc, torch.float64), (naive_acc, torch.float32)):
        z = base_acc.to(prec)
        if bias_t is not None:
            z = z + bias_t.to(prec)
        if c is not None:
            z = z + beta * c.to(prec)
        z = act_ref(z, act)
        if clamp:
            z = z.clamp(clamp[0], clamp[1])
        outs.append(z)
    ref, naive = outs[0], outs[1].to(od)
    check(name, d, ref, naive, written=not torch.isnan(d.float()).any().item() and padding_intact(dbase, n))


@guarded
def fp8_case(name, m, n, k, adt=torch.float8_e4m3fn, bdt=torch.float8_e4m3fn, od=torch.bfloat16, fast=False,
             amax=False, scale_d=None, bias=False, act="none"):
    a = (torch.randn(m, k, device=dev) * 2).to(adt)
    w = (torch.randn(n, k, device=dev) * 2).to(bdt)  # K-major B: W[n][k]
    b = w.t()
    da = torch.tensor([0.5], device=dev)
    db = torch.tensor([0.25], device=dev)
    sd = torch.tensor([scale_d], device=dev) if scale_d else None
    am = torch.full((1,), 12345.0, device=dev) if amax else None
    d = poisoned((m, n), od)
    bias_t = rand((n,), torch.bfloat16) if bias else None
    why = fg.gemm(a, b, d, descale_a=da, descale_b=db, scale_d=sd, amax=am, fast_accum=fast, bias=bias_t, act=act)
    if why:
        record(name, False, f"declined: {why}")
        return
    torch.cuda.synchronize()
    z = torch.matmul(a.double(), b.double()) * 0.125
    if bias_t is not None:
        z = z + bias_t.double()
    z = act_ref(z, act)
    zn = act_ref(torch.matmul(a.float(), b.float()) * 0.125 + (bias_t.float() if bias else 0), act)
    ref = z * (scale_d or 1.0)
    naive = (zn * (scale_d or 1.0)).to(od)
    check(name, d, ref, naive, floor_rel=(3e-3 if fast else 1e-4), written=not torch.isnan(d.float()).any().item())
    if amax:
        got, want = am.item(), z.abs().max().item()
        record(name + " amax", abs(got - want) <= 1e-2 * want, f"amax={got:.5g} ref={want:.5g}")


@guarded
def decline_case(name, expect_word, fn):
    why = fn()
    ok = why is not None and expect_word in why
    record(name, ok, f"reason: {why}")


def check_grouped(name, a, b, d, offs, scale):
    """Each expert's rows of d against scale * A rows @ B[g] in float64 (and the plain low-precision path); the rows
    past offsets[G] must still hold the poison."""
    torch.cuda.synchronize()
    o = offs.tolist()
    total, n = o[-1], d.shape[1]
    ref = torch.empty(total, n, dtype=torch.float64, device=dev)
    naive = torch.empty(total, n, dtype=torch.bfloat16, device=dev)
    for g in range(len(o) - 1):
        ref[o[g]:o[g + 1]] = scale * (a[o[g]:o[g + 1]].double() @ b[g].double())
        naive[o[g]:o[g + 1]] = (scale * (a[o[g]:o[g + 1]].float() @ b[g].float())).bfloat16()
    tail_ok = bool(torch.isnan(d[total:].float()).all().item())
    check(name, d[:total], ref, naive, written=tail_ok and not torch.isnan(d[:total].float()).any().item())


@guarded
def grouped_case(name, groups, n, k, counts, b_layout="kn", cfg=None):
    total = sum(counts)
    T = total + 5  # rows past offsets[G] must stay untouched
    a = rand((T, k), torch.bfloat16)
    b = rand((groups, k, n), torch.bfloat16)
    if b_layout == "kk":
        b = b.transpose(1, 2).contiguous().transpose(1, 2)
    offs = torch.tensor([0] + list(torch.tensor(counts).cumsum(0).tolist()), dtype=torch.int32, device=dev)
    d = poisoned((T, n), torch.bfloat16)
    why = fg.grouped(a, b, d, offs, alpha=0.5, cfg=cfg)
    if why:
        record(name, False, f"declined: {why}")
        return
    check_grouped(name, a, b, d, offs, 0.5)


@guarded
def grouped_fp8_case(name, groups, n, k, counts, descales=True):
    """e4m3 x e4m3 -> bf16 with FP32 promotion; B is K-major (FP8 wgmma reads K-major tiles only)."""
    total = sum(counts)
    T = total + 5  # rows past offsets[G] must stay untouched
    a = (torch.randn(T, k, device=dev) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(groups, n, k, device=dev) * 2).to(torch.float8_e4m3fn).transpose(1, 2)
    da, db = (torch.tensor(0.5, device=dev), torch.tensor(0.25, device=dev)) if descales else (None, None)
    scale = 0.125 if descales else 1.0
    offs = torch.tensor([0] + list(torch.tensor(counts).cumsum(0).tolist()), dtype=torch.int32, device=dev)
    d = poisoned((T, n), torch.bfloat16)
    why = fg.grouped(a, b, d, offs, descale_a=da, descale_b=db)
    if why:
        record(name, False, f"declined: {why}")
        return
    check_grouped(name, a, b, d, offs, scale)


@guarded
def swiglu_case(name, m, f, k, w_layout="kn", cfg=None):
    a = rand((m, k), torch.bfloat16)
    wg, wu = rand((k, f), torch.bfloat16), rand((k, f), torch.bfloat16)
    w = interleave_gate_up(wg, wu)
    if w_layout == "kk":
        w = w.t().contiguous().t()
    h = poisoned((m, f), torch.bfloat16)
    why = fg.swiglu(a, w, h, cfg=cfg)
    if why:
        record(name, False, f"declined: {why}")
        return
    torch.cuda.synchronize()
    ref = F.silu(a.double() @ wg.double()) * (a.double() @ wu.double())
    naive = (F.silu(a.float() @ wg.float()) * (a.float() @ wu.float())).bfloat16()
    check(name, h, ref, naive, written=not torch.isnan(h.float()).any().item())


@guarded
def graph_case(name):
    m, n, k = 300, 264, 520
    a, b = rand((m, k), torch.bfloat16), rand((k, n), torch.bfloat16)
    bias = rand((n,), torch.bfloat16)
    d = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
    assert fg.gemm(a, b, d, bias=bias, act="gelu") is None  # warm-up outside capture
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            why = fg.gemm(a, b, d, bias=bias, act="gelu")
    torch.cuda.current_stream().wait_stream(s)
    ok = why is None
    for _ in range(2):
        a.copy_(rand((m, k), torch.bfloat16))
        d.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ref = F.gelu(a.double() @ b.double() + bias.double())
        _, rel = errors(d, ref)
        ok = ok and rel < 1e-2 and not torch.isnan(d.float()).any().item()
    record(name, ok)


def correctness_dense():
    for (m, n, k, ld) in ((1, 1000, 72, None), (17, 136, 8, 144), (257, 264, 520, None), (1000, 1000, 1000, None),
                          (130, 520, 4104, 528), (128, 256, 64, None)):
        dense_case(f"bf16 kn m{m} n{n} k{k}" + (f" ld{ld}" if ld else ""), m, n, k, ld=ld)
    for lay in ("kk", "mn", "mk"):
        dense_case(f"bf16 {lay} m264 n264 k520", 264, 264, 520, layout=lay)  # M-major rows need m % 8 == 0
        dense_case(f"bf16 {lay} m1 n136 k8", 1, 136, 8, layout=lay)
    for lay in ("kn", "kk"):
        dense_case(f"fp16 {lay} m301 n200 k136", 301, 200, 136, dt=torch.float16, layout=lay)
    dense_case("bf16->fp32 kn m77 n312 k264", 77, 312, 264, od=torch.float32)
    for act in ("none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid"):
        dense_case(f"bf16 epilogue act={act} bias resid alpha beta m200 n328(ld336) k96", 200, 328, 96, ld=336, act=act,
                   bias=True, resid=True, alpha=0.7, beta=-1.3)
    dense_case("bf16 epilogue clamp[-0.5,0.75] bias", 150, 264, 72, bias=True, clamp=(-0.5, 0.75))
    # The short bias + activation epilogue (16-byte bias rows, n a multiple of 8): every activation with alpha, both B
    # layouts, m = 1 with k = 8, an activation without a bias (the cases above with a residual take the full tree).
    for act in ("none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid"):
        dense_case(f"bf16 bias+act {act} alpha kn m333 n1000 k136", 333, 1000, 136, act=act, bias=True, alpha=0.7)
    dense_case("bf16 bias+gelu kk m257 n264 k520", 257, 264, 520, layout="kk", act="gelu", bias=True)
    dense_case("bf16 gelu without bias m1 n136 k8", 1, 136, 8, act="gelu")
    dense_case("fp16 epilogue gelu bias resid", 150, 264, 72, dt=torch.float16, bias=True, resid=True, beta=0.5,
               act="gelu")
    dense_case("bf16->fp32 epilogue silu bias resid", 150, 264, 72, od=torch.float32, bias=True, resid=True, beta=2.0,
               act="silu")
    dense_case("bf16 batched b3 kn", 100, 136, 200, batch=3)
    dense_case("bf16 batched b3 kk resid", 100, 136, 200, batch=3, layout="kk", resid=True, beta=1.0)
    dense_case("bf16 batched b4 broadcast B (fold)", 50, 136, 200, batch=4, broadcast="b")
    dense_case("bf16 batched b3 broadcast A (per-batch launches)", 50, 136, 200, batch=3, broadcast="a")
    dense_case("bf16 pingpong 128x128 m300 n264 k520", 300, 264, 520, cfg={"tile_n": 128})
    dense_case("bf16 swizzle=4 m1000 n1000 k200", 1000, 1000, 200, cfg={"swizzle": 4})


def correctness_fp8():
    fp8_case("e4m3->bf16 m257 n264 k528 descales", 257, 264, 528)
    fp8_case("e4m3->bf16 m1 n136 k16", 1, 136, 16)
    fp8_case("e4m3->bf16 fast-accum m300 n264 k4096", 300, 264, 4096, fast=True)
    fp8_case("e4m3->bf16 precise m300 n264 k4096", 300, 264, 4096)
    fp8_case("e4m3->e4m3 scale_d amax m200 n272 k528", 200, 272, 528, od=torch.float8_e4m3fn, amax=True, scale_d=0.5)
    fp8_case("e4m3->bf16 bias relu amax", 200, 264, 528, bias=True, act="relu", amax=True)
    fp8_case("e5m2xe4m3->bf16 m200 n264 k528", 200, 264, 528, adt=torch.float8_e5m2)


def correctness_declines():
    a, b = rand((64, 64), torch.bfloat16), rand((64, 64), torch.bfloat16)
    d = torch.empty(64, 64, dtype=torch.bfloat16, device=dev)
    big = rand((64, 192), torch.bfloat16)
    decline_case("decline A with k stride 3", "a_stride_k", lambda: fg.gemm(big[:, ::3], b, d))
    decline_case("decline D column-major", "d_stride_n", lambda: fg.gemm(a, b, d.t()))
    decline_case("decline unaligned row stride (n=111 packed)", "=111",
                 lambda: fg.gemm(rand((64, 64), torch.bfloat16), rand((64, 111), torch.bfloat16),
                                 torch.empty(64, 111, dtype=torch.bfloat16, device=dev)))
    decline_case("decline fp8 with N-major B", "FP8", lambda: fg.gemm(
        a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn), d))
    decline_case("decline fp32 out with M-major A", "layout", lambda: fg.gemm(
        a.t(), b, torch.empty(64, 64, dtype=torch.float32, device=dev)))
    decline_case("decline split_k", "split_k", lambda: fg.gemm(a, b, d, cfg={"split_k": 4}))
    decline_case("decline tile 64x64", "tile", lambda: fg.gemm(a, b, d, cfg={"tile_m": 64, "tile_n": 64}))
    decline_case("decline stream_k on the ping-pong kernel", "stream_k 1",
                 lambda: fg.gemm(a, b, d, cfg={"tile_n": 128, "stream_k": 1}))
    decline_case("decline stream_k=2", "stream_k=2", lambda: fg.gemm(a, b, d, cfg={"stream_k": 2}))
    decline_case("decline stream_k with split_k 1", "split_k=1", lambda: fg.gemm(a, b, d, cfg={"stream_k": 1,
                                                                                              "split_k": 1}))


def correctness_moe():
    grouped_case("grouped G8 kn uneven (incl. 0 tokens)", 8, 264, 520, [300, 0, 17, 128, 1, 500, 0, 77])
    grouped_case("grouped G8 kk", 8, 256, 136, [130, 5, 0, 256, 31, 2, 300, 9], b_layout="kk")
    grouped_case("grouped G64", 64, 512, 256, [int(x) for x in torch.randint(0, 90, (64,))])
    # The cooperative 128x256 kernel's warpgroups split a tile's rows 0-63 / 64-127: experts whose last tile holds
    # 1-64, 65-127 and exactly 128 rows; one k-tile and several; 64 experts at n 2560 give each CTA 6-7 tiles.
    ends = [1, 64, 65, 127, 128, 129, 192, 193, 255, 256, 0, 17, 300, 2, 40, 100]
    grouped_case("grouped c128x256 G16 kn last tiles of 1-128 rows", 16, 264, 520, ends, cfg={"tile_n": 256})
    grouped_case("grouped c128x256 G16 kk last tiles, one k-tile", 16, 256, 64, ends, b_layout="kk",
                 cfg={"tile_n": 256})
    grouped_case("grouped c128x256 G64 kn last tiles, one k-tile", 64, 2560, 64, ends * 4,
                 cfg={"tile_n": 256})
    grouped_case("grouped c128x256 G64 kk last tiles, three k-tiles", 64, 1024, 192, ends * 4, b_layout="kk",
                 cfg={"tile_n": 256})
    # FP8 with the promotion overlapped: k-tile counts 1, 2, 3 (odd and even), a partial k-tile, experts of 0-300
    # rows, several tiles per CTA (64 experts at n 2560).
    for k in (128, 256, 384, 208):
        grouped_fp8_case(f"grouped e4m3 G16 k{k} last tiles of 1-128 rows", 16, 264, k, ends)
    grouped_fp8_case("grouped e4m3 G64 n2560 k512 several tiles per CTA", 64, 2560, 512, ends * 4)
    grouped_fp8_case("grouped e4m3 G8 no descales", 8, 136, 256, [300, 0, 17, 128, 1, 500, 0, 77], descales=False)
    for label, cfg in GROUPED_CFGS[2:]:
        grouped_case(f"grouped {label} G8 kn uneven", 8, 264, 520, [300, 0, 17, 128, 1, 500, 0, 77], cfg=cfg)
    grouped_case("grouped p128x128 G8 kk", 8, 256, 136, [130, 5, 0, 256, 31, 2, 300, 9], b_layout="kk",
                 cfg={"tile_n": 128})
    grouped_case("grouped p128x128 G64", 64, 512, 256, [int(x) for x in torch.randint(0, 200, (64,))],
                 cfg={"tile_n": 128})
    decline_case("decline grouped tile_n 192", "tile_n=192", lambda: fg.grouped(
        rand((8, 64), torch.bfloat16), rand((2, 64, 64), torch.bfloat16), torch.empty(8, 64, dtype=torch.bfloat16,
                                                                                     device=dev),
        torch.tensor([0, 4, 8], dtype=torch.int32, device=dev), cfg={"tile_n": 192}))
    swiglu_case("swiglu kn m300 f264 k520", 300, 264, 520)
    swiglu_case("swiglu kk m1 f136 k64", 1, 136, 64, w_layout="kk")
    swiglu_case("swiglu kn m129 f1000 k8", 129, 1000, 8)
    swiglu_case("swiglu pingpong 128x128 kn m300 f264 k520", 300, 264, 520, cfg={"tile_n": 128})
    swiglu_case("swiglu pingpong 128x128 kk m1000 f136 k72", 1000, 136, 72, w_layout="kk", cfg={"tile_n": 128})
    decline_case("decline swiglu f=100", "f=", lambda: fg.swiglu(
        rand((8, 64), torch.bfloat16), rand((64, 200), torch.bfloat16), torch.empty(8, 100, dtype=torch.bfloat16,
                                                                                   device=dev)))
    graph_case("cuda graph capture + replay with new inputs")


# ----------------------------------------------------------------------------------------------
# (b) benchmarks
# ----------------------------------------------------------------------------------------------
DENSE_CFGS = (("c128x256", {"tile_n": 256}), ("c128x256 sw4", {"tile_n": 256, "swizzle": 4}),
              ("p128x128", {"tile_n": 128}), ("p128x128 sw4", {"tile_n": 128, "swizzle": 4}))


def add_frost_rows(case, ms, oks, flops, prefix="frost "):
    """One record per checked frost configuration (timed in turns: ms by name); returns the fastest correct one."""
    best = None
    for label, ok in oks.items():
        r = add(case, prefix + label, ms[prefix + label], flops, ok)
        if ok and (best is None or r["ms"] < best["ms"]):
            best = r
    return best


def bench_dense(m, n, k, cfgs=DENSE_CFGS, b_kmajor=False):
    """cuBLAS and every frost configuration timed in turns (bench_many). b_kmajor: B is a W[n][k] weight."""
    case = f"bf16 m{m} n{n} k{k}" + (" B k-major" if b_kmajor else "")
    flops = 2.0 * m * n * k
    a = rand((m, k), torch.bfloat16)
    b = rand((n, k), torch.bfloat16).t() if b_kmajor else rand((k, n), torch.bfloat16)
    ref = torch.matmul(a, b)
    d = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
    fns, oks = {"cublas": lambda: torch.matmul(a, b)}, {}
    for label, cfg in cfgs:
        d.fill_(float("nan"))
        why = fg.gemm(a, b, d, cfg=cfg)
        if why:
            add(case, f"frost {label}", None, flops, False, why)
            continue
        oks[label] = rel(d, ref) < 1e-2
        fns[f"frost {label}"] = lambda cfg=cfg: fg.gemm(a, b, d, cfg=cfg)
    ms = bench_many(fns)
    peer = add(case, "cublas", ms["cublas"], flops, True)
    TABLE.append((case, add_frost_rows(case, ms, oks, flops), peer))


FP8_VARIANTS = (("descales", {}, True), ("descales sw4", {"swizzle": 4}, True), ("alpha-only", {}, False),
                ("alpha-only sw4", {"swizzle": 4}, False))


# Precise FP8 tiles: 128x128 (promotion overlapped with the MMAs) and 128x192 (CUTLASS's promotion).
FP8_PRECISE_VARIANTS = (("t128 alpha-only", {"tile_n": 128}, False), ("t128 descales", {"tile_n": 128}, True),
                        ("t128 sw4 descales", {"tile_n": 128, "swizzle": 4}, True),
                        ("t128 data-parallel descales", {"tile_n": 128, "split_k": 1}, True),
                        ("t128 data-parallel sw4 descales", {"tile_n": 128, "split_k": 1, "swizzle": 4}, True),
                        ("t192 descales", {"tile_n": 192}, True), ("default descales", {}, True))
FP8_FAST_VARIANTS = (("descales", {}, True), ("alpha-only", {}, False))


def bench_fp8(m, n, k, variants=FP8_VARIANTS, fast_variants=None):
    flops = 2.0 * m * n * k
    a = (torch.randn(m, k, device=dev)).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device=dev)).to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device=dev)
    d = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
    for fast in (False, True):
        if fast and fast_variants is not None:
            variants = fast_variants
        case = f"fp8 e4m3 m{m} n{n} k{k}" + (" fast-accum" if fast else "")
        ref = torch._scaled_mm(a, w.t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=fast)
        fns, oks = {"cublaslt": lambda fast=fast: torch._scaled_mm(a, w.t(), one, one, out_dtype=torch.bfloat16,
                                                                   use_fast_accum=fast)}, {}
        for label, cfg, sc in variants:
            kw = {"descale_a": one.view(1), "descale_b": one.view(1)} if sc else {}
            d.fill_(float("nan"))
            why = fg.gemm(a, w.t(), d, fast_accum=fast, cfg=cfg, **kw)
            if why:
                add(case, f"frost {label}", None, flops, False, why)
                continue
            oks[label] = rel(d, ref) < 2e-2
            fns[f"frost {label}"] = lambda fast=fast, cfg=cfg, kw=kw: fg.gemm(a, w.t(), d, fast_accum=fast, cfg=cfg,
                                                                              **kw)
        ms = bench_many(fns)
        peer = add(case, "cublaslt", ms["cublaslt"], flops, True)
        TABLE.append((case, add_frost_rows(case, ms, oks, flops), peer))


def mlp_inputs(T, H, Fd):
    """x [T, H] and the MLP's gate, up and down weights, scaled so every stage stays of order one."""
    x = rand((T, H), torch.bfloat16)
    wg, wu = rand((H, Fd), torch.bfloat16, 0.02), rand((H, Fd), torch.bfloat16, 0.02)
    return x, wg, wu, rand((Fd, H), torch.bfloat16, 0.02)


def bench_swiglu(T, H, Fd):
    """The MLP (gate/up, SwiGLU, down) against PyTorch's two unfused forms, all timed in turns (bench_many):
    frost's fused gate/up GEMM on each SwiGLU kernel followed by the down GEMM (ping-pong 128x128 or cooperative
    128x256 on the stream-K scheduler); and, in the same rounds, the two halves alone on both sides, with the plain
    GEMM of the gate/up shape (no SwiGLU epilogue) as the ceiling of the fused one."""
    case = f"swiglu mlp T{T} H{H} F{Fd}"
    flops = 6.0 * T * H * Fd
    x, wg, wu, wd = mlp_inputs(T, H, Fd)
    w_cat = torch.cat([wg, wu], dim=1)
    w_int = interleave_gate_up(wg, wu)

    def gate_up_cat():
        g, u = (x @ w_cat).chunk(2, dim=1)
        return F.silu(g) * u

    h = torch.empty(T, Fd, dtype=torch.bfloat16, device=dev)
    y = torch.empty(T, H, dtype=torch.bfloat16, device=dev)
    gu = torch.empty(T, 2 * Fd, dtype=torch.bfloat16, device=dev)
    h_ref = gate_up_cat()
    ref = h_ref @ wd
    fns = {"torch unfused (2 GEMMs)": lambda: (F.silu(x @ wg) * (x @ wu)) @ wd,
           "torch unfused (gate_up GEMM + chunk)": lambda: gate_up_cat() @ wd,
           "torch gate/up": gate_up_cat, "torch down": lambda: h_ref @ wd}
    down_sk = {"tile_n": 256, "stream_k": 1, "swizzle": 4}
    oks = {}
    for label, cfg, down in (("default", {}, None), ("c256 sw4", {"tile_n": 256, "swizzle": 4}, {"swizzle": 4}),
                             ("p128 sw4", {"tile_n": 128, "swizzle": 4}, {"swizzle": 4}),
                             ("p128 sw4, down c256 stream-K", {"tile_n": 128, "swizzle": 4}, down_sk)):
        y.fill_(float("nan"))
        why = fg.swiglu(x, w_int, h, cfg=cfg) or fg.gemm(h, wd, y, cfg=down)
        if why:
            add(case, f"frost fused {label}", None, flops, False, why)
            continue
        oks[label] = rel(y, ref) < 2e-2
        fns[f"frost fused {label}"] = lambda cfg=cfg, down=down: (fg.swiglu(x, w_int, h, cfg=cfg),
                                                                 fg.gemm(h, wd, y, cfg=down))
    # The halves alone: (name, fn, output, reference) per frost configuration; no output: timed, not checked.
    halves = {"gate/up": [("frost gate/up p128 sw4", lambda: fg.swiglu(x, w_int, h, cfg={"tile_n": 128, "swizzle": 4}),
                           h, h_ref)],
              "down": [(f"frost down {lab}", lambda c=c: fg.gemm(h_ref, wd, y, cfg=c), y, ref)
                       for lab, c in (("p128 sw4", {"swizzle": 4}), ("c256 sw4", {"tile_n": 256, "swizzle": 4}),
                                      ("c256 stream-K sw4", down_sk))],
              "gate/up GEMM alone": [("frost plain GEMM p128 sw4", lambda: fg.gemm(x, w_int, gu, cfg={"swizzle": 4}),
                                      None, None)]}
    half_ok = {}
    for half, rows in halves.items():
        for name, fn, out, want in rows:
            if out is not None:
                out.fill_(float("nan"))
            why = fn()
            if why:
                add(f"swiglu mlp {half} T{T} H{H} F{Fd}", name, None, flops, False, why)
                continue
            half_ok[name] = out is None or rel(out, want) < 2e-2
            fns[name] = fn
    ms = bench_many(fns)
    torch_mlp = [n for n in fns if n.startswith("torch unfused")]
    peer = min((add(case, n, ms[n], flops, True) for n in torch_mlp), key=lambda r: r["ms"])
    TABLE.append((case, add_frost_rows(case, ms, oks, flops, "frost fused "), peer))
    for half, half_flops, torch_name in (("gate/up", 4.0 * T * H * Fd, "torch gate/up"),
                                         ("down", 2.0 * T * H * Fd, "torch down"),
                                         ("gate/up GEMM alone", 4.0 * T * H * Fd, "torch gate/up")):
        half_case = f"swiglu mlp {half} T{T} H{H} F{Fd}"
        rows = [add(half_case, name, ms[name], half_flops, half_ok[name]) for name, *_ in halves[half] if name in ms]
        best = min((r for r in rows if r["ok"]), key=lambda r: r["ms"], default=None)
        TABLE.append((half_case, best, add(half_case, torch_name, ms[torch_name], half_flops, True)))


BURST_SHAPES = ((8192, 8192, 8192), (16384, 14336, 4096), (16384, 4096, 14336), (4096, 4096, 4096))


def checked_once(fns, out, ref, done):
    """{name: correct} for callables that write out: each runs once on a NaN-poisoned out, returns done (the
    launchers' success value) and matches ref within 1e-2 relative."""
    ok = {}
    for name, fn in fns.items():
        out.fill_(float("nan"))
        ok[name] = fn() == done and rel(out, ref) < 1e-2
    return ok


def bench_bursts(T, H, Fd, shapes=BURST_SHAPES):
    """The MLP and the bf16 target GEMMs against torch in short bursts after idle gaps (time_bursts), frost on
    the ping-pong 128x128 and cooperative 128x256 configurations: the regime of a GPU below its power limit."""
    x, wg, wu, wd = mlp_inputs(T, H, Fd)
    w_int = interleave_gate_up(wg, wu)
    h = torch.empty(T, Fd, dtype=torch.bfloat16, device=dev)
    y = torch.empty(T, H, dtype=torch.bfloat16, device=dev)
    down = {"tile_n": 256, "stream_k": 1, "swizzle": 4}
    # The engine's first choice (ping-pong 128x128 SwiGLU) and the cooperative 128x256 one beside it.
    mlp = {f"frost fused {name} sw4, down c256 stream-K": (lambda tn=tn: (
        fg.swiglu(x, w_int, h, cfg={"tile_n": tn, "swizzle": 4}), fg.gemm(h, wd, y, cfg=down)))
        for name, tn in (("p128", 128), ("c256", 256))}
    torch_mlp = lambda: (F.silu(x @ wg) * (x @ wu)) @ wd  # noqa: E731
    ok = checked_once(mlp, y, torch_mlp(), (None, None))
    ms = time_bursts({"torch unfused (2 GEMMs)": torch_mlp, **mlp})
    case = f"swiglu mlp bursts T{T} H{H} F{Fd}"
    flops = 6.0 * T * H * Fd
    peer = add(case, "torch unfused (2 GEMMs)", ms["torch unfused (2 GEMMs)"], flops, True)
    TABLE.append((case, add_frost_rows(case, ms, ok, flops, prefix=""), peer))
    for m, n, k in shapes:
        a, b = rand((m, k), torch.bfloat16), rand((k, n), torch.bfloat16)
        d = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
        plain = {f"frost {name}": (lambda cfg=cfg, a=a, b=b, d=d: fg.gemm(a, b, d, cfg=cfg))
                 for name, cfg in TARGET_CFGS if name != "default"}
        ok = checked_once(plain, d, a @ b, None)
        ms = time_bursts({"cublas": lambda a=a, b=b: a @ b, **plain})
        case = f"bf16 m{m} n{n} k{k} bursts"
        flops = 2.0 * m * n * k
        TABLE.append((case, add_frost_rows(case, ms, ok, flops, prefix=""),
                      add(case, "cublas", ms["cublas"], flops, True)))


GROUPED_CFGS = (("default", {}), ("c128x256", {"tile_n": 256}), ("p128x128", {"tile_n": 128}))


def routed_offsets(G, T):
    """Uneven routing of T rows over G experts: shares uniform in [0.5, 1.5] of T / G, seeded by G."""
    gen = torch.Generator().manual_seed(G)
    share = torch.rand(G, generator=gen) + 0.5
    counts = (share / share.sum() * T).floor().long()
    counts[0] += T - counts.sum()
    return torch.tensor([0] + counts.cumsum(0).tolist(), dtype=torch.int32, device=dev)


def bench_grouped(G, T, n, k, cfgs=GROUPED_CFGS):
    """Every grouped configuration, a dense cuBLAS GEMM of equal FLOPs and torch's per-expert loop, in turns."""
    case = f"grouped bf16 G{G} T{T} n{n} k{k}"
    flops = 2.0 * T * n * k
    offs = routed_offsets(G, T)
    a = rand((T, k), torch.bfloat16)
    b = rand((G, k, n), torch.bfloat16)
    d = torch.empty(T, n, dtype=torch.bfloat16, device=dev)
    o = offs.tolist()
    bd = rand((k, n), torch.bfloat16)
    fns = {"cublas dense equal-FLOP": lambda: torch.matmul(a, bd),
           "torch per-expert loop": lambda: [torch.matmul(a[o[g]:o[g + 1]], b[g]) for g in range(G)]}
    oks = {}
    for label, cfg in cfgs:
        d.fill_(float("nan"))
        why = fg.grouped(a, b, d, offs, cfg=cfg)
        if why:
            add(case, f"frost {label}", None, flops, False, why)
            continue
        oks[label] = all(rel(d[o[g]:o[g + 1]], a[o[g]:o[g + 1]] @ b[g]) < 1e-2 for g in range(G) if o[g + 1] > o[g])
        fns[f"frost {label}"] = lambda cfg=cfg: fg.grouped(a, b, d, offs, cfg=cfg)
    ms = bench_many(fns)
    dense = add(case, "cublas dense equal-FLOP", ms["cublas dense equal-FLOP"], flops, True)
    add(case, "torch per-expert loop", ms["torch per-expert loop"], flops, True)
    TABLE.append((case, add_frost_rows(case, ms, oks, flops), dense))


def bench_grouped_fp8(G, T, n, k):
    """Grouped e4m3 -> bf16 with both descales (FP32 promotion) against cuBLASLt's dense e4m3 GEMM of equal FLOPs
    with FP32 accumulation (torch._scaled_mm, per-tensor scales), in turns."""
    case = f"grouped e4m3 G{G} T{T} n{n} k{k}"
    flops = 2.0 * T * n * k
    offs = routed_offsets(G, T)
    o = offs.tolist()
    a = torch.randn(T, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(G, n, k, device=dev).to(torch.float8_e4m3fn).transpose(1, 2)  # [G, k, n], K contiguous
    da, db = torch.tensor(0.5, device=dev), torch.tensor(0.25, device=dev)
    d = torch.full((T, n), float("nan"), dtype=torch.bfloat16, device=dev)
    bd = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
    fns = {"cublaslt dense equal-FLOP": lambda: torch._scaled_mm(a, bd, scale_a=da, scale_b=db,
                                                                 out_dtype=torch.bfloat16)}
    why = fg.grouped(a, b, d, offs, descale_a=da, descale_b=db)
    if why:
        add(case, "frost", None, flops, False, why)
        return
    ok = all(rel(d[o[g]:o[g + 1]], (a[o[g]:o[g + 1]].float() @ b[g].float()) * 0.125) < 1e-2
             for g in range(G) if o[g + 1] > o[g])
    fns["frost"] = lambda: fg.grouped(a, b, d, offs, descale_a=da, descale_b=db)
    ms = bench_many(fns)
    dense = add(case, "cublaslt dense equal-FLOP", ms["cublaslt dense equal-FLOP"], flops, True)
    TABLE.append((case, add(case, "frost", ms["frost"], flops, ok), dense))


def bench_epilogue(m, n, k):
    """Fused bias + GELU epilogue vs torch's addmm + gelu (two kernels) on the same inputs."""
    case = f"bf16 m{m} n{n} k{k} +bias+gelu"
    flops = 2.0 * m * n * k
    a, b = rand((m, k), torch.bfloat16), rand((k, n), torch.bfloat16)
    bias = rand((n,), torch.bfloat16)
    ref = F.gelu(torch.addmm(bias, a, b))
    peer = add(case, "torch addmm+gelu", bench(lambda: F.gelu(torch.addmm(bias, a, b))), flops, True)
    d = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
    best = None
    # Default: the short bias + activation epilogue (128x128 ping-pong); tile_n 256 forces the full tree.
    for label, cfg in (("fused", {}), ("tree 128x256", {"tile_n": 256})):
        why = fg.gemm(a, b, d, bias=bias, act="gelu", cfg=cfg)
        if why:
            add(case, f"frost {label}", None, flops, False, why)
            continue
        ok = rel(d, ref) < 1e-2
        r = add(case, f"frost {label}", bench(lambda: fg.gemm(a, b, d, bias=bias, act="gelu", cfg=cfg)), flops, ok)
        if ok and (best is None or r["ms"] < best["ms"]):
            best = r
    TABLE.append((case, best, peer))


def correctness_plain():
    """The stock-epilogue fast path: plain GEMMs of every instantiated plain kind, odd shapes."""
    for (m, n, k) in ((1, 1000, 72), (17, 136, 8), (257, 264, 520), (1000, 1000, 1000), (130, 520, 4104)):
        dense_case(f"plain bf16 kn m{m} n{n} k{k}", m, n, k)
        dense_case(f"plain bf16 kk m{m} n{n} k{k} alpha", m, n, k, layout="kk", alpha=0.5)
    dense_case("plain bf16 batched b3 kn", 100, 136, 200, batch=3)
    dense_case("plain bf16 batched b4 broadcast B (fold)", 50, 136, 200, batch=4, broadcast="b")
    dense_case("plain bf16 swizzle=4 m1000 n1000 k200", 1000, 1000, 200, cfg={"swizzle": 4})
    # The default is ping-pong 128x128; the cooperative 128x256 kernels stay selectable (TILE_N=256).
    for (m, n, k) in ((1, 1000, 72), (257, 264, 520), (130, 520, 4104)):
        dense_case(f"plain bf16 kn c128x256 m{m} n{n} k{k}", m, n, k, cfg={"tile_n": 256})
        dense_case(f"plain bf16 kk c128x256 m{m} n{n} k{k} alpha", m, n, k, layout="kk", alpha=0.5,
                   cfg={"tile_n": 256})
    dense_case("plain bf16 kk batched b3 m100 n136 k200", 100, 136, 200, batch=3, layout="kk")
    for fast in (False, True):
        for (m, n, k) in ((257, 264, 528), (1, 136, 16), (300, 264, 4096)):
            fp8_plain_case(f"plain e4m3->bf16 {'fast ' if fast else ''}m{m} n{n} k{k}", m, n, k, fast)
    # Precise tiles 128 (overlapped promotion: k-tile counts 1, 2, 3 and odd/even, several tiles per CTA) and 192,
    # with and without descales.
    for label, cfg in (("t128", {"tile_n": 128}), ("t192", {"tile_n": 192})):
        for (m, n, k) in ((257, 264, 128), (300, 264, 256), (300, 392, 384), (1, 136, 4112), (2000, 1800, 1152)):
            for sc in (False, True):
                fp8_plain_case(f"plain e4m3->bf16 {label} {'descales ' if sc else ''}m{m} n{n} k{k}", m, n, k, False,
                               cfg=cfg, descales=sc)
    fp8_plain_case("plain e4m3->bf16 fast descales m300 n264 k4096", 300, 264, 4096, True, descales=True)
    # Stream-K on the 128x128 precise kernel: 133 and 160 tiles (one wave of 132 and a small tail) with 16 and 13
    # k-tiles, so the tail's k-loops are split over CTAs and reduced; split_k 1 is the data-parallel path.
    for (m, n, k) in ((896, 2432, 2048), (900, 2440, 1552)):
        for split in (0, 1):
            fp8_plain_case(f"plain e4m3->bf16 t128 split_k={split} descales m{m} n{n} k{k}", m, n, k, False,
                           cfg={"tile_n": 128, "split_k": split}, descales=True)
    # Stream-K on the cooperative bf16 128x256 kernels, forced (STREAM_K=1): 81 tiles (all split), 306 tiles (one
    # data-parallel wave, the rest split) with a k tail, K-major B, a batch.
    sk = {"tile_n": 256, "stream_k": 1}
    dense_case("plain bf16 kn c256 stream-K m1100 n2304 k3000", 1100, 2304, 3000, cfg=sk)
    dense_case("plain bf16 kn c256 stream-K sw4 m2200 n4352 k1000", 2200, 4352, 1000, cfg={**sk, "swizzle": 4})
    dense_case("plain bf16 kk c256 stream-K m2200 n4352 k1000 alpha", 2200, 4352, 1000, layout="kk", alpha=0.5, cfg=sk)
    dense_case("plain bf16 kn c256 stream-K batched b3 m300 n520 k2000", 300, 520, 2000, batch=3, cfg=sk)
    for act in ("none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid"):
        dense_case(f"fused bf16 kn act={act} bias resid alpha beta m200 n336 k96", 200, 336, 96, act=act, bias=True,
                   resid=True, alpha=0.7, beta=-1.3)
    dense_case("fused bf16 kn clamp[-0.5,0.75] bias m150 n264 k72", 150, 264, 72, bias=True, clamp=(-0.5, 0.75))
    dense_case("fused bf16 kn gelu bias m1 n1000 k72", 1, 1000, 72, bias=True, act="gelu")
    dense_case("fused bf16 kn batched b3 silu resid", 100, 136, 200, batch=3, resid=True, beta=1.0, act="silu")
    d = torch.empty(17, 120, dtype=torch.bfloat16, device=dev)
    decline_case("decline n=111 (contiguous extent not 16-byte whole)", "n=111", lambda: fg.gemm(
        rand((17, 8), torch.bfloat16), rand((8, 120), torch.bfloat16)[:, :111], d[:, :111]))


@guarded
def fp8_plain_case(name, m, n, k, fast, cfg=None, descales=False):
    a = (torch.randn(m, k, device=dev) * 2).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device=dev) * 2).to(torch.float8_e4m3fn)
    d = poisoned((m, n), torch.bfloat16)
    # With descales: descale_a 0.5 * descale_b 0.25 (device scalars); without: alpha 0.125 alone.
    kw = {"alpha": 1.0, "descale_a": torch.tensor([0.5], device=dev), "descale_b": torch.tensor([0.25], device=dev)} \
        if descales else {"alpha": 0.125}
    why = fg.gemm(a, w.t(), d, fast_accum=fast, cfg=cfg, **kw)
    if why:
        record(name, False, f"declined: {why}")
        return
    torch.cuda.synchronize()
    ref = torch.matmul(a.double(), w.t().double()) * 0.125
    naive = (torch.matmul(a.float(), w.t().float()) * 0.125).bfloat16()
    check(name, d, ref, naive, floor_rel=(3e-3 if fast else 1e-4), written=not torch.isnan(d.float()).any().item())


PLAIN_CFGS = (("c128x256", {"tile_n": 256}), ("c128x256 sw4", {"tile_n": 256, "swizzle": 4}))
# The shapes of the bf16 and FP8 targets, every plain configuration: tile and raster swizzle.
TARGET_CFGS = (("default", {}), ("default sw4", {"swizzle": 4}), ("c128x256 sw4", {"tile_n": 256, "swizzle": 4}),
               ("c128x256 stream-K", {"tile_n": 256, "stream_k": 1}),
               ("c128x256 stream-K sw4", {"tile_n": 256, "stream_k": 1, "swizzle": 4}))
PARTS = {
    "plain": [correctness_plain],
    "bench_plain": [lambda: guarded_bench(bench_dense, 8192, 8192, 8192, PLAIN_CFGS),
                    lambda: guarded_bench(bench_dense, 16384, 14336, 4096, PLAIN_CFGS),
                    lambda: guarded_bench(bench_dense, 4096, 4096, 4096, PLAIN_CFGS),
                    lambda: guarded_bench(bench_fp8, 8192, 8192, 8192, FP8_VARIANTS[2:3]),
                    lambda: guarded_bench(bench_epilogue, 8192, 8192, 8192)],
    "bench_targets": [lambda: guarded_bench(bench_dense, 8192, 8192, 8192, TARGET_CFGS),
                      lambda: guarded_bench(bench_dense, 16384, 14336, 4096, TARGET_CFGS),
                      lambda: guarded_bench(bench_dense, 16384, 4096, 14336, TARGET_CFGS),
                      lambda: guarded_bench(bench_dense, 4096, 4096, 4096, TARGET_CFGS),
                      lambda: guarded_bench(bench_dense, 8192, 8192, 8192, TARGET_CFGS, True),
                      lambda: guarded_bench(bench_dense, 16384, 14336, 4096, TARGET_CFGS, True),
                      lambda: guarded_bench(bench_fp8, 8192, 8192, 8192, FP8_PRECISE_VARIANTS, FP8_FAST_VARIANTS)],
    "dense": [correctness_dense],
    "fp8": [correctness_fp8],
    "declines": [correctness_declines],
    "moe": [correctness_moe],
    "bench_dense": [lambda: guarded_bench(bench_epilogue, 8192, 8192, 8192),
                    lambda: guarded_bench(bench_dense, 8192, 8192, 8192),
                    lambda: guarded_bench(bench_dense, 16384, 14336, 4096),
                    lambda: guarded_bench(bench_dense, 4096, 4096, 4096),
                    lambda: guarded_bench(bench_fp8, 8192, 8192, 8192)],
    "bench_swiglu": [lambda: guarded_bench(bench_swiglu, 8192, 4096, 14336)],
    "bench_bursts": [lambda: guarded_bench(bench_bursts, 8192, 4096, 14336)],
    "bench_moe": [lambda: guarded_bench(bench_swiglu, 8192, 4096, 14336),
                  lambda: guarded_bench(bench_grouped, 8, 16384, 14336, 4096),
                  lambda: guarded_bench(bench_grouped, 64, 32768, 4096, 4096)],
    "bench_grouped": [lambda: guarded_bench(bench_grouped, 8, 16384, 14336, 4096),
                      lambda: guarded_bench(bench_grouped, 64, 32768, 4096, 4096),
                      lambda: guarded_bench(bench_grouped, 16, 16384, 4096, 4096),
                      lambda: guarded_bench(bench_grouped, 64, 65536, 14336, 4096),
                      lambda: guarded_bench(bench_grouped, 32, 8192, 4096, 4096)],
    "bench_grouped_fp8": [lambda: guarded_bench(bench_grouped_fp8, 8, 16384, 14336, 4096),
                          lambda: guarded_bench(bench_grouped_fp8, 64, 32768, 4096, 4096),
                          lambda: guarded_bench(bench_grouped_fp8, 16, 16384, 4096, 4096),
                          lambda: guarded_bench(bench_grouped_fp8, 64, 65536, 14336, 4096),
                          lambda: guarded_bench(bench_grouped_fp8, 32, 8192, 4096, 4096)],
}
PART_DIR = os.environ.get("GEMM_PART_DIR", "/tmp/gemm_parts")


def run_part(part):
    """Each part runs in its own process (device_run.sh), so a crashing kernel cannot hide the others."""
    torch.manual_seed(hash(part) % 1000)
    print(f"== {part}", flush=True)
    for fn in PARTS[part]:
        fn()
    os.makedirs(PART_DIR, exist_ok=True)
    table = [[c, r, p] for c, r, p in TABLE]
    with open(os.path.join(PART_DIR, part + ".json"), "w") as f:
        json.dump({"records": RECORDS, "results": RESULTS, "table": table}, f)
    print(f"== {part}: {RESULTS['pass']} passed, {RESULTS['fail']} failed", flush=True)


def report():
    records, results, table = [], {"pass": 0, "fail": 0, "failures": []}, []
    wanted = os.environ.get("GEMM_PARTS", " ".join(PARTS)).split()
    for part in wanted:
        path = os.path.join(PART_DIR, part + ".json")
        if not os.path.exists(path):
            results["fail"] += 1
            results["failures"].append(f"part {part} did not finish (crash or timeout)")
            continue
        with open(path) as f:
            got = json.load(f)
        records += got["records"]
        table += got["table"]
        for key in ("pass", "fail"):
            results[key] += got["results"][key]
        results["failures"] += got["results"]["failures"]
    out = {"suite": "gemm", "date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
           "commit": commit_of(), "versions": versions(), "records": records,
           "correctness": results}
    path = os.path.join(os.environ.get("OUT", "."), "gemm.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")
    print(f"correctness: {results['pass']} passed, {results['fail']} failed")
    if results["failures"]:
        print("FAILURES:\n  " + "\n  ".join(results["failures"]))
    print(f"\n{'case':44s} {'frost TFLOP/s':>26s} {'peer TFLOP/s':>30s} {'ratio':>6s}")
    for case, r, p in table:
        fs = f"{r['value']:7.1f} ({r['impl'][6:]})" if r else "n/a"
        ps = f"{p['value']:7.1f} ({p['impl']})"
        ratio = f"{r['value'] / p['value']:.3f}" if r else "-"
        print(f"{case:44s} {fs:>26s} {ps:>30s} {ratio:>6s}")


def main():
    part = sys.argv[2] if len(sys.argv) > 2 else "all"
    if part == "report":
        report()
    elif part == "all":
        for p in PARTS:
            run_part(p)
        report()
    else:
        run_part(part)


if __name__ == "__main__":
    main()
