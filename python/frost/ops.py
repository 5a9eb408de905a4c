"""Functional ops over frost graphs: call with arrays, get arrays back.

Each call builds (once per distinct shape, layout, dtype, device and attribute set) a graph, keeps it
in a process-wide cache and executes it on the caller's buffers. Inputs are anything with
``__dlpack__`` (torch, numpy, cupy); outputs are allocated with the inputs' library on their device
(numpy and torch inputs; others pass ``out=``). Statistics are FP32.
"""

import collections
import math
import sys
import threading

from . import _buffers, _dtypes, _frost
from ._errors import FrostError
from ._pygraph import pygraph

FLOAT = _frost.data_type.FLOAT
_CACHE_SIZE = 256
_cache = collections.OrderedDict()
_cache_lock = threading.Lock()
_counters = {"hits": 0, "misses": 0}
_handles = {}

CacheStats = collections.namedtuple("CacheStats", "hits misses size maxsize")


def cache_info():
    """Number of graphs the functional ops hold built."""
    return len(_cache)


def cache_stats():
    """Hits and misses of the graph cache since the last clear_cache(), its size and bound."""
    with _cache_lock:
        return CacheStats(_counters["hits"], _counters["misses"], len(_cache), _CACHE_SIZE)


def clear_cache():
    with _cache_lock:
        _cache.clear()
        _counters["hits"] = _counters["misses"] = 0


def _describe(x):
    """(shape, strides, frost dtype, (DLPack device type, device id)) of an array: the cache key's part."""
    tensor_type = _torch_tensor_type()
    if tensor_type is not None and isinstance(x, tensor_type):
        dtype = _dtypes.torch_maps()[1].get(x.dtype)
        if dtype is not None:
            device = x.get_device()
            where = (_buffers.DL_CUDA, device) if device >= 0 else (_buffers.DL_CPU, 0)
            return tuple(x.shape), x.stride(), dtype, where
    described = _buffers.info(x)
    if described is None:
        raise TypeError(f"expected an array with __dlpack__, got {type(x).__name__}")
    _ptr, shape, strides, code, bits, lanes, device_type, device_id = described
    dtype = _dtypes.from_dlpack(code, bits, lanes)
    if dtype is None:
        raise TypeError(f"frost has no data type for {_dtypes.dlpack_name(code, bits, lanes)}")
    return tuple(shape), tuple(strides), dtype, (device_type, device_id)


def _torch_tensor_type():
    torch = sys.modules.get("torch")
    return torch.Tensor if torch is not None else None


def _handle(device, x):
    """The cached handle of a device; for a torch CUDA tensor, set to torch's current stream of its device so
    frost's work is ordered with torch's, with no synchronization."""
    device_type, device_id = device
    handle = _handles.get(device)
    if handle is None:
        handle = _handles[device] = _frost.create_handle(
            f"cuda:{device_id}" if device_type == _buffers.DL_CUDA else "cpu"
        )
    if device_type == _buffers.DL_CUDA and type(x).__module__.startswith("torch"):
        _frost.set_stream(handle, _torch_stream(device_id))
    return handle


def _torch_stream(device_id):
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device_id)
    return torch.cuda.current_stream(device_id).cuda_stream


def _empty(like, shape, dtype):
    """A new row-major array of `shape` and frost `dtype` from the library (and device) of `like`."""
    module = type(like).__module__.split(".")[0]
    if module == "torch":
        import torch

        torch_types = {
            FLOAT: torch.float32,
            _frost.data_type.HALF: torch.float16,
            _frost.data_type.BFLOAT16: torch.bfloat16,
            _frost.data_type.DOUBLE: torch.float64,
            _frost.data_type.UINT8: torch.uint8,
        }
        return torch.empty(shape, dtype=torch_types[dtype], device=like.device)
    if module in ("numpy", "cupy"):
        xp = __import__(module)
        numpy_types = {
            FLOAT: "float32",
            _frost.data_type.HALF: "float16",
            _frost.data_type.DOUBLE: "float64",
            _frost.data_type.UINT8: "uint8",
        }
        if dtype not in numpy_types:
            raise TypeError(f"{module} has no {dtype.name} arrays: pass out=")
        return xp.empty(shape, dtype=numpy_types[dtype])
    raise TypeError(f"cannot allocate outputs like a {type(like).__name__}: pass out=")


