"""PyTorch custom ops over frost graphs, registered with torch.library so they compose with autograd
and torch.compile: frost::rms_norm, frost::rms_norm_bwd, frost::layer_norm, frost::layer_norm_bwd,
frost::sdpa_fwd, frost::sdpa_bwd, frost::gdn_fwd, frost::gdn_bwd, frost::kda_fwd, frost::kda_bwd,
frost::mamba2_fwd, frost::mamba2_bwd. CPU tensors run on the CPU reference engine, CUDA tensors on the GPU engines
(none serves mamba2 yet).

    y = frost.torch_ops.rms_norm(x, weight, eps)          # differentiable in x and weight
    o = frost.torch_ops.sdpa(q, k, v, attn_scale, is_causal)
    o, ht = frost.torch_ops.gdn(q, k, v, g, beta, initial_state=h0, output_final_state=True)

Statistics saved for backward are FP32 (FP64 for FP64 inputs) [rows, 1, ...] (rows = x.shape[0]); normalization runs over
every axis but the first, so pass x as [tokens, hidden].
"""

import math
from typing import Optional, Tuple

import torch

from . import ops as _ops

Tensor = torch.Tensor


def _stats_shape(x):
    return (x.shape[0],) + (1,) * (x.dim() - 1)


def _plain(*tensors):
    """Contiguous views without autograd history: DLPack refuses tensors that require grad, and the
    custom op bodies run below autograd anyway."""
    return [t.detach().contiguous() for t in tensors]


def _stats_dtype(x):
    """Saved statistics are FP32, FP64 for FP64 inputs."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


# ---- RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight


@torch.library.custom_op("frost::rms_norm", mutates_args=())
def rms_norm_fwd(x: Tensor, weight: Tensor, eps: float) -> Tuple[Tensor, Tensor]:
    """(y, inv_rms) with inv_rms [rows, 1, ...] (FP32; FP64 for FP64 x)."""
    y, inv_rms = _ops.rms_norm_training(*_plain(x, weight), None, eps)
    return y, inv_rms


@rms_norm_fwd.register_fake
def _(x, weight, eps):
    return x.new_empty(x.shape), x.new_empty(_stats_shape(x), dtype=_stats_dtype(x))


@torch.library.custom_op("frost::rms_norm_bwd", mutates_args=())
def rms_norm_bwd(dy: Tensor, x: Tensor, weight: Tensor, inv_rms: Tensor) -> Tuple[Tensor, Tensor]:
    """(dx, dweight) with dweight in weight's data type."""
    dx, dweight, _ = _ops.rms_norm_backward(*_plain(dy, x, weight, inv_rms))
    return dx, dweight.to(weight.dtype)


@rms_norm_bwd.register_fake
def _(dy, x, weight, inv_rms):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


def _rms_setup(ctx, inputs, output):
    x, weight, _eps = inputs
    ctx.save_for_backward(x, weight, output[1])


def _rms_backward(ctx, dy, _dinv):
    x, weight, inv_rms = ctx.saved_tensors
    dx, dweight = rms_norm_bwd(dy, x, weight, inv_rms)
    return dx, dweight, None


rms_norm_fwd.register_autograd(_rms_backward, setup_context=_rms_setup)


def rms_norm(x, weight, eps=1e-5):
    """Differentiable RMSNorm over every axis but the first."""
    return rms_norm_fwd(x, weight, eps)[0]


# ---- LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias


