"""Runs flash-linear-attention's chunked delta-rule ops on frost where frost serves the call.

    import frost.fla
    frost.fla.accelerate_fla()    # fla's chunk_gated_delta_rule and chunk_kda now try frost first
    ...
    frost.fla.restore_fla()       # the original functions are back

accelerate_fla() replaces `chunk_gated_delta_rule` (and its alias `chunk_gdn`) and `chunk_kda` wherever FLA's
loaded modules hold them: their defining modules, the packages fla.ops.gated_delta_rule, fla.ops.kda and fla.ops,
and the layer modules that imported them (fla.layers.gated_deltanet, fla.layers.kda, ...). Modules imported later
take the replacement from those packages.

A replaced function serves a call on frost only when every argument is one frost implements and every other
argument keeps its default, the tensors are torch tensors on one device, and the planner has an engine for that
graph on that device (for the backward graph too when autograd will need it). Implemented: q, k, v, g, beta,
scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel; cu_seqlens_cpu and
disable_recompute, hints that change no result; and, computed with torch in FP32 around frost's call as FLA's
kernels compute them, the gate from raw g (use_gate_in_kernel with A_log and dt_bias: -exp(A_log) *
softplus(g + dt_bias)), the beta sigmoid (use_beta_sigmoid_in_kernel, allow_neg_eigval) and the V-first state
layout (state_v_first). Every other call (KDA's lower_bound or safe_gate, chunk_size, cp_context, ...) goes to
FLA's own function with the arguments exactly as given. The outputs follow FLA's conventions: (o in q's data
type, final_state FP32 or None); gradients flow through frost::gdn_bwd / frost::kda_bwd (and torch's autograd
for the prologue, so A_log and dt_bias get theirs).
"""

import functools
import importlib
import inspect
import sys
import threading

from . import ops as _ops

