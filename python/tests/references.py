"""Straightforward numpy references the builder tests compare frost against: convolution by explicit tap
loops, the Philox 4x32-10 generator, FP8 E4M3 / E8M0 coding and MXFP8 blocks, attention forward and backward
pieces, and the serialize-and-replay check."""

import numpy as np

import frost
from conftest import poisoned


def row_major(dims):
    return [int(s) for s in np.cumprod([1] + list(dims)[::-1])[:-1][::-1]]


def run(g, pack, outputs, dtype=np.float32):
    """Validates g, gives every output row-major strides, builds, runs with poisoned output buffers of `dtype`
    (one for all or a list; NaN for floats, 123 for integers) and returns the outputs in order."""
    g.validate()
    for t in outputs:
        t.set_stride(row_major(t.get_dim()))
    g.build()
    dtypes = dtype if isinstance(dtype, (list, tuple)) else [dtype] * len(outputs)
    buffers = [
        poisoned(t.get_dim(), d) if np.issubdtype(d, np.floating) else np.full(t.get_dim(), 123, d)
        for t, d in zip(outputs, dtypes)
    ]
    g.execute({**pack, **dict(zip(outputs, buffers))}, None)
    return buffers


def replay(g, pack, outputs, dtype=np.float32):
    """Serializes the validated g, deserializes it into a new graph, runs that graph on the same inputs
    (bound by uid) and returns its outputs: a second path to the same bytes."""
    h = frost.pygraph(handle=frost.create_handle("cpu"))
    h.deserialize(g.serialize())
    h.build()
    dtypes = dtype if isinstance(dtype, (list, tuple)) else [dtype] * len(outputs)
    buffers = [np.zeros(t.get_dim(), d) for t, d in zip(outputs, dtypes)]
    h.execute({**{t.get_uid(): b for t, b in pack.items()}, **{t.get_uid(): b for t, b in zip(outputs, buffers)}})
    return buffers


# ---- convolution ----------------------------------------------------------------------------------


def _conv_geometry(x_shape, w_shape, pre, post, stride, dilation):
    spatial = x_shape[2:]
    out = [
        (s + a + b - d * (f - 1) - 1) // st + 1
        for s, a, b, d, f, st in zip(spatial, pre, post, dilation, w_shape[2:], stride)
    ]
    return out


def _tap_slices(taps, dilation, out, stride):
    return tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(taps, dilation, out, stride))


def conv_fprop(x, w, pre, post, stride, dilation):
    """Grouped cross-correlation by a loop over filter taps: each tap adds a strided window of the padded input."""
    n, c = x.shape[:2]
    k, cg = w.shape[:2]
    groups, kg = c // cg, k // (c // cg)
    out = _conv_geometry(x.shape, w.shape, pre, post, stride, dilation)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pre, post)))
    y = np.zeros((n, k, *out))
    for taps in np.ndindex(*w.shape[2:]):
        window = xp[(slice(None), slice(None)) + _tap_slices(taps, dilation, out, stride)]
        for gi in range(groups):
            wt = w[(slice(gi * kg, (gi + 1) * kg), slice(None)) + taps]
            y[:, gi * kg : (gi + 1) * kg] += np.einsum("nc...,kc->nk...", window[:, gi * cg : (gi + 1) * cg], wt)
    return y


def conv_dgrad(dy, w, x_shape, pre, post, stride, dilation):
    """The adjoint of conv_fprop in x: each tap scatters dy @ w back onto the padded input, then the padding goes."""
    c = x_shape[1]
    k, cg = w.shape[:2]
    groups, kg = c // cg, k // (c // cg)
    out = list(dy.shape[2:])
    dxp = np.zeros((x_shape[0], c) + tuple(s + a + b for s, a, b in zip(x_shape[2:], pre, post)))
    for taps in np.ndindex(*w.shape[2:]):
        sl = (slice(None), slice(None)) + _tap_slices(taps, dilation, out, stride)
        for gi in range(groups):
            wt = w[(slice(gi * kg, (gi + 1) * kg), slice(None)) + taps]
            contribution = np.einsum("nk...,kc->nc...", dy[:, gi * kg : (gi + 1) * kg], wt)
            dxp[sl][:, gi * cg : (gi + 1) * cg] += contribution
    crop = tuple(slice(a, a + s) for a, s in zip(pre, x_shape[2:]))
    return dxp[(slice(None), slice(None)) + crop]