@torch.library.custom_op("frost::layer_norm", mutates_args=())
def layer_norm_fwd(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tuple[Tensor, Tensor, Tensor]:
    """(y, mean, inv_variance), statistics [rows, 1, ...] (FP32; FP64 for FP64 x)."""
    return _ops.layer_norm_training(*_plain(x, weight, bias), eps)


@layer_norm_fwd.register_fake
def _(x, weight, bias, eps):
    shape, dtype = _stats_shape(x), _stats_dtype(x)
    return x.new_empty(x.shape), x.new_empty(shape, dtype=dtype), x.new_empty(shape, dtype=dtype)


@torch.library.custom_op("frost::layer_norm_bwd", mutates_args=())
def layer_norm_bwd(
    dy: Tensor, x: Tensor, weight: Tensor, mean: Tensor, inv_variance: Tensor
) -> Tuple[Tensor, Tensor, Tensor]:
    """(dx, dweight, dbias) with dweight and dbias in weight's data type."""
    dx, dweight, dbias = _ops.layer_norm_backward(*_plain(dy, x, weight, mean, inv_variance))
    return dx, dweight.to(weight.dtype), dbias.to(weight.dtype)


@layer_norm_bwd.register_fake
def _(dy, x, weight, mean, inv_variance):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape)


def _ln_setup(ctx, inputs, output):
    x, weight, _bias, _eps = inputs
    ctx.save_for_backward(x, weight, output[1], output[2])


def _ln_backward(ctx, dy, _dmean, _dinv):
    x, weight, mean, inv_variance = ctx.saved_tensors
    dx, dweight, dbias = layer_norm_bwd(dy, x, weight, mean, inv_variance)
    return dx, dweight, dbias, None


layer_norm_fwd.register_autograd(_ln_backward, setup_context=_ln_setup)


def layer_norm(x, weight, bias, eps=1e-5):
    """Differentiable LayerNorm over every axis but the first."""
    return layer_norm_fwd(x, weight, bias, eps)[0]


# ---- Attention forward: O = softmax(attn_scale * Q K^T, causal mask) V on [b, h, s, d]


@torch.library.custom_op("frost::sdpa_fwd", mutates_args=())
def sdpa_fwd(q: Tensor, k: Tensor, v: Tensor, attn_scale: float, is_causal: bool) -> Tuple[Tensor, Tensor]:
    """(O [b, h_q, s_q, d_v] row-major, Stats FP32 [b, h_q, s_q, 1] natural-log logsumexp)."""
    q, k, v = _plain(q, k, v)
    return _ops.sdpa(q, k, v, attn_scale=attn_scale, is_causal=is_causal, return_stats=True)


@sdpa_fwd.register_fake
def _(q, k, v, attn_scale, is_causal):
    b, h, s, _ = q.shape
    return q.new_empty((b, h, s, v.shape[3])), q.new_empty((b, h, s, 1), dtype=torch.float32)


@torch.library.custom_op("frost::sdpa_bwd", mutates_args=())
def sdpa_bwd(
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, attn_scale: float, is_causal: bool
) -> Tuple[Tensor, Tensor, Tensor]:
    """(dQ, dK, dV) from the forward's O and Stats; dK and dV sum over the query heads of a GQA group."""
    return _ops.sdpa_backward(*_plain(q, k, v, o, do, stats), attn_scale=attn_scale, is_causal=is_causal)


@sdpa_bwd.register_fake
def _(q, k, v, o, do, stats, attn_scale, is_causal):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _sdpa_setup(ctx, inputs, output):
    q, k, v, attn_scale, is_causal = inputs
    ctx.attn_scale, ctx.is_causal = attn_scale, is_causal
    ctx.save_for_backward(q, k, v, output[0], output[1])


def _sdpa_backward(ctx, do, _dstats):
    q, k, v, o, stats = ctx.saved_tensors
    dq, dk, dv = sdpa_bwd(q, k, v, o, do.contiguous(), stats, ctx.attn_scale, ctx.is_causal)
    return dq, dk, dv, None, None


sdpa_fwd.register_autograd(_sdpa_backward, setup_context=_sdpa_setup)


def sdpa(q, k, v, attn_scale=None, is_causal=False):
    """Differentiable attention on [b, h, s, d] tensors (GQA when h_k divides h_q); attn_scale defaults
    to 1/sqrt(d). The backward runs frost::sdpa_bwd."""
    scale = q.shape[3] ** -0.5 if attn_scale is None else float(attn_scale)
    return sdpa_fwd(q, k, v, scale, bool(is_causal))[0]