def _cached(key, make):
    with _cache_lock:
        entry = _cache.get(key)
        if entry is not None:
            _cache.move_to_end(key)
            _counters["hits"] += 1
            return entry
        _counters["misses"] += 1
    entry = make()
    with _cache_lock:
        _cache[key] = entry
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return entry


def _wide(io_type):
    """Type of statistics and weight gradients: FP32, or FP64 for FP64 data (which also computes in FP64)."""
    return _frost.data_type.DOUBLE if io_type == _frost.data_type.DOUBLE else FLOAT


def _new_graph(io_type, handle):
    wide = _wide(io_type)
    return pygraph(io_data_type=io_type, intermediate_data_type=wide, compute_data_type=wide, handle=handle)


def _declare(g, described, name):
    shape, strides, dtype, _device = described
    return g.tensor(name=name, dim=shape, stride=strides, data_type=dtype)


def _row_major(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return list(reversed(strides))


def _run(entry, buffers, handle):
    g, tensors = entry
    workspace = None
    size = g.get_workspace_size()
    if size:
        workspace = _empty(buffers[0], (size,), _frost.data_type.UINT8)
    if not g._execute_fast(zip(tensors, buffers), workspace, handle):
        g.execute(dict(zip(tensors, buffers)), workspace, handle=handle)


def sdpa(
    q,
    k,
    v,
    attn_scale=None,
    is_causal=False,
    causal_bottom_right=False,
    sliding_window_length=None,
    bias=None,
    return_stats=False,
    stats_use_log2=False,
    out=None,
    stats_out=None,
):
    """Scaled dot-product attention on [b, h, s, d] arrays (any strides; GQA when h_k | h_q).
    O = softmax(attn_scale * Q K^T (+ bias), masked) V with attn_scale defaulting to 1 / sqrt(d_qk);
    with return_stats, also Stats = logsumexp of each row, FP32 [b, h_q, s_q, 1]. Returns O or (O, Stats)."""
    dq, dk, dv = _describe(q), _describe(k), _describe(v)
    db = _describe(bias) if bias is not None else None
    if attn_scale is None:
        attn_scale = dq[0][3] ** -0.5
    handle = _handle(dq[3], q)
    key = (
        "sdpa",
        dq,
        dk,
        dv,
        db,
        float(attn_scale),
        bool(is_causal),
        bool(causal_bottom_right),
        sliding_window_length,
        bool(return_stats),
        bool(stats_use_log2),
    )

    def make():
        g = _new_graph(dq[2], handle)
        Q, K, V = _declare(g, dq, "q"), _declare(g, dk, "k"), _declare(g, dv, "v")
        B = _declare(g, db, "bias") if db else None
        O, STATS = g.sdpa(
            q=Q,
            k=K,
            v=V,
            attn_scale=float(attn_scale),
            generate_stats=return_stats,
            bias=B,
            use_causal_mask=is_causal,
            use_causal_mask_bottom_right=causal_bottom_right,
            sliding_window_length=sliding_window_length,
            stats_use_log2=stats_use_log2,
        )
        o_dims = [dq[0][0], dq[0][1], dq[0][2], dv[0][3]]
        O.set_output(True).set_dim(o_dims).set_stride(_row_major(o_dims))
        tensors = [Q, K, V] + ([B] if B else []) + [O]
        if STATS is not None:
            STATS.set_output(True).set_data_type(FLOAT)
            tensors.append(STATS)
        g.build([_frost.heur_mode.A, _frost.heur_mode.FALLBACK])
        return g, tensors

    entry = _cached(key, make)
    o_dims = entry[1][-2 if return_stats else -1].get_dim()
    o = out if out is not None else _empty(q, o_dims, dq[2])
    buffers = [q, k, v] + ([bias] if bias is not None else []) + [o]
    stats = None
    if return_stats:
        stats = stats_out if stats_out is not None else _empty(q, (dq[0][0], dq[0][1], dq[0][2], 1), FLOAT)
        buffers.append(stats)
    _run(entry, buffers, handle)
    return (o, stats) if return_stats else o


def sdpa_backward(q, k, v, o, do, stats, attn_scale=None, is_causal=False, causal_bottom_right=False):
    """(dQ, dK, dV) of sdpa on [b, h, s, d] arrays from the forward's O and Stats (natural-log
    logsumexp, FP32 [b, h_q, s_q, 1]) and dO. attn_scale defaults to 1 / sqrt(d_qk). dK and dV sum over
    the query heads that share a K/V head (GQA). Gradients come back row-major in q's data type."""
    described = [_describe(t) for t in (q, k, v, o, do, stats)]
    if attn_scale is None:
        attn_scale = described[0][0][3] ** -0.5
    handle = _handle(described[0][3], q)
    key = ("sdpa_backward", *described, float(attn_scale), bool(is_causal), bool(causal_bottom_right))

    def make():
        g = _new_graph(described[0][2], handle)
        Q, K, V, O, DO, S = (_declare(g, d, n) for d, n in zip(described, ("q", "k", "v", "o", "do", "stats")))
        grads = g.sdpa_backward(
            q=Q,
            k=K,
            v=V,
            o=O,
            dO=DO,
            stats=S,
            attn_scale=float(attn_scale),
            use_causal_mask=is_causal,
            use_causal_mask_bottom_right=causal_bottom_right,
        )
        for t, d in zip(grads, described[:3]):
            t.set_output(True).set_dim(list(d[0])).set_stride(_row_major(d[0]))
        g.build([_frost.heur_mode.A, _frost.heur_mode.FALLBACK])
        return g, [Q, K, V, O, DO, S, *grads]

    entry = _cached(key, make)
    grads = [_empty(q, d[0], d[2]) for d in described[:3]]
    _run(entry, [q, k, v, o, do, stats, *grads], handle)
    return tuple(grads)


def _norm(kind, x, weight, bias, eps, out):
    dx = _describe(x)
    dw = _describe(weight) if weight is not None else None
    db = _describe(bias) if bias is not None else None
    handle = _handle(dx[3], x)
    key = (kind, dx, dw, db, float(eps))

    def make():
        g = _new_graph(dx[2], handle)
        X = _declare(g, dx, "x")
        W = _declare(g, dw, "weight") if dw else None
        B = _declare(g, db, "bias") if db else None
        phase = _frost.norm_forward_phase.INFERENCE
        if kind == "rms_norm":
            Y, _ = g.rmsnorm(norm_forward_phase=phase, input=X, scale=W, bias=B, epsilon=float(eps))
        else:
            Y, _, _ = g.layernorm(norm_forward_phase=phase, input=X, scale=W, bias=B, epsilon=float(eps))
        Y.set_output(True).set_dim(list(dx[0])).set_stride(_row_major(dx[0]))
        g.build([_frost.heur_mode.A, _frost.heur_mode.FALLBACK])
        return g, [t for t in (X, W, B, Y) if t is not None]

    entry = _cached(key, make)
    y = out if out is not None else _empty(x, dx[0], dx[2])
    _run(entry, [t for t in (x, weight, bias, y) if t is not None], handle)
    return y


def rms_norm(x, weight, bias=None, eps=1e-5, out=None):
    """y = x / sqrt(mean(x^2) + eps) * weight (+ bias), the mean over every axis but the first;
    weight and bias broadcast to x (e.g. [1, hidden] for x [tokens, hidden])."""
    return _norm("rms_norm", x, weight, bias, eps, out)


def layer_norm(x, weight, bias, eps=1e-5, out=None):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over every axis but the first."""
    return _norm("layer_norm", x, weight, bias, eps, out)


def _stats_dims(shape):
    """Saved statistics: one FP32 value per row (the first axis), [rows, 1, ..., 1]."""
    return [shape[0]] + [1] * (len(shape) - 1)


def _norm_training(kind, x, weight, bias, eps):
    dx = _describe(x)
    dw = _describe(weight) if weight is not None else None
    db = _describe(bias) if bias is not None else None
    handle = _handle(dx[3], x)
    key = (kind + "_training", dx, dw, db, float(eps))

    def make():
        g = _new_graph(dx[2], handle)
        X = _declare(g, dx, "x")
        W = _declare(g, dw, "weight") if dw else None
        B = _declare(g, db, "bias") if db else None
        phase = _frost.norm_forward_phase.TRAINING
        if kind == "rms_norm":
            Y, inv = g.rmsnorm(norm_forward_phase=phase, input=X, scale=W, bias=B, epsilon=float(eps))
            stats = [inv]
        else:
            Y, mean, inv = g.layernorm(norm_forward_phase=phase, input=X, scale=W, bias=B, epsilon=float(eps))
            stats = [mean, inv]
        Y.set_output(True).set_dim(list(dx[0])).set_stride(_row_major(dx[0]))
        dims = _stats_dims(dx[0])
        for t in stats:
            t.set_output(True).set_dim(dims).set_stride(_row_major(dims)).set_data_type(_wide(dx[2]))
        g.build([_frost.heur_mode.A, _frost.heur_mode.FALLBACK])
        return g, [t for t in (X, W, B, Y) if t is not None] + stats

    entry = _cached(key, make)
    y = _empty(x, dx[0], dx[2])
    stats = [_empty(x, _stats_dims(dx[0]), _wide(dx[2])) for _ in range(1 if kind == "rms_norm" else 2)]
    _run(entry, [t for t in (x, weight, bias, y) if t is not None] + stats, handle)
    return (y, *stats)


def _norm_backward(kind, dy, x, weight, stats, with_dbias):
    ddy, dx_, dw = _describe(dy), _describe(x), _describe(weight)
    dstats = tuple(_describe(t) for t in stats)
    handle = _handle(dx_[3], x)
    key = (kind + "_backward", ddy, dx_, dw, dstats, bool(with_dbias))

    def make():
        g = _new_graph(dx_[2], handle)
        DY, X, W = _declare(g, ddy, "dy"), _declare(g, dx_, "x"), _declare(g, dw, "weight")
        S = [_declare(g, d, f"stat{i}") for i, d in enumerate(dstats)]
        if kind == "rms_norm":
            DX, DW, DB = g.rmsnorm_backward(grad=DY, input=X, scale=W, inv_rms=S[0], has_dbias=with_dbias)
        else:
            DX, DW, DB = g.layernorm_backward(grad=DY, input=X, scale=W, mean=S[0], inv_variance=S[1])
        DX.set_output(True).set_dim(list(dx_[0])).set_stride(_row_major(dx_[0]))
        grads = [DX, DW] + ([DB] if DB is not None else [])
        for t in grads[1:]:
            t.set_output(True).set_dim(list(dw[0])).set_stride(_row_major(dw[0])).set_data_type(_wide(dx_[2]))
        g.build([_frost.heur_mode.A, _frost.heur_mode.FALLBACK])
        return g, [DY, X, W] + S + grads

    entry = _cached(key, make)
    dx = _empty(x, dx_[0], dx_[2])
    dweights = [_empty(x, dw[0], _wide(dx_[2])) for _ in range(len(entry[1]) - 4 - len(stats))]
    _run(entry, [dy, x, weight, *stats, dx, *dweights], handle)
    return (dx, *dweights) if len(dweights) == 2 else (dx, dweights[0], None)


def rms_norm_training(x, weight, bias=None, eps=1e-5):
    """rms_norm that also returns the saved inv_rms ([rows, 1, ...], FP32 or FP64 for FP64 x): (y, inv_rms)."""
    return _norm_training("rms_norm", x, weight, bias, eps)


def rms_norm_backward(dy, x, weight, inv_rms, with_dbias=False):
    """(dx, dweight, dbias or None) of rms_norm from the saved inv_rms; dweight/dbias are FP32 (FP64 for FP64 x)."""
    return _norm_backward("rms_norm", dy, x, weight, (inv_rms,), with_dbias)


def layer_norm_training(x, weight, bias, eps=1e-5):
    """layer_norm that also returns the saved statistics (FP32, [rows, 1, ...]): (y, mean, inv_variance)."""
    return _norm_training("layer_norm", x, weight, bias, eps)


def layer_norm_backward(dy, x, weight, mean, inv_variance):
    """(dx, dweight, dbias) of layer_norm from the saved statistics; dweight and dbias are FP32."""
    return _norm_backward("layer_norm", dy, x, weight, (mean, inv_variance), True)


def matmul(a, b, out=None):
    """c[..., m, n] = sum_k a[..., m, k] b[..., k, n] (rank >= 3 as [batch, m, k]; batch broadcasts
    over extent 1), accumulated in FP32, stored in a's data type."""
    da, dbb = _describe(a), _describe(b)
    handle = _handle(da[3], a)
    key = ("matmul", da, dbb)

    def make():
        g = _new_graph(da[2], handle)
        A, B = _declare(g, da, "a"), _declare(g, dbb, "b")
        C = g.matmul(A=A, B=B)
        C.set_output(True)
        g.validate()
        C.set_stride(_row_major(C.get_dim()))
        g.build([_frost.heur_mode.A, _frost.heur_mode.FALLBACK])
        return g, [A, B, C]

    entry = _cached(key, make)
    c = out if out is not None else _empty(a, entry[1][2].get_dim(), da[2])
    _run(entry, [a, b, c], handle)
    return c


# ---- Linear attention: Gated DeltaNet (gdn) and Kimi Delta Attention (kda), flash-linear-attention's conventions

DOUBLE = _frost.data_type.DOUBLE
_DELTA_RULE_OPS = ("gdn", "kda")


def _state_type(io_type, initial_state):
    """States are FP32 as in flash-linear-attention (FP64 for FP64 data); an initial state keeps its own type."""
    if initial_state is not None:
        return initial_state[2]
    return DOUBLE if io_type == DOUBLE else FLOAT


def _state_dims(dq, dv, dh0, dcu):
    """[N, HV, K, V]: N is the initial state's (a pool's) row count, else the sequence count."""
    if dh0 is not None:
        n = dh0[0][0]
    elif dcu is not None:
        n = dcu[0][0] - 1
    else:
        n = dq[0][0]
    return [n, dv[0][2], dq[0][3], dv[0][3]]


def _delta_rule_entry(op, backward, described, scale, output_final_state, l2norm, handle):
    """The built, cached graph of one delta-rule call from the descriptions of its arrays
    (q, k, v, g, beta, initial_state, cu_seqlens, state_indices, and for the backward do, dht; None where absent).
    Raises GraphNotSupportedError when no engine serves it on that device."""
    dq, dv, dh0, dcu = described[0], described[2], described[5], described[6]
    key = (op + ("_backward" if backward else ""), *described, float(scale), bool(output_final_state), bool(l2norm))

    def make():
        g = _new_graph(dq[2], handle)
        names = ("q", "k", "v", "g", "beta", "initial_state", "cu_seqlens", "state_indices", "do", "dht")
        declared = [_declare(g, d, n) if d is not None else None for d, n in zip(described, names)]
        Q, K, V, G, BETA, H0, CU, IDX, DO, DHT = declared
        options = dict(
            scale=float(scale), initial_state=H0, cu_seqlens=CU, use_qk_l2norm_in_kernel=l2norm, state_indices=IDX
        )
        state = _state_type(dq[2], dh0)
        state_dims = _state_dims(dq, dv, dh0, dcu)
        if not backward:
            O, FINAL = getattr(g, op)(Q, K, V, G, BETA, output_final_state=output_final_state, **options, name=op)
            o_dims = list(dv[0])
            O.set_output(True).set_dim(o_dims).set_stride(_row_major(o_dims)).set_data_type(dq[2])
            outputs = [O]
            if FINAL is not None:
                FINAL.set_output(True).set_dim(state_dims).set_stride(_row_major(state_dims)).set_data_type(state)
                outputs.append(FINAL)
        else:
            grads = getattr(g, op + "_backward")(Q, K, V, G, BETA, DO, dht=DHT, **options, name=op + "_backward")
            outputs = []
            for t, d in zip(grads[:5], described[:5]):
                t.set_output(True).set_dim(list(d[0])).set_stride(_row_major(d[0])).set_data_type(d[2])
                outputs.append(t)
            if grads[5] is not None:
                grads[5].set_output(True).set_dim(state_dims).set_stride(_row_major(state_dims)).set_data_type(state)
                outputs.append(grads[5])
        g.build([_frost.heur_mode.A, _frost.heur_mode.FALLBACK])
        return g, [t for t in declared if t is not None] + outputs

    return _cached(key, make)


def _delta_rule_described(op, arrays):
    if op not in _DELTA_RULE_OPS:
        raise ValueError(f"unknown linear-attention op {op!r}: expected one of {_DELTA_RULE_OPS}")
    return tuple(_describe(a) if a is not None else None for a in arrays)


def _delta_rule_forward(op, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, l2, indices):
    arrays = (q, k, v, g, beta, initial_state, cu_seqlens, indices)
    described = _delta_rule_described(op, arrays) + (None, None)
    dq, dv, dh0, dcu = described[0], described[2], described[5], described[6]
    scale = dq[0][3] ** -0.5 if scale is None else scale
    handle = _handle(dq[3], q)
    entry = _delta_rule_entry(op, False, described, scale, output_final_state, l2, handle)
    o = _empty(q, dv[0], dq[2])
    final = _empty(q, _state_dims(dq, dv, dh0, dcu), _state_type(dq[2], dh0)) if output_final_state else None
    _run(entry, [a for a in arrays if a is not None] + [t for t in (o, final) if t is not None], handle)
    return o, final


def _delta_rule_backward(op, q, k, v, g, beta, do, scale, initial_state, dht, cu_seqlens, l2, indices):
    arrays = (q, k, v, g, beta, initial_state, cu_seqlens, indices, do, dht)
    described = _delta_rule_described(op, arrays)
    dq, dv, dh0, dcu = described[0], described[2], described[5], described[6]
    scale = dq[0][3] ** -0.5 if scale is None else scale
    handle = _handle(dq[3], q)
    entry = _delta_rule_entry(op, True, described, scale, False, l2, handle)
    grads = [_empty(q, d[0], d[2]) for d in described[:5]]
    dh0_out = _empty(q, _state_dims(dq, dv, dh0, dcu), _state_type(dq[2], dh0)) if initial_state is not None else None
    _run(entry, [a for a in arrays if a is not None] + grads + ([dh0_out] if dh0_out is not None else []), handle)
    return (*grads, dh0_out)


def gdn(
    q,
    k,
    v,
    g,
    beta,
    scale=None,
    initial_state=None,
    output_final_state=False,
    *,
    cu_seqlens=None,
    use_qk_l2norm_in_kernel=False,
    state_indices=None,
):
    """Gated DeltaNet forward, as flash-linear-attention's chunk_gated_delta_rule: q, k [B, T, H, K];
    v [B, T, HV, V] (GVA when HV > H); g, the log-space decay, [B, T, HV]; beta (after the sigmoid) [B, T, HV];
    scale defaults to K^-0.5; initial_state [N, HV, K, V] (FP32; with state_indices a pool [P, HV, K, V]);
    cu_seqlens [N + 1] (INT32 or INT64) packs N sequences along T with B == 1.
    Returns (o, final_state): o [B, T, HV, V] in q's data type, final_state [N, HV, K, V] FP32 (None unless
    output_final_state). The options after output_final_state are keyword-only: their positions differ between
    flash-linear-attention's releases."""
    return _delta_rule_forward(
        "gdn",
        q,
        k,
        v,
        g,
        beta,
        scale,
        initial_state,
        output_final_state,
        cu_seqlens,
        use_qk_l2norm_in_kernel,
        state_indices,
    )


def kda(
    q,
    k,
    v,
    g,
    beta,
    scale=None,
    initial_state=None,
    output_final_state=False,
    *,
    cu_seqlens=None,
    use_qk_l2norm_in_kernel=False,
    state_indices=None,
):
    """Kimi Delta Attention forward, as flash-linear-attention's chunk_kda: gdn with one decay per key channel,
    g [B, T, HV, K]. Returns (o, final_state)."""
    return _delta_rule_forward(
        "kda",
        q,
        k,
        v,
        g,
        beta,
        scale,
        initial_state,
        output_final_state,
        cu_seqlens,
        use_qk_l2norm_in_kernel,
        state_indices,
    )


def gdn_backward(
    q,
    k,
    v,
    g,
    beta,
    do,
    scale=None,
    initial_state=None,
    dht=None,
    *,
    cu_seqlens=None,
    use_qk_l2norm_in_kernel=False,
    state_indices=None,
):
    """Gradients of gdn from do (o's gradient) and dht (final_state's, when it feeds a loss); the forward is
    recomputed from the inputs. Returns (dq, dk, dv, dg, dbeta, dh0): each gradient has its input's shape and
    data type; dh0 is None without initial_state."""
    return _delta_rule_backward(
        "gdn", q, k, v, g, beta, do, scale, initial_state, dht, cu_seqlens, use_qk_l2norm_in_kernel, state_indices
    )


def kda_backward(
    q,
    k,
    v,
    g,
    beta,
    do,
    scale=None,
    initial_state=None,
    dht=None,
    *,
    cu_seqlens=None,
    use_qk_l2norm_in_kernel=False,
    state_indices=None,
):
    """Gradients of kda, as gdn_backward (dg is [B, T, HV, K]). Returns (dq, dk, dv, dg, dbeta, dh0)."""
    return _delta_rule_backward(
        "kda", q, k, v, g, beta, do, scale, initial_state, dht, cu_seqlens, use_qk_l2norm_in_kernel, state_indices
    )


def _contiguous(described):
    shape, _strides, dtype, device = described
    return tuple(shape), tuple(_row_major(shape)), dtype, device


def delta_rule_support(
    op,
    q,
    k,
    v,
    g,
    beta,
    scale=None,
    initial_state=None,
    output_final_state=False,
    *,
    cu_seqlens=None,
    use_qk_l2norm_in_kernel=False,
    state_indices=None,
    backward=False,
):
    """Whether an engine serves `op` ("gdn" or "kda") for these arrays on their device, asked of the planner
    without running anything: returns None when served, else the reason on one line (the planner's decline with
    each engine's reason, or the validation error). With backward=True the backward graph (dO row-major in q's
    data type, and dht when output_final_state) must be served as well. Built graphs stay cached for the calls
    that follow."""
    arrays = (q, k, v, g, beta, initial_state, cu_seqlens, state_indices)
    try:
        described = _delta_rule_described(op, arrays)
        dq, dv, dh0, dcu = described[0], described[2], described[5], described[6]
        scale = dq[0][3] ** -0.5 if scale is None else scale
        handle = _handle(dq[3], q)
        l2 = use_qk_l2norm_in_kernel
        _delta_rule_entry(op, False, described + (None, None), scale, output_final_state, l2, handle)
        if backward:
            ddo = _contiguous((dv[0], None, dq[2], dq[3]))
            state = (tuple(_state_dims(dq, dv, dh0, dcu)), None, _state_type(dq[2], dh0), dq[3])
            ddht = _contiguous(state) if output_final_state else None
            _delta_rule_entry(op, True, described + (ddo, ddht), scale, False, l2, handle)
    except FrostError as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        return " ".join(lines[:1] + ["; ".join(lines[1:])]).strip() or type(e).__name__
    return None


# ---- Mamba-2's scan, mamba_ssm's conventions (mamba_chunk_scan_combined) ----

_MAMBA2_NAMES = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states", "cu_seqlens", "dy", "dfinal")


def _mamba2_state(dx, dbc, dh0, dcu):
    """Dims [S, H, P, N] and type of the states (FP32, FP64 for FP64 data; an initial state keeps its own type)."""
    sequences = dh0[0][0] if dh0 is not None else dcu[0][0] - 1 if dcu is not None else dx[0][0]
    return [sequences, dx[0][2], dx[0][3], dbc[0][3]], _state_type(dx[2], dh0)


def _mamba2_entry(backward, described, dt_softplus, dt_limit, output_final_state, handle):
    """The built, cached graph of one mamba2 (or mamba2_backward) call from the descriptions of its arrays in the
    order of _MAMBA2_NAMES (None where absent)."""
    dx, dbc, dh0, dcu = described[0], described[3], described[8], described[9]
    key = ("mamba2_backward" if backward else "mamba2", *described, bool(dt_softplus), tuple(dt_limit))
    key += (bool(output_final_state),)

    def make():
        g = _new_graph(dx[2], handle)
        declared = [_declare(g, d, n) if d is not None else None for d, n in zip(described, _MAMBA2_NAMES)]
        X, DT, A, B, C, D, Z, BIAS, H0, CU, DY, DH = declared
        options = dict(
            D=D, z=Z, dt_bias=BIAS, initial_states=H0, cu_seqlens=CU, dt_softplus=dt_softplus, dt_limit=dt_limit
        )
        state_dims, state_type = _mamba2_state(dx, dbc, dh0, dcu)
        if not backward:
            results = g.mamba2(X, DT, A, B, C, return_final_states=output_final_state, **options, name="mamba2")
            follows = (described[0], None)
        else:
            results = g.mamba2_backward(X, DT, A, B, C, DY, dfinal_states=DH, **options, name="mamba2_backward")
            follows = described[:8] + (None,)
        outputs = []
        for t, d in zip(results, follows):
            if t is None:
                continue
            dims, dtype = (list(d[0]), d[2]) if d is not None else (state_dims, state_type)
            t.set_output(True).set_dim(dims).set_stride(_row_major(dims)).set_data_type(dtype)
            outputs.append(t)
        g.build([_frost.heur_mode.A, _frost.heur_mode.FALLBACK])
        return g, [t for t in declared if t is not None] + outputs

    return _cached(key, make)


def mamba2(
    x,
    dt,
    A,
    B,
    C,
    D=None,
    z=None,
    dt_bias=None,
    initial_states=None,
    cu_seqlens=None,
    dt_softplus=False,
    dt_limit=(0.0, math.inf),
    return_final_states=False,
):
    """Mamba-2's scan forward, as mamba_ssm's mamba_chunk_scan_combined (docs/ops/mamba2.md): x [B, T, H, P], dt
    [B, T, H], A [H], B and C [B, T, G, N]. Returns (y, final_states); final_states [S, H, P, N] is None unless
    return_final_states."""
    arrays = (x, dt, A, B, C, D, z, dt_bias, initial_states, cu_seqlens)
    described = tuple(_describe(a) if a is not None else None for a in arrays) + (None, None)
    dx = described[0]
    handle = _handle(dx[3], x)
    entry = _mamba2_entry(False, described, dt_softplus, dt_limit, return_final_states, handle)
    y = _empty(x, dx[0], dx[2])
    final = None
    if return_final_states:
        final = _empty(x, *_mamba2_state(dx, described[3], described[8], described[9]))
    _run(entry, [a for a in arrays if a is not None] + [t for t in (y, final) if t is not None], handle)
    return y, final


def mamba2_backward(
    x,
    dt,
    A,
    B,
    C,
    dy,
    D=None,
    z=None,
    dt_bias=None,
    initial_states=None,
    cu_seqlens=None,
    dt_softplus=False,
    dt_limit=(0.0, math.inf),
    dfinal_states=None,
):
    """Gradients of mamba2 from dy and, when the final states feed a loss, dfinal_states. Returns (dx, ddt, dA,
    dB, dC, dD, dz, ddt_bias, dinitial_states), each in its input's shape and type; the last four are None where
    their input is."""
    arrays = (x, dt, A, B, C, D, z, dt_bias, initial_states, cu_seqlens, dy, dfinal_states)
    described = tuple(_describe(a) if a is not None else None for a in arrays)
    dx = described[0]
    handle = _handle(dx[3], x)
    entry = _mamba2_entry(True, described, dt_softplus, dt_limit, False, handle)
    grads = [_empty(x, d[0], d[2]) if d is not None else None for d in described[:8]]
    dh0 = None
    if initial_states is not None:
        dh0 = _empty(x, *_mamba2_state(dx, described[3], described[8], described[9]))
    _run(entry, [a for a in arrays if a is not None] + [t for t in (*grads, dh0) if t is not None], handle)
    return (*grads, dh0)