def conv_wgrad(dy, x, w_shape, pre, post, stride, dilation):
    """dW[k, c', taps] = sum over n and output positions of dy[n, k, o] * x_padded[n, c, o * stride + taps * dilation]."""
    c = x.shape[1]
    k, cg = w_shape[:2]
    groups, kg = c // cg, k // (c // cg)
    out = list(dy.shape[2:])
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pre, post)))
    dw = np.zeros(w_shape)
    for taps in np.ndindex(*w_shape[2:]):
        window = xp[(slice(None), slice(None)) + _tap_slices(taps, dilation, out, stride)]
        for gi in range(groups):
            dy_g = dy[:, gi * kg : (gi + 1) * kg].reshape(dy.shape[0], kg, -1)
            x_g = window[:, gi * cg : (gi + 1) * cg].reshape(x.shape[0], cg, -1)
            dw[(slice(gi * kg, (gi + 1) * kg), slice(None)) + taps] = np.einsum("nko,nco->kc", dy_g, x_g)
    return dw


# ---- Philox 4x32-10 --------------------------------------------------------------------------------

_MASK32 = np.uint64(0xFFFFFFFF)


def philox_words(seed, offset, count):
    """Words 0..count-1 of the Philox 4x32-10 stream: counter (block low, block high, offset low, offset high)
    for block = n // 4, key (seed low, seed high), word n % 4 of the block's output."""
    blocks = np.arange((count + 3) // 4, dtype=np.uint64)
    c = [blocks & _MASK32, blocks >> np.uint64(32)]
    c += [np.full_like(blocks, offset & 0xFFFFFFFF), np.full_like(blocks, offset >> 32)]
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    for r in range(10):
        if r:
            k0 = (k0 + np.uint64(0x9E3779B9)) & _MASK32
            k1 = (k1 + np.uint64(0xBB67AE85)) & _MASK32
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & _MASK32, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & _MASK32]
    return np.stack(c, axis=1).reshape(-1)[:count]


def philox_uniform(seed, offset, count):
    return philox_words(seed, offset, count).astype(np.float64) / 2.0**32


# ---- small floating-point formats ----------------------------------------------------------------


def e4m3_to_float(codes):
    """FP8 E4M3 (OCP, no infinities; 0x7F / 0xFF are NaN) codes to float64."""
    codes = np.asarray(codes, np.uint8).astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 0x7
    value = np.where(exponent == 0, mantissa / 8.0 * 2.0**-6, (1 + mantissa / 8.0) * 2.0 ** (exponent - 7.0))
    return np.where((codes & 0x7F) == 0x7F, np.nan, sign * value)


def float_to_e4m3(values):
    """The E4M3 codes of float values: round to nearest, ties to the even code, saturating at +-448."""
    table = e4m3_to_float(np.arange(127))  # the non-negative finite values, increasing with the code
    magnitude = np.minimum(np.abs(np.asarray(values, np.float64)), 448.0)
    above = np.clip(np.searchsorted(table, magnitude), 1, 126)
    below = above - 1
    gap_below, gap_above = magnitude - table[below], table[above] - magnitude
    code = np.where(
        gap_below < gap_above, below, np.where(gap_above < gap_below, above, np.where(below % 2 == 0, below, above))
    )
    return (code | np.where(np.signbit(values), 0x80, 0)).astype(np.uint8)


def e8m0_to_float(codes):
    """FP8 E8M0 scale codes (2^(code - 127); 0xFF is NaN) to float64."""
    codes = np.asarray(codes, np.uint8).astype(np.float64)
    return np.where(codes == 255, np.nan, 2.0 ** (codes - 127))