# ---- Linear attention: Gated DeltaNet and Kimi Delta Attention in flash-linear-attention's conventions
#
# Custom op schemas cannot return None: an absent final state or initial-state gradient comes back as an empty
# tensor (numel 0) from the ops below, and as None from the wrappers gdn() and kda().


def _state_dtype(q, initial_state):
    if initial_state is not None:
        return initial_state.dtype
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def _state_shape(q, v, initial_state, cu_seqlens):
    if initial_state is not None:
        n = initial_state.shape[0]
    elif cu_seqlens is not None:
        n = cu_seqlens.shape[0] - 1
    else:
        n = q.shape[0]
    return (n, v.shape[2], q.shape[3], v.shape[3])


def _no_state(q, initial_state):
    return q.new_empty((0,), dtype=_state_dtype(q, initial_state))


def _optional(t):
    return None if t is None else t.detach()


def _detached(*tensors):
    """The delta-rule graphs take any strides: only autograd's history is dropped (DLPack refuses it), so the
    layouts frost.fla asked the planner about are the ones that run."""
    return [t.detach() for t in tensors]


def _delta_rule_fwd(op, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, l2, indices):
    o, final = getattr(_ops, op)(
        *_detached(q, k, v, g, beta),
        scale,
        _optional(initial_state),
        output_final_state,
        cu_seqlens=_optional(cu_seqlens),
        use_qk_l2norm_in_kernel=l2,
        state_indices=_optional(indices),
    )
    return o, final if final is not None else _no_state(q, initial_state)


def _delta_rule_fwd_fake(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, l2, indices):
    o = v.new_empty(v.shape, dtype=q.dtype)
    if not output_final_state:
        return o, _no_state(q, initial_state)
    return o, q.new_empty(_state_shape(q, v, initial_state, cu_seqlens), dtype=_state_dtype(q, initial_state))


def _delta_rule_bwd(op, q, k, v, g, beta, do, scale, initial_state, dht, cu_seqlens, l2, indices):
    grads = getattr(_ops, op + "_backward")(
        *_detached(q, k, v, g, beta, do),
        scale,
        _optional(initial_state),
        _optional(dht),
        cu_seqlens=_optional(cu_seqlens),
        use_qk_l2norm_in_kernel=l2,
        state_indices=_optional(indices),
    )
    return (*grads[:5], grads[5] if grads[5] is not None else _no_state(q, initial_state))


def _delta_rule_bwd_fake(q, k, v, g, beta, do, scale, initial_state, dht, cu_seqlens, l2, indices):
    grads = tuple(t.new_empty(t.shape) for t in (q, k, v, g, beta))
    return (*grads, initial_state.new_empty(initial_state.shape) if initial_state is not None else _no_state(q, None))


@torch.library.custom_op("frost::gdn_fwd", mutates_args=())
def gdn_fwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    scale: float,
    initial_state: Optional[Tensor],
    output_final_state: bool,
    cu_seqlens: Optional[Tensor],
    use_qk_l2norm_in_kernel: bool,
    state_indices: Optional[Tensor],
) -> Tuple[Tensor, Tensor]:
    """(o [B, T, HV, V] in q's type, final_state [N, HV, K, V] FP32, or empty without output_final_state)."""
    return _delta_rule_fwd(
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


@torch.library.custom_op("frost::kda_fwd", mutates_args=())
def kda_fwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    scale: float,
    initial_state: Optional[Tensor],
    output_final_state: bool,
    cu_seqlens: Optional[Tensor],
    use_qk_l2norm_in_kernel: bool,
    state_indices: Optional[Tensor],
) -> Tuple[Tensor, Tensor]:
    """As frost::gdn_fwd with g [B, T, HV, K]."""
    return _delta_rule_fwd(
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


@torch.library.custom_op("frost::gdn_bwd", mutates_args=())
def gdn_bwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    do: Tensor,
    scale: float,
    initial_state: Optional[Tensor],
    dht: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    use_qk_l2norm_in_kernel: bool,
    state_indices: Optional[Tensor],
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dg, dbeta, dh0) in their inputs' types; dh0 is empty without initial_state."""
    return _delta_rule_bwd(
        "gdn", q, k, v, g, beta, do, scale, initial_state, dht, cu_seqlens, use_qk_l2norm_in_kernel, state_indices
    )