# op -> (the module that defines FLA's function, its name there)
_TARGETS = {
    "gdn": ("fla.ops.gated_delta_rule.chunk", "chunk_gated_delta_rule"),
    "kda": ("fla.ops.kda.chunk", "chunk_kda"),
}
_SERVED = ("q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state", "cu_seqlens")
_SERVED_FLAGS = ("use_qk_l2norm_in_kernel",)
_NO_EFFECT = ("cu_seqlens_cpu", "disable_recompute")
# Computed with torch around frost's call, in FP32 as FLA's kernels do: the gate from raw g, the beta sigmoid,
# the V-first state layout.
_PROLOGUE = ("use_gate_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "state_v_first")
_PROLOGUE_KWARGS = ("use_gate_in_kernel", "A_log", "dt_bias")
_MAX_DECISIONS = 1024

_lock = threading.Lock()
_originals = {}  # op -> FLA's function
_wrappers = {}  # op -> its replacement
_decisions = {}  # call description -> None (frost serves) or the reason it does not
_counts = {"frost": 0, "fla": 0}
_last_reason = [None]


def is_accelerated():
    """True between accelerate_fla() and restore_fla()."""
    return bool(_wrappers)


def stats():
    """Calls served by frost and passed to FLA since accelerate_fla(), and the reason of the latest pass."""
    with _lock:
        return {"frost": _counts["frost"], "fla": _counts["fla"], "last_reason": _last_reason[0]}


def _fla_modules():
    return [m for name, m in list(sys.modules.items()) if m is not None and (name == "fla" or name.startswith("fla."))]


def _replace_everywhere(old, new):
    """Points every attribute of FLA's loaded modules that is `old` at `new`; returns how many."""
    count = 0
    for module in _fla_modules():
        for attr, value in list(vars(module).items()):
            if value is old:
                setattr(module, attr, new)
                count += 1
    return count


def accelerate_fla():
    """Patches FLA's chunk_gated_delta_rule / chunk_kda onto frost (see the module's description). Idempotent.
    Returns the ops patched ("gdn", "kda"); an op whose module this FLA lacks is left out. Raises ImportError
    without FLA."""
    importlib.import_module("fla.ops")
    with _lock:
        for op, (module_name, name) in _TARGETS.items():
            if op in _wrappers:
                continue
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            original = getattr(module, name, None)
            if original is None:
                continue
            wrapper = _make_wrapper(op, original)
            _replace_everywhere(original, wrapper)
            _originals[op], _wrappers[op] = original, wrapper
        _counts["frost"] = _counts["fla"] = 0
        _last_reason[0] = None
        return tuple(_wrappers)


def restore_fla():
    """Puts FLA's own functions back everywhere the replacements went, including modules imported since.
    A no-op when nothing is patched."""
    with _lock:
        for op, wrapper in list(_wrappers.items()):
            _replace_everywhere(wrapper, _originals[op])
        _wrappers.clear()
        _originals.clear()
        _decisions.clear()


def _make_wrapper(op, original):
    signature = inspect.signature(original)
    frost_call = _frost_function(op)

    @functools.wraps(original)
    def accelerated(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            bound = None
        plan = "FLA rejects the arguments" if bound is None else _plan(op, signature, bound)
        if not isinstance(plan, str):
            with _lock:
                _counts["frost"] += 1
            q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, l2, v_first = plan
            o, final = frost_call(
                q,
                k,
                v,
                g,
                beta,
                scale,
                initial_state,
                output_final_state,
                cu_seqlens=cu_seqlens,
                use_qk_l2norm_in_kernel=l2,
            )
            return o, final.transpose(-1, -2).contiguous() if v_first and final is not None else final
        with _lock:
            _counts["fla"] += 1
            _last_reason[0] = plan
        return original(*args, **kwargs)

    accelerated.__frost_accelerated__ = op
    return accelerated


def _frost_function(op):
    from . import torch_ops

    return torch_ops.gdn if op == "gdn" else torch_ops.kda


def _is_default(value, default):
    if value is default:
        return True
    plain = (bool, int, float, str, type(None))
    return isinstance(value, plain) and isinstance(default, plain) and value == default


def _option(arguments, extra, name, default=None):
    return arguments[name] if name in arguments else extra.get(name, default)


def _plan(op, signature, bound):
    """frost's arguments for this call (q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
    use_qk_l2norm_in_kernel, state_v_first), or the reason it goes to FLA."""
    arguments = bound.arguments
    extra = {}
    for name, parameter in signature.parameters.items():
        if name in _SERVED or name in _SERVED_FLAGS or name in _NO_EFFECT or name in _PROLOGUE:
            continue
        if name not in arguments:
            continue
        value = arguments[name]
        if parameter.kind == inspect.Parameter.VAR_KEYWORD:
            unknown = sorted(set(value) - set(_PROLOGUE_KWARGS))
            if unknown:
                return f"keyword {unknown[0]} is not served by frost"
            extra = value
        elif parameter.kind == inspect.Parameter.VAR_POSITIONAL:
            if value:
                return "extra positional arguments"
        elif not _is_default(value, parameter.default):
            return f"{name}={value!r} is not served by frost (only its default {parameter.default!r})"
    torch = sys.modules.get("torch")
    if torch is None:
        return "torch is not loaded"
    tensors = [arguments.get(n) for n in ("q", "k", "v", "g", "beta")]
    if any(not isinstance(t, torch.Tensor) for t in tensors):
        return "q, k, v, g and beta must be torch tensors"
    gate = bool(_option(arguments, extra, "use_gate_in_kernel", False))
    a_log, dt_bias = extra.get("A_log"), extra.get("dt_bias")
    optional = [arguments.get("initial_state"), arguments.get("cu_seqlens")] + ([a_log, dt_bias] if gate else [])
    if any(t is not None and not isinstance(t, torch.Tensor) for t in optional):
        return "initial_state, cu_seqlens, A_log and dt_bias must be torch tensors"
    device = tensors[0].device
    if any(t.device != device for t in tensors + [t for t in optional if t is not None]):
        return "the tensors are on different devices"
    initial_state, cu_seqlens = optional[:2]
    if cu_seqlens is not None and (cu_seqlens.dim() != 1 or tensors[0].shape[0] != 1):
        return "cu_seqlens needs B == 1 and a 1-D offsets tensor"
    sigmoid = bool(arguments.get("use_beta_sigmoid_in_kernel", False))
    neg_eigval = bool(arguments.get("allow_neg_eigval", False))
    v_first = bool(arguments.get("state_v_first", False))
    if neg_eigval and not sigmoid:
        return "allow_neg_eigval needs use_beta_sigmoid_in_kernel"
    if gate and a_log is None:
        return "use_gate_in_kernel needs A_log"
    q, k, v, g, beta = tensors
    try:
        if gate:
            g = _gate(op, g, a_log, dt_bias)
        if sigmoid:
            beta = torch.sigmoid(_fp32_or_wider(beta)) * (2.0 if neg_eigval else 1.0)
        if v_first and initial_state is not None:
            initial_state = initial_state.transpose(-1, -2)
    except (RuntimeError, TypeError, ValueError) as e:  # shapes FLA would reject: let FLA say so
        return f"the gate or beta prologue failed: {e}"
    scale = arguments.get("scale")
    scale = None if scale is None else float(scale)
    output_final_state = bool(arguments.get("output_final_state", False))
    l2 = bool(arguments.get("use_qk_l2norm_in_kernel", False))
    inputs = [q, k, v, g, beta, initial_state]
    reason = _decline(op, inputs, cu_seqlens, scale, output_final_state, l2)
    if reason is not None:
        return reason
    return q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, l2, v_first


def _fp32_or_wider(x):
    return x if x.dtype == sys.modules["torch"].float64 else x.float()


def _gate(op, g, a_log, dt_bias):
    """FLA's in-kernel gate in FP32: -exp(A_log) * softplus(g + dt_bias), per value head (GDN) or per value head
    and key channel (KDA, dt_bias [HV * K])."""
    x = _fp32_or_wider(g)
    if dt_bias is not None:
        x = x + (_fp32_or_wider(dt_bias).view(x.shape[-2:]) if op == "kda" else _fp32_or_wider(dt_bias))
    decay = -_fp32_or_wider(a_log).exp()
    return (decay.view(-1, 1) if op == "kda" else decay) * sys.modules["torch"].nn.functional.softplus(x)


def _decline(op, inputs, cu_seqlens, scale, output_final_state, l2):
    """None when an engine serves the graph (and its backward when autograd will need it), else the reason."""
    torch = sys.modules["torch"]
    initial_state = inputs[5]
    backward = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)
    key = (
        op,
        tuple(None if t is None else (tuple(t.shape), t.stride(), t.dtype, t.device) for t in inputs + [cu_seqlens]),
        scale,
        output_final_state,
        l2,
        backward,
    )
    with _lock:
        if key in _decisions:
            return _decisions[key]
    reason = _ops.delta_rule_support(
        op,
        *(t.detach() for t in inputs[:5]),
        scale,
        None if initial_state is None else initial_state.detach(),
        output_final_state,
        cu_seqlens=cu_seqlens,
        use_qk_l2norm_in_kernel=l2,
        backward=backward,
    )
    with _lock:
        if len(_decisions) >= _MAX_DECISIONS:
            _decisions.clear()
        _decisions[key] = reason
    return reason