def random_e4m3(rng, shape, low_exponent=5, high_exponent=9):
    """Random finite E4M3 codes with magnitudes in [2^(low - 7), 2^(high - 6)): moderate values, either sign."""
    sign = rng.integers(0, 2, shape) << 7
    exponent = rng.integers(low_exponent, high_exponent + 1, shape) << 3
    mantissa = rng.integers(0, 8, shape)
    return (sign | exponent | mantissa).astype(np.uint8)


def e4m3_round(values):
    """values rounded to E4M3 (nearest, ties to even, saturating at +-448), as float64."""
    return e4m3_to_float(float_to_e4m3(values))


def e8m0_block_scales(codes, shape, axis):
    """The scale each element of an operand of `shape` takes from E8M0 block scales `codes`, one per 32
    elements along `axis` (extents past the needed ones are padding)."""
    scales = e8m0_to_float(codes)
    needed = [-(-n // 32) if a == axis % len(shape) else n for a, n in enumerate(shape)]
    scales = scales[tuple(slice(0, n) for n in needed)]
    return np.repeat(scales, 32, axis=axis)[tuple(slice(0, n) for n in shape)]


def mx_e4m3_round_trip(x, axis):
    """x quantized to E4M3 in MXFP8 blocks of 32 along `axis` (the last block may be shorter) and dequantized:
    per block scale = 2^(floor(log2 amax) - 8), 2^-127 for an all-zero block; values rounded, saturating."""
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    out = np.empty_like(x)
    for start in range(0, x.shape[-1], 32):
        block = x[..., start : start + 32]
        amax = np.abs(block).max(axis=-1, keepdims=True)
        _, exponent = np.frexp(amax)  # amax = m * 2^exponent with m in [0.5, 1): floor(log2 amax) = exponent - 1
        scale = np.where(amax > 0, np.ldexp(1.0, np.clip(exponent - 1 - 8, -127, 127)), 2.0**-127)
        out[..., start : start + 32] = e4m3_round(block / scale) * scale
    return np.moveaxis(out, -1, axis)


# ---- attention ------------------------------------------------------------------------------------


def attention(q, k, v, scale, visible=None, p_weights=None):
    """O and the natural-log logsumexp of softmax attention per (b, h); `visible` (broadcast to [b, h, s_q, s_kv])
    masks keys, `p_weights` multiplies P after the softmax (dropout). A row with no visible key gives O = 0 and
    LSE = -inf."""
    s = scale * np.einsum("bhid,bhjd->bhij", q, k)
    if visible is not None:
        s = np.where(visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    safe_m = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - safe_m)
    denom = p.sum(axis=-1, keepdims=True)
    p = p / np.where(denom > 0, denom, 1)
    lse = np.where(denom > 0, safe_m + np.log(np.where(denom > 0, denom, 1)), -np.inf)
    if p_weights is not None:
        p = p * p_weights
    return np.einsum("bhij,bhjd->bhid", p, v), lse


def repeat_heads(x, heads):
    """K or V [b, h_kv, s, d] with each head repeated for the query heads of its group (GQA / MQA)."""
    return np.repeat(x, heads // x.shape[1], axis=1)


def sum_head_groups(x, heads):
    """A gradient [b, h_q, s, d] summed over the query heads of each group: [b, heads, s, d]."""
    b, h_q, s, d = x.shape
    return x.reshape(b, heads, h_q // heads, s, d).sum(axis=2)


def attention_backward_terms(q, k, v, o, do, lse, scale, visible=None, do_for_delta=None):
    """P = exp(S - LSE) (zero where not visible) and dS = scale * P * (dO V^T - rowsum(dO * O)) of one attention
    backward on real values with matched heads; do_for_delta replaces dO in the row sums."""
    s = scale * np.einsum("bhid,bhjd->bhij", q, k)
    p = np.exp(s - lse)
    if visible is not None:
        p = np.where(visible, p, 0.0)
    delta = ((do if do_for_delta is None else do_for_delta) * o).sum(axis=-1, keepdims=True)
    dp = np.einsum("bhid,bhjd->bhij", do, v)
    return p, scale * p * (dp - delta)