@torch.library.custom_op("frost::kda_bwd", mutates_args=())
def kda_bwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    do: Tensor,
    scale: float,
    initial_state: Optional[Tensor],
    dht: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    use_qk_l2norm_in_kernel: bool,
    state_indices: Optional[Tensor],
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """As frost::gdn_bwd with dg [B, T, HV, K]."""
    return _delta_rule_bwd(
        "kda", q, k, v, g, beta, do, scale, initial_state, dht, cu_seqlens, use_qk_l2norm_in_kernel, state_indices
    )


for _fwd, _bwd in ((gdn_fwd, gdn_bwd), (kda_fwd, kda_bwd)):
    _fwd.register_fake(_delta_rule_fwd_fake)
    _bwd.register_fake(_delta_rule_bwd_fake)


def _delta_rule_setup(ctx, inputs, output):
    q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, l2, indices = inputs
    ctx.scale, ctx.output_final_state, ctx.l2 = scale, output_final_state, l2
    ctx.save_for_backward(q, k, v, g, beta, initial_state, cu_seqlens, indices)


def _delta_rule_backward(bwd):
    def backward(ctx, do, d_final_state):
        q, k, v, g, beta, initial_state, cu_seqlens, indices = ctx.saved_tensors
        do = torch.zeros_like(v, dtype=q.dtype) if do is None else do.contiguous()
        dht = d_final_state.contiguous() if ctx.output_final_state and d_final_state is not None else None
        dq, dk, dv, dg, dbeta, dh0 = bwd(
            q, k, v, g, beta, do, ctx.scale, initial_state, dht, cu_seqlens, ctx.l2, indices
        )
        return dq, dk, dv, dg, dbeta, None, dh0 if initial_state is not None else None, None, None, None, None

    return backward


gdn_fwd.register_autograd(_delta_rule_backward(gdn_bwd), setup_context=_delta_rule_setup)
kda_fwd.register_autograd(_delta_rule_backward(kda_bwd), setup_context=_delta_rule_setup)


def _delta_rule(fwd, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, l2, indices):
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    o, final = fwd(q, k, v, g, beta, scale, initial_state, bool(output_final_state), cu_seqlens, bool(l2), indices)
    return o, final if output_final_state else None


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
    """Differentiable Gated DeltaNet (frost.ops.gdn's arguments): (o, final_state or None), with gradients for
    q, k, v, g, beta and initial_state through frost::gdn_bwd."""
    return _delta_rule(
        gdn_fwd,
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
    """Differentiable Kimi Delta Attention (g [B, T, HV, K]): (o, final_state or None)."""
    return _delta_rule(
        kda_fwd,
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


# ---- Mamba-2's scan. Absent optional gradients come back from the ops as empty tensors (numel 0). ----


def _mamba2_detached(*tensors):
    return [None if t is None else t.detach() for t in tensors]


@torch.library.custom_op("frost::mamba2_fwd", mutates_args=())
def mamba2_fwd(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Optional[Tensor],
    z: Optional[Tensor],
    dt_bias: Optional[Tensor],
    initial_states: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    dt_softplus: bool,
    dt_min: float,
    dt_max: float,
    return_final_states: bool,
) -> Tuple[Tensor, Tensor]:
    """Mamba-2's scan forward (frost.ops.mamba2); the final states are an empty tensor unless return_final_states."""
    y, final = _ops.mamba2(
        *_mamba2_detached(x, dt, A, B, C, D, z, dt_bias, initial_states, cu_seqlens),
        dt_softplus=dt_softplus,
        dt_limit=(dt_min, dt_max),
        return_final_states=return_final_states,
    )
    return y, final if final is not None else _no_state(x, initial_states)


@mamba2_fwd.register_fake
def _(x, dt, A, B, C, D, z, dt_bias, initial_states, cu_seqlens, dt_softplus, dt_min, dt_max, return_final_states):
    y = x.new_empty(x.shape)
    if not return_final_states:
        return y, _no_state(x, initial_states)
    sequences = (
        initial_states.shape[0]
        if initial_states is not None
        else cu_seqlens.shape[0] - 1 if cu_seqlens is not None else x.shape[0]
    )
    shape = (sequences, x.shape[2], x.shape[3], B.shape[3])
    return y, x.new_empty(shape, dtype=_state_dtype(x, initial_states))


@torch.library.custom_op("frost::mamba2_bwd", mutates_args=())
def mamba2_bwd(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    dy: Tensor,
    D: Optional[Tensor],
    z: Optional[Tensor],
    dt_bias: Optional[Tensor],
    initial_states: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    dfinal_states: Optional[Tensor],
    dt_softplus: bool,
    dt_min: float,
    dt_max: float,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients of frost::mamba2_fwd (frost.ops.mamba2_backward); those of absent inputs are empty tensors."""
    grads = _ops.mamba2_backward(
        *_mamba2_detached(x, dt, A, B, C, dy, D, z, dt_bias, initial_states, cu_seqlens),
        dt_softplus=dt_softplus,
        dt_limit=(dt_min, dt_max),
        dfinal_states=None if dfinal_states is None else dfinal_states.detach(),
    )
    return tuple(g if g is not None else _no_state(x, None) for g in grads)


@mamba2_bwd.register_fake
def _(x, dt, A, B, C, dy, D, z, dt_bias, initial_states, cu_seqlens, dfinal_states, dt_softplus, dt_min, dt_max):
    optional = (D, z, dt_bias, initial_states)
    return (
        *(t.new_empty(t.shape) for t in (x, dt, A, B, C)),
        *(t.new_empty(t.shape) if t is not None else _no_state(x, None) for t in optional),
    )


def _mamba2_setup(ctx, inputs, output):
    x, dt, A, B, C, D, z, dt_bias, initial_states, cu_seqlens, dt_softplus, dt_min, dt_max, final = inputs
    ctx.options = (dt_softplus, dt_min, dt_max, final)
    ctx.save_for_backward(x, dt, A, B, C, D, z, dt_bias, initial_states, cu_seqlens)


def _mamba2_backward(ctx, dy, d_final_states):
    x, dt, A, B, C, D, z, dt_bias, initial_states, cu_seqlens = ctx.saved_tensors
    dt_softplus, dt_min, dt_max, final = ctx.options
    dy = torch.zeros_like(x) if dy is None else dy.contiguous()
    dfinal = d_final_states.contiguous() if final and d_final_states is not None else None
    grads = mamba2_bwd(
        x, dt, A, B, C, dy, D, z, dt_bias, initial_states, cu_seqlens, dfinal, dt_softplus, dt_min, dt_max
    )
    given = (True,) * 5 + tuple(t is not None for t in (D, z, dt_bias, initial_states))
    return (*(g if on else None for g, on in zip(grads, given)), None, None, None, None, None)


mamba2_fwd.register_autograd(_mamba2_backward, setup_context=_mamba2_setup)


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
    """Differentiable Mamba-2 scan with mamba_ssm's keywords: (y, final_states or None)."""
    lo, hi = (float(v) for v in dt_limit)
    y, final = mamba2_fwd(
        x, dt, A, B, C, D, z, dt_bias, initial_states, cu_seqlens, bool(dt_softplus), lo, hi, bool(return_final_states)
    )
    return y, final if return_final_states else None
